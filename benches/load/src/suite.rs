//! The benchmark runs, start to table: which loads, in which order, how the
//! figures become Markdown between markers in BENCHMARKS.md, and the plot.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::generator::{self, Driver, Load, Outcome};
use crate::idle::{self, IdleMemory};
use crate::paced::{self, Paced};
use crate::plot::{self, Series};
use crate::procfs;
use crate::profile::{self, Profile};
use crate::servers::{self, Launch, Programs, Running, ServerKind};
use crate::tls;
use crate::trace::{self, Syscalls};
use crate::workers::{self, WorkerRun};

/// What a suite run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// req/s and server CPU per request, every load, and the plot.
    Throughput,
    /// Memory per idle connection.
    Idle,
    /// System calls per request under strace.
    Syscalls,
    /// Instructions per request under callgrind.
    Instructions,
    /// Where the hello servers' CPU goes (perf); not part of `All`.
    Profile,
    /// Latency percentiles at fixed rates, open loop (nginx and `jsontp
    /// serve`); not part of `All`.
    Latency,
    /// req/s over TLS (nginx and `jsontp serve`); not part of `All`.
    Tls,
    /// Two workers of nginx and `jsontp serve` on every core, and the
    /// connections each worker took; not part of `All`.
    Workers,
    /// The io_uring runtime beside epoll, hyper and nginx; not part of
    /// `All`.
    Uring,
    /// This build's mio hello and `--baseline`'s, alternately; not part
    /// of `All`.
    Versus,
    /// All four.
    All,
    /// Seconds: every server starts, loads complete without errors, the
    /// tables render; nothing is written into BENCHMARKS.md.
    Smoke,
}

impl Mode {
    /// From its name on the command line.
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "throughput" => Mode::Throughput,
            "idle" => Mode::Idle,
            "syscalls" => Mode::Syscalls,
            "instructions" => Mode::Instructions,
            "profile" => Mode::Profile,
            "latency" => Mode::Latency,
            "tls" => Mode::Tls,
            "workers" => Mode::Workers,
            "uring" => Mode::Uring,
            "versus" => Mode::Versus,
            "all" => Mode::All,
            "smoke" => Mode::Smoke,
            _ => return None,
        })
    }
}

/// How the suite runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The servers' programs.
    pub programs: Programs,
    /// Scratch files, logs and results.
    pub work: PathBuf,
    /// Runs of each load (the median is reported).
    pub runs: usize,
    /// Seconds of each measured window.
    pub seconds: f64,
    /// Seconds of warm-up before each window.
    pub warmup: f64,
    /// Pin the servers to this CPU (the generator is pinned by the caller).
    pub server_cpu: Option<usize>,
    /// The command line to print beside the tables.
    pub command: String,
    /// BENCHMARKS.md, to update between its markers.
    pub write: Option<PathBuf>,
    /// Where the plot goes.
    pub svg: PathBuf,
    /// The most idle connections.
    pub idle_max: usize,
    /// The servers to measure.
    pub only: Vec<ServerKind>,
    /// How the generator drives the throughput loads' connections (the
    /// other loads, which count a server's instructions or system calls
    /// or pace requests, always use epoll).
    pub generator: Driver,
}

/// Which file a load asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Payload {
    /// The 13-byte `Hello, world!` (the hello servers answer their own).
    Hello,
    /// The 300 KiB text file.
    Big,
    /// The 16 KiB text file, asked for gzipped.
    Gzip,
}

/// One load on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Case {
    /// What is asked for.
    pub payload: Payload,
    /// Keep-alive connections.
    pub connections: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// The server.
    pub server: ServerKind,
}

impl Case {
    pub(crate) fn request(&self) -> Vec<u8> {
        let (file, gzip) = match self.payload {
            Payload::Hello => (servers::HELLO, false),
            Payload::Big => (servers::BIG, false),
            Payload::Gzip => (servers::TEXT, true),
        };
        self.server.request(&format!("/{file}"), gzip)
    }
}

/// Connection counts of the plot.
const SWEEP: [usize; 6] = [1, 4, 16, 64, 128, 256];

/// The loads of a throughput run, in the order each round runs them: the
/// servers compared side by side follow each other.
fn throughput_cases(available: &[ServerKind], smoke: bool) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |payload, connections, pipeline, servers: &[ServerKind]| {
        for &server in servers {
            if available.contains(&server) {
                cases.push(Case {
                    payload,
                    connections,
                    pipeline,
                    server,
                });
            }
        }
    };
    let files = [ServerKind::Nginx, ServerKind::JsontpServe];
    // The floor beside the servers where the hello servers are compared.
    add(Payload::Hello, 16, 1, &ServerKind::WITH_FLOOR);
    add(Payload::Hello, 16, 16, &ServerKind::WITH_FLOOR);
    add(Payload::Big, 16, 1, &files);
    add(Payload::Gzip, 16, 1, &files);
    if !smoke {
        for connections in SWEEP.into_iter().filter(|&c| c != 16) {
            add(Payload::Hello, connections, 1, &ServerKind::ALL);
        }
    }
    cases
}

/// Everything a suite measured, as saved beside the scratch files.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Results {
    /// Each load's runs, in round order.
    pub throughput: Vec<(Case, Vec<Outcome>)>,
    /// Idle memory per server.
    pub idle: Vec<IdleMemory>,
    /// System calls per server and pipeline depth.
    pub syscalls: Vec<(ServerKind, usize, Syscalls)>,
    /// Instructions per request per server and pipeline depth.
    pub instructions: Vec<(ServerKind, usize, f64)>,
    /// Instructions per parse of the typical request, per parser
    /// (`parse_count`: jsontp, httparse, value).
    #[serde(default)]
    pub parse: Vec<(String, f64)>,
    /// Where the CPU of the hello servers and the floor goes.
    #[serde(default)]
    pub profiles: Vec<(ServerKind, Profile)>,
    /// The two-worker runs.
    #[serde(default)]
    pub workers: Vec<WorkerRun>,
    /// Load average before and after.
    pub load_average: Vec<[f64; 3]>,
}

/// Runs `mode`; returns whether every load completed without an error.
pub fn run(mode: Mode, settings: &Settings) -> io::Result<bool> {
    fs::create_dir_all(&settings.work)?;
    let root = settings.work.join("www");
    servers::write_files(&root)?;
    let with_floor: Vec<ServerKind> = ServerKind::WITH_FLOOR
        .into_iter()
        .filter(|&k| settings.programs.has(k) && settings.only.contains(&k))
        .collect();
    // The floor is measured for its rate and its system calls only: its
    // memory and instructions say nothing about a server.
    let available: Vec<ServerKind> = with_floor
        .iter()
        .copied()
        .filter(|&k| k != ServerKind::Floor)
        .collect();
    if !settings.programs.has(ServerKind::Nginx) {
        eprintln!("loadbench: no nginx (not installed, or --nginx none): its rows are left out");
    }
    let about = About::read(settings);
    let mut results = Results::default();
    results.load_average.extend(procfs::load_average());
    let mut clean = true;
    let smoke = mode == Mode::Smoke;
    let mut sections: Vec<(&str, String)> = Vec::new();

    if matches!(mode, Mode::Throughput | Mode::All | Mode::Smoke) {
        let cases = throughput_cases(&with_floor, smoke);
        let (runs, seconds, warmup) = if smoke {
            (1, settings.seconds.min(1.0), settings.warmup.min(0.2))
        } else {
            (settings.runs, settings.seconds, settings.warmup)
        };
        results.throughput = throughput(settings, &root, &with_floor, &cases, runs, seconds, warmup)?;
        for (case, outcomes) in &results.throughput {
            for o in outcomes {
                if o.errors > 0 || o.completed == 0 {
                    clean = false;
                    eprintln!(
                        "loadbench: {} {:?}: {} completed, {} errors: {:?}",
                        case.server.name(),
                        case,
                        o.completed,
                        o.errors,
                        o.error_samples
                    );
                }
            }
        }
        let svg = if smoke {
            settings.work.join("throughput.svg")
        } else {
            settings.svg.clone()
        };
        let series = sweep_series(&results.throughput);
        if series.iter().any(|s| s.points.len() > 1) {
            plot::throughput_svg(&svg, PLOT_TITLE, &series).map_err(io::Error::other)?;
            eprintln!("loadbench: plot written to {}", svg.display());
        }
        let mut text = header(&about, settings, &results, runs, seconds, warmup);
        text += &throughput_tables(&results.throughput, &about, &svg_link(settings));
        sections.push(("throughput", text));
    }

    if matches!(mode, Mode::Idle | Mode::All | Mode::Smoke) {
        let steps = idle_steps(if smoke { 50 } else { settings.idle_max });
        for &kind in &available {
            let mut server =
                servers::start(kind, &settings.programs, &root, &settings.work, &launch(settings))?;
            let request = Case {
                payload: Payload::Hello,
                connections: 1,
                pipeline: 1,
                server: kind,
            }
            .request();
            let measured = idle::measure(&server, &request, &steps);
            server.stop(Duration::from_secs(5))?;
            match measured {
                Ok(m) => {
                    eprintln!(
                        "loadbench: idle {}: {:.0} bytes per connection",
                        kind.name(),
                        m.bytes_per_connection
                    );
                    results.idle.push(m);
                }
                Err(e) => {
                    clean = false;
                    eprintln!("loadbench: idle memory of {}: {e}", kind.name());
                }
            }
        }
        let text = simple_header(&about, settings, "idle connections, each after one exchange")
            + &idle_table(&results.idle, &steps);
        sections.push(("idle", text));
    }

    if matches!(mode, Mode::Syscalls | Mode::All) {
        for &kind in &with_floor {
            let server = servers::start(kind, &settings.programs, &root, &settings.work, &launch(settings))?;
            let warm = load_for(&server, 16, 1, None, 0.0, 0.5);
            generator::run(&warm)?;
            for pipeline in [1, 16] {
                // Under strace every system call stops the server twice: a
                // few hundred requests a second where a call is costly.
                let requests = if pipeline == 1 { 5_000 } else { 16_000 };
                let load = load_for(&server, 16, pipeline, Some(requests), 0.0, 300.0);
                match trace::strace(server.worker_pid(), &load, &settings.work) {
                    Ok(s) => {
                        eprintln!(
                            "loadbench: strace {} p{pipeline}: {:.2} syscalls per request",
                            kind.name(),
                            s.per_request()
                        );
                        results.syscalls.push((kind, pipeline, s));
                    }
                    Err(e) => {
                        clean = false;
                        eprintln!("loadbench: strace of {}: {e}", kind.name());
                    }
                }
            }
        }
        let text = simple_header(&about, settings, "strace -c -f attached to the server's worker")
            + &syscalls_table(&results.syscalls);
        sections.push(("syscalls", text));
    }

    if matches!(mode, Mode::Instructions | Mode::All) {
        let counts = [2_000u64, 10_000];
        // The hello on io_uring too, whose budget CI checks beside the
        // others'; its rates are mode `uring`'s.
        let uring = [ServerKind::UringHello]
            .into_iter()
            .filter(|&k| settings.programs.has(k) && settings.only.contains(&k));
        for kind in available.iter().copied().chain(uring) {
            for pipeline in [1, 16] {
                match instructions(settings, &root, kind, pipeline, counts) {
                    Ok(per_request) => {
                        eprintln!(
                            "loadbench: callgrind {} p{pipeline}: {per_request:.0} instructions per request",
                            kind.name()
                        );
                        results.instructions.push((kind, pipeline, per_request));
                    }
                    Err(e) => {
                        clean = false;
                        eprintln!("loadbench: callgrind of {}: {e}", kind.name());
                    }
                }
            }
        }
        for parser in PARSERS {
            match parse_instructions(settings, parser) {
                Ok(per_parse) => {
                    eprintln!("loadbench: callgrind parse {parser}: {per_parse:.0} instructions per parse");
                    results.parse.push((parser.to_string(), per_parse));
                }
                Err(e) => {
                    clean = false;
                    eprintln!("loadbench: callgrind of parse_count {parser}: {e}");
                }
            }
        }
        let text = simple_header(
            &about,
            settings,
            "valgrind --tool=callgrind, user-space instructions of the whole server process",
        ) + &instructions_table(&results.instructions, counts)
            + &parse_table(&results.parse);
        sections.push(("instructions", text));
    }

    if mode == Mode::Profile {
        let profiled = [ServerKind::Hyper, ServerKind::MioHello, ServerKind::Floor];
        for kind in with_floor.iter().copied().filter(|k| profiled.contains(k)) {
            let server = servers::start(kind, &settings.programs, &root, &settings.work, &launch(settings))?;
            // The load outlasts the recording on both sides.
            let load = load_for(&server, 16, 1, None, 0.5, settings.seconds + 1.5);
            match profile::record(server.worker_pid(), &load, &settings.work, settings.seconds) {
                Ok(p) => {
                    eprintln!(
                        "loadbench: perf {}: {:.1} % kernel over {} samples",
                        kind.name(),
                        p.kernel,
                        p.samples
                    );
                    results.profiles.push((kind, p));
                }
                Err(e) => {
                    clean = false;
                    eprintln!("loadbench: perf of {}: {e}", kind.name());
                }
            }
        }
        let text = simple_header(
            &about,
            settings,
            "perf record -g attached to the server, 16 connections, pipeline 1",
        ) + &profile_table(&results.profiles);
        sections.push(("profile", text));
    }

    if mode == Mode::Tls {
        let (text, ok) = tls_throughput(settings, &root, &available, &about)?;
        clean &= ok;
        sections.push(("tls", text));
    }

    if mode == Mode::Workers {
        let (text, ok, runs) = workers::run(settings, &root, &available, &about)?;
        clean &= ok;
        results.workers = runs;
        sections.push(("workers", text));
    }

    if mode == Mode::Uring {
        let (text, ok) = crate::uring::uring(settings, &root, &about)?;
        clean &= ok;
        sections.push(("uring", text));
    }

    if mode == Mode::Versus {
        let (text, ok) = crate::uring::versus(settings, &root, &about)?;
        clean &= ok;
        sections.push(("versus", text));
    }

    if mode == Mode::Latency {
        let (text, ok) = latency(settings, &root, &available, &about)?;
        clean &= ok;
        sections.push(("latency", text));
    }

    results.load_average.extend(procfs::load_average());
    let json = serde_json::to_string_pretty(&results).map_err(io::Error::other)?;
    fs::write(settings.work.join("results.json"), json)?;
    for (name, text) in &sections {
        println!("<!-- loadbench:{name} -->\n{text}");
    }
    if !smoke {
        if let Some(file) = &settings.write {
            for (name, text) in &sections {
                write_section(file, name, text)?;
            }
            eprintln!("loadbench: {} updated", file.display());
        }
    }
    Ok(clean)
}

/// req/s over TLS 1.3 (one cipher suite, the same certificate) for nginx
/// and `jsontp serve`, 16 connections at pipeline 1 and 16, the 13-byte
/// file, `settings.runs` rounds interleaved as the throughput table's.
fn tls_throughput(
    settings: &Settings,
    root: &Path,
    available: &[ServerKind],
    about: &About,
) -> io::Result<(String, bool)> {
    let certificates = tls::certificates(&settings.work.join("tls"))?;
    let servers: Vec<ServerKind> = [ServerKind::Nginx, ServerKind::JsontpServe]
        .into_iter()
        .filter(|k| available.contains(k))
        .collect();
    let mut launch = launch(settings);
    launch.tls = Some((certificates.chain.clone(), certificates.key.clone()));
    let mut clean = true;
    let mut rates: BTreeMap<(usize, ServerKind), Vec<f64>> = BTreeMap::new();
    // Pipeline 0 stands for a new connection per request: a handshake each.
    for round in 0..settings.runs {
        for pipeline in [1, 16, 0] {
            for &kind in &servers {
                let mut server = servers::start(kind, &settings.programs, root, &settings.work, &launch)?;
                let mut load = load_for(
                    &server,
                    16,
                    pipeline.max(1),
                    None,
                    settings.warmup,
                    settings.seconds,
                );
                load.tls = Some(certificates.client.clone());
                load.reconnect = pipeline == 0;
                let outcome = generator::run(&load);
                server.stop(Duration::from_secs(30))?;
                let outcome = outcome?;
                eprintln!(
                    "loadbench: tls round {}/{} {} p{pipeline} (0: a connection per request): {:.0} req/s, {} errors",
                    round + 1,
                    settings.runs,
                    kind.name(),
                    outcome.requests_per_second,
                    outcome.errors
                );
                if outcome.errors > 0 || outcome.completed == 0 {
                    clean = false;
                    eprintln!("loadbench: {}: {:?}", kind.name(), outcome.error_samples);
                }
                rates
                    .entry((pipeline, kind))
                    .or_default()
                    .push(outcome.requests_per_second);
            }
        }
    }
    let mut text = simple_header(
        about,
        settings,
        &format!(
            "TLS 1.3, TLS_AES_128_GCM_SHA256, the same certificate (a CA and a leaf for 127.0.0.1) for both \
             servers, 16 keep-alive connections, the 13-byte file; each cell the median of {} run(s) of {} s \
             after {} s of warm-up",
            settings.runs, settings.seconds, settings.warmup
        ),
    );
    text += "| server | pipeline 1 | pipeline 16 | new connections (a handshake and one request each) |\n|---|---|---|---|\n";
    let cell =
        |pipeline: usize, kind: ServerKind| rates.get(&(pipeline, kind)).and_then(|r| median(r.clone()));
    for &kind in &servers {
        let mut row = format!("| {} |", kind.name());
        for pipeline in [1, 16, 0] {
            let rate = cell(pipeline, kind);
            let versus = match (kind, rate, cell(pipeline, ServerKind::Nginx)) {
                (ServerKind::JsontpServe, Some(ours), Some(nginx)) if nginx > 0.0 => {
                    format!(" ({:.2}× nginx)", ours / nginx)
                }
                _ => String::new(),
            };
            let _ = write!(row, " {}{versus} |", rps(rate));
        }
        text += &row;
        text += "\n";
    }
    Ok((text, clean))
}

/// The shares of the reference's maximum rate at which latency is measured.
const LATENCY_SHARES: [f64; 2] = [0.5, 0.9];

/// Latency at fixed offered rates: nginx's maximum rate measured closed
/// loop (16 connections, pipeline 1, the 13-byte file), then nginx and
/// `jsontp serve` paced at [`LATENCY_SHARES`] of it, 16 connections.
/// Without nginx, `jsontp serve`'s own maximum is the reference.
fn latency(
    settings: &Settings,
    root: &Path,
    available: &[ServerKind],
    about: &About,
) -> io::Result<(String, bool)> {
    let servers: Vec<ServerKind> = [ServerKind::Nginx, ServerKind::JsontpServe]
        .into_iter()
        .filter(|k| available.contains(k))
        .collect();
    let Some(&reference) = servers.first() else {
        return Err(io::Error::other("neither nginx nor jsontp serve can run"));
    };
    let mut server = servers::start(
        reference,
        &settings.programs,
        root,
        &settings.work,
        &launch(settings),
    )?;
    let maximum = generator::run(&load_for(&server, 16, 1, None, settings.warmup, settings.seconds));
    server.stop(Duration::from_secs(30))?;
    let maximum = maximum?.requests_per_second;
    eprintln!("loadbench: {} closed loop: {maximum:.0} req/s", reference.name());
    let seconds = settings.seconds.max(10.0);
    let mut clean = true;
    let mut rows = Vec::new();
    for &kind in &servers {
        let mut server = servers::start(kind, &settings.programs, root, &settings.work, &launch(settings))?;
        for share in LATENCY_SHARES {
            let closed = load_for(&server, 16, 1, None, 0.0, 0.0);
            let got = paced::run(&Paced {
                addr: closed.addr,
                protocol: closed.protocol,
                request: closed.request,
                connections: 16,
                rate: maximum * share,
                warmup: Duration::from_secs_f64(settings.warmup),
                duration: Duration::from_secs_f64(seconds),
            });
            let got = match got {
                Ok(got) => got,
                Err(e) => {
                    server.stop(Duration::from_secs(30))?;
                    return Err(e);
                }
            };
            eprintln!(
                "loadbench: {} at {:.0} req/s: p50 {} µs, p99 {} µs, p99.9 {} µs, {} errors",
                kind.name(),
                got.offered,
                got.p50_us,
                got.p99_us,
                got.p999_us,
                got.errors
            );
            if got.errors > 0 {
                clean = false;
                eprintln!("loadbench: {}: {:?}", kind.name(), got.error_samples);
            }
            rows.push((kind, share, got));
        }
        server.stop(Duration::from_secs(30))?;
    }
    let mut text = simple_header(
        about,
        settings,
        &format!(
            "open loop: 16 keep-alive connections used in turn, the 13-byte file, requests sent on a fixed \
             schedule whatever is still unanswered, each latency from when its request was meant to leave \
             (coordinated omission corrected), recorded in an HdrHistogram; {seconds} s after {} s of warm-up",
            settings.warmup
        ),
    );
    let _ = writeln!(
        text,
        "The reference rate is {}'s maximum, closed loop, 16 connections, pipeline 1: {maximum:.0} req/s.\n",
        reference.name()
    );
    text +=
        "| server | share of the reference | offered req/s | answered req/s | p50 | p99 | p99.9 | max |\n";
    text += "|---|---|---|---|---|---|---|---|\n";
    let ms = |us: u64| format!("{:.2} ms", us as f64 / 1000.0);
    for (kind, share, got) in &rows {
        let _ = writeln!(
            text,
            "| {} | {:.0} % | {:.0} | {:.0} | {} | {} | {} | {} |",
            kind.name(),
            share * 100.0,
            got.offered,
            got.achieved,
            ms(got.p50_us),
            ms(got.p99_us),
            ms(got.p999_us),
            ms(got.max_us)
        );
    }
    Ok((text, clean))
}

/// Draws the plot again from a suite's saved results (`results.json`),
/// without measuring anything.
pub fn replot(results: &Path, svg: &Path) -> io::Result<()> {
    let text = fs::read_to_string(results)?;
    let results: Results = serde_json::from_str(&text).map_err(io::Error::other)?;
    plot::throughput_svg(svg, PLOT_TITLE, &sweep_series(&results.throughput)).map_err(io::Error::other)
}

/// The plot's title.
const PLOT_TITLE: &str = "jsontp load benchmark: req/s against connections";

pub(crate) fn launch(settings: &Settings) -> Launch {
    Launch {
        cpus: settings.server_cpu.map(|c| c.to_string()),
        ..Launch::default()
    }
}

pub(crate) fn load_for(
    server: &Running,
    connections: usize,
    pipeline: usize,
    requests: Option<u64>,
    warmup: f64,
    seconds: f64,
) -> Load {
    Load {
        addr: server.addr,
        protocol: server.kind.protocol(),
        request: Case {
            payload: Payload::Hello,
            connections,
            pipeline,
            server: server.kind,
        }
        .request(),
        connections,
        pipeline,
        warmup: Duration::from_secs_f64(warmup),
        duration: Duration::from_secs_f64(seconds),
        requests,
        server_pids: server.pids(),
        tls: None,
        reconnect: false,
        driver: Driver::Epoll,
    }
}

/// Every load, `runs` rounds, each server started once and pinned.
pub(crate) fn throughput(
    settings: &Settings,
    root: &Path,
    available: &[ServerKind],
    cases: &[Case],
    runs: usize,
    seconds: f64,
    warmup: f64,
) -> io::Result<Vec<(Case, Vec<Outcome>)>> {
    let mut running = BTreeMap::new();
    for &kind in available {
        running.insert(
            kind,
            servers::start(kind, &settings.programs, root, &settings.work, &launch(settings))?,
        );
    }
    let mut outcomes: Vec<(Case, Vec<Outcome>)> = cases.iter().map(|&c| (c, Vec::new())).collect();
    for round in 0..runs {
        for (case, runs_so_far) in &mut outcomes {
            let server = &running[&case.server];
            let load = Load {
                addr: server.addr,
                protocol: case.server.protocol(),
                request: case.request(),
                connections: case.connections,
                pipeline: case.pipeline,
                warmup: Duration::from_secs_f64(warmup),
                duration: Duration::from_secs_f64(seconds),
                requests: None,
                server_pids: server.pids(),
                tls: None,
                reconnect: false,
                driver: settings.generator,
            };
            let outcome = generator::run(&load)?;
            eprintln!(
                "loadbench: round {}/{runs} {:>12} {:?} c{:<3} p{:<2}: {:>9.0} req/s, {} µs CPU/req, generator {:.0} %, {} errors",
                round + 1,
                case.server.name(),
                case.payload,
                case.connections,
                case.pipeline,
                outcome.requests_per_second,
                outcome
                    .server_cpu_us_per_request
                    .map_or("-".to_string(), |c| format!("{c:.1}")),
                outcome.generator_cpu_share.unwrap_or(0.0) * 100.0,
                outcome.errors
            );
            runs_so_far.push(outcome);
        }
    }
    for server in running.values_mut() {
        server.stop(Duration::from_secs(5))?;
    }
    Ok(outcomes)
}

/// Instructions per request: two callgrind runs of the server with
/// `counts[0]` and `counts[1]` requests; the difference cancels start-up,
/// connection set-up and shutdown.
pub(crate) fn instructions(
    settings: &Settings,
    root: &Path,
    kind: ServerKind,
    pipeline: usize,
    counts: [u64; 2],
) -> io::Result<f64> {
    let mut totals = [0u64; 2];
    for (i, &n) in counts.iter().enumerate() {
        totals[i] = match callgrind_run(settings, root, kind, pipeline, n) {
            Ok(total) => total,
            Err(e) => {
                eprintln!("loadbench: callgrind of {} once more: {e}", kind.name());
                callgrind_run(settings, root, kind, pipeline, n)?
            }
        };
    }
    Ok(totals[1].saturating_sub(totals[0]) as f64 / (counts[1] - counts[0]) as f64)
}

/// The parsers `parse_count` knows, ours first.
const PARSERS: [&str; 3] = ["jsontp", "httparse", "value"];

/// Instructions of one parse of the typical request by `parser`: two
/// callgrind runs of `parse_count`, 1,000 and 11,000 parses; the
/// difference cancels the program's start.
fn parse_instructions(settings: &Settings, parser: &str) -> io::Result<f64> {
    let counts = [1_000u64, 11_000];
    let mut totals = [0u64; 2];
    for (i, n) in counts.into_iter().enumerate() {
        let out = settings.work.join(format!("callgrind-parse-{parser}-{n}.out"));
        let status = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&settings.programs.parse_count)
            .args([parser, &n.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        if !status.success() {
            return Err(io::Error::other(format!("parse_count {parser} {n}: {status}")));
        }
        totals[i] = trace::callgrind_total(&out)?;
    }
    Ok(totals[1].saturating_sub(totals[0]) as f64 / (counts[1] - counts[0]) as f64)
}

/// The instructions of one server run under callgrind, `n` requests.
fn callgrind_run(
    settings: &Settings,
    root: &Path,
    kind: ServerKind,
    pipeline: usize,
    n: u64,
) -> io::Result<u64> {
    let out = settings.work.join(format!(
        "callgrind-{}-p{pipeline}-{n}.out",
        kind.name().replace(' ', "-")
    ));
    let _ = fs::remove_file(&out);
    let launch = Launch {
        cpus: settings.server_cpu.map(|c| c.to_string()),
        under: vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={}", out.display()),
        ],
        ready_within: Some(Duration::from_secs(120)),
        ..Launch::default()
    };
    let mut server = servers::start(kind, &settings.programs, root, &settings.work, &launch)?;
    let load = load_for(&server, 16, pipeline, Some(n), 0.0, 300.0);
    let outcome = generator::run(&load);
    server.stop(Duration::from_secs(120))?;
    let outcome = outcome?;
    if outcome.errors > 0 {
        return Err(io::Error::other(format!(
            "errors under callgrind: {:?}",
            outcome.error_samples
        )));
    }
    trace::callgrind_total(&out)
}

fn idle_steps(max: usize) -> Vec<usize> {
    let mut steps: Vec<usize> = [1, 100, 1_000, 2_500, 5_000, 7_500, 10_000]
        .into_iter()
        .filter(|&s| s < max)
        .collect();
    if max <= 100 {
        steps = vec![1, max / 2, max];
    } else {
        steps.push(max);
    }
    steps.dedup();
    steps
}

/// What the tables say about where they were measured.
pub(crate) struct About {
    date: String,
    cpu: String,
    rustc: String,
    nginx: String,
    hyper: String,
}

impl About {
    fn read(settings: &Settings) -> About {
        let output = |program: &str, args: &[&str]| -> String {
            Command::new(program)
                .args(args)
                .output()
                .ok()
                .map(|o| {
                    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
                    s += &String::from_utf8_lossy(&o.stderr);
                    s.trim().to_string()
                })
                .unwrap_or_default()
        };
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let nginx = settings
            .programs
            .nginx
            .as_ref()
            .map(|n| output(&n.display().to_string(), &["-v"]))
            .and_then(|v| v.split('/').nth(1).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| "-".into());
        About {
            date: output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            cpu,
            rustc: output("rustc", &["-V"]),
            nginx,
            hyper: locked_version("hyper").unwrap_or_else(|| "1".into()),
        }
    }
}

/// The version of `package` in this crate's Cargo.lock.
fn locked_version(package: &str) -> Option<String> {
    let lock = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).ok()?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{package}\"") {
            let version = lines.next()?;
            return Some(version.strip_prefix("version = ")?.trim_matches('"').to_string());
        }
    }
    None
}

pub(crate) fn simple_header(about: &About, settings: &Settings, what: &str) -> String {
    let load = procfs::load_average().map_or("-".into(), |l| format!("{:.2}", l[0]));
    format!(
        "Measured {} with `{}` ({what}); {}, {} cores, {}; load average {load} at the end.\n\n",
        about.date,
        settings.command,
        about.cpu,
        procfs::cpus_online(),
        about.rustc,
    )
}

fn header(
    about: &About,
    settings: &Settings,
    results: &Results,
    runs: usize,
    seconds: f64,
    warmup: f64,
) -> String {
    let loads = match (results.load_average.first(), procfs::load_average()) {
        (Some(a), Some(b)) => format!("{:.2} before, {:.2} after", a[0], b[0]),
        _ => "-".into(),
    };
    let pinned = match settings.server_cpu {
        Some(cpu) => format!("servers pinned to CPU {cpu}, the generator to the other"),
        None => "nothing pinned".into(),
    };
    format!(
        "Measured {} with `{}`: loopback, {pinned}; each cell the median of {runs} \
         run(s) of {seconds} s after {warmup} s of warm-up, the loads interleaved \
         round by round; a ratio is the median of the per-round ratios of two \
         servers measured one after the other{}. {}, {} cores, {}; load average \
         (1 min) {loads}: other builds share this machine.\n\n",
        about.date,
        settings.command,
        generator_note(settings),
        about.cpu,
        procfs::cpus_online(),
        about.rustc,
    )
}

/// Which generator drove the throughput loads, for the header of a table
/// of them: named only when on io_uring, epoll being what every other
/// table used.
pub(crate) fn generator_note(settings: &Settings) -> &'static str {
    match settings.generator {
        Driver::Epoll => "",
        Driver::Uring => "; the generator on io_uring (`--generator uring`)",
    }
}

fn svg_link(settings: &Settings) -> String {
    // BENCHMARKS.md sits at the repository root, as does `benches/`.
    match (&settings.write, settings.svg.canonicalize()) {
        (Some(file), Ok(svg)) => file
            .canonicalize()
            .ok()
            .and_then(|f| f.parent().map(Path::to_path_buf))
            .and_then(|dir| svg.strip_prefix(dir).ok().map(|p| p.display().to_string()))
            .unwrap_or_else(|| settings.svg.display().to_string()),
        _ => settings.svg.display().to_string(),
    }
}

fn find(results: &[(Case, Vec<Outcome>)], case: Case) -> Option<&[Outcome]> {
    results
        .iter()
        .find(|(c, _)| *c == case)
        .map(|(_, o)| o.as_slice())
}

pub(crate) fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

fn median_rps(outcomes: &[Outcome]) -> Option<f64> {
    median(outcomes.iter().map(|o| o.requests_per_second).collect())
}

/// Median over rounds of one server CPU figure (µs per request).
fn median_us(outcomes: &[Outcome], figure: fn(&Outcome) -> Option<f64>) -> Option<f64> {
    median(outcomes.iter().filter_map(figure).collect())
}

fn median_cpu(outcomes: &[Outcome]) -> Option<f64> {
    median_us(outcomes, |o| o.server_cpu_us_per_request)
}

/// `user 2.1 + kernel 5.6`: the medians of the server's CPU per request in
/// user space and in the kernel; `None` for results saved without them.
fn cpu_split(outcomes: &[Outcome]) -> Option<String> {
    let user = median_us(outcomes, |o| o.server_user_us_per_request)?;
    let kernel = median_us(outcomes, |o| o.server_system_us_per_request)?;
    Some(format!("user {user:.1} + kernel {kernel:.1}"))
}

/// Median over rounds of `a`'s req/s over `b`'s.
pub(crate) fn ratio(a: &[Outcome], b: &[Outcome]) -> Option<f64> {
    median(
        a.iter()
            .zip(b)
            .filter(|(_, b)| b.requests_per_second > 0.0)
            .map(|(a, b)| a.requests_per_second / b.requests_per_second)
            .collect(),
    )
}

/// Median over rounds of `a`'s server CPU per request over `b`'s: less
/// moved by other work on the machine than req/s, since time the server
/// spends preempted is not counted.
fn cpu_ratio(a: &[Outcome], b: &[Outcome]) -> Option<f64> {
    median(
        a.iter()
            .zip(b)
            .filter_map(|(a, b)| Some((a.server_cpu_us_per_request?, b.server_cpu_us_per_request?)))
            .filter(|&(_, b)| b > 0.0)
            .map(|(a, b)| a / b)
            .collect(),
    )
}

pub(crate) fn rps(value: Option<f64>) -> String {
    match value {
        Some(v) if v >= 10_000.0 => format!("{:.0}k", v / 1000.0),
        Some(v) if v >= 1_000.0 => format!("{:.1}k", v / 1000.0),
        Some(v) => format!("{v:.0}"),
        None => "—".into(),
    }
}

fn percent(value: Option<f64>) -> String {
    value.map_or("—".into(), |v| format!("{:.0} %", v * 100.0))
}

pub(crate) fn times(value: Option<f64>) -> String {
    value.map_or("—".into(), |r| format!("{r:.2}×"))
}

fn throughput_tables(results: &[(Case, Vec<Outcome>)], about: &About, svg: &str) -> String {
    use ServerKind::*;
    let cell = |server, payload, connections, pipeline| {
        find(
            results,
            Case {
                payload,
                connections,
                pipeline,
                server,
            },
        )
    };
    let mut t = String::new();
    let _ = writeln!(t, "#### 16 keep-alive connections, `Hello, world!`\n");
    let _ = writeln!(
        t,
        "| server | pipeline 1 | pipeline 16 | server CPU per request (p1) |\n|---|---|---|---|"
    );
    let rows = [
        (
            Nginx,
            None,
            format!("nginx {}, one worker, a 13-byte file over HTTP/1.1", about.nginx),
        ),
        (
            JsontpServe,
            Some(Nginx),
            "`jsontp serve --workers 1`, the same file".to_string(),
        ),
        (
            Hyper,
            None,
            format!("hyper {} \"Hello, world!\" (tokio current-thread)", about.hyper),
        ),
        (
            MioHello,
            Some(Hyper),
            "the mio adapter with a hello handler (`examples/hello_server`)".to_string(),
        ),
        (
            Floor,
            Some(Hyper),
            "the kernel's floor: one `recv` and one `send` per request, no other work \
             (`floor_server`, not a server)"
                .to_string(),
        ),
    ];
    for (server, against, label) in &rows {
        let mut line = format!("| {label} |");
        for pipeline in [1, 16] {
            let mine = cell(*server, Payload::Hello, 16, pipeline);
            let mut text = format!(" {} req/s", rps(mine.and_then(median_rps)));
            if let (Some(against), Some(mine)) = (against, mine) {
                if let Some(theirs) = cell(*against, Payload::Hello, 16, pipeline) {
                    let _ = write!(text, " ({} {})", times(ratio(mine, theirs)), against.name());
                }
            }
            if mine.is_none() {
                text = " —".into();
            }
            line += &text;
            line += " |";
        }
        let mine = cell(*server, Payload::Hello, 16, 1);
        let mut cpu = mine
            .and_then(median_cpu)
            .map_or("—".into(), |c| format!("{c:.1} µs"));
        let mut notes = Vec::new();
        if let (Some(against), Some(mine)) = (against, mine) {
            if let Some(r) = cell(*against, Payload::Hello, 16, 1).and_then(|theirs| cpu_ratio(mine, theirs))
            {
                notes.push(format!("{r:.2}× {}", against.name()));
            }
        }
        notes.extend(mine.and_then(cpu_split));
        if !notes.is_empty() {
            let _ = write!(cpu, " ({})", notes.join("; "));
        }
        let _ = writeln!(line, " {cpu} |");
        t += &line;
    }

    if let (Some(floor), Some(hyper), Some(mio)) = (
        cell(Floor, Payload::Hello, 16, 1),
        cell(Hyper, Payload::Hello, 16, 1),
        cell(MioHello, Payload::Hello, 16, 1),
    ) {
        let _ = writeln!(
            t,
            "\nThe floor's rate is what a server that answers each request with one `recv` and \
             one `send` reaches here when its own work costs nothing. At pipeline 1 it is {} \
             hyper hello's rate, and the mio hello runs at {} of it.",
            times(ratio(floor, hyper)),
            percent(ratio(mio, floor)),
        );
    }

    let _ = writeln!(t, "\n#### Other loads (pipeline 1)\n");
    let _ = writeln!(
        t,
        "| load | nginx | jsontp serve | jsontp / nginx | hyper hello | mio hello | mio / hyper |\n|---|---|---|---|---|---|---|"
    );
    let others = [
        ("1 connection", Payload::Hello, 1),
        ("128 connections", Payload::Hello, 128),
        ("300 KiB text file, 16 connections", Payload::Big, 16),
        (
            "16 KiB text file gzipped (`accept-encoding: gzip`), 16 connections",
            Payload::Gzip,
            16,
        ),
    ];
    let mut any = false;
    for (label, payload, connections) in others {
        let get = |server| cell(server, payload, connections, 1);
        if ServerKind::ALL.iter().all(|&s| get(s).is_none()) {
            continue;
        }
        any = true;
        let pair = |a, b| match (get(a), get(b)) {
            (Some(a), Some(b)) => times(ratio(a, b)),
            _ => "—".into(),
        };
        let _ = writeln!(
            t,
            "| {label} | {} | {} | {} | {} | {} | {} |",
            rps(get(Nginx).and_then(median_rps)),
            rps(get(JsontpServe).and_then(median_rps)),
            pair(JsontpServe, Nginx),
            rps(get(Hyper).and_then(median_rps)),
            rps(get(MioHello).and_then(median_rps)),
            pair(MioHello, Hyper),
        );
    }
    if !any {
        let _ = writeln!(t, "| (not measured in this run) | | | | | | |");
    }
    let single: Vec<String> = ServerKind::ALL
        .iter()
        .filter_map(|&s| {
            let outcomes = cell(s, Payload::Hello, 1, 1)?;
            let cpu = median_cpu(outcomes)?;
            let split = cpu_split(outcomes).map_or(String::new(), |split| format!(" ({split})"));
            Some(format!("{} {cpu:.1} µs{split}", s.name()))
        })
        .collect();
    if !single.is_empty() {
        let _ = writeln!(
            t,
            "\nServer CPU per request at 1 connection: {}.",
            single.join(", ")
        );
    }

    let sweep: Vec<usize> = SWEEP
        .into_iter()
        .filter(|&c| {
            ServerKind::ALL
                .iter()
                .any(|&s| cell(s, Payload::Hello, c, 1).is_some())
        })
        .collect();
    if sweep.len() > 1 {
        let _ = writeln!(t, "\n#### Requests per second against connections (pipeline 1)\n");
        let _ = writeln!(t, "![req/s against keep-alive connections]({svg})\n");
        let _ = writeln!(
            t,
            "| connections | nginx | jsontp serve | hyper hello | mio hello |\n|---|---|---|---|---|"
        );
        for c in sweep {
            let _ = writeln!(
                t,
                "| {c} | {} | {} | {} | {} |",
                rps(cell(Nginx, Payload::Hello, c, 1).and_then(median_rps)),
                rps(cell(JsontpServe, Payload::Hello, c, 1).and_then(median_rps)),
                rps(cell(Hyper, Payload::Hello, c, 1).and_then(median_rps)),
                rps(cell(MioHello, Payload::Hello, c, 1).and_then(median_rps)),
            );
        }
    }
    let busiest = results
        .iter()
        .flat_map(|(c, o)| o.iter().map(move |o| (c, o.generator_cpu_share.unwrap_or(0.0))))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((case, share)) = busiest {
        let _ = writeln!(
            t,
            "\nThe load generator's busiest run used {:.0} % of its CPU ({}, {}, {} connections, pipeline {}){}.",
            share * 100.0,
            case.server.name(),
            match case.payload {
                Payload::Hello => "the 13-byte file",
                Payload::Big => "the 300 KiB file",
                Payload::Gzip => "the 16 KiB file gzipped",
            },
            case.connections,
            case.pipeline,
            if share > 0.9 {
                ": there it may be what limits the rate"
            } else {
                ""
            }
        );
    }
    let errors: u64 = results.iter().flat_map(|(_, o)| o).map(|o| o.errors).sum();
    let completed: u64 = results.iter().flat_map(|(_, o)| o).map(|o| o.completed).sum();
    let _ = writeln!(
        t,
        "\n{completed} responses checked (jsontp `\"code\":200`, HTTP `200`), {errors} errors."
    );
    t
}

fn sweep_series(results: &[(Case, Vec<Outcome>)]) -> Vec<Series> {
    ServerKind::ALL
        .iter()
        .filter_map(|&server| {
            let points: Vec<(usize, f64)> = SWEEP
                .iter()
                .filter_map(|&c| {
                    find(
                        results,
                        Case {
                            payload: Payload::Hello,
                            connections: c,
                            pipeline: 1,
                            server,
                        },
                    )
                    .and_then(median_rps)
                    .map(|r| (c, r))
                })
                .collect();
            (!points.is_empty()).then(|| Series {
                name: server.name().to_string(),
                points,
            })
        })
        .collect()
}

fn idle_table(idle: &[IdleMemory], steps: &[usize]) -> String {
    let (first, last) = (
        steps.first().copied().unwrap_or(0),
        steps.last().copied().unwrap_or(0),
    );
    let mut t = format!(
        "| server | RSS, {first} connection(s) | RSS, {last} connections | bytes per idle connection (slope over {} steps) |\n|---|---|---|---|\n",
        steps.len()
    );
    for m in idle {
        let at = |n| {
            m.points.iter().find(|p| p.0 == n).map_or("—".into(), |p| {
                format!("{:.1} MiB", p.1 as f64 / (1 << 20) as f64)
            })
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.0} |",
            m.server.name(),
            at(first),
            at(last),
            m.bytes_per_connection
        );
    }
    if idle.is_empty() {
        t += "| (nothing measured) | | | |\n";
    }
    t
}

fn syscalls_table(rows: &[(ServerKind, usize, Syscalls)]) -> String {
    let mut t = String::from(
        "| server | syscalls per request, p1 | most frequent (per request, p1) | syscalls per request, p16 |\n|---|---|---|---|\n",
    );
    for server in ServerKind::WITH_FLOOR {
        let get = |p| rows.iter().find(|r| r.0 == server && r.1 == p).map(|r| &r.2);
        let (Some(p1), p16) = (get(1), get(16)) else {
            continue;
        };
        let top = p1
            .top
            .iter()
            .map(|(name, n)| format!("{name} {:.2}", *n as f64 / p1.requests.max(1) as f64))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            t,
            "| {} | {:.2} | {top} | {} |",
            server.name(),
            p1.per_request(),
            p16.map_or("—".into(), |s| format!("{:.2}", s.per_request()))
        );
    }
    t
}

fn instructions_table(rows: &[(ServerKind, usize, f64)], counts: [u64; 2]) -> String {
    let get = |s, p| rows.iter().find(|r| r.0 == s && r.1 == p).map(|r| r.2);
    let mut t = format!(
        "Per request: the difference between a run of {} and one of {} requests \
         (16 connections), over the difference in requests.\n\n\
         | server | instructions per request, p1 | p16 |\n|---|---|---|\n",
        counts[1], counts[0]
    );
    for server in ServerKind::ALL.into_iter().chain([ServerKind::UringHello]) {
        if get(server, 1).is_none() && get(server, 16).is_none() {
            continue;
        }
        let fmt = |v: Option<f64>| v.map_or("—".into(), |v| format!("{:.0}", v));
        let _ = writeln!(
            t,
            "| {} | {} | {} |",
            server.name(),
            fmt(get(server, 1)),
            fmt(get(server, 16))
        );
    }
    let ratio = |a, b, p| match (get(a, p), get(b, p)) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "—".into(),
    };
    let _ = writeln!(
        t,
        "\njsontp serve / nginx: {} (p1), {} (p16); mio hello / hyper: {} (p1), {} (p16).",
        ratio(ServerKind::JsontpServe, ServerKind::Nginx, 1),
        ratio(ServerKind::JsontpServe, ServerKind::Nginx, 16),
        ratio(ServerKind::MioHello, ServerKind::Hyper, 1),
        ratio(ServerKind::MioHello, ServerKind::Hyper, 16),
    );
    t
}

fn profile_table(rows: &[(ServerKind, Profile)]) -> String {
    let mut t = String::from(
        "Shares of the server's samples; each part of the kernel counts everything under it.\n\n\
         | server | user space | kernel | TCP send | of it, delivery into the peer's socket \
         | TCP receive | `epoll_wait` | entering and leaving the kernel | samples \
         |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (server, p) in rows {
        let _ = writeln!(
            t,
            "| {} | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {} |",
            server.name(),
            p.user,
            p.kernel,
            p.send,
            p.delivery,
            p.receive,
            p.wait,
            p.entry,
            p.samples
        );
    }
    if rows.is_empty() {
        t += "| (nothing measured) | | | | | | | | |\n";
    }
    t
}

fn parse_table(rows: &[(String, f64)]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let anchor = rows.iter().find(|r| r.0 == "httparse").map(|r| r.1);
    let mut t = String::from(
        "\nParsing one typical request (a GET with `accept-encoding`, `accept-language` and \
         `if-modified-since`, 228 bytes; `benches/load/src/bin/parse_count.rs`), per parse:\n\n\
         | parser | instructions per parse | × httparse |\n|---|---|---|\n",
    );
    for (parser, per_parse) in rows {
        let name = match parser.as_str() {
            "jsontp" => "jsontp `parse_request` (framing, syntax, D5 validation, the typed `Request`)",
            "httparse" => "httparse, the same request in HTTP/1.1 (syntax only)",
            "value" => "`serde_json::from_slice::<Value>` of the jsontp bytes (syntax only)",
            other => other,
        };
        let ratio = anchor
            .filter(|&a| a > 0.0)
            .map_or("—".into(), |a| format!("{:.1}×", per_parse / a));
        let _ = writeln!(t, "| {name} | {per_parse:.0} | {ratio} |");
    }
    t
}

/// Replaces the text between `<!-- loadbench:NAME:begin -->` and
/// `<!-- loadbench:NAME:end -->` in `file`.
pub fn write_section(file: &Path, name: &str, text: &str) -> io::Result<()> {
    let doc = fs::read_to_string(file)?;
    let updated = replace_section(&doc, name, text).ok_or_else(|| {
        io::Error::other(format!(
            "{} has no <!-- loadbench:{name}:begin --> … <!-- loadbench:{name}:end --> markers",
            file.display()
        ))
    })?;
    fs::write(file, updated)
}

fn replace_section(doc: &str, name: &str, text: &str) -> Option<String> {
    let begin = format!("<!-- loadbench:{name}:begin -->");
    let end = format!("<!-- loadbench:{name}:end -->");
    let b = doc.find(&begin)? + begin.len();
    let e = b + doc[b..].find(&end)?;
    Some(format!("{}\n{}\n{}", &doc[..b], text.trim_end(), &doc[e..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One second of a server at `rps`, busy all of it: a quarter in user
    /// space, three quarters in the kernel.
    fn outcome(rps: f64) -> Outcome {
        Outcome {
            completed: rps as u64,
            errors: 0,
            error_samples: Vec::new(),
            seconds: 1.0,
            requests_per_second: rps,
            server_cpu_seconds: Some(1.0),
            server_cpu_us_per_request: Some(1e6 / rps),
            server_user_us_per_request: Some(0.25e6 / rps),
            server_system_us_per_request: Some(0.75e6 / rps),
            bytes_received: 0,
            generator_cpu_share: Some(0.5),
        }
    }

    fn about() -> About {
        About {
            date: "today".into(),
            cpu: "cpu".into(),
            rustc: "rustc".into(),
            nginx: "1.22.1".into(),
            hyper: "1.0.0".into(),
        }
    }

    /// `Hello, world!` at 16 connections (pipeline 1 and 16) and at 1
    /// connection (a quarter of the rate), every server, each outcome
    /// passed through `saved`.
    fn hello_results(saved: fn(Outcome) -> Outcome) -> Vec<(Case, Vec<Outcome>)> {
        let mut results = Vec::new();
        for (server, rps) in [
            (ServerKind::Nginx, 60_000.0),
            (ServerKind::JsontpServe, 30_000.0),
            (ServerKind::Hyper, 100_000.0),
            (ServerKind::MioHello, 75_000.0),
            (ServerKind::Floor, 120_000.0),
        ] {
            for (connections, pipeline, rps) in [(16, 1, rps), (16, 16, rps * 16.0), (1, 1, rps / 4.0)] {
                let case = Case {
                    payload: Payload::Hello,
                    connections,
                    pipeline,
                    server,
                };
                results.push((case, vec![saved(outcome(rps))]));
            }
        }
        results
    }

    #[test]
    fn replaces_only_between_its_markers() {
        let doc = "a\n<!-- loadbench:x:begin -->\nold\n<!-- loadbench:x:end -->\nb\n<!-- loadbench:y:begin -->\nkeep\n<!-- loadbench:y:end -->\n";
        let new = replace_section(doc, "x", "new\n").expect("markers");
        assert_eq!(
            new,
            "a\n<!-- loadbench:x:begin -->\nnew\n<!-- loadbench:x:end -->\nb\n<!-- loadbench:y:begin -->\nkeep\n<!-- loadbench:y:end -->\n"
        );
        assert_eq!(replace_section(&new, "x", "new"), Some(new.clone()));
        assert!(replace_section(doc, "z", "t").is_none());
    }

    #[test]
    fn ratios_are_per_round_medians() {
        let a = [outcome(100.0), outcome(300.0), outcome(50.0)];
        let b = [outcome(200.0), outcome(300.0), outcome(25.0)];
        // Per round: 0.5, 1.0, 2.0.
        assert_eq!(ratio(&a, &b), Some(1.0));
        assert_eq!(median(vec![3.0, 1.0]), Some(2.0));
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn the_table_renders_every_server_and_ratio() {
        let t = throughput_tables(&hello_results(|o| o), &about(), "x.svg");
        for expected in [
            // nginx, then jsontp serve against it.
            "| 60k req/s | 960k req/s | 16.7 µs (user 4.2 + kernel 12.5) |",
            "| 30k req/s (0.50× nginx) | 480k req/s (0.50× nginx) \
             | 33.3 µs (2.00× nginx; user 8.3 + kernel 25.0) |",
            // The mio hello and the floor against hyper.
            "| 75k req/s (0.75× hyper hello) | 1200k req/s (0.75× hyper hello) \
             | 13.3 µs (1.33× hyper hello; user 3.3 + kernel 10.0) |",
            "| 120k req/s (1.20× hyper hello) | 1920k req/s (1.20× hyper hello) \
             | 8.3 µs (0.83× hyper hello; user 2.1 + kernel 6.2) |",
            "At pipeline 1 it is 1.20× hyper hello's rate, and the mio hello runs at 62 % of it.",
            "Server CPU per request at 1 connection: nginx 66.7 µs (user 16.7 + kernel 50.0), \
             jsontp serve 133.3 µs (user 33.3 + kernel 100.0), \
             hyper hello 40.0 µs (user 10.0 + kernel 30.0), \
             mio hello 53.3 µs (user 13.3 + kernel 40.0).",
            "nginx 1.22.1",
            "0 errors",
        ] {
            assert!(t.contains(expected), "{expected:?} is not in\n{t}");
        }
    }

    #[test]
    fn results_saved_without_the_split_render_without_it() {
        let before_the_split = |o: Outcome| {
            let mut json = serde_json::to_value(o).expect("serializes");
            let fields = json.as_object_mut().expect("an object");
            fields.remove("server_user_us_per_request");
            fields.remove("server_system_us_per_request");
            serde_json::from_value(json).expect("results saved before the split still read")
        };
        let t = throughput_tables(&hello_results(before_the_split), &about(), "x.svg");
        assert!(t.contains("| 60k req/s | 960k req/s | 16.7 µs |"), "{t}");
        assert!(t.contains(" | 33.3 µs (2.00× nginx) |"), "{t}");
        assert!(
            t.contains("at 1 connection: nginx 66.7 µs, jsontp serve 133.3 µs,"),
            "{t}"
        );
        assert!(!t.contains("+ kernel"), "{t}");
    }

    #[test]
    fn the_profile_table_names_each_part() {
        let p = Profile {
            samples: 100,
            user: 20.0,
            kernel: 80.0,
            send: 60.0,
            delivery: 30.0,
            receive: 10.0,
            wait: 3.0,
            entry: 2.5,
        };
        let t = profile_table(&[(ServerKind::MioHello, p)]);
        assert!(
            t.contains("| mio hello | 20.0 % | 80.0 % | 60.0 % | 30.0 % | 10.0 % | 3.0 % | 2.5 % | 100 |"),
            "{t}"
        );
        assert!(profile_table(&[]).contains("nothing measured"));
    }

    #[test]
    fn idle_steps_end_at_the_maximum() {
        assert_eq!(idle_steps(10_000), [1, 100, 1_000, 2_500, 5_000, 7_500, 10_000]);
        assert_eq!(idle_steps(50), [1, 25, 50]);
    }
}
