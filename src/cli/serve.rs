//! `jsontp serve` (issue 4).

use std::process::ExitCode;

/// Arguments of `jsontp serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

/// Runs the file server.
pub fn run(args: ServeArgs) -> ExitCode {
    let _ = args;
    eprintln!("jsontp serve: not built yet");
    ExitCode::FAILURE
}
