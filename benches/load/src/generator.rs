//! The closed-loop load generator: N keep-alive connections, each keeping P
//! requests in flight, on one mio event loop.
//!
//! Closed loop: a connection sends its next request only when a response
//! comes back, so the offered load is what the server sustains and nothing
//! queues without bound. Every response is framed and checked for a 200.
//! A run is bounded in time (warm-up plus measured window, or a deadline)
//! and, with `requests`, in count.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream as StdStream};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};

use crate::framing::{Framed, Inbound, Protocol, READ_ROOM};
use crate::procfs;
use crate::tls::Stream;

/// One load to put on a server.
#[derive(Debug, Clone)]
pub struct Load {
    /// The server; loopback only.
    pub addr: SocketAddr,
    /// How its responses are framed.
    pub protocol: Protocol,
    /// One request, exactly as sent (pipelining sends copies back to back).
    pub request: Vec<u8>,
    /// Keep-alive connections.
    pub connections: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// Load before the measured window starts (not counted).
    pub warmup: Duration,
    /// The measured window; with `requests`, the deadline for all of them.
    pub duration: Duration,
    /// Send exactly this many requests in all and stop when all are
    /// answered (no warm-up); `None`: run for the window.
    pub requests: Option<u64>,
    /// Processes whose CPU time is read at the window's ends.
    pub server_pids: Vec<u32>,
    /// TLS, with this client configuration; `None`: plain TCP.
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// One request per connection: each connection closes after its
    /// answer and a new one takes its place (with TLS, a new handshake
    /// each time). Needs pipeline 1.
    pub reconnect: bool,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// Responses completed in the window.
    pub completed: u64,
    /// Responses that were not a 200, connections the server closed, bytes
    /// that were no response.
    pub errors: u64,
    /// The first few errors, described.
    pub error_samples: Vec<String>,
    /// The window's length in seconds.
    pub seconds: f64,
    /// `completed / seconds`.
    pub requests_per_second: f64,
    /// Server CPU time (user + system) in the window, in seconds.
    pub server_cpu_seconds: Option<f64>,
    /// Server CPU time per completed response, in microseconds.
    pub server_cpu_us_per_request: Option<f64>,
    /// The part of it in user space (`utime`): the server's own code.
    /// Absent from results saved before it was measured.
    #[serde(default)]
    pub server_user_us_per_request: Option<f64>,
    /// The part of it in the kernel (`stime`): its system calls, the
    /// loopback TCP path included.
    #[serde(default)]
    pub server_system_us_per_request: Option<f64>,
    /// Response bytes received in the window.
    pub bytes_received: u64,
    /// The generator's own CPU time over the window's length: near 1, it
    /// and not the server may be what limits the rate.
    pub generator_cpu_share: Option<f64>,
}

/// The most requests ever sent: a run is bounded in count as well as time.
const MAX_REQUESTS: u64 = 1 << 32;
/// The most connections one run opens.
pub const MAX_CONNECTIONS: usize = 20_000;

struct Conn {
    stream: Stream,
    inbound: Inbound,
    out: Vec<u8>,
    written: usize,
    in_flight: usize,
    open: bool,
}

/// Counters shared by every connection of a run.
struct Tally {
    counting: bool,
    completed: u64,
    bytes: u64,
    errors: u64,
    samples: Vec<String>,
    sent: u64,
    answered: u64,
}

impl Tally {
    fn error(&mut self, what: String) {
        self.errors += 1;
        if self.samples.len() < 5 {
            self.samples.push(what);
        }
    }
}

/// Runs `load` and reports what it measured. Fails only when the
/// connections cannot be opened or polled; everything the server does
/// wrong is counted in [`Outcome::errors`].
pub fn run(load: &Load) -> io::Result<Outcome> {
    check(load)?;
    let poll_timeout_cap = Duration::from_millis(100);
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(1024);
    let mut conns = Vec::with_capacity(load.connections);
    for i in 0..load.connections {
        conns.push(connect(load, &poll, i)?);
    }
    let limit = load.requests.unwrap_or(MAX_REQUESTS);
    let mut tally = Tally {
        counting: load.requests.is_some(),
        completed: 0,
        bytes: 0,
        errors: 0,
        samples: Vec::new(),
        sent: 0,
        answered: 0,
    };
    for conn in &mut conns {
        let n = (load.pipeline as u64).min(limit - tally.sent);
        queue(conn, &load.request, n, &mut tally);
        flush(conn, &mut tally);
    }
    // Connections still open; each close below counts once, as it happens.
    let mut open = conns.iter().filter(|c| c.open).count();

    let began = Instant::now();
    let me = [std::process::id()];
    let (mut window_start, mut window_end) = (began, began + load.warmup);
    let (mut cpu_start, mut own_start) = (None, None);
    if load.requests.is_some() {
        window_end = began + load.duration;
        cpu_start = procfs::cpu_ticks(&load.server_pids);
        own_start = procfs::cpu_ticks(&me);
    }
    let mut measuring = load.requests.is_some();
    loop {
        let now = Instant::now();
        if now >= window_end {
            if measuring {
                break;
            }
            // Warm-up over: the measured window starts now.
            measuring = true;
            tally.counting = true;
            window_start = now;
            window_end = now + load.duration;
            cpu_start = procfs::cpu_ticks(&load.server_pids);
            own_start = procfs::cpu_ticks(&me);
            continue;
        }
        if load.requests.is_some() && tally.answered >= limit {
            break;
        }
        if open == 0 {
            break;
        }
        let wait = (window_end - now).min(poll_timeout_cap);
        poll.poll(&mut events, Some(wait))?;
        for event in &events {
            let Some(conn) = conns.get_mut(event.token().0) else {
                continue;
            };
            if !conn.open {
                continue;
            }
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                let answered = receive(conn, &mut tally);
                if load.reconnect && conn.open && answered > 0 && tally.sent < limit {
                    // The next request on a connection of its own.
                    let _ = poll.registry().deregister(conn.stream.socket());
                    *conn = connect(load, &poll, event.token().0)?;
                    queue(conn, &load.request, 1, &mut tally);
                } else if conn.open && answered > 0 {
                    let n = (answered as u64).min(limit - tally.sent);
                    queue(conn, &load.request, n, &mut tally);
                }
            }
            if conn.open && event.is_writable() {
                // TLS records and handshake messages the socket had no room for.
                if let Err(e) = conn.stream.send_pending() {
                    close(conn, &mut tally, format!("write: {e}"));
                }
            }
            if conn.open {
                flush(conn, &mut tally);
            }
            if !conn.open {
                open -= 1;
            }
        }
    }
    let window_end = Instant::now();
    let cpu_end = procfs::cpu_ticks(&load.server_pids);
    let own_end = procfs::cpu_ticks(&me);
    if load.requests.is_some() && tally.answered < limit {
        tally.error(format!(
            "only {} of {limit} requests answered in {:?}",
            tally.answered, load.duration
        ));
    }
    let seconds = (window_end - window_start).as_secs_f64();
    let ticks = procfs::clock_ticks();
    let generator_cpu_share = match (own_start, own_end) {
        (Some(a), Some(b)) if seconds > 0.0 => Some(b.since(a).total() as f64 / ticks / seconds),
        _ => None,
    };
    let server_cpu = match (cpu_start, cpu_end) {
        (Some(a), Some(b)) if !load.server_pids.is_empty() => Some(b.since(a)),
        _ => None,
    };
    let us_per_request =
        |spent: u64| (tally.completed > 0).then(|| spent as f64 / ticks * 1e6 / tally.completed as f64);
    Ok(Outcome {
        completed: tally.completed,
        errors: tally.errors,
        error_samples: tally.samples,
        seconds,
        requests_per_second: tally.completed as f64 / seconds,
        server_cpu_seconds: server_cpu.map(|c| c.total() as f64 / ticks),
        server_cpu_us_per_request: server_cpu.and_then(|c| us_per_request(c.total())),
        server_user_us_per_request: server_cpu.and_then(|c| us_per_request(c.user)),
        server_system_us_per_request: server_cpu.and_then(|c| us_per_request(c.system)),
        bytes_received: tally.bytes,
        generator_cpu_share,
    })
}

/// Opens connection `token` of `load` and registers it with `poll`.
fn connect(load: &Load, poll: &Poll, token: usize) -> io::Result<Conn> {
    let stream = StdStream::connect_timeout(&load.addr, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    let mut stream = Stream::new(TcpStream::from_std(stream), load.tls.as_ref())?;
    poll.registry().register(
        stream.socket(),
        Token(token),
        Interest::READABLE | Interest::WRITABLE,
    )?;
    Ok(Conn {
        stream,
        inbound: Inbound::new(load.protocol, READ_ROOM),
        out: Vec::with_capacity(load.request.len() * load.pipeline),
        written: 0,
        in_flight: 0,
        open: true,
    })
}

/// Loopback only, and bounded.
fn check(load: &Load) -> io::Result<()> {
    check_bounds(
        load.addr,
        load.connections,
        load.warmup,
        load.duration,
        &load.request,
    )?;
    if load.pipeline == 0 || load.pipeline > 1024 {
        return Err(invalid("pipeline: 1 to 1024"));
    }
    if load.reconnect && load.pipeline != 1 {
        return Err(invalid("a new connection per request asks pipeline 1"));
    }
    Ok(())
}

/// What every load, closed or open loop, must be: on loopback, with
/// 1 to 20,000 connections, at most 600 s of load and 60 s of warm-up,
/// and a request to send.
pub fn check_bounds(
    addr: SocketAddr,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    request: &[u8],
) -> io::Result<()> {
    let loopback = match addr.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => ip.is_loopback(),
    };
    if !loopback {
        return Err(invalid("the load generator only targets loopback addresses"));
    }
    if connections == 0 || connections > MAX_CONNECTIONS {
        return Err(invalid("connections: 1 to 20,000"));
    }
    if duration > Duration::from_secs(600) || warmup > Duration::from_secs(60) {
        return Err(invalid("at most 600 s of load and 60 s of warm-up"));
    }
    if request.is_empty() {
        return Err(invalid("an empty request"));
    }
    Ok(())
}

/// A load that may not run, and why.
pub fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// Appends `n` requests to the connection's output.
fn queue(conn: &mut Conn, request: &[u8], n: u64, tally: &mut Tally) {
    if conn.written == conn.out.len() {
        conn.out.clear();
        conn.written = 0;
    }
    for _ in 0..n {
        conn.out.extend_from_slice(request);
    }
    conn.in_flight += n as usize;
    tally.sent += n;
}

/// Writes what the socket takes.
fn flush(conn: &mut Conn, tally: &mut Tally) {
    while conn.written < conn.out.len() {
        match conn.stream.write(&conn.out[conn.written..]) {
            Ok(0) => {
                close(conn, tally, "the server stopped reading".into());
                return;
            }
            Ok(n) => conn.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                close(conn, tally, format!("write: {e}"));
                return;
            }
        }
    }
}

/// Reads everything there is and frames it; returns how many responses
/// completed.
fn receive(conn: &mut Conn, tally: &mut Tally) -> usize {
    let mut answered = 0;
    loop {
        match conn.stream.read(conn.inbound.room()) {
            Ok(0) => {
                answered += frame(conn, tally);
                let what = if conn.in_flight > 0 {
                    format!("the server closed with {} responses owed", conn.in_flight)
                } else {
                    "the server closed an idle connection".to_string()
                };
                close(conn, tally, what);
                return answered;
            }
            Ok(n) => {
                conn.inbound.received(n);
                if tally.counting {
                    tally.bytes += n as u64;
                }
                answered += frame(conn, tally);
                if !conn.open {
                    return answered;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return answered,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                close(conn, tally, format!("read: {e}"));
                return answered;
            }
        }
    }
}

/// Takes every whole response from the buffer.
fn frame(conn: &mut Conn, tally: &mut Tally) -> usize {
    let mut answered = 0;
    loop {
        match conn.inbound.next() {
            Framed::Response { ok, .. } => {
                answered += 1;
                tally.answered += 1;
                if conn.in_flight == 0 {
                    close(conn, tally, "a response to no request".into());
                    return answered;
                }
                conn.in_flight -= 1;
                if tally.counting {
                    tally.completed += 1;
                }
                if !ok {
                    tally.error("a response that is not a 200".into());
                }
            }
            Framed::Partial => break,
            Framed::Error(e) => {
                close(conn, tally, e);
                return answered;
            }
        }
    }
    answered
}

fn close(conn: &mut Conn, tally: &mut Tally, why: String) {
    conn.open = false;
    tally.error(why);
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    const OK: &[u8] = br#"{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK","human-message":"hi"},"resource":"/","headers":{},"body":{"content":"Hello, world!","encoding":"identity"}}"#;
    const MISSING: &[u8] = br#"{"jsontp":"1.0","type":"response","status":{"code":404,"formal-message":"Not Found","human-message":"no"},"resource":"/","headers":{},"body":{"content":"","encoding":"identity"}}"#;

    /// A server for `connections` connections that answers each request
    /// (one line) with `answer(n)`, n counting from 0 on its connection,
    /// and closes a connection after `close_after` answers.
    fn server(connections: usize, close_after: usize, answer: fn(usize) -> &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        thread::spawn(move || {
            for _ in 0..connections {
                let (mut stream, _) = listener.accept().expect("accept");
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let mut answered = 0;
                    while answered < close_after {
                        let n = match stream.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let mut out = Vec::new();
                        for _ in buf[..n].iter().filter(|&&b| b == b'\n') {
                            if answered < close_after {
                                out.extend_from_slice(answer(answered));
                                out.push(b'\n');
                                answered += 1;
                            }
                        }
                        if stream.write_all(&out).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn load(addr: SocketAddr, connections: usize, pipeline: usize, requests: u64) -> Load {
        Load {
            addr,
            protocol: Protocol::Jsontp,
            request: b"{}\n".to_vec(),
            connections,
            pipeline,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(20),
            requests: Some(requests),
            server_pids: vec![std::process::id()],
            tls: None,
            reconnect: false,
        }
    }

    #[test]
    fn a_counted_run_gets_every_answer_pipelined() {
        let addr = server(4, usize::MAX, |_| OK);
        let outcome = run(&load(addr, 4, 8, 2_000)).expect("a run");
        assert_eq!((outcome.completed, outcome.errors), (2_000, 0), "{outcome:?}");
        assert_eq!(outcome.bytes_received, 2_000 * (OK.len() as u64 + 1));
        assert!(outcome.server_cpu_seconds.is_some());
        let parts = [
            outcome.server_cpu_us_per_request,
            outcome.server_user_us_per_request,
            outcome.server_system_us_per_request,
        ];
        let [Some(total), Some(user), Some(system)] = parts else {
            panic!("{outcome:?}");
        };
        // The parts are the total's ticks split in two; only floating point differs.
        assert!(
            (user + system - total).abs() < 1e-6 * total.max(1.0),
            "{outcome:?}"
        );
    }

    #[test]
    fn answers_that_are_not_200_are_errors() {
        // One connection: the count of requests per connection is exact.
        let addr = server(1, usize::MAX, |n| if n % 4 == 3 { MISSING } else { OK });
        let outcome = run(&load(addr, 1, 4, 400)).expect("a run");
        assert_eq!(outcome.completed, 400);
        assert_eq!(outcome.errors, 100, "{outcome:?}");
    }

    #[test]
    fn a_server_that_closes_is_an_error_and_ends_the_run() {
        let addr = server(2, 10, |_| OK);
        let outcome = run(&load(addr, 2, 2, 1_000)).expect("a run");
        assert_eq!(outcome.completed, 20);
        assert!(outcome.errors >= 2, "{outcome:?}");
        // A server that closes with requests still unread resets the
        // connection rather than ending it: either is the error.
        assert!(
            outcome
                .error_samples
                .iter()
                .any(|e| e.contains("closed") || e.contains("reset")),
            "{outcome:?}"
        );
    }

    #[test]
    fn only_loopback_and_bounded_loads_run() {
        let mut far = load(SocketAddr::from(([192, 0, 2, 1], 80)), 1, 1, 1);
        assert!(run(&far).is_err());
        far.addr = SocketAddr::from(([127, 0, 0, 1], 9));
        far.connections = MAX_CONNECTIONS + 1;
        assert!(run(&far).is_err());
    }
}
