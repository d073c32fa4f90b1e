//! The `jsontp` command and the application behind `jsontp serve`.

mod file_server;
