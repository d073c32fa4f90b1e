//! The open-loop load generator: requests leave on a fixed schedule, at
//! `rate` a second spread over N keep-alive connections in turn, whether
//! or not the answers before them have come, and each latency runs from
//! the moment the schedule meant the request to leave.
//!
//! Measuring from the intended moment rather than from the send corrects
//! coordinated omission: a server that stalls makes the requests that
//! should have left meanwhile wait, and their wait counts, as a user's
//! would. Latencies go into an HdrHistogram (microseconds, three
//! significant digits). A run is bounded in time, in requests in flight
//! per connection and in count.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};

use crate::framing::{Framed, Inbound, Protocol, READ_ROOM};
use crate::generator;

/// One paced load.
#[derive(Debug, Clone)]
pub struct Paced {
    /// The server; loopback only.
    pub addr: SocketAddr,
    /// How its responses are framed.
    pub protocol: Protocol,
    /// One request, exactly as sent.
    pub request: Vec<u8>,
    /// Keep-alive connections, used in turn.
    pub connections: usize,
    /// Requests a second, all connections together.
    pub rate: f64,
    /// Load before the measured window (not recorded).
    pub warmup: Duration,
    /// The measured window: requests meant to leave in it are recorded.
    pub duration: Duration,
}

/// What a paced run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Latencies {
    /// The rate asked for.
    pub offered: f64,
    /// Responses to requests of the window, over the window's length.
    pub achieved: f64,
    /// Responses recorded.
    pub recorded: u64,
    /// Latency percentiles in microseconds: 50, 99, 99.9, and the most.
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Responses that were not a 200, connections closed, requests that
    /// found a connection already holding [`MAX_IN_FLIGHT`], answers that
    /// did not come before the end.
    pub errors: u64,
    /// The first few errors, described.
    pub error_samples: Vec<String>,
}

/// Requests in flight on one connection beyond which the schedule counts
/// an error instead of queueing more: a server that far behind has failed
/// the rate.
const MAX_IN_FLIGHT: usize = 4096;
/// How long the answers to the window's last requests may take.
const DRAIN: Duration = Duration::from_secs(5);
/// The most requests one run may schedule.
const MAX_REQUESTS: f64 = 100_000_000.0;

struct Conn {
    stream: TcpStream,
    inbound: Inbound,
    out: Vec<u8>,
    written: usize,
    /// When each request in flight was meant to leave, oldest first.
    meant: VecDeque<Instant>,
    open: bool,
}

/// Runs `load` and reports its latencies. Fails only when the connections
/// cannot be opened or polled, or the load is not a bounded loopback one.
pub fn run(load: &Paced) -> io::Result<Latencies> {
    check(load)?;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(1024);
    let mut conns = Vec::with_capacity(load.connections);
    for i in 0..load.connections {
        let stream = StdStream::connect_timeout(&load.addr, Duration::from_secs(5))?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let mut stream = TcpStream::from_std(stream);
        poll.registry()
            .register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE)?;
        conns.push(Conn {
            stream,
            inbound: Inbound::new(load.protocol, READ_ROOM),
            out: Vec::new(),
            written: 0,
            meant: VecDeque::new(),
            open: true,
        });
    }
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(io::Error::other)?;
    let mut errors = Errors::default();
    let interval = Duration::from_secs_f64(1.0 / load.rate);
    let began = Instant::now();
    let window = (began + load.warmup, began + load.warmup + load.duration);
    let mut sent: u64 = 0;
    loop {
        let now = Instant::now();
        // Every request the schedule has reached leaves now, on its turn's
        // connection.
        loop {
            let meant = began + interval.mul_f64(sent as f64);
            if meant > now || meant >= window.1 {
                break;
            }
            let conn = &mut conns[(sent % load.connections as u64) as usize];
            sent += 1;
            if !conn.open {
                errors.add("a request for a closed connection".into());
                continue;
            }
            if conn.meant.len() >= MAX_IN_FLIGHT {
                errors.add(format!("{MAX_IN_FLIGHT} requests in flight on one connection"));
                continue;
            }
            if conn.written == conn.out.len() {
                conn.out.clear();
                conn.written = 0;
            }
            conn.out.extend_from_slice(&load.request);
            conn.meant.push_back(meant);
            flush(conn, &mut errors);
        }
        let scheduled_all = began + interval.mul_f64(sent as f64) >= window.1;
        let waiting = conns.iter().any(|c| c.open && !c.meant.is_empty());
        if scheduled_all && (!waiting || now >= window.1 + DRAIN) {
            break;
        }
        // Spin while the next request is due within a millisecond: epoll's
        // timeouts are whole milliseconds, which would send late.
        let next = began + interval.mul_f64(sent as f64);
        let wait = if scheduled_all {
            Duration::from_millis(10)
        } else {
            let until = next.saturating_duration_since(Instant::now());
            if until < Duration::from_millis(1) {
                Duration::ZERO
            } else {
                until
            }
        };
        poll.poll(&mut events, Some(wait))?;
        for event in &events {
            let Some(conn) = conns.get_mut(event.token().0) else {
                continue;
            };
            if !conn.open {
                continue;
            }
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                for meant in receive(conn, &mut errors) {
                    let took = Instant::now().saturating_duration_since(meant);
                    if meant >= window.0 && meant < window.1 {
                        histogram.saturating_record(took.as_micros().max(1) as u64);
                    }
                }
            }
            if conn.open {
                flush(conn, &mut errors);
            }
        }
    }
    let unanswered: usize = conns.iter().map(|c| c.meant.len()).sum();
    if unanswered > 0 {
        errors.add_many(
            unanswered as u64,
            format!("{unanswered} requests unanswered at the end"),
        );
    }
    Ok(Latencies {
        offered: load.rate,
        achieved: histogram.len() as f64 / load.duration.as_secs_f64(),
        recorded: histogram.len(),
        p50_us: histogram.value_at_quantile(0.50),
        p99_us: histogram.value_at_quantile(0.99),
        p999_us: histogram.value_at_quantile(0.999),
        max_us: histogram.max(),
        errors: errors.count,
        error_samples: errors.samples,
    })
}

#[derive(Default)]
struct Errors {
    count: u64,
    samples: Vec<String>,
}

impl Errors {
    fn add(&mut self, what: String) {
        self.add_many(1, what);
    }

    fn add_many(&mut self, count: u64, what: String) {
        self.count += count;
        if self.samples.len() < 5 {
            self.samples.push(what);
        }
    }
}

/// Loopback only, and bounded in time and in count.
fn check(load: &Paced) -> io::Result<()> {
    generator::check_bounds(
        load.addr,
        load.connections,
        load.warmup,
        load.duration,
        &load.request,
    )?;
    // Also refuses a rate that is not a number.
    let rate_ok = load.rate.is_finite() && load.rate >= 1.0;
    if !rate_ok || load.rate * (load.warmup + load.duration).as_secs_f64() > MAX_REQUESTS {
        return Err(generator::invalid(
            "a rate of at least 1 a second and at most 100 million requests a run",
        ));
    }
    Ok(())
}

/// Writes what the socket takes.
fn flush(conn: &mut Conn, errors: &mut Errors) {
    while conn.written < conn.out.len() {
        match conn.stream.write(&conn.out[conn.written..]) {
            Ok(0) => return close(conn, errors, "the server stopped reading".into()),
            Ok(n) => conn.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return close(conn, errors, format!("write: {e}")),
        }
    }
}

/// Reads everything there is; returns when each answered request was
/// meant to leave, in order.
fn receive(conn: &mut Conn, errors: &mut Errors) -> Vec<Instant> {
    let mut answered = Vec::new();
    loop {
        match conn.stream.read(conn.inbound.room()) {
            Ok(0) => {
                frame(conn, errors, &mut answered);
                close(conn, errors, "the server closed the connection".into());
                return answered;
            }
            Ok(n) => {
                conn.inbound.received(n);
                frame(conn, errors, &mut answered);
                if !conn.open {
                    return answered;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return answered,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                close(conn, errors, format!("read: {e}"));
                return answered;
            }
        }
    }
}

/// Takes every whole response from the buffer.
fn frame(conn: &mut Conn, errors: &mut Errors, answered: &mut Vec<Instant>) {
    loop {
        match conn.inbound.next() {
            Framed::Response { ok, .. } => {
                let Some(meant) = conn.meant.pop_front() else {
                    return close(conn, errors, "a response to no request".into());
                };
                answered.push(meant);
                if !ok {
                    errors.add("a response that is not a 200".into());
                }
            }
            Framed::Partial => break,
            Framed::Error(e) => return close(conn, errors, e),
        }
    }
}

fn close(conn: &mut Conn, errors: &mut Errors, why: String) {
    conn.open = false;
    errors.add(why);
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    const OK: &[u8] = br#"{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK","human-message":"hi"},"resource":"/","headers":{},"body":{"content":"Hello, world!","encoding":"identity"}}"#;

    /// A server that answers each request line at once, after `delay`
    /// for every `slow_every`-th answer on its connection.
    fn server(connections: usize, delay: Duration, slow_every: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        thread::spawn(move || {
            for _ in 0..connections {
                let (mut stream, _) = listener.accept().expect("accept");
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let mut answered = 0usize;
                    loop {
                        let n = match stream.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        for _ in buf[..n].iter().filter(|&&b| b == b'\n') {
                            answered += 1;
                            if answered.is_multiple_of(slow_every) {
                                thread::sleep(delay);
                            }
                            let mut out = OK.to_vec();
                            out.push(b'\n');
                            if stream.write_all(&out).is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    fn paced(addr: SocketAddr, rate: f64, seconds: f64) -> Paced {
        Paced {
            addr,
            protocol: Protocol::Jsontp,
            request: b"{\"jsontp\":\"1.0\"}\n".to_vec(),
            connections: 2,
            rate,
            warmup: Duration::from_millis(100),
            duration: Duration::from_secs_f64(seconds),
        }
    }

    #[test]
    fn a_paced_run_records_every_request_of_its_window() {
        let addr = server(2, Duration::ZERO, usize::MAX);
        let got = run(&paced(addr, 2_000.0, 0.5)).expect("run");
        assert_eq!(got.errors, 0, "{:?}", got.error_samples);
        assert!((950..=1050).contains(&got.recorded), "{} recorded", got.recorded);
        assert!(got.p50_us <= got.p99_us && got.p99_us <= got.p999_us && got.p999_us <= got.max_us);
    }

    #[test]
    fn a_stall_counts_for_every_request_it_held_up() {
        // One answer in 200 waits 50 ms: the requests meant to leave during
        // the stall count their wait, so more than 1 % of all see over
        // 10 ms, and the 99th percentile shows it.
        let addr = server(2, Duration::from_millis(50), 200);
        let got = run(&paced(addr, 2_000.0, 1.0)).expect("run");
        assert_eq!(got.errors, 0, "{:?}", got.error_samples);
        assert!(got.p99_us >= 10_000, "p99 {} µs", got.p99_us);
        assert!(got.p50_us < got.p99_us);
    }

    #[test]
    fn only_bounded_loopback_loads_run() {
        let addr = server(0, Duration::ZERO, 1);
        let mut far = paced(addr, 10.0, 0.1);
        far.addr = "192.0.2.1:80".parse().unwrap();
        assert!(run(&far).is_err());
        assert!(run(&paced(addr, 0.0, 0.1)).is_err());
        assert!(run(&paced(addr, 1e9, 1.0)).is_err());
    }
}
