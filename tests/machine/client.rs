//! The client role against server bytes written by hand: transcripts
//! (insta snapshots) of requests out, responses in and events, with
//! simulated time; and the published reference server's habits (D13).

use std::time::Duration;

use jsontp_protocol::machine::{ClientConfig, ClientConnection, ClientEvent, PeerError};
use jsontp_protocol::message::{Body, Forgiven, Headers, Method, Request, StatusCode, Validation};

use crate::support::{Clock, Transcript, render_client, show, take_output};

struct Client {
    conn: ClientConnection,
    clock: Clock,
    log: Transcript,
    events: Vec<ClientEvent>,
}

impl Client {
    fn new() -> Client {
        let clock = Clock::new();
        Client {
            conn: ClientConnection::new(ClientConfig::default(), clock.now()),
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
        self.log.note(format!("<- (from the server) {}", show(bytes)));
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
        let out = take_output(&mut self.conn, self.clock.now());
        for line in out.split_inclusive('\n') {
            self.log.note(format!("-> (to the server) {}", show(line)));
        }
        while let Some(event) = self.conn.next_event(self.clock.now()) {
            self.log.event(render_client(&event));
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
    assert!(
        !c.events
            .contains(&ClientEvent::PeerError(PeerError::UnexpectedEof))
    );
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
    assert!(matches!(c.events[0], ClientEvent::Continue { .. }));
    assert!(matches!(c.events[1], ClientEvent::Response { .. }));
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
        ClientEvent::PeerError(PeerError::Rejected { closes: true, .. })
    ));
    insta::assert_snapshot!("machine_client_garbage", texts(&c));
}

// The client against bytes written by hand.

fn client() -> (ClientConnection, Clock) {
    let clock = Clock::new();
    (ClientConnection::new(ClientConfig::default(), clock.now()), clock)
}

fn response_bytes(resource: &str, headers: &str, encoding: &str) -> String {
    status_bytes(200, "OK", resource, headers, encoding)
}

fn status_bytes(code: u16, reason: &str, resource: &str, headers: &str, encoding: &str) -> String {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"response\",\"status\":{{\"code\":{code},\"formal-message\":\"{reason}\",\"human-message\":\"fine\"}},\"resource\":\"{resource}\",\"headers\":{{{headers}}},\"body\":{{\"content\":\"hi\",\"encoding\":\"{encoding}\"}}}}"
    )
}

const DATE_AND_LANGUAGE: &str = "\"date\":\"2025-11-22T01:00:00Z+01:00\",\"language\":\"EN-us\"";

fn drain(conn: &mut ClientConnection, clock: &Clock) -> Vec<String> {
    std::iter::from_fn(|| conn.next_event(clock.now()))
        .map(|e| render_client(&e))
        .collect()
}

#[test]
fn a_server_that_closes_after_each_response_works() {
    // D2: the published reference server answers once and closes, without
    // a newline; that is a complete exchange, not an error.
    let (mut conn, clock) = client();
    conn.send_request(get("/hello.txt"), clock.now()).unwrap();
    conn.receive_data(
        response_bytes("/hello.txt", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    conn.receive_eof(clock.now());
    assert_eq!(
        drain(&mut conn, &clock),
        ["response #0 200 \"/hello.txt\" \"hi\"", "closed"]
    );
}

#[test]
fn end_of_stream_with_requests_outstanding_is_an_error() {
    let (mut conn, clock) = client();
    conn.send_request(get("/a"), clock.now()).unwrap();
    conn.send_request(get("/b"), clock.now()).unwrap();
    conn.receive_data(
        response_bytes("/a", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    conn.receive_eof(clock.now());
    assert_eq!(
        drain(&mut conn, &clock),
        [
            "response #0 200 \"/a\" \"hi\"",
            "peer error UnexpectedEof",
            "closed"
        ]
    );
}

#[test]
fn a_mismatched_resource_is_an_error_not_a_response() {
    // D13: an error carrying the response, so that its status can be shown;
    // it answered the exchange, and the next response answers the next.
    let (mut conn, clock) = client();
    let id = conn.send_request(get("/mine"), clock.now()).unwrap();
    conn.send_request(get("/next"), clock.now()).unwrap();
    conn.receive_data(
        status_bytes(404, "Not Found", "/theirs", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    match conn.next_event(clock.now()) {
        Some(ClientEvent::PeerError(error)) => {
            assert_eq!(
                error.to_string(),
                "the response to request 0 (404) is for resource \"/theirs\", not \"/mine\" as requested"
            );
            let PeerError::ResourceMismatch {
                id: got,
                sent,
                response,
            } = error
            else {
                panic!("expected a mismatch, got {error:?}");
            };
            assert_eq!((got, sent.as_str()), (id, "/mine"));
            assert_eq!(response.resource, "/theirs");
            assert_eq!(response.status.code, StatusCode::NOT_FOUND);
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    conn.receive_data(
        response_bytes("/next", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    assert_eq!(drain(&mut conn, &clock), ["response #1 200 \"/next\" \"hi\""]);
}

#[test]
fn an_error_echoing_nothing_answers_the_request() {
    // D12, D13: a server that could not read our request's resource echoes
    // "" in its error response (here its size limit, 413): that is the
    // answer to the front request, not a mismatch.
    let (mut conn, clock) = client();
    conn.send_request(get("/huge"), clock.now()).unwrap();
    conn.send_request(get("/next"), clock.now()).unwrap();
    conn.receive_data(
        status_bytes(413, "Payload Too Large", "", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    assert_eq!(drain(&mut conn, &clock), ["response #0 413 \"\" \"hi\""]);
    // A success echoing "" is no such answer: it is a mismatch.
    conn.receive_data(
        response_bytes("", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    assert_eq!(
        drain(&mut conn, &clock),
        ["peer error #1 resource mismatch: sent \"/next\", got 200 \"\""]
    );
}

#[test]
fn lenient_validation_forgives_and_reports_what_strict_refuses() {
    // D13: the reference crate leaves out date and language and sends an
    // empty encoding.
    let sloppy = response_bytes("/a", "", "");
    let (mut strict, clock) = client();
    strict.send_request(get("/a"), clock.now()).unwrap();
    strict.receive_data(sloppy.as_bytes(), clock.now());
    assert!(matches!(
        strict.next_event(clock.now()),
        Some(ClientEvent::PeerError(PeerError::Rejected {
            id: Some(_),
            closes: false,
            ..
        }))
    ));

    let config = ClientConfig {
        validation: Validation::Lenient,
        ..ClientConfig::default()
    };
    let mut lenient = ClientConnection::new(config, clock.now());
    lenient.send_request(get("/a"), clock.now()).unwrap();
    lenient.receive_data(sloppy.as_bytes(), clock.now());
    match lenient.next_event(clock.now()) {
        Some(ClientEvent::Response {
            forgiven, response, ..
        }) => {
            assert_eq!(response.body.as_text(), Some("hi"));
            assert!(forgiven.contains(&Forgiven::MissingDate));
            assert!(forgiven.contains(&Forgiven::MissingLanguage));
            assert!(forgiven.contains(&Forgiven::EmptyEncoding));
        }
        other => panic!("expected a forgiven response, got {other:?}"),
    }
}

#[test]
fn a_100_to_a_plain_request_is_unexpected() {
    let (mut conn, clock) = client();
    conn.send_request(get("/a"), clock.now()).unwrap();
    let ack = "{\"jsontp\":\"1.0\",\"type\":\"response\",\"status\":{\"code\":100,\"formal-message\":\"CONTINUE\",\"human-message\":\"go\"},\"resource\":\"/a\",\"headers\":{\"date\":\"2025-11-22T00:00:00Z+0000\",\"language\":\"en-US\"},\"body\":{\"content\":\"\",\"encoding\":\"identity\"}}";
    conn.receive_data(ack.as_bytes(), clock.now());
    assert_eq!(
        drain(&mut conn, &clock),
        ["peer error #0 400 \"a 100 Continue arrived for request 0, which did not ask for one\" echo \"\""]
    );
    // The exchange is still open for its real response.
    conn.receive_data(
        response_bytes("/a", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    assert_eq!(drain(&mut conn, &clock), ["response #0 200 \"/a\" \"hi\""]);
}

#[test]
fn an_exchange_state_follows_the_table_until_its_response_is_read() {
    use jsontp_protocol::machine::table::ExchangeState;
    let (mut conn, clock) = client();
    let id = conn.send_request(get("/a"), clock.now()).unwrap();
    assert_eq!(conn.exchange_state(id), Some(ExchangeState::AwaitingResponse));
    conn.receive_data(
        response_bytes("/a", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    assert_eq!(drain(&mut conn, &clock), ["response #0 200 \"/a\" \"hi\""]);
    assert_eq!(conn.exchange_state(id), None, "answered");
}
