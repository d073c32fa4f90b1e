//! `loadbench`: load benchmarks of jsontp's servers beside nginx and hyper.
//!
//! ```text
//! loadbench gen --addr 127.0.0.1:8080 --protocol jsontp --path /hello.txt -c 16 -p 1 -d 5
//! loadbench suite throughput|idle|syscalls|instructions|all|smoke|workers|uring|versus [options]
//! ```
//!
//! `scripts/load-bench.sh` builds everything, pins this program to one CPU
//! and runs `suite`; see BENCHMARKS.md.

// A benchmark owns its clock, threads and processes; the disallowed list
// (clippy.toml) guards the sans-I/O core.
#![allow(clippy::disallowed_methods)]

mod framing;
mod generator;
mod idle;
mod paced;
mod plot;
mod procfs;
mod profile;
#[cfg(target_os = "linux")]
mod ring_generator;
mod servers;
mod suite;
mod tls;
mod trace;
mod uring;
mod workers;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use framing::Protocol;
use generator::Driver;
use servers::{Programs, ServerKind};
use suite::{Mode, Settings};

const USAGE: &str = "\
usage:
  loadbench gen --addr ADDR [--protocol jsontp|http] [--path /hello.txt] [--gzip]
                [-c CONNECTIONS] [-p PIPELINE] [-d SECONDS] [--warmup SECONDS]
                [--requests N] [--pid SERVER_PID]... [--generator epoll|uring]
  loadbench suite MODE [--runs 3] [--seconds 5] [--warmup 1] [--bin-dir target/release]
                [--hyper PATH] [--nginx PATH|none] [--work DIR] [--write BENCHMARKS.md]
                [--svg FILE] [--server-cpu N|none] [--idle-max 10000] [--command TEXT]
                [--servers nginx,jsontp,hyper,mio,floor,uring,jsontp-uring] [--baseline PATH]
                [--generator epoll|uring]
  MODE: throughput, idle, syscalls, instructions, all, smoke, profile, latency, tls, workers,
        uring (the io_uring runtime beside epoll), versus (this mio hello and --baseline's)
  loadbench replot [--results target/loadbench/results.json] [--svg FILE]
  --generator: how the generator drives its connections, epoll (the default; plain TCP, TLS,
        a connection per request) or uring (io_uring: one system call submits every
        connection's sends and reaps its answers; plain TCP, keep-alive, Linux only)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("gen") => generate(&args[1..]),
        Some("suite") => suite(&args[1..]),
        Some("replot") => replot(&args[1..]),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("loadbench: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--name value` options, and flags.
struct Options<'a> {
    args: &'a [String],
    used: Vec<bool>,
}

impl<'a> Options<'a> {
    fn new(args: &'a [String]) -> Self {
        Options {
            args,
            used: vec![false; args.len()],
        }
    }

    fn all(&mut self, names: &[&str]) -> Vec<&'a str> {
        let mut found = Vec::new();
        let mut i = 0;
        while i < self.args.len() {
            if names.contains(&self.args[i].as_str()) && i + 1 < self.args.len() {
                self.used[i] = true;
                self.used[i + 1] = true;
                found.push(self.args[i + 1].as_str());
                i += 1;
            }
            i += 1;
        }
        found
    }

    fn value(&mut self, names: &[&str]) -> Option<&'a str> {
        self.all(names).pop()
    }

    fn parsed<T: std::str::FromStr>(&mut self, names: &[&str], default: T) -> Result<T, String> {
        match self.value(names) {
            Some(v) => v.parse().map_err(|_| format!("{}: cannot read {v:?}", names[0])),
            None => Ok(default),
        }
    }

    fn flag(&mut self, name: &str) -> bool {
        let at = self.args.iter().position(|a| a == name);
        if let Some(i) = at {
            self.used[i] = true;
        }
        at.is_some()
    }

    fn finish(self) -> Result<(), String> {
        match self.args.iter().zip(&self.used).find(|(_, used)| !**used) {
            Some((arg, _)) => Err(format!("unknown argument {arg:?}\n{USAGE}")),
            None => Ok(()),
        }
    }
}

fn generate(args: &[String]) -> Result<bool, String> {
    let mut o = Options::new(args);
    let addr: SocketAddr = o
        .value(&["--addr"])
        .ok_or("--addr is required")?
        .parse()
        .map_err(|e| format!("--addr: {e}"))?;
    let protocol = match o.value(&["--protocol"]).unwrap_or("jsontp") {
        "jsontp" => Protocol::Jsontp,
        "http" => Protocol::Http,
        other => return Err(format!("--protocol: jsontp or http, not {other:?}")),
    };
    let path = o.value(&["--path"]).unwrap_or("/hello.txt").to_string();
    let gzip = o.flag("--gzip");
    let connections = o.parsed(&["-c", "--connections"], 16usize)?;
    let pipeline = o.parsed(&["-p", "--pipeline"], 1usize)?;
    let seconds = o.parsed(&["-d", "--seconds"], 5.0f64)?;
    let warmup = o.parsed(&["--warmup"], 1.0f64)?;
    let requests = o
        .value(&["--requests"])
        .map(str::parse::<u64>)
        .transpose()
        .map_err(|e| e.to_string())?;
    let pids = o
        .all(&["--pid"])
        .into_iter()
        .map(str::parse::<u32>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--pid: {e}"))?;
    let driver = generator_option(&mut o)?;
    o.finish()?;
    if !(0.0..=600.0).contains(&seconds) || !(0.0..=60.0).contains(&warmup) {
        return Err("-d: at most 600 s; --warmup: at most 60 s".into());
    }
    // The same request the suite sends: only the protocol matters here.
    let kind = match protocol {
        Protocol::Jsontp => servers::ServerKind::JsontpServe,
        Protocol::Http => servers::ServerKind::Nginx,
    };
    let load = generator::Load {
        addr,
        protocol,
        request: kind.request(&path, gzip),
        connections,
        pipeline,
        warmup: Duration::from_secs_f64(warmup),
        duration: Duration::from_secs_f64(seconds),
        requests,
        server_pids: pids,
        tls: None,
        reconnect: false,
        driver,
    };
    let outcome = generator::run(&load).map_err(|e| e.to_string())?;
    println!("{}", serde_json::to_string(&outcome).map_err(|e| e.to_string())?);
    Ok(outcome.errors == 0 && outcome.completed > 0)
}

/// `--generator epoll|uring`, epoll unless given.
fn generator_option(o: &mut Options) -> Result<Driver, String> {
    match o.value(&["--generator"]) {
        None => Ok(Driver::Epoll),
        Some(name) => Driver::parse(name).ok_or_else(|| format!("--generator: epoll or uring, not {name:?}")),
    }
}

fn suite(args: &[String]) -> Result<bool, String> {
    let mode = args
        .first()
        .and_then(|m| Mode::parse(m))
        .ok_or_else(|| USAGE.to_string())?;
    let mut o = Options::new(&args[1..]);
    let bin_dir = PathBuf::from(o.value(&["--bin-dir"]).unwrap_or("target/release"));
    let here = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        .unwrap_or_else(|| bin_dir.clone());
    let hyper = o
        .value(&["--hyper"])
        .map_or_else(|| here.join("hyper_hello"), PathBuf::from);
    let nginx = match o.value(&["--nginx"]) {
        Some("none") => None,
        Some(path) => Some(PathBuf::from(path)),
        None => ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists()),
    };
    let server_cpu = match o.value(&["--server-cpu"]) {
        Some("none") => None,
        Some(n) => Some(n.parse().map_err(|_| format!("--server-cpu: {n:?}"))?),
        None => Some(0),
    };
    let settings = Settings {
        programs: Programs {
            jsontp: bin_dir.join("jsontp"),
            hello: bin_dir.join("examples").join("hello_server"),
            hyper,
            floor: here.join("floor_server"),
            parse_count: here.join("parse_count"),
            nginx,
            baseline: o.value(&["--baseline"]).map(PathBuf::from),
        },
        work: PathBuf::from(o.value(&["--work"]).unwrap_or("target/loadbench")),
        runs: o.parsed(&["--runs"], 3usize)?.max(1),
        seconds: o.parsed(&["--seconds"], 5.0f64)?,
        warmup: o.parsed(&["--warmup"], 1.0f64)?,
        server_cpu,
        command: o
            .value(&["--command"])
            .map_or_else(|| format!("loadbench suite {}", args[0]), str::to_string),
        write: o.value(&["--write"]).map(PathBuf::from),
        svg: PathBuf::from(o.value(&["--svg"]).unwrap_or("benches/load/throughput.svg")),
        idle_max: o.parsed(&["--idle-max"], 10_000usize)?,
        generator: generator_option(&mut o)?,
        only: match o.value(&["--servers"]) {
            // Modes that do not compare a server leave it out whatever
            // this says.
            None => ServerKind::WITH_FLOOR
                .into_iter()
                .chain([
                    ServerKind::UringHello,
                    ServerKind::JsontpServeUring,
                    ServerKind::BaselineHello,
                ])
                .collect(),
            Some(list) => list
                .split(',')
                .map(|name| {
                    ServerKind::from_short(name.trim()).ok_or_else(|| {
                        format!("--servers: {name:?} (nginx, jsontp, hyper, mio, floor, uring, jsontp-uring)")
                    })
                })
                .collect::<Result<_, _>>()?,
        },
    };
    o.finish()?;
    if !(0.1..=60.0).contains(&settings.seconds) || !(0.0..=30.0).contains(&settings.warmup) {
        return Err("--seconds: 0.1 to 60; --warmup: 0 to 30".into());
    }
    if settings.idle_max == 0 || settings.idle_max > generator::MAX_CONNECTIONS {
        return Err("--idle-max: 1 to 20,000".into());
    }
    for (what, path) in [
        ("the jsontp binary", &settings.programs.jsontp),
        ("examples/hello_server", &settings.programs.hello),
        ("hyper_hello", &settings.programs.hyper),
        ("floor_server", &settings.programs.floor),
    ] {
        if !path.exists() {
            return Err(format!("{what} is not at {} (build it first)", path.display()));
        }
    }
    if mode == Mode::Versus && settings.programs.baseline.is_none() {
        return Err(
            "mode versus compares with another build: --baseline PATH/TO/examples/hello_server".into(),
        );
    }
    suite::run(mode, &settings).map_err(|e| e.to_string())
}

fn replot(args: &[String]) -> Result<bool, String> {
    let mut o = Options::new(args);
    let results = o
        .value(&["--results"])
        .unwrap_or("target/loadbench/results.json")
        .to_string();
    let svg = o
        .value(&["--svg"])
        .unwrap_or("benches/load/throughput.svg")
        .to_string();
    o.finish()?;
    suite::replot(results.as_ref(), svg.as_ref()).map_err(|e| format!("{results}: {e}"))?;
    Ok(true)
}
