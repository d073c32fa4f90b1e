//! A client machine wired to a server machine in memory ([`Pair`]):
//! requests and responses, with and without the 100-continue handshake
//! (D10), pipelined (D2), with errors.

use jsontp_protocol::machine::{ContinuePolicy, PeerError, ServerConfig, ServerEvent};
use jsontp_protocol::message::{Body, Headers, Method, Request};

use crate::support::{App, Logs, Pair};

fn get(path: &str) -> Request {
    Request::new(Method::Get, path.parse().unwrap())
}

fn put_expecting_continue(path: &str, content: &str) -> Request {
    Request::new(Method::Put, path.parse().unwrap())
        .with_headers(Headers::new().with_expect_continue(true))
        .with_body(Body::text(content))
}

fn policy(continue_policy: ContinuePolicy) -> ServerConfig {
    ServerConfig {
        continue_policy,
        ..ServerConfig::default()
    }
}

#[test]
fn pipelined_requests_get_their_own_responses_in_order() {
    let mut pair = Pair::with_server(ServerConfig::default(), App::Echo);
    for path in ["/a", "/b", "/c"] {
        pair.send(get(path));
    }
    pair.settle();
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
    for continue_policy in [ContinuePolicy::AutoAccept, ContinuePolicy::Ask] {
        let mut pair = Pair::with_server(policy(continue_policy), App::Echo);
        pair.send(put_expecting_continue("/up.txt", "the content"));
        pair.settle();
        assert_eq!(
            pair.client_log(),
            [
                "continue #0",
                "response #0 200 \"/up.txt\" \"PUT /up.txt the content\""
            ],
            "{continue_policy:?}"
        );
    }
}

#[test]
fn requests_sent_during_a_handshake_wait_for_it() {
    // The server reads the next request as the full one, so a GET queued
    // behind the handshake goes out after it.
    let mut pair = Pair::with_server(ServerConfig::default(), App::Echo);
    pair.send(put_expecting_continue("/up.txt", "x"));
    pair.send(get("/after"));
    pair.settle();
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
    let mut pair = Pair::with_server(policy(ContinuePolicy::Ask), App::RejectHandshakes);
    pair.send(put_expecting_continue("/up.txt", "big"));
    pair.settle();
    pair.send(get("/next"));
    pair.settle();
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
    let mut pair = Pair::with_server(policy(ContinuePolicy::Refuse), App::Echo);
    pair.send(put_expecting_continue("/nc.txt", "x"));
    pair.settle();
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
    let mut pair = Pair::with_server(policy(ContinuePolicy::Ask), App::Hold);
    pair.send(put_expecting_continue("/up.txt", "late"));
    pair.settle();
    assert_eq!(pair.held.len(), 1);
    assert!(pair.client.poll_timeout().is_some());
    // One step: the earliest deadline is the client's wait for 100.
    assert!(pair.step());
    pair.settle();
    let (id, _) = pair.held.remove(0);
    pair.server.accept_continue(id, pair.clock.now()).unwrap();
    pair.settle();
    let (id, request) = pair.held.remove(0);
    pair.server
        .send_response(id, crate::support::echo_response(&request), pair.clock.now())
        .unwrap();
    pair.settle();
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
    let mut pair = Pair::with_server(policy(ContinuePolicy::Ask), App::Hold);
    pair.send(put_expecting_continue("/up.txt", "late"));
    pair.wait(1);
    pair.send(get("/next"));
    let (id, _) = pair.held.remove(0);
    pair.server
        .send_response(id, crate::support::not_found(), pair.clock.now())
        .unwrap();
    pair.app = App::Echo;
    pair.settle();
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
        .filter(|e| matches!(e, ServerEvent::Request { .. }))
        .count();
    assert_eq!(server_requests, 2, "the orphaned full request and /next");
}

#[test]
fn a_server_error_in_the_middle_of_a_pipeline() {
    // A request over the server's header limit (D3: 431) between two good
    // ones: each gets its own answer, in order, and the connection stays.
    let mut config = ServerConfig::default();
    config.limits.message.max_headers = 1;
    let mut pair = Pair::with_server(config, App::Echo);
    let crowded = get("/crowded").with_headers(
        Headers::new()
            .with_authorization("token".to_owned())
            .with_ignore_invalid_headers(true),
    );
    pair.send(get("/a"));
    pair.send(crowded);
    pair.send(get("/c"));
    pair.settle();
    let log = pair.client_log();
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(log[0].starts_with("response #0 200"));
    assert!(log[1].starts_with("response #1 431 \"/crowded\""), "{log:?}");
    assert!(log[2].starts_with("response #2 200"));
    assert!(matches!(
        pair.server_events[1],
        ServerEvent::PeerError(PeerError::Rejected { closes: false, .. })
    ));
}

#[test]
fn step_runs_simulated_time_to_the_end_of_an_idle_connection() {
    // Quinn-style: nothing to deliver, so each step jumps to the earliest
    // deadline. An answered request, then the server's idle timeout (D3)
    // closes it, silently; the client sees the end of stream.
    let mut pair = Pair::with_server(ServerConfig::default(), App::Echo);
    pair.send(get("/a"));
    let start = pair.clock.now().instant;
    while pair.step() {}
    assert!(pair.server.is_closed() && pair.client.is_closed());
    assert_eq!(
        pair.clock.now().instant.duration_since(start),
        std::time::Duration::from_secs(60)
    );
    assert_eq!(
        pair.client_log(),
        ["response #0 200 \"/a\" \"GET /a \"", "closed"]
    );
}
