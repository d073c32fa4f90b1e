//! The subcommands of `jsontp`.

pub mod admin;
pub mod client;
pub mod config;
pub mod envelope;
pub mod generate;
pub mod help;
pub mod listing;
pub mod log;
pub mod output;
pub mod reload;
pub mod request;
pub mod serve;
pub mod sockets;
pub mod target;
pub mod transfer;
pub mod wire;
