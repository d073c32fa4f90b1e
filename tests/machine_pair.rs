//! A client machine wired to a server machine in memory: requests and
//! responses, with and without the 100-continue handshake (D10),
//! pipelined (D2), with errors; and a client against hand-written server
//! bytes (the published reference server's habits, D13).

mod machine_support;

use std::time::Duration;

use jsontp::machine::{Config, Connection, ContinuePolicy, Event, PeerError, RequestId, Role};
use jsontp::message::{Body, Forgiven, Headers, Method, Request, Response, Status, StatusCode, Validation};
use machine_support::{Clock, echo_response, render_event};

/// What the server's application does with a handshake it is asked about.
#[derive(Clone, Copy, PartialEq)]
enum Decide {
    Accept,
    Reject,
    /// Decide nothing until the test says so.
    Hold,
}

struct Pair {
    client: Connection,
    server: Connection,
    clock: Clock,
    decide: Decide,
    /// Handshakes the server's application has not decided yet.
    undecided: Vec<(RequestId, Request)>,
    client_events: Vec<Event>,
    server_events: Vec<Event>,
}

impl Pair {
    fn new(server_config: Config, decide: Decide) -> Pair {
        let clock = Clock::new();
        Pair {
            client: Connection::new(Role::Client, Config::default(), clock.now()),
            server: Connection::new(Role::Server, server_config, clock.now()),
            clock,
            decide,
            undecided: Vec::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
        }
    }

    fn request(&mut self, request: Request) -> RequestId {
        let id = self.client.send_request(request, self.clock.now()).expect("send");
        self.run();
        id
    }

    /// Moves bytes both ways and lets the server's application answer
    /// until nothing moves.
    fn run(&mut self) {
        loop {
            let now = self.clock.now();
            let mut moved = false;
            let out = self.client.pending_output().to_vec();
            if !out.is_empty() && self.server.wants_read() {
                self.server.receive_data(&out, now);
                self.client.consume_output(out.len());
                moved = true;
            }
            while let Some(event) = self.server.next_event(now) {
                moved = true;
                self.server_events.push(event.clone());
                match event {
                    Event::Request { id, request } => self
                        .server
                        .send_response(id, echo_response(&request), now)
                        .unwrap(),
                    Event::ContinueRequested { id, request } => match self.decide {
                        Decide::Accept => self.server.accept_continue(id, now).unwrap(),
                        Decide::Reject => self.server.send_response(id, not_found(&request), now).unwrap(),
                        Decide::Hold => self.undecided.push((id, request)),
                    },
                    _ => {}
                }
            }
            let out = self.server.pending_output().to_vec();
            if !out.is_empty() {
                self.client.receive_data(&out, now);
                self.server.consume_output(out.len());
                moved = true;
            }
            if self.server.is_closed() && self.server.pending_output().is_empty() && !self.client_saw_eof() {
                self.client.receive_eof(now);
                moved = true;
            }
            while let Some(event) = self.client.next_event(now) {
                moved = true;
                self.client_events.push(event);
            }
            if !moved {
                return;
            }
        }
    }

    fn client_saw_eof(&self) -> bool {
        !self.client.wants_read()
    }

    /// Lets time pass on both machines, firing their timers.
    fn wait(&mut self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
        let now = self.clock.now();
        if self.client.poll_timeout().is_some_and(|t| t <= now.instant) {
            self.client.handle_timeout(now);
        }
        if self.server.poll_timeout().is_some_and(|t| t <= now.instant) {
            self.server.handle_timeout(now);
        }
        self.run();
    }

    fn client_log(&self) -> Vec<String> {
        self.client_events.iter().map(render_event).collect()
    }
}

fn not_found(request: &Request) -> Response {
    Response::new(Status::new(StatusCode::NOT_FOUND, "no such file")).with_resource(request.resource.as_str())
}

fn get(path: &str) -> Request {
    Request::new(Method::Get, path.parse().unwrap())
}

fn put_expecting_continue(path: &str, content: &str) -> Request {
    Request::new(Method::Put, path.parse().unwrap())
        .with_headers(Headers::new().with_expect_continue(true))
        .with_body(Body::text(content))
}

#[test]
fn pipelined_requests_get_their_own_responses_in_order() {
    let mut pair = Pair::new(Config::default(), Decide::Accept);
    for path in ["/a", "/b", "/c"] {
        pair.client.send_request(get(path), pair.clock.now()).unwrap();
    }
    pair.run();
    assert_eq!(
        pair.client_log(),
        [
            "response #0 200 \"/a\" \"GET /a \"",
            "response #1 200 \"/b\" \"GET /b \"",
            "response #2 200 \"/c\" \"GET /c \"",
        ]
    );
    assert!(
        !pair.client.is_closed() && !pair.server.is_closed(),
        "D2: both stay open"
    );
}

#[test]
fn handshake_accepted_carries_the_full_request() {
    // D10: the first request has an empty body; the full one, sent on 100,
    // carries the content.
    for policy in [ContinuePolicy::AutoAccept, ContinuePolicy::Ask] {
        let config = Config {
            continue_policy: policy,
            ..Config::default()
        };
        let mut pair = Pair::new(config, Decide::Accept);
        pair.request(put_expecting_continue("/up.txt", "the content"));
        assert_eq!(
            pair.client_log(),
            [
                "continue #0",
                "response #0 200 \"/up.txt\" \"PUT /up.txt the content\""
            ],
            "{policy:?}"
        );
    }
}

#[test]
fn requests_sent_during_a_handshake_wait_for_it() {
    // The server reads the next request as the full one, so a GET queued
    // behind the handshake goes out after it.
    let mut pair = Pair::new(Config::default(), Decide::Accept);
    let now = pair.clock.now();
    pair.client
        .send_request(put_expecting_continue("/up.txt", "x"), now)
        .unwrap();
    pair.client.send_request(get("/after"), now).unwrap();
    pair.run();
    assert_eq!(
        pair.client_log(),
        [
            "continue #0",
            "response #0 200 \"/up.txt\" \"PUT /up.txt x\"",
            "response #1 200 \"/after\" \"GET /after \"",
        ]
    );
}

#[test]
fn handshake_rejected_ends_the_exchange_and_the_connection_goes_on() {
    let config = Config {
        continue_policy: ContinuePolicy::Ask,
        ..Config::default()
    };
    let mut pair = Pair::new(config, Decide::Reject);
    pair.request(put_expecting_continue("/up.txt", "big"));
    pair.request(get("/next"));
    assert_eq!(
        pair.client_log(),
        [
            "response #0 404 \"/up.txt\" \"\"",
            "response #1 200 \"/next\" \"GET /next \"",
        ]
    );
}

#[test]
fn handshake_refused_is_501_and_the_server_closes() {
    let config = Config {
        continue_policy: ContinuePolicy::Refuse,
        ..Config::default()
    };
    let mut pair = Pair::new(config, Decide::Accept);
    pair.request(put_expecting_continue("/nc.txt", "x"));
    let log = pair.client_log();
    assert!(log[0].starts_with("response #0 501 \"/nc.txt\""), "{log:?}");
    assert_eq!(log[1..], ["closed"], "nothing was outstanding: no error");
    assert!(pair.server.is_closed() && pair.client.is_closed());
}

#[test]
fn the_client_stops_waiting_for_100_and_the_server_accepts_late() {
    // D10: after continue_wait (1 s) the client sends the full request
    // anyway; the server's application then accepts: the late 100 is
    // taken and the one response answers the exchange.
    let config = Config {
        continue_policy: ContinuePolicy::Ask,
        ..Config::default()
    };
    let mut pair = Pair::new(config, Decide::Hold);
    pair.request(put_expecting_continue("/up.txt", "late"));
    assert_eq!(pair.undecided.len(), 1);
    assert!(pair.client.poll_timeout().is_some());
    pair.wait(1);
    let (id, _) = pair.undecided.remove(0);
    pair.server.accept_continue(id, pair.clock.now()).unwrap();
    pair.run();
    assert_eq!(
        pair.client_log(),
        ["response #0 200 \"/up.txt\" \"PUT /up.txt late\""]
    );
}

#[test]
fn the_client_stops_waiting_for_100_and_the_server_rejects_late() {
    // The server rejects the first request after the client already sent
    // the full one: the server reads that as a new exchange and answers
    // it; the client drops that answer and keeps its matching in order.
    let config = Config {
        continue_policy: ContinuePolicy::Ask,
        ..Config::default()
    };
    let mut pair = Pair::new(config, Decide::Hold);
    pair.request(put_expecting_continue("/up.txt", "late"));
    pair.wait(1);
    pair.client.send_request(get("/next"), pair.clock.now()).unwrap();
    let (id, request) = pair.undecided.remove(0);
    pair.server
        .send_response(id, not_found(&request), pair.clock.now())
        .unwrap();
    pair.run();
    assert_eq!(
        pair.client_log(),
        [
            "response #0 404 \"/up.txt\" \"\"",
            "response #1 200 \"/next\" \"GET /next \"",
        ]
    );
    let server_requests = pair
        .server_events
        .iter()
        .filter(|e| matches!(e, Event::Request { .. }))
        .count();
    assert_eq!(server_requests, 2, "the orphaned full request and /next");
}

#[test]
fn a_server_error_in_the_middle_of_a_pipeline() {
    // A request over the server's header limit (D3: 431) between two good
    // ones: each gets its own answer, in order, and the connection stays.
    let mut config = Config::default();
    config.limits.message.max_headers = 1;
    let mut pair = Pair::new(config, Decide::Accept);
    let now = pair.clock.now();
    let crowded = get("/crowded").with_headers(
        Headers::new()
            .with_authorization("token".to_owned())
            .with_ignore_invalid_headers(true),
    );
    pair.client.send_request(get("/a"), now).unwrap();
    pair.client.send_request(crowded, now).unwrap();
    pair.client.send_request(get("/c"), now).unwrap();
    pair.run();
    let log = pair.client_log();
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(log[0].starts_with("response #0 200"));
    assert!(log[1].starts_with("response #1 431 \"/crowded\""), "{log:?}");
    assert!(log[2].starts_with("response #2 200"));
    assert!(matches!(
        pair.server_events[1],
        Event::PeerError(PeerError::Rejected { closes: false, .. })
    ));
}

// The client against bytes written by hand.

fn client() -> (Connection, Clock) {
    let clock = Clock::new();
    (
        Connection::new(Role::Client, Config::default(), clock.now()),
        clock,
    )
}

fn response_bytes(resource: &str, headers: &str, encoding: &str) -> String {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"response\",\"status\":{{\"code\":200,\"formal-message\":\"OK\",\"human-message\":\"fine\"}},\"resource\":\"{resource}\",\"headers\":{{{headers}}},\"body\":{{\"content\":\"hi\",\"encoding\":\"{encoding}\"}}}}"
    )
}

const DATE_AND_LANGUAGE: &str = "\"date\":\"2025-11-22T01:00:00Z+01:00\",\"language\":\"EN-us\"";

fn drain(conn: &mut Connection, clock: &Clock) -> Vec<String> {
    std::iter::from_fn(|| conn.next_event(clock.now()))
        .map(|e| render_event(&e))
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
    // D13.
    let (mut conn, clock) = client();
    let id = conn.send_request(get("/mine"), clock.now()).unwrap();
    conn.receive_data(
        response_bytes("/theirs", DATE_AND_LANGUAGE, "identity").as_bytes(),
        clock.now(),
    );
    let event = conn.next_event(clock.now());
    assert_eq!(
        event,
        Some(Event::PeerError(PeerError::ResourceMismatch {
            id,
            sent: "/mine".to_owned(),
            received: "/theirs".to_owned(),
        }))
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
        Some(Event::PeerError(PeerError::Rejected {
            id: Some(_),
            closes: false,
            ..
        }))
    ));

    let config = Config {
        validation: Validation::Lenient,
        ..Config::default()
    };
    let mut lenient = Connection::new(Role::Client, config, clock.now());
    lenient.send_request(get("/a"), clock.now()).unwrap();
    lenient.receive_data(sloppy.as_bytes(), clock.now());
    match lenient.next_event(clock.now()) {
        Some(Event::Response {
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
