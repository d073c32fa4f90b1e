//! NNNTP, the jsontp organisation's news server, on this crate: users
//! post to groups and list them, stored in an SQLite file.
//!
//! ```text
//! cargo run --example nnntp --features tower -- --addr 127.0.0.1:1119 --db news.db
//! ```
//!
//! It serves on the tokio server, its router behind tower's layers: a
//! time limit on every request and a bound on those answered at once.
//! Ctrl-C stops it gracefully.

mod news;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use jsontp_protocol::io_adapters::server::tokio::serve_service;
use jsontp_protocol::io_adapters::server::{ServerOptions, listen};

const USAGE: &str = "usage: nnntp --addr HOST:PORT --db FILE";

/// The command line: where to listen, where the news is kept.
struct Args {
    addr: String,
    db: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let (mut addr, mut db) = (None, None);
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
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        addr: addr.ok_or("--addr is missing")?,
        db: db.ok_or("--db is missing")?,
    })
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

fn run(args: Args) -> Result<(), String> {
    let store = news::Store::open(&args.db).map_err(|e| format!("cannot open {}: {e}", args.db.display()))?;
    let listener = listen(args.addr.as_str()).map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let router = news::router(store);
        let service = tower::ServiceBuilder::new()
            // A request that takes longer is answered 503 and its work
            // dropped; the connection goes on.
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
    })
}
