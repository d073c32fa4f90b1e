//! Every server runtime's counters ([`ServerMetrics`]) against a known set
//! of exchanges over loopback: exact counts, and text that Prometheus' own
//! parser reads back to the same values.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::{CloseCause, ConnectionState, MetricsSnapshot, ServerMetrics};
use jsontp_protocol::machine::ContinuePolicy;
use jsontp_protocol::message::{Request, Response, Status, StatusCode};
use prometheus_parse::{Scrape, Value};
use serde_json::Value as Json;

use crate::support::{Runtime, code, connect, each_runtime, options, request, start, with_policy};

/// `/found` is there; nothing else is.
fn found_only(request: &Request) -> Response {
    if request.resource.as_str() == "/found" {
        Response::new(Status::new(StatusCode::OK, "here"))
    } else {
        Response::new(Status::new(StatusCode::NOT_FOUND, "no such resource"))
    }
}

/// Waits (bounded) until `done` holds of the counts; the last snapshot.
fn wait_for(metrics: &ServerMetrics, done: impl Fn(&MetricsSnapshot) -> bool) -> MetricsSnapshot {
    let started = Instant::now();
    loop {
        let snapshot = metrics.snapshot();
        if done(&snapshot) || started.elapsed() > Duration::from_secs(10) {
            return snapshot;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends `text`, shuts our side, reads to the end: what came back.
fn exchange_and_close(addr: std::net::SocketAddr, text: &str) -> Vec<u8> {
    let mut stream = connect(addr);
    stream.write_all(text.as_bytes()).expect("write");
    stream.shutdown(Shutdown::Write).expect("shutdown");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read to the end");
    answer
}

/// The status codes of the responses in `bytes`.
fn codes(bytes: &[u8]) -> Vec<u64> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Json>()
        .map(|response| code(&response.expect("a response")))
        .collect()
}

/// The status codes of the whole responses in `bytes`, the last of which
/// may still be arriving.
fn codes_so_far(bytes: &[u8]) -> Vec<u64> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Json>()
        .map_while(Result::ok)
        .map(|response| code(&response))
        .collect()
}

#[test]
fn every_runtime_counts_requests_connections_and_bytes_exactly() {
    each_runtime(|runtime| {
        let metrics = ServerMetrics::new();
        let workers = 2;
        let server = start(
            runtime,
            found_only,
            options(with_policy(ContinuePolicy::AutoAccept), workers).with_metrics(metrics.clone()),
        );
        let mut received = 0;
        let mut sent = 0;

        // A connection kept open: counted open, serving, while it is.
        let ask = request("GET", "/found", "");
        let mut open = connect(server.addr);
        open.write_all(ask.as_bytes()).expect("write");
        let mut got = Vec::new();
        while codes_so_far(&got).is_empty() {
            let mut chunk = [0; 4096];
            let n = open.read(&mut chunk).expect("a response");
            assert!(n > 0, "closed before the response: {runtime:?}");
            got.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(codes_so_far(&got), [200], "{runtime:?}");
        received += ask.len();
        // The record, and so the count, is made once the peer took the
        // response's last byte, which may be just after we read it.
        let serving = wait_for(&metrics, |s| {
            s.connections(ConnectionState::Serving) == 1 && s.requests(200) == 1
        });
        assert_eq!(serving.connections(ConnectionState::Serving), 1, "{runtime:?}");
        assert_eq!(serving.open_connections(), 1, "{runtime:?}");
        assert_eq!(serving.requests(200), 1, "{runtime:?}");

        // Two requests, then our side shut: both answered, then closed.
        let two = request("GET", "/found", "") + &request("GET", "/missing", "");
        let answers = exchange_and_close(server.addr, &two);
        assert_eq!(codes(&answers), [200, 404], "{runtime:?}");
        received += two.len();
        sent += answers.len();

        // Bytes where a message must start that are not `{`: 400 and
        // close (D1).
        let garbage = "no json here\n";
        let refused = exchange_and_close(server.addr, garbage);
        assert_eq!(codes(&refused), [400], "{runtime:?}");
        received += garbage.len();
        sent += refused.len();

        let snapshot = wait_for(&metrics, |s| s.closed_total() == 2 && s.requests_total() == 4);
        assert_eq!(snapshot.accepted_total(), 3, "{runtime:?}");
        assert_eq!(snapshot.requests(200), 2, "{runtime:?}");
        assert_eq!(snapshot.requests(404), 1, "{runtime:?}");
        assert_eq!(snapshot.requests(400), 1, "{runtime:?}");
        assert_eq!(snapshot.requests_total(), 4, "{runtime:?}");
        assert_eq!(
            snapshot.duration_count(),
            4,
            "one duration per response: {runtime:?}"
        );
        assert_eq!(snapshot.responses_incomplete(), 0, "{runtime:?}");
        assert_eq!(snapshot.closed(CloseCause::PeerClosed), 1, "{runtime:?}");
        assert_eq!(snapshot.closed(CloseCause::Rejected), 1, "{runtime:?}");
        assert_eq!(snapshot.closed_total(), 2, "{runtime:?}");
        assert_eq!(snapshot.connections(ConnectionState::Serving), 1, "{runtime:?}");
        assert_eq!(snapshot.open_connections(), 1, "{runtime:?}");

        // The connection left open ends with the shutdown.
        server.stop();
        open.read_to_end(&mut got).expect("read to the end");
        sent += got.len();
        server.join();
        let last = metrics.snapshot();
        assert_eq!(last.closed(CloseCause::Shutdown), 1, "{runtime:?}");
        assert_eq!(last.closed_total(), 3, "{runtime:?}");
        assert_eq!(
            last.accepted_total(),
            last.closed_total(),
            "each accepted closed once: {runtime:?}"
        );
        assert_eq!(last.open_connections(), 0, "{runtime:?}");
        assert_eq!(last.received_bytes(), received as u64, "{runtime:?}");
        assert_eq!(last.sent_bytes(), sent as u64, "{runtime:?}");
        let per_worker: u64 = (0..last.workers()).map(|w| last.accepted(w)).sum();
        assert_eq!(per_worker, 3, "{runtime:?}");
        match runtime {
            #[cfg(feature = "mio")]
            Runtime::Mio => assert_eq!(last.workers(), workers, "one shard per worker"),
            #[cfg(all(feature = "uring", target_os = "linux"))]
            Runtime::Uring => assert_eq!(last.workers(), workers, "one shard per worker"),
            _ => assert_eq!(last.workers(), 1, "{runtime:?} counts as worker 0"),
        }
        let (_, memory_limit) = last.content_memory().expect("watched once started");
        assert_eq!(memory_limit, 64 << 20, "{runtime:?}");
    });
}

/// The value of the one sample named `name` whose labels include `labels`.
fn value_of(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Value {
    let found: Vec<&Value> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| &s.value)
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0].clone()
}

#[test]
fn prometheus_reads_the_text_back_to_the_counts() {
    let metrics = ServerMetrics::new();
    let server = start(
        Runtime::Std,
        found_only,
        options(with_policy(ContinuePolicy::AutoAccept), 1).with_metrics(metrics.clone()),
    );
    let three = request("GET", "/found", "") + &request("GET", "/found", "") + &request("GET", "/x", "");
    assert_eq!(codes(&exchange_and_close(server.addr, &three)), [200, 200, 404]);
    wait_for(&metrics, |s| s.closed_total() == 1);
    server.shutdown_and_join();
    let snapshot = metrics.snapshot();

    let mut text = String::new();
    metrics.encode(&mut text);
    let scrape = Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("parses");
    // The parser skips lines it cannot read: every sample line must be
    // one it read (the 15 bucket lines make one histogram sample).
    let sample_lines = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(scrape.samples.len(), sample_lines - 14, "{text}");
    assert_eq!(
        scrape.docs.len(),
        text.lines().filter(|l| l.starts_with("# HELP")).count()
    );

    assert_eq!(
        value_of(&scrape, "jsontp_requests_total", &[("code", "200")]),
        Value::Counter(2.0)
    );
    assert_eq!(
        value_of(&scrape, "jsontp_requests_total", &[("code", "404")]),
        Value::Counter(1.0)
    );
    assert_eq!(
        value_of(&scrape, "jsontp_connections_accepted_total", &[("worker", "0")]),
        Value::Counter(1.0)
    );
    assert_eq!(
        value_of(
            &scrape,
            "jsontp_connections_closed_total",
            &[("reason", "peer_closed")]
        ),
        Value::Counter(1.0)
    );
    assert_eq!(
        value_of(
            &scrape,
            "jsontp_connections_closed_total",
            &[("reason", "idle_timeout")]
        ),
        Value::Counter(0.0)
    );
    assert_eq!(
        value_of(&scrape, "jsontp_connections", &[("state", "serving")]),
        Value::Gauge(0.0)
    );
    assert_eq!(
        value_of(&scrape, "jsontp_received_bytes_total", &[]),
        Value::Counter(three.len() as f64)
    );
    assert_eq!(
        value_of(&scrape, "jsontp_sent_bytes_total", &[]),
        Value::Counter(snapshot.sent_bytes() as f64)
    );
    assert_eq!(
        value_of(&scrape, "jsontp_content_memory_limit_bytes", &[]),
        Value::Gauge((64u64 << 20) as f64)
    );
    assert_eq!(
        value_of(&scrape, "jsontp_content_memory_bytes", &[]),
        Value::Gauge(0.0)
    );
    let Value::Histogram(buckets) = value_of(&scrape, "jsontp_request_duration_seconds", &[]) else {
        panic!("a histogram");
    };
    let expected: Vec<(f64, f64)> = snapshot
        .duration_buckets()
        .map(|(le, n)| (le, n as f64))
        .collect();
    let parsed: Vec<(f64, f64)> = buckets.iter().map(|b| (b.less_than, b.count)).collect();
    assert_eq!(parsed, expected);
    assert_eq!(parsed.last(), Some(&(f64::INFINITY, 3.0)));
    assert_eq!(
        value_of(&scrape, "jsontp_request_duration_seconds_count", &[]),
        Value::Untyped(3.0)
    );
}

#[test]
fn every_runtime_counts_an_idle_timeout_by_its_kind() {
    each_runtime(|runtime| {
        let metrics = ServerMetrics::new();
        let mut config = with_policy(ContinuePolicy::AutoAccept);
        config.idle_timeout = Duration::from_millis(150);
        let server = start(
            runtime,
            found_only,
            options(config, 1).with_metrics(metrics.clone()),
        );
        let mut stream = connect(server.addr);
        stream
            .write_all(request("GET", "/found", "").as_bytes())
            .expect("write");
        // D3: the server closes the idle connection without a response.
        let mut got = Vec::new();
        stream.read_to_end(&mut got).expect("read to the end");
        assert_eq!(codes(&got), [200], "{runtime:?}");
        let snapshot = wait_for(&metrics, |s| s.closed_total() == 1);
        assert_eq!(snapshot.closed(CloseCause::IdleTimeout), 1, "{runtime:?}");
        assert_eq!(snapshot.closed_total(), 1, "{runtime:?}");
        assert_eq!(snapshot.open_connections(), 0, "{runtime:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn every_runtime_counts_a_missing_proxy_header_as_closed_once() {
    each_runtime(|runtime| {
        let metrics = ServerMetrics::new();
        let server = start(
            runtime,
            found_only,
            options(with_policy(ContinuePolicy::AutoAccept), 1)
                .with_proxy_protocol(true)
                .with_metrics(metrics.clone()),
        );
        // D21: a message where the header must be: closed, no response.
        let mut stream = connect(server.addr);
        stream
            .write_all(request("GET", "/found", "").as_bytes())
            .expect("write");
        // Closed with our bytes unread: an end of stream or a reset.
        let mut answer = Vec::new();
        match stream.read_to_end(&mut answer) {
            Ok(_) => assert!(answer.is_empty(), "{runtime:?}"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{runtime:?}"),
        }
        let snapshot = wait_for(&metrics, |s| s.closed_total() == 1);
        assert_eq!(snapshot.closed(CloseCause::NoProxyHeader), 1, "{runtime:?}");
        assert_eq!(snapshot.closed_total(), 1, "{runtime:?}");
        assert_eq!(snapshot.accepted_total(), 1, "{runtime:?}");
        assert_eq!(snapshot.open_connections(), 0, "{runtime:?}");
        assert_eq!(snapshot.requests_total(), 0, "{runtime:?}");
        server.shutdown_and_join();
    });
}

/// Each mio worker's count of accepted connections is exactly what that
/// worker took: the handler, which runs on the worker's thread, names it.
#[test]
#[cfg(feature = "mio")]
fn each_mio_worker_counts_exactly_the_connections_it_took() {
    use crate::support::{Reader, content};
    let metrics = ServerMetrics::new();
    let workers = 3;
    let whose = |_: &Request| {
        let name = std::thread::current().name().unwrap_or_default().to_owned();
        Response::new(Status::new(StatusCode::OK, "here"))
            .with_body(jsontp_protocol::message::Body::text(name))
    };
    let server = start(
        Runtime::Mio,
        whose,
        options(with_policy(ContinuePolicy::AutoAccept), workers).with_metrics(metrics.clone()),
    );
    let mut took = vec![0u64; workers];
    let mut clients = Vec::new();
    for _ in 0..24 {
        let mut client = Reader::new(connect(server.addr));
        client.send(&request("GET", "/", ""));
        let name = content(&client.expect()).to_owned();
        let n: usize = name
            .strip_prefix("jsontp-mio-")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a worker's thread: {name:?}"));
        took[n] += 1;
        clients.push(client);
    }
    let snapshot = metrics.snapshot();
    assert_eq!(snapshot.workers(), workers);
    for (n, count) in took.iter().enumerate() {
        assert_eq!(snapshot.accepted(n), *count, "worker {n}: {took:?}");
    }
    assert_eq!(snapshot.connections(ConnectionState::Serving), 24);
    drop(clients);
    server.shutdown_and_join();
}
