//! `jsontp serve --admin`: `/metrics` read by Prometheus' own text parser,
//! its counts equal to what was sent, and two workers sharing new
//! connections evenly (one listening socket each).
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::support::{Serve, serve_command, temp_root};

const WAIT: Duration = Duration::from_secs(15);

/// A free loopback port for the admin listener.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `jsontp serve --admin` on `root` with `workers`: the server, its
/// address and its admin listener's.
fn serve_with_admin(root: &std::path::Path, workers: &str) -> (Serve, SocketAddr, SocketAddr) {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let mut child = serve_command(
        &[
            "--addr",
            "127.0.0.1:0",
            "--workers",
            workers,
            "--quiet",
            "--admin",
            &admin.to_string(),
        ],
        &[],
    )
    .arg("--root")
    .arg(root)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("start jsontp serve");
    let mut log = BufReader::new(child.stderr.take().expect("stderr"));
    let serve = Serve(child);
    let mut start = String::new();
    log.read_line(&mut start).expect("a start line");
    let addr = start
        .trim()
        .rsplit("://")
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("jsontp serve did not start: {start:?}"));
    let mut admin_line = String::new();
    log.read_line(&mut admin_line).expect("the admin line");
    assert!(admin_line.contains(&format!("http://{admin}")), "{admin_line}");
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    (serve, addr, admin)
}

/// An HTTP/1.1 GET on the admin listener: the status and the body.
pub(crate) fn http_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(admin).expect("connect to the admin listener");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("ask");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status");
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length: "))
        .and_then(|n| n.parse().ok())
        .expect("content-length");
    assert_eq!(body.len(), length, "the body is as long as its head says");
    (status, body.to_owned())
}

/// One request on a new connection; the response's status code.
fn exchange(addr: SocketAddr, line: &str) -> u64 {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    stream.write_all(line.as_bytes()).expect("send");
    let mut response = String::new();
    BufReader::new(&stream)
        .read_line(&mut response)
        .expect("a response");
    let value: serde_json::Value = serde_json::from_str(&response).expect("JSON");
    value["status"]["code"].as_u64().expect("a code")
}

fn get(resource: &str) -> String {
    serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    })
    .to_string()
        + "\n"
}

/// The value of the sample `name` with `labels` in a parsed scrape.
fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        })
        .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
}

fn scrape(admin: SocketAddr) -> prometheus_parse::Scrape {
    let (status, text) = http_get(admin, "/metrics");
    assert_eq!(status, 200);
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    prometheus_parse::Scrape::parse(lines).expect("Prometheus' parser takes the text")
}

#[test]
fn the_metrics_parse_and_count_exactly_what_was_sent() {
    let root = temp_root("admin-metrics");
    let (_serve, addr, admin) = serve_with_admin(&root, "2");
    for _ in 0..7 {
        assert_eq!(exchange(addr, &get("/hello.txt")), 200);
    }
    for _ in 0..3 {
        assert_eq!(exchange(addr, &get("/missing.txt")), 404);
    }
    assert_eq!(exchange(addr, "{\"jsontp\": 1}\n"), 400);
    // An exchange is counted once its response has wholly left, which a
    // worker sees just after the client may have read it: scraped again
    // until all eleven show, within the wait.
    let until = std::time::Instant::now() + WAIT;
    let scrape = loop {
        let scrape = scrape(admin);
        let counted: f64 = scrape
            .samples
            .iter()
            .filter(|s| s.metric == "jsontp_requests_total")
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum();
        let counted = counted >= 11.0;
        if counted || std::time::Instant::now() >= until {
            break scrape;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(sample(&scrape, "jsontp_requests_total", &[("code", "200")]), 7.0);
    assert_eq!(sample(&scrape, "jsontp_requests_total", &[("code", "404")]), 3.0);
    assert_eq!(sample(&scrape, "jsontp_requests_total", &[("code", "400")]), 1.0);
    let accepted = sample(&scrape, "jsontp_connections_accepted_total", &[("worker", "0")])
        + sample(&scrape, "jsontp_connections_accepted_total", &[("worker", "1")]);
    assert_eq!(accepted, 11.0, "one connection per request");
    // Every response had its duration recorded.
    let durations = scrape
        .samples
        .iter()
        .find(|s| s.metric == "jsontp_request_duration_seconds")
        .expect("the histogram");
    match &durations.value {
        prometheus_parse::Value::Histogram(buckets) => {
            let all = buckets.last().expect("buckets");
            assert!(all.less_than.is_infinite());
            assert_eq!(all.count, 11.0);
        }
        other => panic!("not a histogram: {other:?}"),
    }
    assert_eq!(
        sample(&scrape, "jsontp_file_cache_files", &[]),
        1.0,
        "hello.txt is cached"
    );
    assert_eq!(http_get(admin, "/ready").0, 200);
    assert_eq!(http_get(admin, "/live").0, 200);
    assert_eq!(http_get(admin, "/nothing").0, 404);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn two_workers_share_ten_thousand_new_connections() {
    // One listening socket per worker (SO_REUSEPORT): the kernel spreads
    // new connections, so that neither worker takes more than 60 %.
    let root = temp_root("admin-workers");
    let (_serve, addr, admin) = serve_with_admin(&root, "2");
    let total = 10_000;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..total / 4 {
                    assert_eq!(exchange(addr, &get("/hello.txt")), 200);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("clients");
    }
    let scrape = scrape(admin);
    let taken = [
        sample(&scrape, "jsontp_connections_accepted_total", &[("worker", "0")]),
        sample(&scrape, "jsontp_connections_accepted_total", &[("worker", "1")]),
    ];
    assert_eq!(taken[0] + taken[1], f64::from(total), "{taken:?}");
    assert!(
        taken.iter().all(|&n| n <= 0.6 * f64::from(total)),
        "connections per worker: {taken:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
