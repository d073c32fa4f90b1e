//! Shared by the machine tests: a compact rendering of events and bytes
//! for transcripts, and, from `fuzz/pair.rs` (which the fuzz harness
//! shares), simulated time, a small echo application and the one [`Pair`]
//! harness that wires a client machine to a server machine.

use jsontp_protocol::machine::{
    ClientConnection, ClientEvent, Now, PeerError, ServerConnection, ServerEvent,
};

#[path = "../../fuzz/pair.rs"]
mod shared;

pub use shared::{App, Pair, SimClock as Clock, echo_response, not_found};

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

/// The events a [`Pair`]'s client saw, rendered.
pub trait Logs {
    fn client_log(&self) -> Vec<String>;
}

impl Logs for Pair {
    fn client_log(&self) -> Vec<String> {
        self.client_events.iter().map(render_client).collect()
    }
}
