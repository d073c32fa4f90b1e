//! The bodies of the fuzz targets, shared with `tests/fuzz_corpus.rs`, which
//! replays the committed corpus through ordinary `cargo test`.
//!
//! Each function takes arbitrary bytes and checks that nothing panics and
//! that the invariants named in its doc hold.
#![allow(dead_code, clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use jsontp::machine::{
    ClientConfig, ClientConnection, ContinuePolicy, Now, ServerConfig, ServerConnection, ServerEvent,
    UsageError,
};
use jsontp::message::framing::{Scan, Scanner};
use jsontp::message::{
    Body, Date, Encoding, MessageLimits, Method, RequestContext, Response, Status, StatusCode, Validation,
    codec, parse_request, parse_response,
};

fn now(offset: Duration) -> Now {
    thread_local! { static START: Instant = Instant::now(); }
    Now {
        instant: START.with(|s| *s) + offset,
        wall: Date::from_unix_seconds(1_700_000_000 + offset.as_secs() as i64),
    }
}

/// Parsing never panics, and every request that parses survives a round
/// trip through serialization unchanged.
pub fn parse_message(data: &[u8]) {
    let limits = MessageLimits::default();
    for context in [RequestContext::Fresh, RequestContext::AfterContinue] {
        if let Ok(request) = parse_request(data, context, &limits) {
            let again =
                parse_request(&request.to_bytes(), context, &limits).expect("a request we wrote must parse");
            assert_eq!(again, request, "request round trip");
        }
    }
    for validation in [Validation::Strict, Validation::Lenient] {
        if let Ok(parsed) = parse_response(data, validation, &limits) {
            let again = parse_response(&parsed.message.to_bytes(), validation, &limits)
                .expect("a response we wrote must parse");
            assert_eq!(again.message, parsed.message, "response round trip");
        }
    }
}

/// Feeding the scanner a byte at a time gives the same answer as feeding it
/// the whole buffer (D1: incremental, never dependent on TCP's splits).
pub fn scanner(data: &[u8]) {
    let whole = Scanner::new().scan(data);
    let mut incremental = Scanner::new();
    let mut last = Scan::Partial;
    for end in 1..=data.len() {
        last = incremental.scan(&data[..end]);
        if last != Scan::Partial {
            break;
        }
    }
    if data.is_empty() {
        return;
    }
    assert_eq!(
        last, whole,
        "byte-at-a-time scan differs from the whole-buffer scan"
    );
}

/// The first byte picks chunk sizes, the 100-continue policy, whether time
/// jumps past every timer, and whether the peer reads slowly. A server
/// connection fed arbitrary bytes never panics, never moves an exchange
/// against its table (debug assertions), writes only valid responses, and
/// never queues more than the bound on output owed allows (D3).
pub fn server_connection(data: &[u8]) {
    let Some((&knob, input)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(knob % 64) + 1;
    let config = ServerConfig {
        continue_policy: if knob & 0x40 != 0 {
            ContinuePolicy::Ask
        } else {
            ContinuePolicy::AutoAccept
        },
        ..ServerConfig::default()
    };
    let mut conn = ServerConnection::new(config, now(Duration::ZERO));
    // A slow peer takes a few bytes per piece; a fast one everything.
    let most = if knob & 0x20 != 0 { 7 } else { usize::MAX };
    let mut written = Vec::new();
    let mut t = Duration::ZERO;
    for piece in input.chunks(chunk) {
        t += Duration::from_millis(10);
        if conn.wants_read() {
            conn.receive_data(piece, now(t));
        }
        serve_events(&mut conn, now(t));
        check_output_bound(&conn, input.len());
        take_output(&mut conn, &mut written, most, now(t));
    }
    conn.receive_eof(now(t));
    serve_events(&mut conn, now(t));
    if knob & 0x80 != 0 {
        conn.handle_timeout(now(t + Duration::from_secs(3600)));
        serve_events(&mut conn, now(t + Duration::from_secs(3600)));
    }
    take_output(&mut conn, &mut written, usize::MAX, now(t));
    // A stall (D3) drops what was pending: a response may end cut short.
    if knob & 0x80 == 0 || most == usize::MAX {
        check_responses(&written);
    }
}

fn serve_events(conn: &mut ServerConnection, now: Now) {
    while let Some(event) = conn.next_event(now) {
        // Closed: a timer closed the connection since the event was queued.
        let answered = match event {
            ServerEvent::Request { id, request } => {
                let body = Body::text(format!("{} {}", request.method, request.resource));
                let response = Response::new(Status::new(StatusCode::OK, "ok")).with_body(body);
                conn.send_response(id, response, now)
            }
            ServerEvent::ContinueRequested { id, request } => {
                if request.method == Method::Put {
                    let refusal = Response::new(Status::new(StatusCode::UNAUTHORIZED, "no"));
                    conn.send_response(id, refusal, now)
                } else {
                    conn.accept_continue(id, now)
                }
            }
            _ => Ok(()),
        };
        assert!(
            matches!(answered, Ok(()) | Err(UsageError::Closed)),
            "answering an event just handed out: {answered:?}"
        );
    }
}

/// What one piece of the socket takes: everything, or (a slow peer) at
/// most `most` bytes.
fn take_output(conn: &mut ServerConnection, into: &mut Vec<u8>, most: usize, at: Now) {
    let out = conn.pending_output();
    let n = out.len().min(most);
    into.extend_from_slice(&out[..n]);
    conn.consume_output(n, at);
}

/// D3: the output pending is at most the response being written, the
/// bound on what is queued beyond it, and the one response (with its `100`)
/// whose request was read while the bound still held. Every response here
/// is at most twice the input (the resource echoed, and named in the body)
/// plus its envelope.
fn check_output_bound(conn: &ServerConnection, input_len: usize) {
    let bound = ServerConfig::default().limits.max_output_owed;
    let response = 2 * input_len + 1024;
    assert!(
        conn.pending_output().len() <= bound + 3 * response,
        "{} bytes pending",
        conn.pending_output().len()
    );
}

/// Every message in `written` must be a strictly valid response.
fn check_responses(mut written: &[u8]) {
    let limits = MessageLimits {
        max_message_bytes: usize::MAX,
        max_decoded_body: usize::MAX,
        ..MessageLimits::default()
    };
    while !written.iter().all(u8::is_ascii_whitespace) {
        match Scanner::new().scan(written) {
            Scan::Complete(frame) => {
                let (start, end) = (frame.start(), frame.end());
                if let Err(e) = parse_response(&written[start..end], Validation::Strict, &limits) {
                    panic!(
                        "the server wrote an invalid response ({e}): {}",
                        String::from_utf8_lossy(&written[start..end])
                    );
                }
                written = &written[end..];
            }
            other => panic!("the server wrote bytes that are not a message: {other:?}"),
        }
    }
}

/// A client connection fed arbitrary bytes as responses never panics.
pub fn client_connection(data: &[u8]) {
    let Some((&knob, input)) = data.split_first() else {
        return;
    };
    let config = ClientConfig {
        validation: if knob & 1 == 0 {
            Validation::Strict
        } else {
            Validation::Lenient
        },
        ..ClientConfig::default()
    };
    let mut conn = ClientConnection::new(config, now(Duration::ZERO));
    for path in ["/a", "/b"] {
        let mut request = jsontp::message::Request::new(Method::Get, path.parse().expect("a valid resource"));
        if knob & 2 != 0 {
            request.headers = request.headers.with_expect_continue(true);
        }
        let _ = conn.send_request(request, now(Duration::ZERO));
    }
    let mut sink = Vec::new();
    let chunk = usize::from(knob >> 2) + 1;
    let mut t = Duration::ZERO;
    for piece in input.chunks(chunk) {
        t += Duration::from_millis(10);
        let n = conn.pending_output().len();
        sink.extend_from_slice(conn.pending_output());
        conn.consume_output(n, now(t));
        if conn.wants_read() {
            conn.receive_data(piece, now(t));
        }
        while conn.next_event(now(t)).is_some() {}
    }
    conn.receive_eof(now(t));
    conn.handle_timeout(now(t + Duration::from_secs(5)));
    while conn.next_event(now(t)).is_some() {}
}

/// Decoding never panics and never returns more than the limit.
pub fn body_decode(data: &[u8]) {
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let encoding = Encoding::ALL[usize::from(knob % 4)];
    let limit = 1 << (8 + (knob >> 4) % 12);
    let content = String::from_utf8_lossy(rest);
    if let Ok(bytes) = codec::decode(&content, encoding, limit) {
        assert!(
            bytes.len() <= limit,
            "decode returned {} bytes over a limit of {limit}",
            bytes.len()
        );
    }
    // Our own encodings always decode back.
    if let Ok(body) = Body::new(rest.to_vec(), encoding) {
        let encoded = codec::encode(body.content(), encoding);
        let decoded = codec::decode(&encoded, encoding, usize::MAX).expect("our encoding decodes");
        assert_eq!(decoded, rest);
    }
}
