//! The `jsontp` command: `jsontp serve` (a file server) and the client
//! commands `get`, `post`, `put`, `delete` and `options`, used like curl;
//! `completions` and `man` write what a package installs beside it.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use jsontp_protocol::message::Method;

mod commands;

use commands::help;

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
    /// Serve files from a folder (default: the current one) on
    /// 127.0.0.1:8080, read-only unless --writable.
    #[command(after_help = help::SERVE)]
    Serve(commands::serve::Serve),
    /// GET a resource and print its content.
    #[command(after_help = help::GET)]
    Get(commands::client::RequestArgs),
    /// POST content to a resource and print the answer's content.
    #[command(after_help = help::POST)]
    Post(commands::client::RequestArgs),
    /// PUT content to a resource (create or replace).
    #[command(after_help = help::PUT)]
    Put(commands::client::RequestArgs),
    /// DELETE a resource.
    #[command(after_help = help::DELETE)]
    Delete(commands::client::RequestArgs),
    /// Ask which methods a resource allows.
    #[command(after_help = help::OPTIONS)]
    Options(commands::client::RequestArgs),
    /// Write a shell completion script to stdout.
    #[command(after_help = help::COMPLETIONS)]
    Completions(commands::generate::CompletionsArgs),
    /// Write a man page (roff) to stdout.
    #[command(after_help = help::MAN)]
    Man(commands::generate::ManArgs),
}

fn main() -> ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|error| {
        let args: Vec<_> = std::env::args_os().skip(1).collect();
        help::with_verb_hint(error, &args).exit()
    });
    match cli.command {
        Command::Serve(serve) => serve.run(),
        Command::Get(args) => args.run(Method::Get),
        Command::Post(args) => args.run(Method::Post),
        Command::Put(args) => args.run(Method::Put),
        Command::Delete(args) => args.run(Method::Delete),
        Command::Options(args) => args.run(Method::Options),
        Command::Completions(args) => args.run(Cli::command()),
        Command::Man(args) => args.run(Cli::command()),
    }
}
