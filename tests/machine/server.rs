//! Server-role transcripts (insta snapshots): bytes in, bytes and events
//! out, with simulated time. Each test also asserts the facts it is about,
//! so a snapshot update cannot quietly change them.

use std::time::Duration;

use jsontp_protocol::machine::{
    ContinuePolicy, PeerError, RequestId, ServerConfig, ServerConnection, ServerEvent, UsageError,
};
use jsontp_protocol::message::{Response, Status, StatusCode};

use crate::support::{Clock, Transcript, echo_response, not_found, render_server, take_output};

/// How the application in a test answers.
#[derive(Clone, Copy, PartialEq)]
enum App {
    /// Answer every request at once with the echo response; accept every
    /// handshake it is asked about.
    Echo,
    /// Answer handshakes it is asked about with `404`.
    RejectHandshakes,
    /// Answer nothing; the test answers by hand.
    Hold,
}

struct Server {
    conn: ServerConnection,
    clock: Clock,
    log: Transcript,
    app: App,
    /// Requests held by an `App::Hold` application.
    held: Vec<(RequestId, jsontp_protocol::message::Request)>,
    events: Vec<ServerEvent>,
    closed_noted: bool,
}

impl Server {
    fn new(config: ServerConfig, app: App) -> Server {
        let clock = Clock::new();
        Server {
            conn: ServerConnection::new(config, clock.now()),
            clock,
            log: Transcript::default(),
            app,
            held: Vec::new(),
            events: Vec::new(),
            closed_noted: false,
        }
    }

    fn send(&mut self, bytes: &[u8]) -> &mut Self {
        self.log.input(bytes);
        self.conn.receive_data(bytes, self.clock.now());
        self.pump()
    }

    fn eof(&mut self) -> &mut Self {
        self.log.note("-> <end of stream>");
        self.conn.receive_eof(self.clock.now());
        self.pump()
    }

    /// Lets `secs` pass, firing timers at their deadlines on the way.
    fn wait(&mut self, secs: u64) -> &mut Self {
        self.log.note(format!(".. {secs} s pass"));
        let target = self.clock.now().instant + Duration::from_secs(secs);
        while let Some(deadline) = self.conn.poll_timeout() {
            if deadline > target {
                break;
            }
            let step = deadline.saturating_duration_since(self.clock.now().instant);
            self.clock.advance(step);
            self.log
                .note(format!(".. timer at {:.0} s", self.clock.secs_of(deadline)));
            self.conn.handle_timeout(self.clock.now());
            self.pump();
        }
        let rest = target.saturating_duration_since(self.clock.now().instant);
        self.clock.advance(rest);
        self
    }

    fn answer(&mut self, id: RequestId, response: Response) -> &mut Self {
        self.log.note(format!("app answers #{}", id.index()));
        self.conn
            .send_response(id, response, self.clock.now())
            .expect("a valid answer");
        self.pump()
    }

    fn pump(&mut self) -> &mut Self {
        loop {
            while let Some(event) = self.conn.next_event(self.clock.now()) {
                self.log.event(render_server(&event));
                self.events.push(event.clone());
                let now = self.clock.now();
                match event {
                    ServerEvent::Request { id, request } => match self.app {
                        App::Hold => self.held.push((id, *request)),
                        _ => self
                            .conn
                            .send_response(id, echo_response(&request), now)
                            .expect("answer"),
                    },
                    ServerEvent::ContinueRequested { id, request } => match self.app {
                        App::Echo => self.conn.accept_continue(id, now).expect("accept"),
                        App::RejectHandshakes => {
                            self.conn.send_response(id, not_found(), now).expect("reject")
                        }
                        App::Hold => self.held.push((id, *request)),
                    },
                    _ => {}
                }
            }
            let out = take_output(&mut self.conn, self.clock.now());
            if out.is_empty() {
                break;
            }
            self.log.output(&out);
        }
        if self.conn.is_closed() && !self.closed_noted {
            self.closed_noted = true;
            self.log.note("== the machine says: close");
        }
        self
    }

    fn transcript(&self) -> String {
        self.log.text()
    }

    fn output_codes(&self) -> Vec<u16> {
        // Status codes in the order they went out, from the transcript.
        self.log
            .text()
            .lines()
            .filter(|l| l.starts_with("<- "))
            .filter_map(|l| {
                let at = l.find("\"code\":")? + 7;
                l.get(at..at + 3)?.parse().ok()
            })
            .collect()
    }
}

fn get(resource: &str) -> String {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"{resource}\",\"method\":\"GET\",\"headers\":{{}},\"body\":{{\"content\":\"\",\"encoding\":\"identity\"}}}}\n"
    )
}

fn put_expecting_continue(resource: &str) -> String {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"{resource}\",\"method\":\"PUT\",\"headers\":{{\"expect\":\"100-continue\"}},\"body\":{{}}}}\n"
    )
}

fn put(resource: &str, content: &str) -> String {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"{resource}\",\"method\":\"PUT\",\"headers\":{{}},\"body\":{{\"content\":\"{content}\",\"encoding\":\"identity\"}}}}\n"
    )
}

/// The `PeerError::Rejected` reports among `events`: exchange, status,
/// echoed resource, whether the connection closes.
fn rejections(events: &[ServerEvent]) -> Vec<(Option<u64>, StatusCode, String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::PeerError(PeerError::Rejected {
                id,
                rejection,
                closes,
            }) => Some((
                id.map(RequestId::index),
                rejection.status(),
                rejection.resource.clone(),
                *closes,
            )),
            _ => None,
        })
        .collect()
}

fn ask() -> ServerConfig {
    ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    }
}

#[test]
fn one_request_one_response() {
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(get("/hello.txt").as_bytes());
    assert_eq!(s.output_codes(), [200]);
    assert!(!s.conn.is_closed() && s.conn.wants_read(), "D2: stays open");
    insta::assert_snapshot!("machine_server_one_request", s.transcript());
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    // D2: three requests in one write.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    let bytes = [get("/a"), get("/b"), get("/c")].concat();
    s.send(bytes.as_bytes());
    assert_eq!(s.output_codes(), [200, 200, 200]);
    insta::assert_snapshot!("machine_server_pipelined", s.transcript());
}

#[test]
fn answers_given_out_of_order_go_out_in_order() {
    // D2: the application answers #2, then #0, then #1.
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    s.send([get("/a"), get("/b"), get("/c")].concat().as_bytes());
    let held = std::mem::take(&mut s.held);
    s.answer(held[2].0, echo_response(&held[2].1));
    assert!(s.conn.pending_output().is_empty(), "#2 waits for #0 and #1");
    s.answer(held[0].0, echo_response(&held[0].1));
    s.answer(held[1].0, echo_response(&held[1].1));
    let text = s.transcript();
    let (a, b, c) = (text.rfind("\"/a\""), text.rfind("\"/b\""), text.rfind("\"/c\""));
    assert!(a < b && b < c, "responses in request order");
    insta::assert_snapshot!("machine_server_out_of_order", text);
}

#[test]
fn json5_comments_bom_and_whitespace_frame_as_one_message() {
    // D1, D4: the published examples carry comments and trailing commas.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    let message = "\u{FEFF}\n\r\n\t {\n // written by hand }\n \"jsontp\": \"1.0\", /* } */\n \"type\": \"request\",\n \"resource\": '/h}.txt',\n \"method\": \"GET\",\n \"headers\": {},\n \"body\": {\"content\": \"\", \"encoding\": \"identity\",},\n}";
    s.send(message.as_bytes());
    assert_eq!(s.output_codes(), [200]);
    insta::assert_snapshot!("machine_server_json5", s.transcript());
}

#[test]
fn handshake_accepted_automatically() {
    // D10: AutoAccept writes the 100, then the full request is a normal
    // request of the same exchange.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(put_expecting_continue("/up.txt").as_bytes());
    assert_eq!(s.output_codes(), [100]);
    s.send(put("/up.txt", "the content").as_bytes());
    assert_eq!(s.output_codes(), [100, 200]);
    let requests: Vec<_> = s
        .events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::Request { id, .. } => Some(id.index()),
            _ => None,
        })
        .collect();
    assert_eq!(requests, [0], "the full request surfaces once, as exchange 0");
    insta::assert_snapshot!("machine_server_handshake_auto", s.transcript());
}

#[test]
fn handshake_asked_and_accepted() {
    let mut s = Server::new(ask(), App::Echo);
    s.send(put_expecting_continue("/up.txt").as_bytes());
    assert!(matches!(s.events[0], ServerEvent::ContinueRequested { .. }));
    s.send(put("/up.txt", "the content").as_bytes());
    assert_eq!(s.output_codes(), [100, 200]);
    insta::assert_snapshot!("machine_server_handshake_ask_accept", s.transcript());
}

#[test]
fn handshake_rejected_keeps_the_connection_open() {
    // D10: a final 4xx instead of 100 ends the exchange; the next message
    // is a new request.
    let mut s = Server::new(ask(), App::RejectHandshakes);
    s.send(put_expecting_continue("/up.txt").as_bytes());
    s.send(get("/hello.txt").as_bytes());
    assert_eq!(s.output_codes(), [404, 200]);
    assert!(!s.conn.is_closed());
    insta::assert_snapshot!("machine_server_handshake_rejected", s.transcript());
}

#[test]
fn handshake_with_an_invalid_first_request_gets_a_final_error() {
    // D10: the first request is validated as usual; failure is final and
    // the connection stays open.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    let bad = put_expecting_continue("/up.txt").replace("PUT", "FETCH");
    s.send(bad.as_bytes());
    s.send(get("/hello.txt").as_bytes());
    assert_eq!(s.output_codes(), [400, 200]);
    insta::assert_snapshot!("machine_server_handshake_invalid", s.transcript());
}

#[test]
fn handshake_refused_is_501_and_close() {
    let config = ServerConfig {
        continue_policy: ContinuePolicy::Refuse,
        ..ServerConfig::default()
    };
    let mut s = Server::new(config, App::Echo);
    s.send(put_expecting_continue("/nc.txt").as_bytes());
    assert_eq!(s.output_codes(), [501]);
    assert!(s.conn.is_closed() && !s.conn.wants_read());
    insta::assert_snapshot!("machine_server_handshake_refused", s.transcript());
}

/// A first request of a handshake whose `body` is `body` (`None`: absent).
fn handshake_with_body(resource: &str, body: Option<&str>) -> String {
    let body = body.map(|body| format!(",\"body\":{body}")).unwrap_or_default();
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"{resource}\",\"method\":\"PUT\",\"headers\":{{\"expect\":\"100-continue\"}}{body}}}\n"
    )
}

#[test]
fn a_handshake_without_a_body_is_acknowledged() {
    // D10: the first request's body may be absent; it is ignored anyway.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(handshake_with_body("/up.txt", None).as_bytes());
    assert_eq!(s.output_codes(), [100]);
    s.send(put("/up.txt", "the content").as_bytes());
    assert_eq!(s.output_codes(), [100, 200]);
    assert!(!s.conn.is_closed());
    insta::assert_snapshot!("machine_server_handshake_without_body", s.transcript());
}

#[test]
fn a_handshake_without_a_body_refused_is_501_and_close() {
    // D10: a server without 100-continue answers 501 and closes, whether
    // the first request carries a body or not.
    let config = ServerConfig {
        continue_policy: ContinuePolicy::Refuse,
        ..ServerConfig::default()
    };
    let mut s = Server::new(config, App::Echo);
    s.send(handshake_with_body("/nc.txt", None).as_bytes());
    assert_eq!(s.output_codes(), [501]);
    assert!(s.conn.is_closed() && !s.conn.wants_read());
    insta::assert_snapshot!("machine_server_handshake_without_body_refused", s.transcript());
}

#[test]
fn a_handshake_body_that_is_not_an_object_is_400_before_501() {
    // D10: any object is ignored, another type is 400; an envelope error
    // (level 3) wins over the refusal of 100-continue (level 4), and then
    // the connection stays open (D5).
    for policy in [ContinuePolicy::AutoAccept, ContinuePolicy::Refuse] {
        let config = ServerConfig {
            continue_policy: policy,
            ..ServerConfig::default()
        };
        for body in ["5", "null", "\"\"", "[]"] {
            let mut s = Server::new(config.clone(), App::Echo);
            s.send(handshake_with_body("/up.txt", Some(body)).as_bytes());
            s.send(get("/hello.txt").as_bytes());
            assert_eq!(s.output_codes(), [400, 200], "{policy:?} {body}");
            let said = rejections(&s.events);
            assert!(!said[0].3, "{policy:?} {body}: stays open");
            assert!(
                s.transcript().contains(r#"field \"body\" must be an object"#),
                "{}",
                s.transcript()
            );
        }
    }
    // The full request still needs its body, whatever its `expect`.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(handshake_with_body("/up.txt", None).as_bytes());
    s.send(handshake_with_body("/up.txt", None).as_bytes());
    assert_eq!(s.output_codes(), [100, 400]);
    assert!(
        s.transcript().contains(r#"field \"body\" is missing"#),
        "{}",
        s.transcript()
    );
}

#[test]
fn garbage_where_a_message_starts_is_400_and_close() {
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(format!("hello {}", get("/hello.txt")).as_bytes());
    assert_eq!(s.output_codes(), [400]);
    assert!(s.conn.is_closed());
    assert!(s.transcript().contains("\"resource\":\"\""), "echo \"\" (D1)");
    insta::assert_snapshot!("machine_server_garbage", s.transcript());
}

#[test]
fn an_array_is_not_a_message() {
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(b"[1,2,3]\n");
    assert_eq!(s.output_codes(), [400]);
    assert!(s.conn.is_closed());
    insta::assert_snapshot!("machine_server_array", s.transcript());
}

#[test]
fn an_error_waits_for_the_responses_owed_before_it() {
    // D2: the framing error after requests 0 and 1 goes out after their
    // responses, which the application gives late.
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    s.send(format!("{}{}xyz", get("/a"), get("/b")).as_bytes());
    assert!(s.conn.pending_output().is_empty());
    assert!(!s.conn.is_closed(), "not before the owed responses are out");
    let held = std::mem::take(&mut s.held);
    s.answer(held[1].0, echo_response(&held[1].1));
    s.answer(held[0].0, echo_response(&held[0].1));
    assert_eq!(s.output_codes(), [200, 200, 400]);
    assert!(s.conn.is_closed());
    insta::assert_snapshot!("machine_server_error_after_owed", s.transcript());
}

#[test]
fn an_oversize_message_is_refused_before_it_ends() {
    // D3: 413 as soon as the limit is passed, then close.
    let mut config = ServerConfig::default();
    config.limits.message.max_message_bytes = 100;
    let mut s = Server::new(config, App::Echo);
    s.send(b"{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/big\",\"body\":{\"content\":\"");
    assert!(s.output_codes().is_empty());
    s.send(b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    assert_eq!(s.output_codes(), [413]);
    assert!(s.conn.is_closed());
    insta::assert_snapshot!("machine_server_oversize", s.transcript());
}

#[test]
fn too_deep_is_400_without_parsing_and_the_connection_goes_on() {
    let mut config = ServerConfig::default();
    config.limits.message.max_depth = 3;
    let mut s = Server::new(config, App::Echo);
    s.send(b"{\"a\":{\"b\":[{\"c\":1}]}}\n");
    s.send(get("/after").as_bytes());
    assert_eq!(s.output_codes(), [400, 200]);
    insta::assert_snapshot!("machine_server_too_deep", s.transcript());
}

#[test]
fn end_of_stream_mid_message_is_400_incomplete() {
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(b"{\"jsontp\":\"1.0\",\"type\":\"req");
    s.eof();
    assert_eq!(s.output_codes(), [400]);
    assert!(s.conn.is_closed());
    // Reported as the 400 written, with its status and echo, so an adapter
    // can log it.
    assert_eq!(
        rejections(&s.events),
        [(Some(0), StatusCode::BAD_REQUEST, String::new(), true)]
    );
    assert!(
        !s.events
            .contains(&ServerEvent::PeerError(PeerError::UnexpectedEof))
    );
    insta::assert_snapshot!("machine_server_eof_mid_message", s.transcript());
}

#[test]
fn half_close_after_messages_still_gets_every_response() {
    // D1, D2: the peer half-closes after two requests; the application
    // answers after the end of stream.
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    s.send([get("/a"), get("/b")].concat().as_bytes());
    s.eof();
    assert!(!s.conn.is_closed(), "two responses are owed");
    assert!(!s.conn.wants_read());
    let held = std::mem::take(&mut s.held);
    s.answer(held[0].0, echo_response(&held[0].1));
    assert!(!s.conn.is_closed());
    s.answer(held[1].0, echo_response(&held[1].1));
    assert_eq!(s.output_codes(), [200, 200]);
    assert!(s.conn.is_closed());
    insta::assert_snapshot!("machine_server_half_close", s.transcript());
}

#[test]
fn a_slow_message_times_out_with_408() {
    // D3: 30 s from a message's first byte.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.wait(10);
    s.send(b"{\"jsontp\":\"1.0\",");
    s.wait(29);
    assert!(s.output_codes().is_empty());
    s.wait(2);
    assert_eq!(s.output_codes(), [408]);
    assert!(s.conn.is_closed());
    // Reported as the 408 written, not as a bare timeout.
    assert_eq!(
        rejections(&s.events),
        [(Some(0), StatusCode::REQUEST_TIMEOUT, String::new(), true)]
    );
    assert!(
        !s.events
            .iter()
            .any(|e| matches!(e, ServerEvent::PeerError(PeerError::TimedOut { .. })))
    );
    insta::assert_snapshot!("machine_server_message_timeout", s.transcript());
}

#[test]
fn an_idle_connection_closes_silently() {
    // D3: 60 s between messages, then close without a response.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(get("/a").as_bytes());
    s.wait(59);
    assert!(!s.conn.is_closed());
    s.send(b"\n\n");
    s.wait(1);
    assert!(s.conn.is_closed(), "whitespace does not count as activity");
    assert_eq!(s.output_codes(), [200]);
    insta::assert_snapshot!("machine_server_idle_timeout", s.transcript());
}

#[test]
fn the_full_request_after_100_has_the_longer_timeout() {
    // D3, D10: 300 s after the 100, then 408 and close.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(put_expecting_continue("/up.txt").as_bytes());
    s.wait(299);
    assert_eq!(s.output_codes(), [100]);
    s.wait(1);
    assert_eq!(s.output_codes(), [100, 408]);
    assert!(s.conn.is_closed());
    // Reported as the 408 written, echoing the handshake's resource.
    assert_eq!(
        rejections(&s.events),
        [(Some(0), StatusCode::REQUEST_TIMEOUT, "/up.txt".to_owned(), true)]
    );
    insta::assert_snapshot!("machine_server_continue_timeout", s.transcript());
}

#[test]
fn reading_stops_while_too_many_responses_are_owed() {
    // D3: with max_pipelined 2, the third request waits in the buffer until
    // the peer has taken a response.
    let config = ServerConfig {
        max_pipelined: 2,
        ..ServerConfig::default()
    };
    let mut s = Server::new(config, App::Hold);
    s.conn.receive_data(
        [get("/a"), get("/b"), get("/c")].concat().as_bytes(),
        s.clock.now(),
    );
    s.pump();
    assert_eq!(s.held.len(), 2);
    assert!(!s.conn.wants_read());
    let (id, request) = s.held.remove(0);
    let now = s.clock.now();
    s.conn.send_response(id, echo_response(&request), now).unwrap();
    assert!(!s.conn.wants_read(), "answered but not yet written");
    assert_eq!(s.conn.next_event(now), None);
    let n = s.conn.pending_output().len();
    s.conn.consume_output(n, now);
    // The peer took one response: it is reported, and the buffered third
    // request is read at once, which makes two owed again.
    assert_eq!(
        s.conn.next_event(now),
        Some(ServerEvent::ResponseSent { id, bytes: n as u64 })
    );
    match s.conn.next_event(now) {
        Some(ServerEvent::Request { id, request }) => {
            assert_eq!((id.index(), request.resource.as_str()), (2, "/c"));
        }
        other => panic!("expected request #2, got {other:?}"),
    }
    assert!(!s.conn.wants_read());
}

#[test]
fn usage_errors_are_typed() {
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    s.send([get("/a"), put_expecting_continue("/b")].concat().as_bytes());
    let now = s.clock.now();
    let (id, request) = s.held.remove(0);
    let continue_status = Response::new(Status::new(StatusCode::CONTINUE, "go on")).with_resource("/a");
    assert_eq!(
        s.conn.send_response(id, continue_status, now),
        Err(UsageError::InformationalResponse)
    );
    assert_eq!(
        s.conn.accept_continue(id, now),
        Err(UsageError::NotAwaitingContinue(id))
    );
    s.conn.send_response(id, echo_response(&request), now).unwrap();
    assert_eq!(
        s.conn.send_response(id, echo_response(&request), now),
        Err(UsageError::UnknownRequest(id))
    );
    // Exchange 1 has had its 100 (AutoAccept): its full request is awaited.
    let second = jsontp_protocol::machine::RequestId::from_index(1);
    assert_eq!(
        s.conn.send_response(second, echo_response(&request), now),
        Err(UsageError::OutOfTurn(second))
    );
}

#[test]
fn the_100_waits_for_the_responses_owed_before_it() {
    // D2 holds for the acknowledgement too: a handshake pipelined behind a
    // request the application has not answered gets its 100 after that
    // response.
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    s.send(
        [get("/first"), put_expecting_continue("/up.txt")]
            .concat()
            .as_bytes(),
    );
    assert!(s.output_codes().is_empty());
    let (id, request) = s.held.remove(0);
    s.answer(id, echo_response(&request));
    assert_eq!(s.output_codes(), [200, 100]);
    s.send(put("/up.txt", "late").as_bytes());
    let (id, request) = s.held.remove(0);
    assert_eq!(id.index(), 1);
    s.answer(id, echo_response(&request));
    assert_eq!(s.output_codes(), [200, 100, 200]);
    insta::assert_snapshot!("machine_server_continue_in_order", s.transcript());
}

#[test]
fn an_idle_connection_gives_back_the_buffers_of_a_large_exchange() {
    // Thousands of idle connections per worker: each must cost little
    // memory, whatever it carried before.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    let big = "x".repeat(600 * 1024);
    s.send(put("/big.txt", &big).as_bytes());
    assert_eq!(s.output_codes(), [200]);
    assert!(
        s.conn.buffered_capacity() <= 32 * 1024,
        "an idle connection still holds {} bytes of buffers",
        s.conn.buffered_capacity()
    );
    // And it still serves the next request.
    s.send(get("/next").as_bytes());
    assert_eq!(s.output_codes(), [200, 200]);
}

#[test]
fn the_continue_timer_starts_when_the_100_goes_out_not_when_it_is_owed() {
    // D3, D10, D2: a handshake pipelined behind a request the application
    // holds for 400 s gets its 100 only then; the client cannot send the
    // full request before it sees the 100, so its 300 s start there. No
    // other timer may cut the exchange short meanwhile.
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    s.send(
        [get("/slow"), put_expecting_continue("/up.txt")]
            .concat()
            .as_bytes(),
    );
    assert_eq!(s.conn.poll_timeout(), None, "the delay is ours: no timer runs");
    s.wait(400);
    assert!(s.output_codes().is_empty(), "no 408 while the 100 waits its turn");
    let (id, request) = s.held.remove(0);
    s.answer(id, echo_response(&request));
    assert_eq!(s.output_codes(), [200, 100]);
    let continue_deadline = s.clock.now().instant + Duration::from_secs(300);
    assert_eq!(
        s.conn.poll_timeout(),
        Some(continue_deadline),
        "300 s from the 100"
    );
    s.wait(250);
    s.send(put("/up.txt", "late but in time").as_bytes());
    let (id, request) = s.held.remove(0);
    assert_eq!(id.index(), 1);
    s.answer(id, echo_response(&request));
    assert_eq!(s.output_codes(), [200, 100, 200]);
    assert!(!s.conn.is_closed());
}

#[test]
fn the_continue_timer_of_a_late_100_still_runs_out() {
    // D3, D10: counted from the 100, the full request's 300 s still end in
    // a 408 and the close.
    let mut s = Server::new(ask(), App::Hold);
    s.send(
        [get("/slow"), put_expecting_continue("/up.txt")]
            .concat()
            .as_bytes(),
    );
    let (first, request) = s.held.remove(0);
    let (second, _) = s.held.remove(0);
    let now = s.clock.now();
    s.conn.accept_continue(second, now).expect("accept");
    s.wait(100);
    assert_eq!(s.conn.poll_timeout(), None, "the 100 has not gone out yet");
    s.answer(first, echo_response(&request));
    assert_eq!(s.output_codes(), [200, 100]);
    s.wait(299);
    assert_eq!(s.output_codes(), [200, 100]);
    s.wait(1);
    assert_eq!(s.output_codes(), [200, 100, 408]);
    assert!(s.conn.is_closed());
}

#[test]
fn a_full_request_that_names_another_resource_or_method_is_400() {
    // D10: the full request after 100 must repeat the handshake's method
    // and resource; otherwise 400, the exchange ends, the connection stays
    // open and the next message is a new request.
    let mut s = Server::new(ServerConfig::default(), App::Echo);
    s.send(put_expecting_continue("/up.txt").as_bytes());
    s.send(put("/other.txt", "the content").as_bytes());
    assert_eq!(s.output_codes(), [100, 400]);
    let message = "the full request must name the same method and resource as the handshake";
    assert_eq!(
        rejections(&s.events),
        [(Some(0), StatusCode::BAD_REQUEST, "/up.txt".to_owned(), false)]
    );
    assert!(s.transcript().contains(message));
    assert!(!s.conn.is_closed() && s.conn.wants_read());
    // Another method, same resource: the same answer.
    s.send(put_expecting_continue("/up.txt").as_bytes());
    s.send(put("/up.txt", "x").replace("PUT", "POST").as_bytes());
    assert_eq!(s.output_codes(), [100, 400, 100, 400]);
    // The connection goes on.
    s.send(get("/next").as_bytes());
    assert_eq!(s.output_codes(), [100, 400, 100, 400, 200]);
    insta::assert_snapshot!("machine_server_full_request_mismatch", s.transcript());
}

#[test]
fn the_echo_is_the_requests_own_resource_whatever_the_handler_says() {
    // D7, D12: a handler cannot break the echo.
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    s.send(get("/a%2Fb.txt").as_bytes());
    let (id, _) = s.held.remove(0);
    let lying = Response::new(Status::new(StatusCode::OK, "OK")).with_resource("/other");
    s.answer(id, lying);
    let text = s.transcript();
    assert!(text.contains("\"resource\":\"/a%2Fb.txt\""), "{text}");
    assert!(!text.contains("/other"));
}

#[test]
fn is_idle_says_when_nothing_is_under_way() {
    let mut s = Server::new(ServerConfig::default(), App::Hold);
    assert!(s.conn.is_idle(), "a new connection");
    s.send(b" \r\n");
    assert!(
        s.conn.is_idle(),
        "whitespace between messages starts nothing (D1)"
    );
    s.send(b"{\"jsontp\":");
    assert!(!s.conn.is_idle(), "half a request");
    let rest = &get("/a")["{\"jsontp\":".len()..];
    s.conn.receive_data(rest.as_bytes(), s.clock.now());
    assert!(!s.conn.is_idle(), "a request not yet taken");
    s.pump();
    assert!(!s.conn.is_idle(), "a request handed out, not answered");
    let (id, request) = s.held.remove(0);
    s.conn
        .send_response(id, echo_response(&request), s.clock.now())
        .unwrap();
    assert!(!s.conn.is_idle(), "an answer not yet written");
    s.pump();
    assert!(s.conn.is_idle(), "answered and written");
    s.send(put_expecting_continue("/up.txt").as_bytes());
    assert!(!s.conn.is_idle(), "a handshake whose full request is awaited");
}

#[test]
fn an_exchange_state_follows_the_table_until_its_answer_is_queued() {
    use jsontp_protocol::machine::table::ExchangeState;
    let clock = Clock::new();
    let mut conn = ServerConnection::new(ServerConfig::default(), clock.now());
    conn.receive_data(
        br#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#,
        clock.now(),
    );
    let Some(ServerEvent::Request { id, request }) = conn.next_event(clock.now()) else {
        panic!("a request");
    };
    assert_eq!(conn.exchange_state(id), Some(ExchangeState::AwaitingResponse));
    assert_eq!(conn.exchange_state(RequestId::from_index(7)), None, "never given");
    conn.send_response(id, echo_response(&request), clock.now())
        .unwrap();
    assert_eq!(
        conn.exchange_state(id),
        None,
        "queued whole: done for the machine"
    );
}
