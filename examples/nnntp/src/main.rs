//! NNNTP, the jsontp organisation's news server, on this crate: users
//! post to groups and list them, stored in an SQLite file.
//!
//! ```text
//! cargo run -p nnntp -- --addr 127.0.0.1:1119
//! ```
//!
//! The news is kept in `nnntp/news.db` under the user's data folder
//! (`$XDG_DATA_HOME`, else `~/.local/share`; the system's temporary folder
//! when there is no home), created if need be and named at start;
//! `--db FILE` keeps it elsewhere.
//!
//! It serves on the tokio server, its router behind tower's layers: a
//! time limit on every request and a bound on those answered at once.
//! Ctrl-C stops it gracefully.
//!
//! The bounds of `news::Settings` hold by default; the options change
//! those a test or an operator may need to (a load test from one address
//! raises the per-address limits to measure the hashing pool):
//!
//! ```text
//! --hash-workers N    passwords hashed at once (default: half the cores, at least 1)
//! --hash-queue N      requests waiting for a hash (default: 16 per worker)
//! --signups N         sign-ups per address an hour (default 10)
//! --failed-logins N   failed logins per address in 10 minutes (default 20)
//! ```
#![allow(clippy::disallowed_methods)] // an application owns its threads and its clock

mod limits;
mod news;
mod passwords;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use jsontp_protocol::io_adapters::server::tokio::serve_service;
use jsontp_protocol::io_adapters::server::{ServerOptions, listen};

const USAGE: &str = "usage: nnntp --addr HOST:PORT [--db FILE] [--hash-workers N] [--hash-queue N] \
[--signups N] [--failed-logins N]";

/// The command line: where to listen, where the news is kept (`None`: the
/// default place, [`default_db`]), its bounds.
struct Args {
    addr: String,
    db: Option<PathBuf>,
    settings: news::Settings,
}

fn parse_args() -> Result<Args, String> {
    let (mut addr, mut db) = (None, None);
    let mut settings = news::Settings::default();
    let mut queue = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or(format!("{name} needs a value"))
        };
        match name.as_str() {
            "--addr" => addr = Some(value()?),
            "--db" => db = Some(PathBuf::from(value()?)),
            "--hash-workers" => settings.passwords.workers = count(&name, &value()?, 1)?,
            "--hash-queue" => queue = Some(count(&name, &value()?, 0)?),
            "--signups" => settings.signups.at_most = count(&name, &value()?, 0)?,
            "--failed-logins" => settings.failed_logins.at_most = count(&name, &value()?, 0)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    settings.passwords.queue = queue.unwrap_or(16 * settings.passwords.workers);
    Ok(Args {
        addr: addr.ok_or("--addr is missing")?,
        db,
        settings,
    })
}

/// `value` as a whole number from `least` up.
fn count<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    name: &str,
    value: &str,
    least: T,
) -> Result<T, String> {
    match value.parse::<T>() {
        Ok(n) if n >= least => Ok(n),
        _ => Err(format!(
            "{name} is {value:?}; it takes a whole number from {least} up"
        )),
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(why) if why.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("nnntp: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("nnntp: {why}");
            ExitCode::FAILURE
        }
    }
}

/// `nnntp/news.db` in the user's data folder (the XDG base directory
/// rule: `$XDG_DATA_HOME` when it is an absolute path, else
/// `$HOME/.local/share`), or in the system's temporary folder when there
/// is no home: never the folder it was started in, which is often a
/// checkout. The folder is created if need be.
fn default_db() -> Result<PathBuf, String> {
    let absolute = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let dir = absolute("XDG_DATA_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local").join("share")))
        .unwrap_or_else(std::env::temp_dir)
        .join("nnntp");
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "cannot create {}: {e}; --db FILE keeps the news elsewhere",
            dir.display()
        )
    })?;
    Ok(dir.join("news.db"))
}

fn run(args: Args) -> Result<(), String> {
    let db = match args.db {
        Some(db) => db,
        None => default_db()?,
    };
    let store =
        news::Store::open(&db, args.settings).map_err(|e| format!("cannot open {}: {e}", db.display()))?;
    eprintln!("nnntp: news kept in {}", db.display());
    let listener = listen(args.addr.as_str()).map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let router = news::router(store.clone());
        let service = tower::ServiceBuilder::new()
            // A request not answered in time is answered `504` (D13): the
            // server stopped waiting, but the handler may still finish, so a
            // post may yet be stored (a client retries it with the same
            // `nnntp.token`). The handlers bound their own waits (the
            // password queue, the database) well inside it, and answer
            // `503` only with nothing done.
            .timeout(Duration::from_secs(10))
            // SQLite takes one writer at a time: more at once only queue.
            .concurrency_limit(64)
            .service(router.clone());
        // The address actually bound (the port, when 0 was asked for).
        println!("nnntp: listening on {addr}");
        // The router also refuses, before any content is stored, what it
        // would refuse whatever the content (D10, D19).
        serve_service(listener, service, router, ServerOptions::default(), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| e.to_string())
    });
    // Dropping a runtime waits for every blocking task, a handler the
    // server stopped waiting for among them: the process waits a moment,
    // then exits. A post cut off this way is stored whole or not at all
    // (one SQLite statement).
    runtime.shutdown_timeout(Duration::from_secs(1));
    let done = store.passwords().stats();
    eprintln!(
        "nnntp: stopped; passwords hashed {}, checked {}, at most {} at once",
        done.hashed, done.verified, done.most_at_once
    );
    served
}
