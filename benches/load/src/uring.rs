//! Two side-by-side comparisons that a whole suite would blur:
//!
//! - `uring`: the io_uring runtime beside epoll. The hello on io_uring,
//!   the hello on mio, hyper and the kernel's floor, and `jsontp serve` on
//!   each runtime beside nginx, at pipeline 1 and 16, rounds interleaved;
//!   then the instructions (callgrind) and system calls (strace) each hello
//!   pays per request.
//! - `versus`: this build's mio hello and another build's
//!   (`--baseline PATH`), run alternately, so that a change in rate
//!   between two commits is measured in the same minutes on the same
//!   machine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::generator::{self, Outcome};
use crate::servers::{self, ServerKind};
use crate::suite::{self, About, Case, Payload, Settings};
use crate::trace;

/// The hellos compared with hyper, and the floor.
const HELLOS: [ServerKind; 4] = [
    ServerKind::Floor,
    ServerKind::Hyper,
    ServerKind::MioHello,
    ServerKind::UringHello,
];

/// The file servers compared with nginx.
const FILE_SERVERS: [ServerKind; 3] = [
    ServerKind::Nginx,
    ServerKind::JsontpServe,
    ServerKind::JsontpServeUring,
];

/// The pipeline depths compared.
const PIPELINES: [usize; 2] = [1, 16];

/// Mode `uring`: the section's Markdown, and whether every load ran clean.
pub fn uring(settings: &Settings, root: &Path, about: &About) -> io::Result<(String, bool)> {
    let servers: Vec<ServerKind> = HELLOS
        .into_iter()
        .chain(FILE_SERVERS)
        .filter(|&k| settings.programs.has(k) && settings.only.contains(&k))
        .collect();
    let (results, mut clean) = hello_rounds(settings, root, &servers)?;
    let mut instructions = BTreeMap::new();
    let mut syscalls = BTreeMap::new();
    for kind in [ServerKind::Hyper, ServerKind::MioHello, ServerKind::UringHello] {
        if !servers.contains(&kind) {
            continue;
        }
        for pipeline in PIPELINES {
            match suite::instructions(settings, root, kind, pipeline, [2_000, 10_000]) {
                Ok(n) => {
                    eprintln!(
                        "loadbench: callgrind {} p{pipeline}: {n:.0} instructions per request",
                        kind.name()
                    );
                    instructions.insert((kind, pipeline), n);
                }
                Err(e) => {
                    clean = false;
                    eprintln!("loadbench: callgrind of {}: {e}", kind.name());
                }
            }
        }
        let server = servers::start(
            kind,
            &settings.programs,
            root,
            &settings.work,
            &suite::launch(settings),
        )?;
        generator::run(&suite::load_for(&server, 16, 1, None, 0.0, 0.5))?;
        for pipeline in PIPELINES {
            let requests = if pipeline == 1 { 5_000 } else { 16_000 };
            let load = suite::load_for(&server, 16, pipeline, Some(requests), 0.0, 300.0);
            match trace::strace(server.worker_pid(), &load, &settings.work) {
                Ok(s) => {
                    eprintln!(
                        "loadbench: strace {} p{pipeline}: {:.2} syscalls per request",
                        kind.name(),
                        s.per_request()
                    );
                    syscalls.insert((kind, pipeline), s);
                }
                Err(e) => {
                    clean = false;
                    eprintln!("loadbench: strace of {}: {e}", kind.name());
                }
            }
        }
    }
    let text = suite::simple_header(
        about,
        settings,
        &format!(
            "16 connections, rounds interleaved{}; callgrind and strace as in the tables above",
            suite::generator_note(settings)
        ),
    ) + &uring_table(&results, &instructions, &syscalls, settings.runs);
    Ok((text, clean))
}

/// Mode `versus`: the section's Markdown, and whether every load ran
/// clean.
pub fn versus(settings: &Settings, root: &Path, about: &About) -> io::Result<(String, bool)> {
    let (results, clean) = hello_rounds(settings, root, &[ServerKind::BaselineHello, ServerKind::MioHello])?;
    let baseline = settings
        .programs
        .baseline
        .as_ref()
        .map_or_else(String::new, |p| p.display().to_string());
    let what = format!("the baseline: `{baseline}`{}", suite::generator_note(settings));
    let text = suite::simple_header(about, settings, &what) + &versus_table(&results, settings.runs);
    Ok((text, clean))
}

/// Each load with its runs, round by round.
type Rounds = Vec<(Case, Vec<Outcome>)>;

/// The hello on each of `servers` at each pipeline depth, the suite's
/// rounds interleaved; and whether every load ran without an error.
fn hello_rounds(settings: &Settings, root: &Path, servers: &[ServerKind]) -> io::Result<(Rounds, bool)> {
    let results = suite::throughput(
        settings,
        root,
        servers,
        &hello_cases(servers),
        settings.runs,
        settings.seconds,
        settings.warmup,
    )?;
    let clean = results
        .iter()
        .all(|(_, outcomes)| outcomes.iter().all(|o| o.errors == 0 && o.completed > 0));
    Ok((results, clean))
}

/// The hello at each pipeline depth, 16 connections, on each of `servers`.
fn hello_cases(servers: &[ServerKind]) -> Vec<Case> {
    PIPELINES
        .into_iter()
        .flat_map(|pipeline| {
            servers.iter().map(move |&server| Case {
                payload: Payload::Hello,
                connections: 16,
                pipeline,
                server,
            })
        })
        .collect()
}

fn outcomes(results: &[(Case, Vec<Outcome>)], server: ServerKind, pipeline: usize) -> Option<&[Outcome]> {
    results
        .iter()
        .find(|(c, _)| c.server == server && c.pipeline == pipeline)
        .map(|(_, o)| o.as_slice())
}

/// `rate (ratio× against)` for one cell.
fn cell(
    results: &[(Case, Vec<Outcome>)],
    server: ServerKind,
    against: ServerKind,
    pipeline: usize,
) -> String {
    let Some(ours) = outcomes(results, server, pipeline) else {
        return "—".into();
    };
    let rate = suite::rps(suite::median(
        ours.iter().map(|o| o.requests_per_second).collect(),
    ));
    match outcomes(results, against, pipeline).and_then(|theirs| suite::ratio(ours, theirs)) {
        Some(r) if server != against => format!("{rate} ({r:.2}× {})", against.name()),
        _ => rate,
    }
}

fn uring_table(
    results: &[(Case, Vec<Outcome>)],
    instructions: &BTreeMap<(ServerKind, usize), f64>,
    syscalls: &BTreeMap<(ServerKind, usize), trace::Syscalls>,
    runs: usize,
) -> String {
    let mut t = format!(
        "Requests a second (the median of {runs} rounds; a ratio is the median of the per-round ratios), \
         instructions and system calls per request:\n\n\
         | server | req/s, pipeline 1 | req/s, pipeline 16 | instructions, p1 | p16 | system calls, p1 | p16 |\n\
         |---|---|---|---|---|---|---|\n"
    );
    let rows = HELLOS
        .into_iter()
        .map(|k| (k, ServerKind::Hyper))
        .chain(FILE_SERVERS.into_iter().map(|k| (k, ServerKind::Nginx)));
    for (server, against) in rows {
        if outcomes(results, server, 1).is_none() {
            continue;
        }
        let figure = |p: usize| {
            instructions
                .get(&(server, p))
                .map_or("—".into(), |n| format!("{n:.0}"))
        };
        let calls = |p: usize| {
            syscalls
                .get(&(server, p))
                .map_or("—".into(), |s| format!("{:.2}", s.per_request()))
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} |",
            server.name(),
            cell(results, server, against, 1),
            cell(results, server, against, 16),
            figure(1),
            figure(16),
            calls(1),
            calls(16),
        );
    }
    let floor = |p| {
        outcomes(results, ServerKind::UringHello, p)
            .zip(outcomes(results, ServerKind::Floor, p))
            .and_then(|(u, f)| suite::ratio(u, f))
    };
    if let (Some(p1), Some(p16)) = (floor(1), floor(16)) {
        let _ = writeln!(
            t,
            "\nThe uring hello against the epoll floor, round by round: {p1:.2}× at pipeline 1, {p16:.2}× at 16."
        );
    }
    t
}

fn versus_table(results: &[(Case, Vec<Outcome>)], runs: usize) -> String {
    let mut t = format!(
        "The two hellos alternately, 16 connections, the median of {runs} rounds:\n\n\
         | server | req/s, pipeline 1 | req/s, pipeline 16 | every round at 16 |\n|---|---|---|---|\n"
    );
    for server in [ServerKind::BaselineHello, ServerKind::MioHello] {
        let rounds = outcomes(results, server, 16).map_or_else(String::new, |o| {
            o.iter()
                .map(|o| suite::rps(Some(o.requests_per_second)))
                .collect::<Vec<_>>()
                .join(", ")
        });
        let _ = writeln!(
            t,
            "| {} | {} | {} | {rounds} |",
            server.name(),
            cell(results, server, ServerKind::BaselineHello, 1),
            cell(results, server, ServerKind::BaselineHello, 16),
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(rate: f64) -> Outcome {
        Outcome {
            completed: 1000,
            errors: 0,
            error_samples: Vec::new(),
            seconds: 1.0,
            requests_per_second: rate,
            server_cpu_seconds: None,
            server_cpu_us_per_request: None,
            server_user_us_per_request: None,
            server_system_us_per_request: None,
            bytes_received: 0,
            generator_cpu_share: None,
        }
    }

    fn results(rates: &[(ServerKind, usize, f64)]) -> Vec<(Case, Vec<Outcome>)> {
        rates
            .iter()
            .map(|&(server, pipeline, rate)| {
                (
                    Case {
                        payload: Payload::Hello,
                        connections: 16,
                        pipeline,
                        server,
                    },
                    vec![outcome(rate), outcome(rate)],
                )
            })
            .collect()
    }

    #[test]
    fn the_uring_table_sets_each_hello_beside_hyper_and_each_file_server_beside_nginx() {
        let r = results(&[
            (ServerKind::Hyper, 1, 100_000.0),
            (ServerKind::Hyper, 16, 200_000.0),
            (ServerKind::UringHello, 1, 130_000.0),
            (ServerKind::UringHello, 16, 1_300_000.0),
            (ServerKind::Floor, 1, 104_000.0),
            (ServerKind::Floor, 16, 650_000.0),
            (ServerKind::Nginx, 1, 80_000.0),
            (ServerKind::JsontpServeUring, 1, 120_000.0),
        ]);
        let mut counted = BTreeMap::new();
        counted.insert((ServerKind::UringHello, 1), 7_000.0);
        let t = uring_table(&r, &counted, &BTreeMap::new(), 2);
        assert!(
            t.contains("| uring hello | 130k (1.30× hyper hello) | 1300k (6.50× hyper hello) | 7000 | — |"),
            "{t}"
        );
        assert!(t.contains("| jsontp serve (uring) | 120k (1.50× nginx) |"), "{t}");
        assert!(t.contains("1.25× at pipeline 1, 2.00× at 16"), "{t}");
        assert!(
            !t.contains("| mio hello |"),
            "a server not measured has no row: {t}"
        );
    }

    #[test]
    fn the_versus_table_gives_this_build_against_the_baseline_and_every_round() {
        let r = results(&[
            (ServerKind::BaselineHello, 1, 100_000.0),
            (ServerKind::BaselineHello, 16, 500_000.0),
            (ServerKind::MioHello, 1, 110_000.0),
            (ServerKind::MioHello, 16, 550_000.0),
        ]);
        let t = versus_table(&r, 2);
        assert!(t.contains("| mio hello | 110k (1.10× baseline mio hello) | 550k (1.10× baseline mio hello) | 550k, 550k |"), "{t}");
        assert!(
            t.contains("| baseline mio hello | 100k | 500k | 500k, 500k |"),
            "{t}"
        );
    }
}
