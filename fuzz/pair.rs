//! Simulated time, and a client machine wired to a server machine in
//! memory: the one test clock and the one pair driver of every test crate
//! and fuzz target (`tests/machine`, `fuzz/harness.rs`,
//! `fuzz/simulation.rs`), each of which includes this file by path.
#![allow(dead_code, clippy::disallowed_methods)] // the clock owns a base instant

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jsontp_protocol::machine::{
    ClientConfig, ClientConnection, ClientEvent, Now, RequestId, ServerConfig, ServerConnection, ServerEvent,
};
use jsontp_protocol::message::{Body, Date, Request, Response, Status, StatusCode};

/// 2025-11-22T00:00:00Z: the wall clock at simulated time zero.
pub const WALL_START: i64 = 1_763_769_600;

/// Simulated time: one real instant read once, plus an offset that every
/// clone shares, so that a clone handed to a simulated server or client
/// (`io_adapters::Clock::from_fn(move || clone.now())`) reads the time the
/// test moves. The wall clock moves with it, so `date` headers are
/// deterministic. It never goes back.
#[derive(Debug, Clone)]
pub struct SimClock {
    base: Instant,
    /// Nanoseconds since `base`.
    offset: Arc<AtomicU64>,
}

impl Default for SimClock {
    fn default() -> Self {
        SimClock::new()
    }
}

impl SimClock {
    /// Time zero.
    pub fn new() -> SimClock {
        SimClock {
            base: Instant::now(),
            offset: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The time now.
    pub fn now(&self) -> Now {
        self.at(self.elapsed())
    }

    /// The time `offset` after time zero, wherever the clock stands.
    pub fn at(&self, offset: Duration) -> Now {
        Now {
            instant: self.base + offset,
            wall: Date::from_unix_seconds(WALL_START + offset.as_secs() as i64),
        }
    }

    /// Simulated time since time zero.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.offset.load(Ordering::SeqCst))
    }

    /// Moves the clock on by `by`.
    pub fn advance(&mut self, by: Duration) {
        self.set(self.elapsed() + by);
    }

    /// Moves the clock to `at`, if that is later.
    pub fn advance_to(&mut self, at: Instant) {
        self.set(self.since_start(at));
    }

    /// Moves the clock to `since_start` after time zero, if that is later.
    pub fn set(&mut self, since_start: Duration) {
        let nanos = u64::try_from(since_start.as_nanos()).unwrap_or(u64::MAX);
        self.offset.fetch_max(nanos, Ordering::SeqCst);
    }

    /// How long after time zero `at` is (zero for an earlier instant).
    pub fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.base)
    }

    /// Seconds since time zero, for rendering deadlines.
    pub fn secs_of(&self, at: Instant) -> f64 {
        self.since_start(at).as_secs_f64()
    }
}

// ---------------------------------------------------------------------------
// The pair: a client machine and a server machine, wired in memory.

/// What the echo application answers: `200`, content naming the method,
/// the path and the body.
pub fn echo_response(request: &Request) -> Response {
    Response::new(Status::new(StatusCode::OK, "OK")).with_body(Body::text(format!(
        "{} {} {}",
        request.method,
        request.resource.path(),
        request.body.as_text().unwrap_or("<binary>")
    )))
}

/// `404` for a handshake the application refuses.
pub fn not_found() -> Response {
    Response::new(Status::new(StatusCode::NOT_FOUND, "no such file"))
}

/// What the server's application in a [`Pair`] does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum App {
    /// Answers every request at once with [`echo_response`]; accepts every
    /// handshake it is asked about.
    Echo,
    /// As `Echo`, but refuses every handshake it is asked about with `404`.
    RejectHandshakes,
    /// Answers nothing and decides nothing: the test does, by hand, from
    /// [`Pair::held`] (or from the server's events, when it moves bytes
    /// with [`Pair::move_to_server`] and [`Pair::move_to_client`] alone).
    Hold,
}

/// A client machine wired to a server machine, one simulated clock for
/// both, the server's application answering as [`App`] says.
pub struct Pair {
    pub client: ClientConnection,
    pub server: ServerConnection,
    pub clock: SimClock,
    pub app: App,
    /// Requests and handshakes an `App::Hold` application has not answered.
    pub held: Vec<(RequestId, Request)>,
    pub client_events: Vec<ClientEvent>,
    pub server_events: Vec<ServerEvent>,
    /// Most bytes the client's socket takes from the server per delivery
    /// (a slow reader); `None`: everything.
    pub client_reads: Option<usize>,
    /// The client's end of stream was delivered.
    client_saw_eof: bool,
}

impl Pair {
    pub fn new(client: ClientConfig, server: ServerConfig, app: App) -> Pair {
        let clock = SimClock::new();
        Pair {
            client: ClientConnection::new(client, clock.now()),
            server: ServerConnection::new(server, clock.now()),
            clock,
            app,
            held: Vec::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            client_reads: None,
            client_saw_eof: false,
        }
    }

    /// A default client against a server configured as given.
    pub fn with_server(server: ServerConfig, app: App) -> Pair {
        Pair::new(ClientConfig::default(), server, app)
    }

    /// The time now.
    pub fn now(&self) -> Now {
        self.clock.now()
    }

    /// The client sends a request (it moves with the next delivery).
    pub fn send(&mut self, request: Request) -> RequestId {
        self.client.send_request(request, self.clock.now()).expect("send")
    }

    /// Moves at most `most` bytes of the client's output to the server, if
    /// it reads; how many moved.
    pub fn move_to_server(&mut self, most: usize) -> usize {
        let now = self.clock.now();
        let out = self.client.pending_output();
        let n = out.len().min(most);
        if n == 0 || !self.server.wants_read() {
            return 0;
        }
        let bytes = out[..n].to_vec();
        self.server.receive_data(&bytes, now);
        self.client.consume_output(n, now);
        n
    }

    /// Moves at most `most` bytes of the server's output to the client, if
    /// it reads; how many moved.
    pub fn move_to_client(&mut self, most: usize) -> usize {
        let now = self.clock.now();
        let out = self.server.pending_output();
        let n = out.len().min(most);
        if n == 0 || !self.client.wants_read() {
            return 0;
        }
        let bytes = out[..n].to_vec();
        self.client.receive_data(&bytes, now);
        self.server.consume_output(n, now);
        n
    }

    /// Moves every byte both ways once, and nothing else: no events are
    /// taken, no time passes.
    pub fn shuttle(&mut self) {
        self.move_to_server(usize::MAX);
        self.move_to_client(usize::MAX);
    }

    /// Delivers bytes both ways and lets the server's application answer,
    /// once; returns whether anything moved. No time passes.
    pub fn deliver(&mut self) -> bool {
        let now = self.clock.now();
        let mut moved = self.move_to_server(usize::MAX) > 0;
        while let Some(event) = self.server.next_event(now) {
            moved = true;
            self.server_events.push(event.clone());
            self.serve(event, now);
        }
        moved |= self.move_to_client(self.client_reads.unwrap_or(usize::MAX)) > 0;
        if self.server.is_closed() && self.server.pending_output().is_empty() && !self.client_saw_eof {
            // The server closed its socket.
            self.client_saw_eof = true;
            self.client.receive_eof(now);
            moved = true;
        }
        while let Some(event) = self.client.next_event(now) {
            moved = true;
            self.client_events.push(event);
        }
        moved
    }

    fn serve(&mut self, event: ServerEvent, now: Now) {
        match event {
            ServerEvent::Request { id, request } => match self.app {
                App::Hold => self.held.push((id, *request)),
                App::Echo | App::RejectHandshakes => self
                    .server
                    .send_response(id, echo_response(&request), now)
                    .expect("answer"),
            },
            ServerEvent::ContinueRequested { id, request } => match self.app {
                App::Echo => self.server.accept_continue(id, now).expect("accept"),
                App::RejectHandshakes => self.server.send_response(id, not_found(), now).expect("refuse"),
                App::Hold => self.held.push((id, *request)),
            },
            _ => {}
        }
    }

    /// Delivers until nothing moves. No time passes.
    pub fn settle(&mut self) {
        while self.deliver() {}
    }

    /// The earliest deadline of either machine.
    pub fn next_deadline(&self) -> Option<Instant> {
        [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Moves the clock on by `by` and lets both machines act on the timers
    /// due.
    pub fn advance(&mut self, by: Duration) {
        self.clock.advance(by);
        let now = self.clock.now();
        self.client.handle_timeout(now);
        self.server.handle_timeout(now);
    }

    /// One step of the pair (as quinn-proto's `Pair::step`): delivers what
    /// can move; when nothing can, advances simulated time to the earliest
    /// deadline and fires it. False when nothing can happen any more.
    pub fn step(&mut self) -> bool {
        if self.deliver() {
            return true;
        }
        let Some(deadline) = self.next_deadline() else {
            return false;
        };
        self.clock.advance_to(deadline);
        let now = self.clock.now();
        if self.client.poll_timeout().is_some_and(|t| t <= now.instant) {
            self.client.handle_timeout(now);
        }
        if self.server.poll_timeout().is_some_and(|t| t <= now.instant) {
            self.server.handle_timeout(now);
        }
        true
    }

    /// Steps for `secs` of simulated time: every deadline on the way fires
    /// at its moment; the clock ends `secs` later.
    pub fn wait(&mut self, secs: u64) {
        let target = self.clock.now().instant + Duration::from_secs(secs);
        loop {
            self.settle();
            match self.next_deadline() {
                Some(deadline) if deadline <= target => {
                    self.step();
                }
                _ => break,
            }
        }
        self.clock.advance_to(target);
    }
}
