//! The application behind the `jsontp` command: [`file_server`], the
//! handler of `jsontp serve`. The command itself is this package's binary;
//! the protocol is the `jsontp-protocol` library.

#![warn(missing_docs)]

pub mod file_server;
