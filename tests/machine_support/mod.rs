//! Shared by the machine tests: simulated time, a small echo application,
//! and a compact rendering of events and bytes for transcripts.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use jsontp::machine::{Connection, Event, Now, PeerError};
use jsontp::message::{Body, Date, Response, Status, StatusCode};

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

    /// Seconds since the start, for rendering deadlines.
    pub fn secs_of(&self, at: Instant) -> f64 {
        at.duration_since(self.base).as_secs_f64()
    }
}

/// What the echo application answers: `200`, the echoed resource, content
/// naming the method and path.
pub fn echo_response(request: &jsontp::message::Request) -> Response {
    Response::new(Status::new(StatusCode::OK, "OK"))
        .with_resource(request.resource.as_str())
        .with_body(Body::text(format!(
            "{} {} {}",
            request.method,
            request.resource.path(),
            request.body.as_text().unwrap_or("<binary>")
        )))
}

/// One line per event, short enough to read in a snapshot.
pub fn render_event(event: &Event) -> String {
    match event {
        Event::Request { id, request } => format!(
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
        Event::ContinueRequested { id, request } => format!(
            "continue requested #{} {} {}",
            id.index(),
            request.method,
            request.resource
        ),
        Event::Continue { id } => format!("continue #{}", id.index()),
        Event::Response {
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
        Event::PeerError(error) => match error {
            PeerError::Rejected {
                id,
                rejection,
                closes,
            } => format!(
                "peer error #{} {} {:?} echo {:?}{}",
                id.map_or("-".to_owned(), |id| id.index().to_string()),
                rejection.status.as_u16(),
                rejection.message,
                rejection.resource,
                if *closes { ", closes" } else { "" }
            ),
            other => format!("peer error {other:?}"),
        },
        Event::Closed => "closed".to_owned(),
    }
}

/// The pending output as text, taken (consumed).
pub fn take_output(conn: &mut Connection) -> String {
    let out = String::from_utf8_lossy(conn.pending_output()).into_owned();
    let n = conn.pending_output().len();
    conn.consume_output(n);
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

    pub fn event(&mut self, event: &Event) {
        self.lines.push(format!("!! {}", render_event(event)));
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }
}
