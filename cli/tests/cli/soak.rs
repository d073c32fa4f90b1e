//! A soak: several clients at once, keep-alive and pipelined, GET, PUT and
//! DELETE, small and streamed bodies (D19), against `jsontp serve`'s file
//! server on the mio adapter in a child process. Every answer is checked
//! against what was asked; the server's resident memory and open file
//! descriptors end where they began.
//!
//! `JSONTP_SOAK_SECS` sets the length (a few seconds by default, as
//! `cargo test` runs it); `scripts/soak.sh` runs the long form on a release
//! build.
#![cfg(target_os = "linux")]

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jsontp_cli::file_server::{FileServer, SPOOL_FOLDER};
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::server::mio::MioServer;
use jsontp_protocol::io_adapters::server::{ServerOptions, SpoolOptions};
use jsontp_protocol::message::Encoding;
use jsontp_protocol::message::{Body, Method, Request, StatusCode};

const CHILD_ROOT: &str = "JSONTP_SOAK_CHILD_ROOT";

/// The server of the soak, run by the parent as a child process.
#[test]
#[ignore = "run as a child process by a_soak_of_mixed_clients_leaves_the_server_as_it_found_it"]
fn soak_child_server() {
    let Ok(root) = std::env::var(CHILD_ROOT) else {
        return;
    };
    let spool = std::path::Path::new(&root).join(SPOOL_FOLDER);
    std::fs::create_dir_all(&spool).expect("spool folder");
    let files = FileServer::new(&root)
        .expect("root")
        .with_writes(true)
        .into_router();
    let options = ServerOptions::default()
        .with_workers(1)
        .with_spool(SpoolOptions::default().with_folder(spool));
    let server = MioServer::bind("127.0.0.1:0", files, options).expect("bind");
    println!("ADDR {}", server.local_addr().expect("addr"));
    std::io::stdout().flush().expect("stdout");
    server.run().expect("run");
}

fn status_field(pid: u32, field: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status.lines().find(|l| l.starts_with(field)).expect("field");
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number")
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc fd")
        .count()
}

/// What one client does until `until`; returns (exchanges, failures).
fn client_loop(addr: &str, who: usize, until: Instant) -> (u64, Vec<String>) {
    let mut options = ClientOptions::default();
    options.config.stream_content = true;
    let mut client = Client::connect(addr, options.clone()).expect("connect");
    let mut exchanges = 0u64;
    let mut failures = Vec::new();
    let mut round = 0usize;
    let mut fail = |what: String| failures.push(what);
    while Instant::now() < until {
        round += 1;
        if client.is_closed() {
            client = Client::connect(addr, options.clone()).expect("reconnect");
        }
        let name = format!("/c{who}-{}.txt", round % 8);
        let text = format!("client {who} round {round}\n").repeat(round % 5 + 1);
        // PUT, then GET it back.
        let put = Request::new(Method::Put, name.parse().unwrap()).with_body(Body::text(text.clone()));
        match client.send(put) {
            Ok(answer) if answer.response.status.code == StatusCode::CREATED => {}
            other => fail(format!("PUT {name}: {other:?}")),
        }
        match client.send(Request::new(Method::Get, name.parse().unwrap())) {
            Ok(answer) if answer.response.body.content() == text.as_bytes() => {}
            other => fail(format!("GET {name}: {:?}", other.map(|a| a.response.status))),
        }
        // Pipelined GETs of what this client wrote before.
        let names: Vec<String> = (0..4)
            .map(|k| format!("/c{who}-{}.txt", (round + k) % 8))
            .collect();
        let requests = names
            .iter()
            .map(|n| Request::new(Method::Get, n.parse().unwrap()));
        for (n, outcome) in names.iter().zip(client.send_all(requests)) {
            match outcome {
                Ok(answer)
                    if matches!(answer.response.status.code.as_u16(), 200 | 404)
                        && (answer.response.status.code.as_u16() == 404
                            || answer
                                .response
                                .body
                                .as_text()
                                .is_some_and(|t| t.contains(&format!("client {who} ")))) => {}
                other => fail(format!(
                    "pipelined GET {n}: {:?}",
                    other.map(|a| a.response.status)
                )),
            }
        }
        // Every fifth round: a streamed upload and download of 300 KiB of
        // binary content.
        if round.is_multiple_of(5) {
            let bytes: Vec<u8> = (0..300 * 1024u32)
                .map(|i| (i.wrapping_mul(31) ^ round as u32) as u8)
                .collect();
            let big = format!("/big{who}.bin");
            let head = Request::new(Method::Put, big.parse().unwrap())
                .with_body(Body::empty().with_encoding(Encoding::Gzip).unwrap());
            match client.upload(head, &mut bytes.as_slice(), None) {
                Ok(answer) if answer.response.status.code == StatusCode::CREATED => {}
                other => fail(format!(
                    "streamed PUT {big}: {:?}",
                    other.map(|a| a.response.status)
                )),
            }
            let mut got = Vec::new();
            match client.download(Request::new(Method::Get, big.parse().unwrap()), &mut got) {
                Ok(answer) if answer.response.status.code == StatusCode::OK && got == bytes => {}
                other => fail(format!(
                    "streamed GET {big}: {:?}, {} bytes",
                    other.map(|a| a.response.status),
                    got.len()
                )),
            }
            exchanges += 2;
        }
        // DELETE one, then it is gone.
        if round.is_multiple_of(3) {
            match client.send(Request::new(Method::Delete, name.parse().unwrap())) {
                Ok(answer) if answer.response.status.code == StatusCode::NO_CONTENT => {}
                other => fail(format!("DELETE {name}: {:?}", other.map(|a| a.response.status))),
            }
            match client.send(Request::new(Method::Get, name.parse().unwrap())) {
                Ok(answer) if answer.response.status.code == StatusCode::NOT_FOUND => {}
                other => fail(format!(
                    "GET deleted {name}: {:?}",
                    other.map(|a| a.response.status)
                )),
            }
            exchanges += 2;
        }
        exchanges += 6;
        // Now and then a new connection, as real clients come and go.
        if round.is_multiple_of(7) {
            client = Client::connect(addr, options.clone()).expect("reconnect");
        }
    }
    (exchanges, failures)
}

#[test]
fn a_soak_of_mixed_clients_leaves_the_server_as_it_found_it() {
    let seconds: u64 = std::env::var("JSONTP_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let root = tempfile::tempdir().expect("root");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["soak::soak_child_server", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_ROOT, root.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child server");
    let pid = child.id();
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr = lines
        .find_map(|line| line.ok()?.strip_prefix("ADDR ").map(str::to_owned))
        .expect("the child's address");

    let run = |secs: f64| {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        let workers: Vec<_> = (0..4)
            .map(|who| {
                let addr = addr.clone();
                std::thread::spawn(move || client_loop(&addr, who, until))
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("client")).fold(
            (0u64, Vec::new()),
            |(n, mut all), (k, failures)| {
                all.extend(failures);
                (n + k, all)
            },
        )
    };
    // A warm-up, so that the baseline includes what serving costs at all.
    let (_, failures) = run(1.0);
    assert!(failures.is_empty(), "{failures:?}");
    std::thread::sleep(Duration::from_millis(300));
    let (rss_before, fds_before) = (status_field(pid, "VmRSS:"), open_fds(pid));

    let started = Instant::now();
    let (exchanges, failures) = run(seconds as f64);
    let elapsed = started.elapsed();
    // Connections close; memory and descriptors come back.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut rss_after, mut fds_after) = (status_field(pid, "VmRSS:"), open_fds(pid));
    while (fds_after > fds_before || rss_after > rss_before + rss_before / 10) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        (rss_after, fds_after) = (status_field(pid, "VmRSS:"), open_fds(pid));
    }
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "soak: {exchanges} exchanges in {:.1} s, 4 clients; server RSS {rss_before} → {rss_after} KiB, fds {fds_before} → {fds_after}",
        elapsed.as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} wrong answers: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(exchanges > 0);
    assert!(fds_after <= fds_before, "descriptors {fds_before} → {fds_after}");
    assert!(
        rss_after <= rss_before + rss_before / 10,
        "resident memory {rss_before} → {rss_after} KiB"
    );
    let spool = root.path().join(SPOOL_FOLDER);
    assert_eq!(
        std::fs::read_dir(spool).expect("spool").count(),
        0,
        "no upload left behind"
    );
}
