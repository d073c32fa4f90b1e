//! The `jsontp` command and the application behind it: the file server
//! called directly, and the built binary run against `jsontp serve` and small
//! loopback peers, each run bounded in time.

mod file_server;

// The binary exists only with the `cli` feature; without it these modules
// have nothing to run.
#[cfg(feature = "cli")]
mod client;
#[cfg(feature = "cli")]
mod curl;
// Unix: SIGTERM.
#[cfg(all(feature = "cli", unix))]
mod drain;
#[cfg(feature = "cli")]
mod generate;
#[cfg(feature = "cli")]
mod habits;
#[cfg(feature = "cli")]
mod help;
#[cfg(all(feature = "cli", unix))]
mod hostile;
#[cfg(feature = "cli")]
mod listing;
#[cfg(feature = "cli")]
mod logs;
#[cfg(feature = "cli")]
mod refusals;
#[cfg(feature = "cli")]
mod serve;
#[cfg(feature = "cli")]
mod serve_options;
// Linux: the tests look for the spooled file in /proc.
#[cfg(all(feature = "cli", target_os = "linux"))]
mod spool;
#[cfg(feature = "cli")]
mod support;
#[cfg(feature = "cli")]
mod tls;
#[cfg(all(feature = "cli", unix))]
mod truth;
