//! The subcommands of `jsontp`.

pub mod client;
pub mod envelope;
pub mod generate;
pub mod help;
pub mod listing;
pub mod log;
pub mod output;
pub mod request;
pub mod serve;
pub mod target;
pub mod transfer;
pub mod wire;
