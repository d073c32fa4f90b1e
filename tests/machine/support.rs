//! Shared by the machine tests: simulated time, a small echo application,
//! a compact rendering of events and bytes for transcripts, and the one
//! [`Pair`] harness that wires a client machine to a server machine.

use std::time::{Duration, Instant};

use jsontp_protocol::machine::{
    ClientConfig, ClientConnection, ClientEvent, Now, PeerError, RequestId, ServerConfig, ServerConnection,
    ServerEvent,
};
use jsontp_protocol::message::{Body, Date, Request, Response, Status, StatusCode};

/// Simulated time: one real instant captured once, plus offsets; the wall
/// clock moves with it, so `date` headers are deterministic.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Instant,
    offset: Duration,
}

/// 2025-11-22T00:00:00Z.
pub const WALL_START: i64 = 1_763_769_600;

impl Clock {
    pub fn new() -> Clock {
        // The only clock read in the machine tests: the base of simulated
        // time.
        #[allow(clippy::disallowed_methods)]
        let base = Instant::now();
        Clock {
            base,
            offset: Duration::ZERO,
        }
    }

    pub fn now(&self) -> Now {
        Now {
            instant: self.base + self.offset,
            wall: Date::from_unix_seconds(WALL_START + self.offset.as_secs() as i64),
        }
    }

    pub fn advance(&mut self, by: Duration) {
        self.offset += by;
    }

    /// Moves the clock to `at`, if that is later.
    pub fn advance_to(&mut self, at: Instant) {
        let by = at.saturating_duration_since(self.now().instant);
        self.advance(by);
    }

    /// Seconds since the start, for rendering deadlines.
    pub fn secs_of(&self, at: Instant) -> f64 {
        at.duration_since(self.base).as_secs_f64()
    }
}

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

fn render_peer_error(error: &PeerError) -> String {
    match error {
        PeerError::Rejected {
            id,
            rejection,
            closes,
        } => format!(
            "peer error #{} {} {:?} echo {:?}{}",
            id.map_or("-".to_owned(), |id| id.index().to_string()),
            rejection.status().as_u16(),
            rejection.message,
            rejection.resource,
            if *closes { ", closes" } else { "" }
        ),
        PeerError::ResourceMismatch { id, sent, response } => format!(
            "peer error #{} resource mismatch: sent {sent:?}, got {} {:?}",
            id.index(),
            response.status.code.as_u16(),
            response.resource
        ),
        other => format!("peer error {other:?}"),
    }
}

/// One line per server event, short enough to read in a snapshot.
pub fn render_server(event: &ServerEvent) -> String {
    match event {
        ServerEvent::Request { id, request } => format!(
            "request #{} {} {}{}",
            id.index(),
            request.method,
            request.resource,
            if request.headers.expect_continue() {
                " (expect 100-continue)"
            } else {
                ""
            }
        ),
        ServerEvent::ContinueRequested { id, request } => format!(
            "continue requested #{} {} {}",
            id.index(),
            request.method,
            request.resource
        ),
        ServerEvent::ResponseSent { id, bytes } => format!("sent #{} ({bytes} bytes)", id.index()),
        ServerEvent::PeerError(error) => render_peer_error(error),
        ServerEvent::Closed => "closed".to_owned(),
        other => format!("{other:?}"),
    }
}

/// One line per client event, short enough to read in a snapshot.
pub fn render_client(event: &ClientEvent) -> String {
    match event {
        ClientEvent::Continue { id } => format!("continue #{}", id.index()),
        ClientEvent::Response {
            id,
            response,
            forgiven,
        } => format!(
            "response #{} {} {:?} {:?}{}",
            id.index(),
            response.status.code.as_u16(),
            response.resource,
            response.body.as_text().unwrap_or("<binary>"),
            if forgiven.is_empty() {
                String::new()
            } else {
                format!(" forgiven {forgiven:?}")
            }
        ),
        ClientEvent::PeerError(error) => render_peer_error(error),
        ClientEvent::Closed => "closed".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Either machine, as far as its bytes out go.
pub trait Output {
    fn pending(&self) -> &[u8];
    fn consume(&mut self, n: usize, now: Now);
}

impl Output for ServerConnection {
    fn pending(&self) -> &[u8] {
        self.pending_output()
    }
    fn consume(&mut self, n: usize, now: Now) {
        self.consume_output(n, now)
    }
}

impl Output for ClientConnection {
    fn pending(&self) -> &[u8] {
        self.pending_output()
    }
    fn consume(&mut self, n: usize, now: Now) {
        self.consume_output(n, now)
    }
}

/// The pending output as text, taken (consumed) at `now`.
pub fn take_output(conn: &mut impl Output, now: Now) -> String {
    let out = String::from_utf8_lossy(conn.pending()).into_owned();
    let n = conn.pending().len();
    conn.consume(n, now);
    out
}

/// Text with its line ends and other invisible characters made visible,
/// quotes left alone so that JSON stays readable.
pub fn show(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == '\u{FEFF}' || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&c.escape_unicode().to_string())
            }
            c => out.push(c),
        }
    }
    out
}

/// A transcript of one connection: what went in, what came out, what
/// happened.
#[derive(Default)]
pub struct Transcript {
    lines: Vec<String>,
}

impl Transcript {
    pub fn note(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    pub fn input(&mut self, bytes: &[u8]) {
        self.lines
            .push(format!("-> {}", show(&String::from_utf8_lossy(bytes))));
    }

    pub fn output(&mut self, text: &str) {
        for line in text.split_inclusive('\n') {
            self.lines.push(format!("<- {}", show(line)));
        }
    }

    /// An event, rendered.
    pub fn event(&mut self, rendered: String) {
        self.lines.push(format!("!! {rendered}"));
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }
}

// ---------------------------------------------------------------------------
// The pair: a client machine and a server machine, wired in memory.

/// What the server's application in a [`Pair`] does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum App {
    /// Answers every request at once with [`echo_response`]; accepts every
    /// handshake it is asked about.
    Echo,
    /// As `Echo`, but refuses every handshake it is asked about with `404`.
    RejectHandshakes,
    /// Answers nothing and decides nothing: the test does, by hand, from
    /// [`Pair::held`].
    Hold,
}

/// A client machine wired to a server machine, one simulated clock for
/// both, the server's application answering as [`App`] says.
pub struct Pair {
    pub client: ClientConnection,
    pub server: ServerConnection,
    pub clock: Clock,
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
        let clock = Clock::new();
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

    /// The client sends a request (it moves with the next delivery).
    pub fn send(&mut self, request: Request) -> RequestId {
        self.client.send_request(request, self.clock.now()).expect("send")
    }

    /// Delivers bytes both ways and lets the server's application answer,
    /// once; returns whether anything moved. No time passes.
    pub fn deliver(&mut self) -> bool {
        let now = self.clock.now();
        let mut moved = false;
        let out = self.client.pending_output().to_vec();
        if !out.is_empty() && self.server.wants_read() {
            self.server.receive_data(&out, now);
            self.client.consume_output(out.len(), now);
            moved = true;
        }
        while let Some(event) = self.server.next_event(now) {
            moved = true;
            self.server_events.push(event.clone());
            self.serve(event, now);
        }
        let pending = self.server.pending_output().len();
        let n = self.client_reads.map_or(pending, |most| most.min(pending));
        if n > 0 && self.client.wants_read() {
            let out = self.server.pending_output()[..n].to_vec();
            self.client.receive_data(&out, now);
            self.server.consume_output(n, now);
            moved = true;
        }
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

    pub fn client_log(&self) -> Vec<String> {
        self.client_events.iter().map(render_client).collect()
    }
}
