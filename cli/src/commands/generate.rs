//! `jsontp completions SHELL` and `jsontp man [COMMAND]`: generated from the
//! clap definition, so that they cannot drift from `--help`.

use std::io::Write;
use std::process::ExitCode;

use clap_complete::Shell;

/// Arguments of `jsontp completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    shell: Shell,
}

/// Arguments of `jsontp man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// The command whose page to write (`serve`, `get`, ...); without it,
    /// the page of `jsontp` itself.
    command: Option<String>,
}

impl CompletionsArgs {
    /// Writes the completion script for `command` (the whole `jsontp`
    /// definition) to stdout.
    pub fn run(self, mut command: clap::Command) -> ExitCode {
        // Into memory first: the generator panics on a failed write, and
        // stdout may be a closed pipe.
        let mut script = Vec::new();
        clap_complete::generate(self.shell, &mut command, "jsontp", &mut script);
        write_out(&script)
    }
}

impl ManArgs {
    /// Writes the man page (roff) of `jsontp`, or of one of its commands,
    /// to stdout.
    pub fn run(self, command: clap::Command) -> ExitCode {
        let page = match &self.command {
            None => command,
            Some(name) => match command.find_subcommand(name) {
                Some(sub) => sub
                    .clone()
                    .display_name(format!("jsontp-{name}"))
                    .version(env!("CARGO_PKG_VERSION"))
                    .disable_version_flag(true)
                    .bin_name(format!("jsontp {name}")),
                None => {
                    let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
                    eprintln!(
                        "jsontp man: no command {name:?}; the commands are {}",
                        names.join(", ")
                    );
                    return ExitCode::from(2);
                }
            },
        };
        let mut roff = Vec::new();
        if let Err(e) = clap_mangen::Man::new(page).render(&mut roff) {
            eprintln!("jsontp man: {e}");
            return ExitCode::FAILURE;
        }
        write_out(&roff)
    }
}

fn write_out(bytes: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jsontp: cannot write to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
