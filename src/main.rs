//! The `jsontp` command: `jsontp serve` (a file server) and the client
//! commands `get`, `post`, `put`, `delete` and `options`, used like curl.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use jsontp::message::Method;

mod cli;

use cli::help;

/// jsontp: a file server and a client for the jsontp protocol (JSON
/// messages over TCP).
#[derive(Debug, Parser)]
#[command(name = "jsontp", version, after_help = help::TOP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve files from a folder (default: the current one) on 127.0.0.1:8080.
    #[command(after_help = help::SERVE)]
    Serve(cli::serve::ServeArgs),
    /// GET a resource and print its content.
    #[command(after_help = help::GET)]
    Get(cli::client::PlainArgs),
    /// POST content to a resource and print the answer's content.
    #[command(after_help = help::POST)]
    Post(cli::client::SendArgs),
    /// PUT content to a resource (create or replace).
    #[command(after_help = help::PUT)]
    Put(cli::client::SendArgs),
    /// DELETE a resource.
    #[command(after_help = help::DELETE)]
    Delete(cli::client::PlainArgs),
    /// Ask which methods a resource allows.
    #[command(after_help = help::OPTIONS)]
    Options(cli::client::OptionsArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve(args) => cli::serve::run(args),
        Command::Get(args) => args.run(Method::Get),
        Command::Post(args) => args.run(Method::Post),
        Command::Put(args) => args.run(Method::Put),
        Command::Delete(args) => args.run(Method::Delete),
        Command::Options(args) => args.run(),
    }
}
