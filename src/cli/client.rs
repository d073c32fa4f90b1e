//! `jsontp get|post|put|delete|options` (issue 5).

use std::process::ExitCode;

use jsontp::message::Method;

/// Arguments of the client commands.
#[derive(Debug, clap::Args)]
pub struct ClientArgs {}

/// Runs one client command.
pub fn run(method: Method, args: ClientArgs) -> ExitCode {
    let _ = (method, args);
    eprintln!("jsontp client: not built yet");
    ExitCode::FAILURE
}
