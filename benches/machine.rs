//! The machine's costs: the D1 scanner against `memchr` over the same
//! buffer (the floor for touching every byte), and the full server cycle:
//! bytes in → request event → response bytes out.
//!
//! `cargo bench --bench machine`; figures in BENCHMARKS.md.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use jsontp_protocol::machine::{Now, ServerConfig, ServerConnection, ServerEvent};
use jsontp_protocol::message::framing::{Scan, Scanner};
use jsontp_protocol::message::{Body, Date, Response, Status, StatusCode};

const REQUEST: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/hello.txt\",\"method\":\"GET\",\"headers\":{\"accept-language\":[\"en-US\",\"fr-FR\"],\"accept-encoding\":\"gzip, identity\"},\"body\":{\"content\":\"\",\"encoding\":\"identity\"}}\n";

/// Many small pipelined requests: structure-heavy.
fn small_messages() -> Vec<u8> {
    REQUEST.repeat(512).into_bytes()
}

/// One message with a 256 KiB string: string-heavy, where the scanner
/// skips with memchr.
fn one_big_string() -> Vec<u8> {
    let content: String = "the quick brown fox jumps over the lazy dog, \\\"quoted\\\" "
        .chars()
        .cycle()
        .take(256 * 1024)
        .collect();
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/big\",\"method\":\"PUT\",\"headers\":{{}},\"body\":{{\"content\":\"{content}\",\"encoding\":\"identity\"}}}}\n"
    )
    .into_bytes()
}

/// Scans every message in `buf`; returns how many.
fn scan_all(buf: &[u8]) -> usize {
    let mut scanner = Scanner::new();
    let mut rest = buf;
    let mut count = 0;
    while let Scan::Complete(frame) = scanner.scan(rest) {
        rest = &rest[frame.end()..];
        count += 1;
    }
    count
}

fn scanner(c: &mut Criterion) {
    for (name, buf) in [
        ("small messages", small_messages()),
        ("one big string", one_big_string()),
    ] {
        let mut group = c.benchmark_group(format!("scan/{name}"));
        group.throughput(Throughput::Bytes(buf.len() as u64));
        group.bench_function("scanner", |b| b.iter(|| scan_all(black_box(&buf))));
        // The floor: memchr for a byte that is not there reads every byte.
        group.bench_function("memchr", |b| b.iter(|| memchr::memchr(0, black_box(&buf))));
        group.finish();
    }
}

fn now() -> Now {
    // Benchmarks own the clock, like an adapter.
    #[allow(clippy::disallowed_methods)]
    let instant = Instant::now();
    Now {
        instant,
        wall: Date::from_unix_seconds(1_763_769_600),
    }
}

fn answer() -> Response {
    Response::new(Status::new(StatusCode::OK, "OK")).with_body(Body::text("Hello, world!"))
}

/// One request through a long-lived server connection.
fn cycle(conn: &mut ServerConnection, bytes: &[u8], now: Now) -> usize {
    conn.receive_data(bytes, now);
    let mut written = 0;
    while let Some(event) = conn.next_event(now) {
        if let ServerEvent::Request { id, .. } = event {
            conn.send_response(id, answer(), now)
                .expect("a request just handed out");
        }
    }
    let n = conn.pending_output().len();
    written += n;
    conn.consume_output(n, now);
    written
}

fn server_cycle(c: &mut Criterion) {
    let now = now();
    let mut group = c.benchmark_group("server cycle");
    group.throughput(Throughput::Elements(1));
    group.bench_function("one request", |b| {
        let mut conn = ServerConnection::new(ServerConfig::default(), now);
        b.iter(|| cycle(&mut conn, black_box(REQUEST.as_bytes()), now))
    });
    let batch = REQUEST.repeat(16);
    group.throughput(Throughput::Elements(16));
    group.bench_function("16 pipelined requests", |b| {
        let mut conn = ServerConnection::new(ServerConfig::default(), now);
        b.iter(|| cycle(&mut conn, black_box(batch.as_bytes()), now))
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("one request, byte by byte", |b| {
        let mut conn = ServerConnection::new(ServerConfig::default(), now);
        b.iter(|| {
            let mut written = 0;
            for byte in REQUEST.as_bytes().chunks(1) {
                written += cycle(&mut conn, black_box(byte), now);
            }
            written
        })
    });
    group.finish();
}

criterion_group!(benches, scanner, server_cycle);
criterion_main!(benches);
