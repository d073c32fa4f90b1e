//! The closed-loop load generator: N keep-alive connections, each keeping P
//! requests in flight, on one mio event loop or (`Driver::Uring`, in
//! `ring_generator`) one io_uring, sharing the tally, the clock and the
//! framing of responses defined here.
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
    /// How the connections are driven.
    pub driver: Driver,
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
/// The longest wait for events: the window's end is checked at least this often.
const WAIT_CAP: Duration = Duration::from_millis(100);

/// How the generator drives its connections. Both keep the same closed
/// loop and measure the same way; they differ in what a request costs
/// the generator itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Driver {
    /// One mio (epoll) loop: a write and a read per request, and a wait.
    /// Plain TCP, TLS, and a connection per request.
    #[default]
    Epoll,
    /// One io_uring: every connection's sends and receives submitted and
    /// reaped in one system call per turn. Plain TCP and keep-alive only.
    Uring,
}

impl Driver {
    /// The driver named `epoll` or `uring`.
    pub fn parse(name: &str) -> Option<Driver> {
        match name {
            "epoll" => Some(Driver::Epoll),
            "uring" => Some(Driver::Uring),
            _ => None,
        }
    }
}

struct Conn {
    stream: Stream,
    inbound: Inbound,
    out: Vec<u8>,
    written: usize,
    in_flight: usize,
    open: bool,
}

/// Counters shared by every connection of a run.
pub(crate) struct Tally {
    counting: bool,
    completed: u64,
    bytes: u64,
    errors: u64,
    samples: Vec<String>,
    sent: u64,
    answered: u64,
    /// With a count of requests, that count; else [`MAX_REQUESTS`].
    limit: u64,
    counted: bool,
}

impl Tally {
    pub(crate) fn new(load: &Load) -> Tally {
        Tally {
            counting: load.requests.is_some(),
            completed: 0,
            bytes: 0,
            errors: 0,
            samples: Vec::new(),
            sent: 0,
            answered: 0,
            limit: load.requests.unwrap_or(MAX_REQUESTS),
            counted: load.requests.is_some(),
        }
    }

    pub(crate) fn error(&mut self, what: String) {
        self.errors += 1;
        if self.samples.len() < 5 {
            self.samples.push(what);
        }
    }

    /// Of `wanted` more requests, how many the run's count still allows;
    /// those are counted as sent.
    pub(crate) fn allow(&mut self, wanted: u64) -> u64 {
        let n = wanted.min(self.limit - self.sent);
        self.sent += n;
        n
    }

    /// Whether the count allows another request.
    fn more_allowed(&self) -> bool {
        self.sent < self.limit
    }

    /// `n` response bytes arrived.
    pub(crate) fn received(&mut self, n: usize) {
        if self.counting {
            self.bytes += n as u64;
        }
    }
}

/// The run's phases: warm-up, then the measured window; with a count of
/// requests, only the window (its deadline).
enum Phase {
    WarmingUp,
    Measuring,
}

/// The run's time: when the window starts and ends, and the CPU times
/// read at its start.
pub(crate) struct Clock {
    phase: Phase,
    window_start: Instant,
    window_end: Instant,
    duration: Duration,
    cpu_start: Option<procfs::CpuTicks>,
    own_start: Option<procfs::CpuTicks>,
}

impl Clock {
    /// The run starts now.
    pub(crate) fn start(load: &Load) -> Clock {
        let began = Instant::now();
        let mut clock = Clock {
            phase: Phase::WarmingUp,
            window_start: began,
            window_end: began + load.warmup,
            duration: load.duration,
            cpu_start: None,
            own_start: None,
        };
        if load.requests.is_some() {
            clock.measure(began, load);
        }
        clock
    }

    fn measure(&mut self, now: Instant, load: &Load) {
        self.phase = Phase::Measuring;
        self.window_start = now;
        self.window_end = now + self.duration;
        self.cpu_start = procfs::cpu_ticks(&load.server_pids);
        self.own_start = procfs::cpu_ticks(&[std::process::id()]);
    }

    /// How long to wait for events next, or `None` when the run is over:
    /// the window ended, every counted request was answered, or no
    /// connection is left open.
    pub(crate) fn next_wait(&mut self, load: &Load, tally: &mut Tally, open: usize) -> Option<Duration> {
        let mut now = Instant::now();
        if now >= self.window_end {
            match self.phase {
                Phase::Measuring => return None,
                Phase::WarmingUp => {
                    // Warm-up over: the measured window starts now.
                    tally.counting = true;
                    self.measure(now, load);
                    now = Instant::now();
                    if now >= self.window_end {
                        return None;
                    }
                }
            }
        }
        if (tally.counted && tally.answered >= tally.limit) || open == 0 {
            return None;
        }
        Some((self.window_end - now).min(WAIT_CAP))
    }

    /// What the run measured, the window ending now.
    pub(crate) fn finish(self, load: &Load, mut tally: Tally) -> Outcome {
        let window_end = Instant::now();
        let cpu_end = procfs::cpu_ticks(&load.server_pids);
        let own_end = procfs::cpu_ticks(&[std::process::id()]);
        if tally.counted && tally.answered < tally.limit {
            tally.error(format!(
                "only {} of {} requests answered in {:?}",
                tally.answered, tally.limit, load.duration
            ));
        }
        let seconds = (window_end - self.window_start).as_secs_f64();
        let ticks = procfs::clock_ticks();
        let generator_cpu_share = match (self.own_start, own_end) {
            (Some(a), Some(b)) if seconds > 0.0 => Some(b.since(a).total() as f64 / ticks / seconds),
            _ => None,
        };
        let server_cpu = match (self.cpu_start, cpu_end) {
            (Some(a), Some(b)) if !load.server_pids.is_empty() => Some(b.since(a)),
            _ => None,
        };
        let completed = tally.completed;
        let us_per_request =
            |spent: u64| (completed > 0).then(|| spent as f64 / ticks * 1e6 / completed as f64);
        Outcome {
            completed,
            errors: tally.errors,
            error_samples: tally.samples,
            seconds,
            requests_per_second: completed as f64 / seconds,
            server_cpu_seconds: server_cpu.map(|c| c.total() as f64 / ticks),
            server_cpu_us_per_request: server_cpu.and_then(|c| us_per_request(c.total())),
            server_user_us_per_request: server_cpu.and_then(|c| us_per_request(c.user)),
            server_system_us_per_request: server_cpu.and_then(|c| us_per_request(c.system)),
            bytes_received: tally.bytes,
            generator_cpu_share,
        }
    }
}

/// Runs `load` and reports what it measured. Fails only when the
/// connections cannot be opened or polled; everything the server does
/// wrong is counted in [`Outcome::errors`].
pub fn run(load: &Load) -> io::Result<Outcome> {
    check(load)?;
    match load.driver {
        Driver::Epoll => run_epoll(load),
        #[cfg(target_os = "linux")]
        Driver::Uring => crate::ring_generator::run(load),
        #[cfg(not(target_os = "linux"))]
        Driver::Uring => Err(invalid("io_uring is Linux's: use the epoll generator")),
    }
}

fn run_epoll(load: &Load) -> io::Result<Outcome> {
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(1024);
    let mut conns = Vec::with_capacity(load.connections);
    for i in 0..load.connections {
        conns.push(connect(load, &poll, i)?);
    }
    let mut tally = Tally::new(load);
    for conn in &mut conns {
        queue(conn, &load.request, load.pipeline as u64, &mut tally);
        flush(conn, &mut tally);
    }
    // Connections still open; each close below counts once, as it happens.
    let mut open = conns.iter().filter(|c| c.open).count();

    let mut clock = Clock::start(load);
    while let Some(wait) = clock.next_wait(load, &mut tally, open) {
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
                if load.reconnect && conn.open && answered > 0 && tally.more_allowed() {
                    // The next request on a connection of its own.
                    let _ = poll.registry().deregister(conn.stream.socket());
                    *conn = connect(load, &poll, event.token().0)?;
                    queue(conn, &load.request, 1, &mut tally);
                } else if conn.open && answered > 0 {
                    queue(conn, &load.request, answered as u64, &mut tally);
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
    Ok(clock.finish(load, tally))
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

/// Appends up to `wanted` requests (as many as the count allows) to the
/// connection's output.
fn queue(conn: &mut Conn, request: &[u8], wanted: u64, tally: &mut Tally) {
    if conn.written == conn.out.len() {
        conn.out.clear();
        conn.written = 0;
    }
    let n = tally.allow(wanted);
    for _ in 0..n {
        conn.out.extend_from_slice(request);
    }
    conn.in_flight += n as usize;
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
                let (n, why) = server_closed(&mut conn.inbound, &mut conn.in_flight, tally);
                close(conn, tally, why);
                return answered + n;
            }
            Ok(n) => {
                conn.inbound.received(n);
                tally.received(n);
                let (n, broken) = frame(&mut conn.inbound, &mut conn.in_flight, tally);
                answered += n;
                if let Some(why) = broken {
                    close(conn, tally, why);
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

/// The server closed the connection: takes the whole responses left in
/// `inbound` (counting bytes that are none as an error of their own);
/// how many, and why the closing is an error.
pub(crate) fn server_closed(
    inbound: &mut Inbound,
    in_flight: &mut usize,
    tally: &mut Tally,
) -> (usize, String) {
    let (answered, broken) = frame(inbound, in_flight, tally);
    if let Some(why) = broken {
        tally.error(why);
    }
    let why = if *in_flight > 0 {
        format!("the server closed with {in_flight} responses owed")
    } else {
        "the server closed an idle connection".to_string()
    };
    (answered, why)
}

/// Takes every whole response from `inbound`, each answering one of the
/// `in_flight` requests: how many, and why the connection must close
/// when it must (bytes that are no response, a response to no request).
pub(crate) fn frame(
    inbound: &mut Inbound,
    in_flight: &mut usize,
    tally: &mut Tally,
) -> (usize, Option<String>) {
    let mut answered = 0;
    loop {
        match inbound.next() {
            Framed::Response { ok, .. } => {
                answered += 1;
                tally.answered += 1;
                if *in_flight == 0 {
                    return (answered, Some("a response to no request".into()));
                }
                *in_flight -= 1;
                if tally.counting {
                    tally.completed += 1;
                }
                if !ok {
                    tally.error("a response that is not a 200".into());
                }
            }
            Framed::Partial => return (answered, None),
            Framed::Error(e) => return (answered, Some(e)),
        }
    }
}

fn close(conn: &mut Conn, tally: &mut Tally, why: String) {
    conn.open = false;
    tally.error(why);
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::thread::{self, JoinHandle};

    use super::*;

    const OK: &[u8] = br#"{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK","human-message":"hi"},"resource":"/","headers":{},"body":{"content":"Hello, world!","encoding":"identity"}}"#;
    const MISSING: &[u8] = br#"{"jsontp":"1.0","type":"response","status":{"code":404,"formal-message":"Not Found","human-message":"no"},"resource":"/","headers":{},"body":{"content":"","encoding":"identity"}}"#;

    /// Both drivers; the io_uring one where the kernel has it.
    fn drivers() -> Vec<Driver> {
        let mut all = vec![Driver::Epoll];
        if cfg!(target_os = "linux") {
            all.push(Driver::Uring);
        }
        all
    }

    /// What the test server saw, over all its connections.
    #[derive(Default)]
    struct Seen {
        /// Requests received.
        requests: AtomicU64,
        /// The most requests one connection had sent and not yet had
        /// answered, at any read.
        most_unanswered: AtomicUsize,
    }

    /// A server for `connections` connections that answers each request
    /// (one line) with `answer(n)`, n counting from 0 on its connection,
    /// and closes a connection after `close_after` answers. Joining the
    /// handle waits for every connection to end.
    fn server(
        connections: usize,
        close_after: usize,
        answer: fn(usize) -> &'static [u8],
    ) -> (SocketAddr, Arc<Seen>, JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Seen::default());
        let shared = Arc::clone(&seen);
        let handle = thread::spawn(move || {
            let mut each = Vec::new();
            for _ in 0..connections {
                let (mut stream, _) = listener.accept().expect("accept");
                let seen = Arc::clone(&shared);
                each.push(thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let (mut received, mut answered) = (0, 0);
                    while answered < close_after {
                        let n = match stream.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let lines = buf[..n].iter().filter(|&&b| b == b'\n').count();
                        received += lines;
                        seen.requests.fetch_add(lines as u64, Ordering::Relaxed);
                        seen.most_unanswered
                            .fetch_max(received - answered, Ordering::Relaxed);
                        let mut out = Vec::new();
                        while answered < received && answered < close_after {
                            out.extend_from_slice(answer(answered));
                            out.push(b'\n');
                            answered += 1;
                        }
                        if stream.write_all(&out).is_err() {
                            return;
                        }
                    }
                }));
            }
            for one in each {
                let _ = one.join();
            }
        });
        (addr, seen, handle)
    }

    fn load(addr: SocketAddr, connections: usize, pipeline: usize, requests: u64, driver: Driver) -> Load {
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
            driver,
        }
    }

    #[test]
    fn a_counted_run_gets_every_answer_pipelined() {
        for driver in drivers() {
            let (addr, seen, server) = server(4, usize::MAX, |_| OK);
            let outcome = run(&load(addr, 4, 8, 2_000, driver)).expect("a run");
            server.join().expect("the server");
            assert_eq!(
                (outcome.completed, outcome.errors),
                (2_000, 0),
                "{driver:?} {outcome:?}"
            );
            assert_eq!(outcome.bytes_received, 2_000 * (OK.len() as u64 + 1));
            // Exactly the count sent, never more than the pipeline unanswered.
            assert_eq!(seen.requests.load(Ordering::Relaxed), 2_000, "{driver:?}");
            let most = seen.most_unanswered.load(Ordering::Relaxed);
            assert!((1..=8).contains(&most), "{driver:?}: {most} unanswered");
            assert!(outcome.server_cpu_seconds.is_some());
            assert!(outcome.generator_cpu_share.is_some());
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
    }

    #[test]
    fn a_timed_run_counts_only_its_window() {
        for driver in drivers() {
            let (addr, seen, server) = server(2, usize::MAX, |_| OK);
            let mut timed = load(addr, 2, 1, 0, driver);
            timed.requests = None;
            timed.warmup = Duration::from_millis(200);
            timed.duration = Duration::from_millis(300);
            let outcome = run(&timed).expect("a run");
            server.join().expect("the server");
            assert_eq!(outcome.errors, 0, "{driver:?} {outcome:?}");
            assert!(outcome.completed > 0, "{driver:?} {outcome:?}");
            assert!((0.3..1.0).contains(&outcome.seconds), "{driver:?} {outcome:?}");
            // The warm-up's answers were not counted; pipeline 1 throughout.
            let sent = seen.requests.load(Ordering::Relaxed);
            assert!(outcome.completed < sent, "{driver:?}: {sent} sent, {outcome:?}");
            assert_eq!(seen.most_unanswered.load(Ordering::Relaxed), 1, "{driver:?}");
        }
    }

    #[test]
    fn answers_that_are_not_200_are_errors() {
        for driver in drivers() {
            // One connection: the count of requests per connection is exact.
            let (addr, _, server) = server(1, usize::MAX, |n| if n % 4 == 3 { MISSING } else { OK });
            let outcome = run(&load(addr, 1, 4, 400, driver)).expect("a run");
            server.join().expect("the server");
            assert_eq!(outcome.completed, 400, "{driver:?}");
            assert_eq!(outcome.errors, 100, "{driver:?} {outcome:?}");
        }
    }

    #[test]
    fn a_server_that_closes_is_an_error_and_ends_the_run() {
        for driver in drivers() {
            let (addr, _, server) = server(2, 10, |_| OK);
            let outcome = run(&load(addr, 2, 2, 1_000, driver)).expect("a run");
            server.join().expect("the server");
            assert_eq!(outcome.completed, 20, "{driver:?}");
            assert!(outcome.errors >= 2, "{driver:?} {outcome:?}");
            // A server that closes with requests still unread resets the
            // connection rather than ending it: either is the error.
            assert!(
                outcome
                    .error_samples
                    .iter()
                    .any(|e| e.contains("closed") || e.contains("reset")),
                "{driver:?} {outcome:?}"
            );
        }
    }

    #[test]
    fn only_loopback_and_bounded_loads_run() {
        let mut far = load(SocketAddr::from(([192, 0, 2, 1], 80)), 1, 1, 1, Driver::Epoll);
        assert!(run(&far).is_err());
        far.addr = SocketAddr::from(([127, 0, 0, 1], 9));
        far.connections = MAX_CONNECTIONS + 1;
        assert!(run(&far).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_ring_refuses_a_connection_per_request_naming_the_epoll_generator() {
        let (addr, _, _) = server(0, 0, |_| OK);
        let mut each = load(addr, 1, 1, 10, Driver::Uring);
        each.reconnect = true;
        let refused = run(&each).expect_err("refused");
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
        assert!(refused.to_string().contains("--generator epoll"), "{refused}");
    }
}
