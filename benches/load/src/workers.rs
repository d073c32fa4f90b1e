//! Two workers on every core: `jsontp serve --workers 2` beside nginx with
//! `worker_processes 2` and `reuseport`, a listening socket per worker on
//! both, and how many connections each worker took.
//!
//! `jsontp serve`'s split is read from its admin listener
//! (`jsontp_connections_accepted_total{worker=…}`) before and after a run;
//! nginx's from a log of `$pid $connection` for each connection's first
//! request, read once nginx has stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::generator::{self, Driver, Load, Outcome};
use crate::procfs;
use crate::servers::{self, Launch, ServerKind};
use crate::suite::{self, About, Case, Payload, Settings};

/// Workers of each server: one per core of the machine it was asked for.
pub const WORKERS: usize = 2;
/// Keep-alive connections of each load: enough that both workers get many.
const CONNECTIONS: usize = 64;
/// The connections of the new-connection load, each one request and closed.
const NEW_CONNECTIONS: u64 = 10_000;
/// How long the new-connection load may take at most.
const NEW_CONNECTIONS_DEADLINE: Duration = Duration::from_secs(60);

/// One load of the mode: keep-alive at a pipeline depth, or (pipeline 0)
/// a new connection for each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WorkerLoad {
    /// What is asked for.
    pub payload: Payload,
    /// Requests in flight per connection; 0: a connection per request.
    pub pipeline: usize,
}

/// The loads, in the order each round runs them. The 300 KiB file at
/// pipeline 16 is left out, as in the throughput table: there the
/// generator's own framing of the responses is the limit, not the servers.
const LOADS: [WorkerLoad; 4] = [
    WorkerLoad {
        payload: Payload::Hello,
        pipeline: 1,
    },
    WorkerLoad {
        payload: Payload::Hello,
        pipeline: 16,
    },
    WorkerLoad {
        payload: Payload::Big,
        pipeline: 1,
    },
    WorkerLoad {
        payload: Payload::Hello,
        pipeline: 0,
    },
];

/// One run of one load on one server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRun {
    /// Which server.
    pub server: ServerKind,
    /// Which load.
    pub load: WorkerLoad,
    /// What the generator measured.
    pub outcome: Outcome,
    /// Connections each worker took, in worker order.
    pub per_worker: Vec<u64>,
    /// Connections the generator opened: what the split should add up to.
    pub opened: u64,
}

/// Runs every load `settings.runs` times on both servers, alternated, each
/// run on a server started for it; returns the section's text, whether
/// every run was clean, and the runs.
pub fn run(
    settings: &Settings,
    root: &Path,
    available: &[ServerKind],
    about: &About,
) -> io::Result<(String, bool, Vec<WorkerRun>)> {
    let servers: Vec<ServerKind> = [ServerKind::Nginx, ServerKind::JsontpServe]
        .into_iter()
        .filter(|k| available.contains(k))
        .collect();
    // Two workers need both cores: the servers may use every CPU, and the
    // generator stays where the caller pinned it, sharing one of them.
    let cpus = settings
        .server_cpu
        .map(|_| format!("0-{}", procfs::cpus_online().max(1) - 1));
    let launch = Launch {
        cpus: cpus.clone(),
        workers: WORKERS,
        admin: true,
        log_connections: true,
        ..Launch::default()
    };
    let mut clean = true;
    let mut runs = Vec::new();
    for round in 0..settings.runs {
        for load in LOADS {
            for &kind in &servers {
                let got = one_run(settings, root, &launch, kind, load)?;
                let counted: u64 = got.per_worker.iter().sum();
                eprintln!(
                    "loadbench: workers round {}/{} {} {:?} p{} (0: a connection per request): {:.0} req/s, \
                     connections per worker {:?} ({counted} of {} opened), generator {:.0} %, {} errors",
                    round + 1,
                    settings.runs,
                    kind.name(),
                    load.payload,
                    load.pipeline,
                    got.outcome.requests_per_second,
                    got.per_worker,
                    got.opened,
                    got.outcome.generator_cpu_share.unwrap_or(0.0) * 100.0,
                    got.outcome.errors
                );
                if got.outcome.errors > 0 || got.outcome.completed == 0 {
                    clean = false;
                    eprintln!("loadbench: {}: {:?}", kind.name(), got.outcome.error_samples);
                }
                if counted != got.opened {
                    clean = false;
                    eprintln!(
                        "loadbench: {}: the workers' counts add up to {counted}, not {}",
                        kind.name(),
                        got.opened
                    );
                }
                runs.push(got);
            }
        }
    }
    let what = format!(
        "`jsontp serve --workers {WORKERS}` and nginx with `worker_processes {WORKERS}` and `listen … reuseport`, \
         both free to use CPUs {}, the generator pinned as the command pins it; {CONNECTIONS} keep-alive \
         connections, each cell the median of {} run(s) of {} s after {} s of warm-up, a server started for \
         each run, the servers alternated",
        cpus.as_deref().unwrap_or("(not pinned)"),
        settings.runs,
        settings.seconds,
        settings.warmup
    );
    let text = suite::simple_header(about, settings, &what) + &table(&runs);
    Ok((text, clean, runs))
}

/// Starts `kind`, puts `load` on it, stops it, and reads the split.
fn one_run(
    settings: &Settings,
    root: &Path,
    launch: &Launch,
    kind: ServerKind,
    load: WorkerLoad,
) -> io::Result<WorkerRun> {
    let mut server = servers::start(kind, &settings.programs, root, &settings.work, launch)?;
    // The readiness probe was a connection too: count from once a worker
    // has taken it, which may be after the probe returned.
    let before = match server.admin {
        Some(admin) => probe_accepted(admin)?,
        None => Vec::new(),
    };
    let request = Case {
        payload: load.payload,
        connections: CONNECTIONS,
        pipeline: load.pipeline.max(1),
        server: kind,
    }
    .request();
    let new_connections = load.pipeline == 0;
    let generated = Load {
        addr: server.addr,
        protocol: kind.protocol(),
        request,
        connections: CONNECTIONS,
        pipeline: load.pipeline.max(1),
        warmup: if new_connections {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(settings.warmup)
        },
        duration: if new_connections {
            NEW_CONNECTIONS_DEADLINE
        } else {
            Duration::from_secs_f64(settings.seconds)
        },
        requests: new_connections.then_some(NEW_CONNECTIONS),
        server_pids: server.pids(),
        tls: None,
        reconnect: new_connections,
        driver: Driver::Epoll,
    };
    let outcome = generator::run(&generated);
    let after = match (server.admin, &outcome) {
        (Some(admin), Ok(_)) => Some(accepted_per_worker(admin)),
        _ => None,
    };
    let workers = server.worker_pids().to_vec();
    server.stop(Duration::from_secs(10))?;
    let outcome = outcome?;
    let per_worker = match (kind, after) {
        (ServerKind::Nginx, _) => match &server.connection_log {
            Some(log) => nginx_split(&fs::read_to_string(log)?, &workers),
            None => Vec::new(),
        },
        (_, Some(after)) => {
            let after = after?;
            after
                .iter()
                .enumerate()
                .map(|(i, n)| n.saturating_sub(before.get(i).copied().unwrap_or(0)))
                .collect()
        }
        _ => Vec::new(),
    };
    Ok(WorkerRun {
        server: kind,
        load,
        outcome,
        per_worker,
        opened: if new_connections {
            NEW_CONNECTIONS
        } else {
            CONNECTIONS as u64
        },
    })
}

/// `jsontp_connections_accepted_total` by worker, read from the admin
/// listener's `/metrics`.
fn accepted_per_worker(admin: SocketAddr) -> io::Result<Vec<u64>> {
    let body = http_get(admin, "/metrics")?;
    let counts = parse_accepted(&body);
    if counts.is_empty() {
        return Err(io::Error::other(
            "/metrics has no jsontp_connections_accepted_total",
        ));
    }
    Ok(counts)
}

/// The counts once the one readiness probe is among them.
fn probe_accepted(admin: SocketAddr) -> io::Result<Vec<u64>> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let counts = accepted_per_worker(admin)?;
        if counts.iter().sum::<u64>() >= 1 {
            return Ok(counts);
        }
        if Instant::now() > until {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the readiness probe was never counted as accepted",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The counter's values in worker order (the label's number).
fn parse_accepted(metrics: &str) -> Vec<u64> {
    let mut by_worker = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("jsontp_connections_accepted_total{worker=\"") else {
            continue;
        };
        let Some((worker, value)) = rest.split_once("\"}") else {
            continue;
        };
        if let (Ok(worker), Ok(value)) = (worker.parse::<usize>(), value.trim().parse::<f64>()) {
            by_worker.insert(worker, value as u64);
        }
    }
    by_worker.into_values().collect()
}

/// The body of a plain HTTP/1.1 GET, read up to its `Content-Length`.
fn http_get(addr: SocketAddr, path: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let until = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some(body) = complete_body(&got) {
            return Ok(String::from_utf8_lossy(body).into_owned());
        }
        if Instant::now() > until {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no whole answer"));
        }
        match stream.read(&mut buf)? {
            0 => return Err(io::Error::other("the admin listener closed early")),
            n => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// The body once the whole answer (a 200 with a `Content-Length`) is in.
fn complete_body(got: &[u8]) -> Option<&[u8]> {
    let end = got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))?
        .trim()
        .parse()
        .ok()?;
    got.get(end..end + length)
}

/// Distinct connections per nginx worker, from lines of `pid connection`;
/// `workers` first in their order, then any pid only the log names.
fn nginx_split(log: &str, workers: &[u32]) -> Vec<u64> {
    let mut seen: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    for line in log.lines() {
        let mut fields = line.split_ascii_whitespace();
        if let (Some(Ok(pid)), Some(Ok(connection))) = (
            fields.next().map(str::parse::<u32>),
            fields.next().map(str::parse::<u64>),
        ) {
            seen.entry(pid).or_default().insert(connection);
        }
    }
    let mut split: Vec<u64> = workers
        .iter()
        .map(|pid| seen.remove(pid).map_or(0, |c| c.len() as u64))
        .collect();
    split.extend(seen.values().map(|c| c.len() as u64));
    split
}

fn load_label(load: WorkerLoad) -> String {
    let file = match load.payload {
        Payload::Hello => "`Hello, world!` (13 bytes)",
        Payload::Big => "300 KiB text file",
        Payload::Gzip => "16 KiB text file gzipped",
    };
    if load.pipeline == 0 {
        format!(
            "new connections: {}, {CONNECTIONS} at a time, each one request for the {file} and \
             closed (req/s = connections/s)",
            thousands(NEW_CONNECTIONS)
        )
    } else {
        format!("{file}, {CONNECTIONS} connections, pipeline {}", load.pipeline)
    }
}

/// `10000` as `10,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `33 / 31, 30 / 34 (busiest worker: at most 53.1 %)`: each run's split, then the largest
/// share one worker took in any run.
fn split_cell(runs: &[&WorkerRun]) -> String {
    if runs.iter().all(|r| r.per_worker.is_empty()) {
        return "—".into();
    }
    let splits: Vec<String> = runs
        .iter()
        .map(|r| {
            let counted: u64 = r.per_worker.iter().sum();
            let mut s = r
                .per_worker
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" / ");
            if counted != r.opened {
                let _ = write!(s, " (counted {counted} of {})", r.opened);
            }
            s
        })
        .collect();
    let busiest = runs
        .iter()
        .filter_map(|r| {
            let total: u64 = r.per_worker.iter().sum();
            let most = r.per_worker.iter().max()?;
            (total > 0).then(|| *most as f64 / total as f64)
        })
        .max_by(f64::total_cmp);
    let busiest = busiest.map_or(String::new(), |b| {
        format!(" (busiest worker: at most {:.1} %)", b * 100.0)
    });
    format!("{}{busiest}", splits.join(", "))
}

fn table(runs: &[WorkerRun]) -> String {
    let mut t = String::from(
        "| load | nginx | connections per nginx worker, each run | jsontp serve | connections per jsontp \
         worker, each run | jsontp / nginx |\n|---|---|---|---|---|---|\n",
    );
    let of = |server, load| -> Vec<&WorkerRun> {
        runs.iter()
            .filter(|r| r.server == server && r.load == load)
            .collect()
    };
    let mut any = false;
    for load in LOADS {
        let nginx = of(ServerKind::Nginx, load);
        let jsontp = of(ServerKind::JsontpServe, load);
        if nginx.is_empty() && jsontp.is_empty() {
            continue;
        }
        any = true;
        let rate = |runs: &[&WorkerRun]| {
            let rate = suite::median(runs.iter().map(|r| r.outcome.requests_per_second).collect());
            if runs.is_empty() {
                "—".to_string()
            } else {
                format!("{} req/s", suite::rps(rate))
            }
        };
        // Per round, as the other tables: run i of one beside run i of the other.
        let outcomes = |runs: &[&WorkerRun]| runs.iter().map(|r| r.outcome.clone()).collect::<Vec<_>>();
        let versus = suite::times(suite::ratio(&outcomes(&jsontp), &outcomes(&nginx)));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {versus} |",
            load_label(load),
            rate(&nginx),
            split_cell(&nginx),
            rate(&jsontp),
            split_cell(&jsontp),
        );
    }
    if !any {
        t += "| (nothing measured) | | | | | |\n";
    }
    let busiest = runs
        .iter()
        .filter_map(|r| Some((r, r.outcome.generator_cpu_share?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((r, share)) = busiest {
        let _ = writeln!(
            t,
            "\nThe load generator's busiest run used {:.0} % of a CPU ({}, {}).",
            share * 100.0,
            r.server.name(),
            load_label(r.load)
        );
    }
    let errors: u64 = runs.iter().map(|r| r.outcome.errors).sum();
    let completed: u64 = runs.iter().map(|r| r.outcome.completed).sum();
    let _ = writeln!(
        t,
        "\n{completed} responses checked (jsontp `\"code\":200`, HTTP `200`), {errors} errors."
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accepted_counter_is_read_by_worker() {
        let metrics = "# TYPE jsontp_connections_accepted_total counter\n\
                       jsontp_connections_accepted_total{worker=\"1\"} 31\n\
                       jsontp_connections_accepted_total{worker=\"0\"} 34\n\
                       jsontp_connections{state=\"serving\"} 0\n";
        assert_eq!(parse_accepted(metrics), [34, 31]);
        let answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(complete_body(answer), Some(&b"hello"[..]));
        assert_eq!(complete_body(&answer[..answer.len() - 1]), None);
    }

    #[test]
    fn nginx_connections_are_counted_once_per_worker() {
        // Worker 20 took connections 1 and 3 (3 twice: two first requests
        // cannot happen, but a repeat must not count twice); 10 took one.
        let log = "20 1\n10 2\n20 3\n20 3\n";
        assert_eq!(nginx_split(log, &[10, 20, 30]), [1, 2, 0]);
        assert_eq!(nginx_split("40 1\n", &[10]), [0, 1]);
    }

    #[test]
    fn the_table_shows_rates_splits_and_ratio() {
        let outcome = |rps: f64| Outcome {
            completed: rps as u64,
            errors: 0,
            error_samples: Vec::new(),
            seconds: 1.0,
            requests_per_second: rps,
            server_cpu_seconds: None,
            server_cpu_us_per_request: None,
            server_user_us_per_request: None,
            server_system_us_per_request: None,
            bytes_received: 0,
            generator_cpu_share: Some(0.5),
        };
        let load = LOADS[0];
        let runs = [
            WorkerRun {
                server: ServerKind::Nginx,
                load,
                outcome: outcome(50_000.0),
                per_worker: vec![40, 24],
                opened: 64,
            },
            WorkerRun {
                server: ServerKind::JsontpServe,
                load,
                outcome: outcome(100_000.0),
                per_worker: vec![30, 33],
                opened: 64,
            },
        ];
        let t = table(&runs);
        assert!(
            t.contains(
                "| 50k req/s | 40 / 24 (busiest worker: at most 62.5 %) | 100k req/s | 30 / 33 (counted 63 of 64) (busiest worker: at most 52.4 %) | 2.00× |"
            ),
            "{t}"
        );
        assert!(t.contains("0 errors"), "{t}");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
