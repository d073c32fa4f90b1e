//! Client-role transcripts (insta snapshots): requests out as bytes,
//! server bytes in by hand, events out, with simulated time.

mod machine_support;

use std::time::Duration;

use jsontp::machine::{Config, Connection, Event, PeerError, Role};
use jsontp::message::{Body, Headers, Method, Request};
use machine_support::{Clock, Transcript, take_output};

struct Client {
    conn: Connection,
    clock: Clock,
    log: Transcript,
    events: Vec<Event>,
}

impl Client {
    fn new() -> Client {
        let clock = Clock::new();
        Client {
            conn: Connection::new(Role::Client, Config::default(), clock.now()),
            clock,
            log: Transcript::default(),
            events: Vec::new(),
        }
    }

    fn request(&mut self, request: Request) -> &mut Self {
        let id = self.conn.send_request(request, self.clock.now()).unwrap();
        self.log.note(format!("app sends request #{}", id.index()));
        self.pump()
    }

    fn receive(&mut self, bytes: &str) -> &mut Self {
        self.log
            .note(format!("<- (from the server) {}", machine_support::show(bytes)));
        self.conn.receive_data(bytes.as_bytes(), self.clock.now());
        self.pump()
    }

    fn eof(&mut self) -> &mut Self {
        self.log.note("<- <end of stream>");
        self.conn.receive_eof(self.clock.now());
        self.pump()
    }

    fn wait(&mut self, secs: u64) -> &mut Self {
        self.log.note(format!(".. {secs} s pass"));
        self.clock.advance(Duration::from_secs(secs));
        if self
            .conn
            .poll_timeout()
            .is_some_and(|t| t <= self.clock.now().instant)
        {
            self.log.note(".. timer");
            self.conn.handle_timeout(self.clock.now());
        }
        self.pump()
    }

    fn pump(&mut self) -> &mut Self {
        let out = take_output(&mut self.conn);
        for line in out.split_inclusive('\n') {
            self.log
                .note(format!("-> (to the server) {}", machine_support::show(line)));
        }
        while let Some(event) = self.conn.next_event(self.clock.now()) {
            self.log.event(&event);
            self.events.push(event);
        }
        self
    }
}

fn response(code: u16, reason: &str, resource: &str, content: &str) -> String {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"response\",\"status\":{{\"code\":{code},\"formal-message\":\"{reason}\",\"human-message\":\"{reason}\"}},\"resource\":\"{resource}\",\"headers\":{{\"date\":\"2025-11-22T00:00:00Z+0000\",\"language\":\"en-US\"}},\"body\":{{\"content\":\"{content}\",\"encoding\":\"identity\"}}}}\n"
    )
}

fn put_expecting_continue() -> Request {
    Request::new(Method::Put, "/up.txt".parse().unwrap())
        .with_headers(Headers::new().with_expect_continue(true))
        .with_body(Body::text("the content"))
}

fn get(path: &str) -> Request {
    Request::new(Method::Get, path.parse().unwrap())
}

fn texts(c: &Client) -> String {
    c.log.text()
}

#[test]
fn pipelined_requests_and_a_server_that_closes() {
    let mut c = Client::new();
    c.request(get("/a")).request(get("/b"));
    c.receive(&(response(200, "OK", "/a", "one") + &response(200, "OK", "/b", "two")));
    c.eof();
    assert!(c.conn.is_closed());
    assert!(!c.events.contains(&Event::PeerError(PeerError::UnexpectedEof)));
    insta::assert_snapshot!("machine_client_pipelined", texts(&c));
}

#[test]
fn handshake_continue_then_full_request() {
    // D10: the first request has an empty body and keeps `expect`; the full
    // one goes out on 100, without `expect`, with the content.
    let mut c = Client::new();
    c.request(put_expecting_continue());
    let first = texts(&c);
    assert!(first.contains("\"expect\":\"100-continue\""));
    assert!(!first.contains("the content"));
    c.receive(&response(100, "CONTINUE", "/up.txt", ""));
    let after = texts(&c);
    assert!(after.contains("\"content\":\"the content\""));
    c.receive(&response(201, "Created", "/up.txt", ""));
    assert!(matches!(c.events[0], Event::Continue { .. }));
    assert!(matches!(c.events[1], Event::Response { .. }));
    insta::assert_snapshot!("machine_client_handshake_continue", texts(&c));
}

#[test]
fn handshake_answered_with_a_final_error() {
    let mut c = Client::new();
    c.request(put_expecting_continue()).request(get("/next"));
    assert!(
        !texts(&c).contains("/next\",\"method"),
        "held behind the handshake"
    );
    c.receive(&response(401, "Unauthorized", "/up.txt", ""));
    assert!(texts(&c).contains("\"resource\":\"/next\""), "released after it");
    assert!(
        !texts(&c).contains("the content"),
        "the full request is never sent"
    );
    c.receive(&response(200, "OK", "/next", "n"));
    insta::assert_snapshot!("machine_client_handshake_rejected", texts(&c));
}

#[test]
fn the_wait_for_100_runs_out() {
    // D10: after continue_wait (1 s) the full request goes out anyway.
    let mut c = Client::new();
    c.request(put_expecting_continue());
    assert_eq!(
        c.conn.poll_timeout(),
        Some(c.clock.now().instant + Duration::from_secs(1))
    );
    c.wait(1);
    assert!(texts(&c).contains("the content"));
    assert_eq!(c.conn.poll_timeout(), None);
    c.receive(&response(100, "Continue", "/up.txt", ""));
    c.receive(&response(201, "Created", "/up.txt", ""));
    assert_eq!(c.events.len(), 1, "the late 100 is taken quietly");
    insta::assert_snapshot!("machine_client_continue_wait", texts(&c));
}

#[test]
fn a_response_that_stalls_times_out() {
    // D3: 30 s from a message's first byte.
    let mut c = Client::new();
    c.request(get("/slow"));
    c.receive("{\"jsontp\":\"1.0\",");
    c.wait(30);
    assert!(c.conn.is_closed());
    insta::assert_snapshot!("machine_client_message_timeout", texts(&c));
}

#[test]
fn garbage_from_the_server_closes() {
    let mut c = Client::new();
    c.request(get("/a"));
    c.receive("HTTP/1.1 200 OK\r\n");
    assert!(c.conn.is_closed());
    assert!(matches!(
        c.events[0],
        Event::PeerError(PeerError::Rejected { closes: true, .. })
    ));
    insta::assert_snapshot!("machine_client_garbage", texts(&c));
}
