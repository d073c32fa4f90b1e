//! D3's rows on output: a peer that takes none of our output is cut off
//! and the output dropped (stall timer); a server queues at most
//! `max_output_owed` bytes beyond the response being written before it
//! stops reading requests; and the written part of the output buffer is
//! given back as it grows.

use std::io::IoSlice;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsontp_protocol::machine::{
    Acknowledged, ClientConfig, ClientConnection, PeerError, ServerConfig, ServerConnection, ServerEvent,
};
use jsontp_protocol::message::{Body, Encoding, Method, Request, Response, Status, StatusCode};

use crate::support::{App, Clock, Logs, Pair, render_client, render_server};

const GET: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/f\",\"method\":\"GET\",\"headers\":{},\"body\":{\"content\":\"\",\"encoding\":\"identity\"}}\n";

/// A response of `n` control characters, each written as a six-byte JSON
/// escape (`\u0001`): the output is six times the content.
fn escaped(n: usize) -> Response {
    Response::new(Status::new(StatusCode::OK, "OK")).with_body(Body::text("\u{1}".repeat(n)))
}

/// Takes every event, answering requests with `answer`; returns them
/// rendered.
fn serve(conn: &mut ServerConnection, clock: &Clock, answer: impl Fn() -> Response) -> Vec<String> {
    let mut seen = Vec::new();
    while let Some(event) = conn.next_event(clock.now()) {
        seen.push(render_server(&event));
        if let ServerEvent::Request { id, .. } = event {
            conn.send_response(id, answer(), clock.now()).expect("answer");
        }
    }
    seen
}

#[test]
fn a_server_whose_output_stalls_closes_and_frees_it() {
    // D3: 30 s without the peer taking one byte; any byte taken restarts
    // the timer.
    let mut clock = Clock::new();
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    server.receive_data(GET.as_bytes(), clock.now());
    serve(&mut server, &clock, || escaped(100_000));
    assert!(server.pending_output().len() > 600_000);
    let start = clock.now().instant;
    assert_eq!(server.poll_timeout(), Some(start + Duration::from_secs(30)));

    clock.advance(Duration::from_secs(29));
    server.consume_output(1, clock.now());
    let restarted = clock.now().instant + Duration::from_secs(30);
    assert_eq!(server.poll_timeout(), Some(restarted), "a byte taken restarts it");

    clock.advance_to(restarted);
    server.handle_timeout(clock.now());
    assert!(server.is_closed());
    assert!(server.pending_output().is_empty(), "nothing more is written");
    assert!(
        server.buffered_capacity() <= 16 * 1024,
        "the output is dropped, its memory freed: {} bytes held",
        server.buffered_capacity()
    );
    assert_eq!(server.poll_timeout(), None);
    assert_eq!(
        serve(&mut server, &clock, || escaped(1)),
        ["peer error OutputStalled", "closed"]
    );
    // Nothing more is read either.
    server.receive_data(GET.as_bytes(), clock.now());
    assert_eq!(server.next_event(clock.now()), None);
    assert!(server.pending_output().is_empty());
}

#[test]
fn the_stall_timer_still_runs_once_the_connection_is_closed() {
    // A framing error: 400 and close (D1). The 400 is pending; a peer that
    // never reads it does not hold the connection open for ever.
    let mut clock = Clock::new();
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    server.receive_data(b"garbage", clock.now());
    serve(&mut server, &clock, || escaped(1));
    assert!(server.is_closed());
    assert!(!server.pending_output().is_empty());
    let deadline = server.poll_timeout().expect("the stall timer");
    assert_eq!(deadline, clock.now().instant + Duration::from_secs(30));
    clock.advance_to(deadline);
    server.handle_timeout(clock.now());
    assert!(server.pending_output().is_empty());
    assert_eq!(server.poll_timeout(), None);
}

#[test]
fn a_client_whose_requests_are_not_taken_closes() {
    // The same timer on the client: a server that reads none of our
    // request for 30 s.
    let mut clock = Clock::new();
    let mut client = ClientConnection::new(ClientConfig::default(), clock.now());
    client
        .send_request(Request::new(Method::Get, "/a".parse().unwrap()), clock.now())
        .unwrap();
    let deadline = client.poll_timeout().expect("the stall timer");
    assert_eq!(deadline, clock.now().instant + Duration::from_secs(30));
    clock.advance_to(deadline);
    client.handle_timeout(clock.now());
    assert!(client.is_closed() && client.pending_output().is_empty());
    let events: Vec<_> = std::iter::from_fn(|| client.next_event(clock.now()))
        .map(|e| render_client(&e))
        .collect();
    assert_eq!(events, ["peer error OutputStalled", "closed"]);
}

#[test]
fn a_peer_that_stops_reading_is_cut_off_in_simulated_time() {
    // The pair, stepped: the client sends, the server answers, the client
    // never reads; the next deadline is the server's stall timer, 30 s on.
    let mut pair = Pair::with_server(ServerConfig::default(), App::Echo);
    pair.client_reads = Some(0);
    pair.send(Request::new(Method::Get, "/a".parse().unwrap()));
    let start = pair.clock.now().instant;
    while pair.step() {}
    assert_eq!(
        pair.clock.now().instant.duration_since(start),
        Duration::from_secs(30)
    );
    assert!(
        pair.server_events
            .contains(&ServerEvent::PeerError(PeerError::OutputStalled))
    );
    assert!(pair.server.is_closed() && pair.client.is_closed());
    assert_eq!(pair.client_log(), ["peer error UnexpectedEof", "closed"]);
}

#[test]
fn a_server_stops_handling_requests_while_too_much_output_is_owed() {
    // D3: pipelined requests whose responses (24 kB) escape six-fold. With
    // 20 kB of output allowed beyond the response being written, the third
    // request waits until the peer has taken the first response whole.
    let clock = Clock::new();
    let config = ServerConfig {
        max_output_owed: 20_000,
        ..ServerConfig::default()
    };
    let mut server = ServerConnection::new(config, clock.now());
    server.receive_data(GET.repeat(4).as_bytes(), clock.now());
    let seen = serve(&mut server, &clock, || escaped(4_000));
    assert_eq!(seen, ["request #0 GET /f", "request #1 GET /f"]);
    let one = server.pending_output().len() / 2;
    assert!(one > 24_000, "each response is {one} bytes");
    assert!(!server.wants_read(), "reading pauses too");
    assert!(server.poll_timeout().is_some_and(|t| t > clock.now().instant));

    // Part of the first response taken: still too much beyond it.
    server.consume_output(one / 2, clock.now());
    assert_eq!(
        serve(&mut server, &clock, || escaped(4_000)),
        Vec::<String>::new()
    );
    assert!(!server.wants_read());

    // The first response taken whole: the second is the one being written,
    // the third request is handled; its response is then beyond again.
    server.consume_output(one - one / 2, clock.now());
    assert_eq!(
        serve(&mut server, &clock, || escaped(4_000)),
        [format!("sent #0 ({one} bytes)"), "request #2 GET /f".to_owned()]
    );
    assert!(!server.wants_read());
    let n = server.pending_output().len();
    server.consume_output(n, clock.now());
    assert_eq!(
        serve(&mut server, &clock, || escaped(4_000)),
        [
            format!("sent #1 ({one} bytes)"),
            format!("sent #2 ({one} bytes)"),
            "request #3 GET /f".to_owned()
        ]
    );
    let n = server.pending_output().len();
    server.consume_output(n, clock.now());
    assert_eq!(
        serve(&mut server, &clock, || escaped(4_000)),
        [format!("sent #3 ({n} bytes)")]
    );
    assert!(server.wants_read() && server.is_idle());
}

#[test]
fn one_read_of_many_requests_does_not_queue_all_their_responses() {
    // The attack D3's row answers: 16 pipelined requests for a file of
    // control characters, in one read. Requests are handed out one event
    // at a time, so no more than two responses are ever queued.
    let clock = Clock::new();
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    server.receive_data(GET.repeat(16).as_bytes(), clock.now());
    let seen = serve(&mut server, &clock, || escaped(200_000));
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(server.pending_output().len() < 2 * 1_300_000);
    let mut handled = seen.len();
    while handled < 16 {
        let n = server.pending_output().len().min(64 * 1024);
        server.consume_output(n, clock.now());
        assert!(server.pending_output().len() < 3 * 1_300_000);
        handled += serve(&mut server, &clock, || escaped(200_000)).len();
    }
}

#[test]
fn a_steady_reader_keeps_the_output_buffer_small() {
    // The peer reads every round as much as was written, but never lets the
    // buffer empty: the written prefix is given back all the same.
    let clock = Clock::new();
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    const LAG: usize = 5_000;
    let mut peak = 0;
    for _ in 0..2_000 {
        server.receive_data(GET.as_bytes(), clock.now());
        serve(&mut server, &clock, || escaped(2_000));
        let n = server.pending_output().len().saturating_sub(LAG);
        server.consume_output(n, clock.now());
        assert!(server.pending_output().len() <= LAG);
        peak = peak.max(server.buffered_capacity());
    }
    // 2,000 responses of 12 kB went through: 24 MB.
    assert!(peak <= 256 * 1024, "the buffer reached {peak} bytes");
    let n = server.pending_output().len();
    server.consume_output(n, clock.now());
    assert!(server.buffered_capacity() <= 32 * 1024);
}

#[test]
fn an_idle_connection_holds_no_buffer() {
    // Thousands of idle keep-alive connections cost their fixed state only:
    // once everything received is handled and everything queued is taken,
    // the buffers are given back, whatever the exchanges carried. A small
    // exchange's buffers are kept a few milliseconds first, for a busy
    // peer's next request; that moment is a deadline of `poll_timeout`,
    // well before the idle timeout, and closes nothing.
    let mut clock = Clock::new();
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    for size in [1, 100_000] {
        server.receive_data(GET.as_bytes(), clock.now());
        serve(&mut server, &clock, || escaped(size));
        assert!(server.buffered_capacity() > 0, "the answer waits in the output");
        let pending = server.pending_output().len();
        server.consume_output(pending, clock.now());
        if size > 16 * 1024 {
            // Only the request's few bytes of input are left.
            assert!(server.buffered_capacity() < 1024, "a large output is not kept");
        } else {
            assert!(server.buffered_capacity() > 0, "kept for the next request");
        }
        give_back(&mut server, &mut clock);
        assert_eq!(server.buffered_capacity(), 0, "after a {size}-byte answer");
    }
    // Half a message keeps its bytes, and only them, and no timer gives
    // them back (the message timer runs instead).
    server.receive_data(&GET.as_bytes()[..40], clock.now());
    assert!(server.buffered_capacity() >= 40);
    let message_deadline = clock.now().instant + Duration::from_secs(30);
    assert!(server.poll_timeout().is_some_and(|t| t >= message_deadline));
    server.receive_data(&GET.as_bytes()[40..], clock.now());
    serve(&mut server, &clock, || escaped(1));
    let pending = server.pending_output().len();
    server.consume_output(pending, clock.now());
    give_back(&mut server, &mut clock);
    assert_eq!(server.buffered_capacity(), 0);
}

/// Runs the quiet connection's next timer, which gives its kept buffers
/// back: due within 100 ms, and leaving the connection open.
fn give_back(server: &mut ServerConnection, clock: &mut Clock) {
    // What was written is reported first; the timer adds no event.
    while let Some(event) = server.next_event(clock.now()) {
        assert!(matches!(event, ServerEvent::ResponseSent { .. }), "{event:?}");
    }
    let deadline = server.poll_timeout().expect("a timer runs");
    assert!(deadline <= clock.now().instant + Duration::from_millis(100));
    clock.advance_to(deadline);
    server.handle_timeout(clock.now());
    assert!(!server.is_closed());
    assert!(server.next_event(clock.now()).is_none());
    // Now only the idle timeout (D3) is left.
    let idle = server.poll_timeout().expect("the idle timer");
    assert!(idle >= clock.now().instant + Duration::from_secs(1));
}

// ---------------------------------------------------------------------------
// The transport's share (D3: "no byte of it read"): a send buffer that takes
// a write is not the peer reading; only what the peer acknowledged is.

/// The longest time between two askings of the transport while the stall
/// timer runs: a sixty-fourth of the default stall time.
const CHECK: Duration = Duration::from_micros(30_000_000 / 64);

/// What the transport tells: `bytes` acknowledged since it opened, and
/// whether it holds more.
fn told(bytes: u64, holds_more: bool) -> Acknowledged {
    Acknowledged { bytes, holds_more }
}

/// A server owing one large response, none of it written yet.
fn owing_a_large_response(clock: &Clock) -> ServerConnection {
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    server.receive_data(GET.as_bytes(), clock.now());
    serve(&mut server, clock, || escaped(200_000));
    assert!(server.pending_output().len() > 1_000_000);
    server
}

/// Runs the server's deadlines up to `until`, the transport telling `ack`
/// at each (as the adapters do, before `handle_timeout`); returns when the
/// connection closed, if it did. Each deadline is a check at most
/// [`CHECK`] after the one before, or the stall limit.
fn run_checks(
    server: &mut ServerConnection,
    clock: &mut Clock,
    ack: Acknowledged,
    until: Instant,
) -> Option<Instant> {
    while !server.is_closed() {
        let next = server.poll_timeout().expect("the stall timer runs");
        assert!(next > clock.now().instant, "no deadline is due twice");
        assert!(next <= clock.now().instant + CHECK, "asked often enough");
        if next > until {
            clock.advance_to(until);
            return None;
        }
        clock.advance_to(next);
        server.transport_acknowledged(ack, clock.now());
        server.handle_timeout(clock.now());
    }
    Some(clock.now().instant)
}

#[test]
fn a_peer_whose_kernel_takes_writes_but_which_reads_nothing_is_closed_at_30_s() {
    // The kernel's send buffer grows and takes one more write at 29 s; the
    // peer acknowledges nothing. Counted as taken, that write would have
    // held the connection to 59 s.
    let mut clock = Clock::new();
    let mut server = owing_a_large_response(&clock);
    let start = clock.now().instant;
    server.consume_output(200_000, clock.now());
    server.transport_acknowledged(told(0, true), clock.now());
    assert_eq!(
        run_checks(
            &mut server,
            &mut clock,
            told(0, true),
            start + Duration::from_secs(29)
        ),
        None
    );
    server.consume_output(100_000, clock.now());
    server.transport_acknowledged(told(0, true), clock.now());
    let closed = run_checks(
        &mut server,
        &mut clock,
        told(0, true),
        start + Duration::from_secs(60),
    );
    assert_eq!(closed, Some(start + Duration::from_secs(30)));
    assert!(server.pending_output().is_empty(), "nothing more is written");
    assert_eq!(server.poll_timeout(), None);
    assert_eq!(
        serve(&mut server, &clock, || escaped(1)),
        ["peer error OutputStalled", "closed"]
    );
    // The transport's count no longer matters.
    server.transport_acknowledged(told(10, false), clock.now());
    assert_eq!(server.poll_timeout(), None);
}

#[test]
fn what_the_peer_took_counts_from_the_check_that_sees_it_not_from_the_limit() {
    // A never-reading peer's kernel acknowledges what its receive buffer
    // holds, a little after the server's write filled its own: the server
    // was not looking. The next check sees it and the limit runs from
    // there; seen only when the limit came, it used to restart the timer
    // and hold the connection to twice the limit.
    let mut clock = Clock::new();
    let mut server = owing_a_large_response(&clock);
    let start = clock.now().instant;
    server.consume_output(1_000_000, clock.now());
    server.transport_acknowledged(told(32_768, true), clock.now());
    let check = server.poll_timeout().expect("a check");
    assert_eq!(check, start + CHECK, "the first check, not the limit");
    clock.advance_to(check);
    server.transport_acknowledged(told(128_000, true), clock.now());
    server.handle_timeout(clock.now());
    assert!(!server.is_closed());
    // Never anything more: closed 30 s after the check that saw the last
    // bytes taken.
    let closed = run_checks(
        &mut server,
        &mut clock,
        told(128_000, true),
        start + Duration::from_secs(90),
    );
    assert_eq!(closed, Some(check + Duration::from_secs(30)));
}

#[test]
fn bytes_acknowledged_restart_the_stall_timer_and_bytes_written_do_not() {
    let mut clock = Clock::new();
    let mut server = owing_a_large_response(&clock);
    let start = clock.now().instant;
    server.consume_output(100_000, clock.now());
    server.transport_acknowledged(told(0, true), clock.now());
    run_checks(
        &mut server,
        &mut clock,
        told(0, true),
        start + Duration::from_secs(10),
    );
    // Written, not acknowledged: still the first deadline.
    server.consume_output(50_000, clock.now());
    server.transport_acknowledged(told(0, true), clock.now());
    run_checks(
        &mut server,
        &mut clock,
        told(0, true),
        start + Duration::from_secs(20),
    );
    // One byte acknowledged restarts it.
    let restarted = clock.now().instant;
    server.transport_acknowledged(told(1, true), clock.now());
    let closed = run_checks(
        &mut server,
        &mut clock,
        told(1, true),
        start + Duration::from_secs(90),
    );
    assert_eq!(closed, Some(restarted + Duration::from_secs(30)));
}

#[test]
fn the_counts_compared_are_the_transports_own() {
    // Under TLS the socket counts ciphertext, more bytes than the
    // plaintext written: the machine compares a count only with the
    // transport's earlier one. A session that takes a write into its own
    // buffer, the socket being full, has taken nothing from the peer.
    let mut clock = Clock::new();
    let mut server = owing_a_large_response(&clock);
    let start = clock.now().instant;
    server.consume_output(100_000, clock.now());
    server.transport_acknowledged(told(100_400, true), clock.now());
    run_checks(
        &mut server,
        &mut clock,
        told(100_400, true),
        start + Duration::from_secs(20),
    );
    server.consume_output(16_384, clock.now());
    server.transport_acknowledged(told(100_400, true), clock.now());
    let closed = run_checks(
        &mut server,
        &mut clock,
        told(100_400, true),
        start + Duration::from_secs(90),
    );
    assert_eq!(closed, Some(start + Duration::from_secs(30)));
}

#[test]
fn a_check_the_caller_does_not_answer_passes() {
    // A caller that reported once and then never again: its checks pass
    // one by one, each with nothing taken, and the limit comes in time.
    let mut clock = Clock::new();
    let mut server = owing_a_large_response(&clock);
    let start = clock.now().instant;
    server.consume_output(100_000, clock.now());
    server.transport_acknowledged(told(0, true), clock.now());
    let mut checks = 0;
    while !server.is_closed() {
        let next = server.poll_timeout().expect("a timer");
        assert!(next > clock.now().instant, "a check that passed is not due again");
        clock.advance_to(next);
        server.handle_timeout(clock.now());
        checks += 1;
    }
    assert_eq!(clock.now().instant, start + Duration::from_secs(30));
    assert!((64..=65).contains(&checks), "{checks} checks");
}

#[test]
fn only_bytes_held_by_the_transport_still_stall_the_connection() {
    // Nothing pending in the machine: the transport holds the rest of the
    // response, and the peer never acknowledges it.
    let mut clock = Clock::new();
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    server.receive_data(GET.as_bytes(), clock.now());
    serve(&mut server, &clock, || escaped(1_000));
    let n = server.pending_output().len();
    let start = clock.now().instant;
    server.consume_output(n, clock.now());
    server.transport_acknowledged(told(0, true), clock.now());
    // Before the limit, the quiet connection's buffers are given back;
    // nothing closes.
    let closed = run_checks(
        &mut server,
        &mut clock,
        told(0, true),
        start + Duration::from_secs(60),
    );
    assert_eq!(closed, Some(start + Duration::from_secs(30)));
    // Written whole (the transport took it), then stalled there.
    assert_eq!(
        serve(&mut server, &clock, || escaped(1)),
        [
            format!("sent #0 ({n} bytes)"),
            "peer error OutputStalled".to_owned(),
            "closed".to_owned()
        ]
    );
    server.receive_data(GET.as_bytes(), clock.now());
    assert!(server.next_event(clock.now()).is_none() && server.pending_output().is_empty());

    // Once the peer has acknowledged everything, no stall timer runs.
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    server.receive_data(GET.as_bytes(), clock.now());
    serve(&mut server, &clock, || escaped(1_000));
    let n = server.pending_output().len();
    server.consume_output(n, clock.now());
    server.transport_acknowledged(told(0, true), clock.now());
    server.transport_acknowledged(told(n as u64, false), clock.now());
    let idle = server.poll_timeout().expect("the give-back and idle timers");
    clock.advance(Duration::from_secs(40));
    server.handle_timeout(clock.now());
    assert!(idle < clock.now().instant && !server.is_closed());
}

#[test]
fn a_slow_but_steady_reader_behind_a_full_send_buffer_is_never_closed() {
    // A peer that acknowledges 2 KB every 20 s, behind a kernel buffer of
    // 64 KB kept full, checked as often as the machine asks: ten minutes,
    // and the connection stands.
    let mut clock = Clock::new();
    let mut server = owing_a_large_response(&clock);
    const BUFFER: usize = 64 * 1024;
    let (mut in_transport, mut acknowledged) = (0, 0);
    for _ in 0..30 {
        let room = BUFFER - in_transport;
        let n = room.min(server.pending_output().len());
        server.consume_output(n, clock.now());
        in_transport += n;
        let ack = told(acknowledged, true);
        server.transport_acknowledged(ack, clock.now());
        let until = clock.now().instant + Duration::from_secs(20);
        assert_eq!(run_checks(&mut server, &mut clock, ack, until), None);
        in_transport -= 2_048;
        acknowledged += 2_048;
    }
    assert!(server.next_event(clock.now()).is_none());
}

#[test]
fn a_client_whose_requests_sit_in_its_send_buffer_closes_at_30_s() {
    // The same rule in the client role.
    let mut clock = Clock::new();
    let mut client = ClientConnection::new(ClientConfig::default(), clock.now());
    client
        .send_request(Request::new(Method::Get, "/a".parse().unwrap()), clock.now())
        .unwrap();
    let start = clock.now().instant;
    let n = client.pending_output().len();
    client.consume_output(n, clock.now());
    client.transport_acknowledged(told(0, true), clock.now());
    while !client.is_closed() {
        let next = client.poll_timeout().expect("the stall timer");
        assert!(next <= clock.now().instant + CHECK && next > clock.now().instant);
        clock.advance_to(next);
        client.transport_acknowledged(told(0, true), clock.now());
        client.handle_timeout(clock.now());
    }
    assert_eq!(clock.now().instant, start + Duration::from_secs(30));
    let events: Vec<_> = std::iter::from_fn(|| client.next_event(clock.now()))
        .map(|e| render_client(&e))
        .collect();
    assert_eq!(events, ["peer error OutputStalled", "closed"]);
}

/// Everything `pending` gives, taken `step` bytes at a time.
fn drain_output(server: &mut ServerConnection, clock: &Clock, step: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let piece = server.pending_output();
        if piece.is_empty() {
            return out;
        }
        let n = piece.len().min(step);
        out.extend_from_slice(&piece[..n]);
        server.consume_output(n, clock.now());
    }
}

#[test]
fn a_prepared_body_is_the_same_bytes_and_a_large_one_a_piece_of_its_own() {
    // Prepared once (escaped or compressed), a body is written as it would
    // be written afresh; a large one is handed to the transport from
    // where it lies, between its message's head and tail.
    let text = "a \"quoted\" line \\ with\ttabs and \u{1}\n"
        .repeat(3_000)
        .into_bytes();
    for encoding in [Encoding::Identity, Encoding::Gzip, Encoding::Br] {
        let clock = Clock::new();
        let answer = |body: Body| Response::new(Status::new(StatusCode::OK, "OK")).with_body(body);
        let plain = answer(Body::new(text.clone(), encoding).expect("body"));
        let prepared = answer(Body::prepared(Arc::from(&text[..]), encoding).expect("prepared"));
        let mut fresh = ServerConnection::new(ServerConfig::default(), clock.now());
        let mut ready = ServerConnection::new(ServerConfig::default(), clock.now());
        for server in [&mut fresh, &mut ready] {
            server.receive_data(format!("{GET}{GET}").as_bytes(), clock.now());
        }
        serve(&mut fresh, &clock, || plain.clone());
        serve(&mut ready, &clock, || prepared.clone());

        let mut slices = [IoSlice::new(&[]); 8];
        let pieces = ready.pending_output_vectored(&mut slices);
        let written = prepared.body.written_len().expect("prepared");
        let lengths: Vec<usize> = slices[..pieces].iter().map(|slice| slice.len()).collect();
        if written >= 16 * 1024 {
            // Head, text, the tail and the next head, text, tail.
            assert_eq!(pieces, 5, "{encoding:?}: {lengths:?}");
            assert_eq!((lengths[1], lengths[3]), (written, written), "{encoding:?}");
        } else {
            assert_eq!(pieces, 1, "{encoding:?}: a small text is copied");
        }
        let offered: Vec<u8> = slices[..pieces]
            .iter()
            .flat_map(|slice| slice.iter().copied())
            .collect();
        let expected = drain_output(&mut fresh, &clock, usize::MAX);
        assert_eq!(offered, expected, "{encoding:?}: the vectored view");
        assert_eq!(drain_output(&mut ready, &clock, 7_777), expected, "{encoding:?}");
        assert_eq!(ready.output_written(), expected.len() as u64);
    }
}

#[test]
fn a_client_sends_a_prepared_body_as_it_would_send_it_afresh() {
    let clock = Clock::new();
    let text = "upload \"text\"\n".repeat(5_000).into_bytes();
    let request = |body: Body| Request::new(Method::Put, "/f".parse().expect("resource")).with_body(body);
    let mut sent = Vec::new();
    for body in [
        Body::new(text.clone(), Encoding::Identity).expect("body"),
        Body::prepared(Arc::from(&text[..]), Encoding::Identity).expect("prepared"),
    ] {
        let mut client = ClientConnection::new(ClientConfig::default(), clock.now());
        client.send_request(request(body), clock.now()).expect("sent");
        let mut out = Vec::new();
        while !client.pending_output().is_empty() {
            let n = client.pending_output().len();
            out.extend_from_slice(client.pending_output());
            client.consume_output(n, clock.now());
        }
        sent.push(out);
    }
    assert_eq!(sent[0], sent[1]);
    assert!(sent[0].len() > text.len());
}
