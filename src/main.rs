//! The `jsontp` command: `jsontp serve` (a file server) and the client
//! commands `get`, `post`, `put`, `delete` and `options`, used like curl.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// jsontp: a file server and a client for the jsontp protocol.
#[derive(Debug, Parser)]
#[command(name = "jsontp", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve files from a folder (default: the current one) on 127.0.0.1:8080.
    Serve(cli::serve::ServeArgs),
    /// GET a resource and print its content.
    Get(cli::client::ClientArgs),
    /// POST content to a resource.
    Post(cli::client::ClientArgs),
    /// PUT content to a resource (create or replace).
    Put(cli::client::ClientArgs),
    /// DELETE a resource.
    Delete(cli::client::ClientArgs),
    /// Ask which methods a resource allows.
    Options(cli::client::ClientArgs),
}

fn main() -> ExitCode {
    use jsontp::message::Method;
    match Cli::parse().command {
        Command::Serve(args) => cli::serve::run(args),
        Command::Get(args) => cli::client::run(Method::Get, args),
        Command::Post(args) => cli::client::run(Method::Post, args),
        Command::Put(args) => cli::client::run(Method::Put, args),
        Command::Delete(args) => cli::client::run(Method::Delete, args),
        Command::Options(args) => cli::client::run(Method::Options, args),
    }
}
