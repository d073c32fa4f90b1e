//! The `jsontp` command and the application behind it: the file server
//! called directly, and the built binary run against `jsontp serve` and small
//! loopback peers, each run bounded in time.
#![allow(clippy::disallowed_methods)] // tests own threads and the clock

mod file_server;

mod admin;
// Linux: the cache's sealed files, and the server's memory in /proc.
#[cfg(target_os = "linux")]
mod cache;
mod client;
// Unix: SIGHUP.
#[cfg(unix)]
mod config;
mod curl;
// Unix: SIGTERM.
#[cfg(unix)]
mod drain;
mod generate;
mod habits;
mod help;
#[cfg(unix)]
mod hostile;
mod interop;
mod listing;
mod logs;
// The test PKI the library's TLS tests use.
#[path = "../../../tests/adapters/pki.rs"]
mod pki;
#[path = "../../../tests/common/reference_get.rs"]
mod reference_get;
mod refusals;
mod serve;
mod serve_options;
// A server process under mixed clients for seconds: memory, descriptors
// and the spool come back.
mod soak;
// Linux: the tests look for the spooled file in /proc.
#[cfg(target_os = "linux")]
mod spool;
mod support;
mod tls;
#[cfg(unix)]
mod truth;
mod upgrade;
