//! One answer per message (D1, D3, D5): a message the server refused
//! before its end (nested past the depth limit) gets no second response
//! from the bytes that follow within it, whatever they are. If it cannot
//! end cleanly (a framing fault, the size limit, the end of stream, the
//! message timer), the connection closes once the one answer is out; if
//! it ends cleanly, the connection goes on. However TCP splits the bytes.

use std::time::Duration;

use jsontp_protocol::machine::{PeerError, ServerConfig, ServerConnection, ServerEvent};
use jsontp_protocol::message::framing::{Scan, Scanner};
use proptest::prelude::*;

use crate::props::{chunks, cuts};
use crate::support::{Clock, echo_response, render_server};

const DEPTH: usize = 8;
const MAX_BYTES: usize = 512;
const GET: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/next\",\"method\":\"GET\",\"headers\":{},\"body\":{\"content\":\"\",\"encoding\":\"identity\"}}\n";

fn config(stream_content: bool) -> ServerConfig {
    let mut config = ServerConfig {
        stream_content,
        ..ServerConfig::default()
    };
    config.limits.message.max_depth = DEPTH;
    config.limits.message.max_message_bytes = MAX_BYTES;
    config
}

/// A request whose `body.meta` opens arrays past the depth limit, its
/// content (`streamed`: long enough to come in pieces when streaming)
/// before them; the message is not closed.
fn too_deep(streamed: bool) -> String {
    let content = if streamed { "c".repeat(300) } else { String::new() };
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/deep\",\"method\":\"PUT\",\"headers\":{{}},\
         \"body\":{{\"encoding\":\"identity\",\"content\":\"{content}\",\"meta\":{}",
        "[".repeat(DEPTH)
    )
}

/// What follows the refusal inside the refused message, and what the
/// connection writes in all.
#[derive(Debug, Clone, Copy)]
enum Tail {
    /// A closer that does not match its opener (D1).
    MismatchedBracket,
    /// A `/` that starts no comment (D1).
    StraySlash,
    /// `*/` outside a comment (D1).
    StrayCommentEnd,
    /// A string that takes the message past the size limit (D3).
    TooLarge,
    /// The end of stream (D1).
    EndOfStream,
    /// The message ends cleanly; a request follows, pipelined.
    CleanEnd,
}

impl Tail {
    fn bytes(self) -> String {
        match self {
            Tail::MismatchedBracket => "]]}".to_owned(),
            Tail::StraySlash => "/x".to_owned(),
            Tail::StrayCommentEnd => "*/".to_owned(),
            Tail::TooLarge => format!("\"{}\"", "x".repeat(MAX_BYTES)),
            Tail::EndOfStream => String::new(),
            Tail::CleanEnd => format!("{}}}}}\n{GET}", "]".repeat(DEPTH)),
        }
    }

    /// The status codes written, in order.
    fn answers(self) -> &'static [u16] {
        match self {
            Tail::CleanEnd => &[400, 200],
            _ => &[400],
        }
    }
}

fn tail() -> impl Strategy<Value = Tail> {
    prop_oneof![
        Just(Tail::MismatchedBracket),
        Just(Tail::StraySlash),
        Just(Tail::StrayCommentEnd),
        Just(Tail::TooLarge),
        Just(Tail::EndOfStream),
        Just(Tail::CleanEnd),
    ]
}

/// What a connection did: the codes it wrote, its events, whether it
/// closed.
#[derive(Debug, PartialEq)]
struct Run {
    codes: Vec<u16>,
    events: Vec<String>,
    /// The responses the peer took, apart: when each is reported depends
    /// on when output is taken, which the split moves; which and in what
    /// order must not.
    sent: Vec<String>,
    closed: bool,
}

/// Feeds the chunks (then the end of stream, if `eof`), answering every
/// request at once and taking every byte written.
fn run(config: ServerConfig, chunks: &[Vec<u8>], eof: bool) -> Run {
    let clock = Clock::new();
    let now = clock.now();
    let mut conn = ServerConnection::new(config, now);
    let mut events = Vec::new();
    let mut sent = Vec::new();
    let mut output = Vec::new();
    // Until nothing moves: taking output brings the reports of what left.
    let mut pump = |conn: &mut ServerConnection| loop {
        let mut moved = false;
        while let Some(event) = conn.next_event(now) {
            moved = true;
            if let ServerEvent::Request { id, request } = &event {
                conn.send_response(*id, echo_response(request), now).unwrap();
            }
            // Pieces depend on the split; the rest must not.
            match event {
                ServerEvent::Content { .. } => {}
                ServerEvent::ResponseSent { .. } => sent.push(render_server(&event)),
                _ => events.push(render_server(&event)),
            }
        }
        let n = conn.pending_output().len();
        output.extend_from_slice(conn.pending_output());
        conn.consume_output(n, now);
        if !moved && n == 0 {
            break;
        }
    };
    for chunk in chunks {
        conn.receive_data(chunk, now);
        pump(&mut conn);
    }
    if eof {
        conn.receive_eof(now);
        pump(&mut conn);
    }
    Run {
        codes: codes(&output),
        events,
        sent,
        closed: conn.is_closed(),
    }
}

/// The status code of every response in `output`.
fn codes(mut output: &[u8]) -> Vec<u16> {
    let mut codes = Vec::new();
    while let Scan::Complete(frame) = Scanner::new().scan(output) {
        let response: serde_json::Value = serde_json::from_slice(&output[frame.range()]).unwrap();
        codes.push(response["status"]["code"].as_u64().unwrap() as u16);
        output = &output[frame.end()..];
    }
    assert!(
        output.iter().all(u8::is_ascii_whitespace),
        "bytes after the responses"
    );
    codes
}

fn rejections(events: &[String]) -> usize {
    events.iter().filter(|e| e.starts_with("peer error")).count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Whatever follows the refusal in the refused message, and however
    /// the bytes are split: one answer for it, and the close unless it
    /// ended cleanly, when the pipelined request behind it is answered too.
    #[test]
    fn a_message_refused_before_its_end_is_answered_once(
        tail in tail(),
        streamed in any::<bool>(),
        cuts in cuts(),
    ) {
        let wire = format!("{}{}", too_deep(streamed), tail.bytes()).into_bytes();
        // The stream ends where the tail says so; otherwise it stays open.
        let eof = matches!(tail, Tail::EndOfStream);
        let whole = run(config(streamed), std::slice::from_ref(&wire), eof);
        prop_assert_eq!(&whole.codes, tail.answers(), "{:?}", whole.events);
        // One report per response written, in order.
        prop_assert_eq!(whole.sent.len(), whole.codes.len(), "{:?}", whole.sent);
        prop_assert_eq!(rejections(&whole.events), 1, "{:?}", whole.events);
        prop_assert_eq!(whole.closed, !matches!(tail, Tail::CleanEnd));
        let bytewise: Vec<Vec<u8>> = wire.iter().map(|&b| vec![b]).collect();
        prop_assert_eq!(&whole, &run(config(streamed), &chunks(&wire, &cuts), eof));
        prop_assert_eq!(&whole, &run(config(streamed), &bytewise, eof));
    }
}

#[test]
fn a_refused_message_that_never_ends_is_closed_by_the_message_timer_without_a_408() {
    // D3: the message timer still bounds the refused message; its end not
    // coming is no reason for a second answer.
    let mut clock = Clock::new();
    let mut conn = ServerConnection::new(config(false), clock.now());
    conn.receive_data(too_deep(false).as_bytes(), clock.now());
    let mut events = Vec::new();
    let mut codes_seen = Vec::new();
    let mut pump = |conn: &mut ServerConnection, clock: &Clock| {
        while let Some(event) = conn.next_event(clock.now()) {
            events.push(event);
        }
        codes_seen.extend(codes(conn.pending_output()));
        let n = conn.pending_output().len();
        conn.consume_output(n, clock.now());
    };
    pump(&mut conn, &clock);
    assert!(!conn.is_closed());
    let deadline = conn.poll_timeout().expect("the message timer");
    assert_eq!(deadline, clock.now().instant + Duration::from_secs(30));
    clock.advance_to(deadline);
    conn.handle_timeout(clock.now());
    pump(&mut conn, &clock);
    assert_eq!(codes_seen, [400]);
    assert!(conn.is_closed());
    let refused = events
        .iter()
        .filter(|e| matches!(e, ServerEvent::PeerError(PeerError::Rejected { .. })))
        .count();
    assert_eq!(refused, 1, "{events:?}");
    assert_eq!(events.last(), Some(&ServerEvent::Closed));
}

#[test]
fn the_one_answer_goes_out_in_turn_before_the_close() {
    // D2: the refusal waits behind an earlier response the application
    // has not given yet; the framing fault after it closes the connection
    // only once both are out.
    let clock = Clock::new();
    let now = clock.now();
    let mut conn = ServerConnection::new(config(false), now);
    conn.receive_data(GET.as_bytes(), now);
    let Some(ServerEvent::Request { id, request }) = conn.next_event(now) else {
        panic!("the first request");
    };
    conn.receive_data(format!("{}]]}}", too_deep(false)).as_bytes(), now);
    while conn.next_event(now).is_some() {}
    assert!(
        conn.pending_output().is_empty(),
        "nothing before the first answer"
    );
    assert!(!conn.is_closed());
    conn.send_response(id, echo_response(&request), now).unwrap();
    while conn.next_event(now).is_some() {}
    assert_eq!(codes(conn.pending_output()), [200, 400]);
    assert!(conn.is_closed());
}
