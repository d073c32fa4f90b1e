//! A bounded, steady load of `GET`s through the library's pooled client,
//! as a service calling another would send it: each of `--clients`
//! threads sends one request after another on the pool's keep-alive
//! connections, which the pool sends again once where D13 allows (a
//! reused connection that closed before any byte of its answer). It stops
//! when `--stop-file` appears or after `--seconds`, whichever is first,
//! and prints one JSON line: the requests sent, those answered with the
//! expected status and content, and every failure by kind, connections
//! refused apart.
//!
//! `scripts/pool-test.sh` runs it through HAProxy while the servers
//! behind are upgraded in place, killed and restarted.
//!
//! ```text
//! cargo run --release -p jsontp-cli --example pool_load -- \
//!     jsontp://127.0.0.1:8080/hello.txt --expect 'hello' --clients 4 --seconds 10
//! ```

// A load generator owns its threads and its clock; the disallowed list
// (clippy.toml) guards the sans-I/O core.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::client::ClientError;
use jsontp_protocol::io_adapters::client::PoolOptions;
use jsontp_protocol::io_adapters::client::blocking::Pool;

/// What the threads found, all together.
#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    ok: u64,
    /// Failures by kind; `refused` among them for connections refused.
    failed: BTreeMap<String, u64>,
    /// The first few failures in full, to say what happened.
    examples: Vec<String>,
}

struct Args {
    url: String,
    expect: Option<String>,
    clients: usize,
    seconds: f64,
    stop_file: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args {
        url: String::new(),
        expect: None,
        clients: 4,
        seconds: 10.0,
        stop_file: None,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--expect" => parsed.expect = Some(value("--expect")?),
            "--clients" => {
                parsed.clients = value("--clients")?
                    .parse()
                    .map_err(|_| "--clients takes a number from 1 up")?;
            }
            "--seconds" => {
                parsed.seconds = value("--seconds")?
                    .parse()
                    .map_err(|_| "--seconds takes a number of seconds")?;
            }
            "--stop-file" => parsed.stop_file = Some(value("--stop-file")?.into()),
            url if !url.starts_with('-') && parsed.url.is_empty() => parsed.url = url.to_owned(),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if parsed.url.is_empty() || parsed.clients == 0 {
        return Err(
            "usage: pool_load URL [--expect TEXT] [--clients N] [--seconds S] [--stop-file PATH]".into(),
        );
    }
    Ok(parsed)
}

/// The kind of a failed call, as the summary counts it.
fn kind(error: &ClientError) -> String {
    match error {
        ClientError::Refused { .. } => "refused".into(),
        ClientError::ClosedEarly { .. } => "closed early".into(),
        ClientError::TimedOut(_) => "timed out".into(),
        other => format!("{other:?}")
            .split([' ', '(', '{'])
            .next()
            .unwrap_or("other")
            .to_owned(),
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(why) => {
            eprintln!("pool_load: {why}");
            return ExitCode::from(2);
        }
    };
    let pool = Pool::new(PoolOptions::default().with_call_timeout(Some(Duration::from_secs(10))));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let until = Instant::now() + Duration::from_secs_f64(args.seconds);
    let args = Arc::new(args);
    let threads: Vec<_> = (0..args.clients)
        .map(|_| {
            let (pool, tally, args) = (pool.clone(), Arc::clone(&tally), Arc::clone(&args));
            std::thread::spawn(move || {
                while Instant::now() < until && !args.stop_file.as_ref().is_some_and(|f| f.exists()) {
                    let outcome = pool.get(&args.url).send();
                    let mut tally = tally.lock().unwrap_or_else(|p| p.into_inner());
                    tally.requests += 1;
                    let failure = match outcome {
                        Ok(answer) => {
                            let response = &answer.response;
                            let text = response.body.as_text().unwrap_or_default();
                            if response.status.code.as_u16() != 200 {
                                Some((
                                    format!("status {}", response.status.code.as_u16()),
                                    format!(
                                        "{} {}",
                                        response.status.code.as_u16(),
                                        response.status.human_message
                                    ),
                                ))
                            } else if args
                                .expect
                                .as_ref()
                                .is_some_and(|expect| !text.contains(expect.as_str()))
                            {
                                Some(("wrong content".into(), format!("content {text:?}")))
                            } else {
                                None
                            }
                        }
                        Err(error) => Some((kind(&error), error.to_string())),
                    };
                    match failure {
                        None => tally.ok += 1,
                        Some((kind, detail)) => {
                            *tally.failed.entry(kind).or_default() += 1;
                            if tally.examples.len() < 5 {
                                tally.examples.push(detail);
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    let tally = tally.lock().unwrap_or_else(|p| p.into_inner());
    let failed: u64 = tally.failed.values().sum();
    let summary = serde_json::json!({
        "requests": tally.requests,
        "ok": tally.ok,
        "failed": failed,
        "refused": tally.failed.get("refused").copied().unwrap_or(0),
        "failures": tally.failed,
        "examples": tally.examples,
    });
    println!("{summary}");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
