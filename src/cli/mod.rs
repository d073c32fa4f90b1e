//! The subcommands of `jsontp`.

pub mod client;
pub mod serve;
