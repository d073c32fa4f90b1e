//! The bodies of the fuzz targets, shared with `tests/fuzz_corpus.rs`, which
//! replays the committed corpus through ordinary `cargo test`.
//!
//! Each function takes arbitrary bytes and checks that nothing panics and
//! that the invariants named in its doc hold.
#![allow(dead_code)]

#[path = "pair.rs"]
mod pair;

use std::time::Duration;

use pair::{App, Pair, SimClock};

use jsontp_protocol::machine::{
    ClientConfig, ClientConnection, ClientEvent, ContinuePolicy, Now, ServerConfig, ServerConnection,
    ServerEvent, UsageError,
};
use jsontp_protocol::message::framing::{Scan, Scanner};
use jsontp_protocol::message::{
    Body, Encoding, MessageLimits, Method, RequestContext, Response, Status, StatusCode, Validation, codec,
    parse_request, parse_response,
};

/// Parsing never panics, every request that parses survives a round
/// trip through serialization unchanged, the reader of message text
/// reads it as serde_json does where serde_json reads it, as the json5
/// crate does where only it does, and refuses the rest, and the one-pass reader of whole messages frames and reads them as the
/// lexer and the parsers do, or leaves them alone.
pub fn parse_message(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        assert!(
            jsontp_protocol::message::oracles::text_reader_agrees(text),
            "the text reader and its references (serde_json, json5) read {text:?} differently"
        );
    }
    assert!(
        jsontp_protocol::message::oracles::quick_reader_agrees(data),
        "the one-pass reader and the general path read {:?} differently",
        String::from_utf8_lossy(data)
    );
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
        // D19, content in any order.
        stream_content: knob & 0x10 != 0,
        ..ServerConfig::default()
    };
    let clock = SimClock::new();
    let now = |t| clock.at(t);
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
            ServerEvent::Content { data, .. } => {
                assert!(
                    !data.is_empty() && data.len() <= 64 * 1024,
                    "a piece of {} bytes",
                    data.len()
                );
                Ok(())
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
    let bound = ServerConfig::default().max_output_owed;
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

/// A client connection, streaming content or not, fed arbitrary bytes as
/// responses never panics and hands out content in pieces of at most
/// 64 KiB.
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
        // D19, content in any order.
        stream_content: knob & 4 != 0,
        ..ClientConfig::default()
    };
    let clock = SimClock::new();
    let now = |t| clock.at(t);
    let mut conn = ClientConnection::new(config, now(Duration::ZERO));
    for path in ["/a", "/b"] {
        let mut request =
            jsontp_protocol::message::Request::new(Method::Get, path.parse().expect("a valid resource"));
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
        take_client_events(&mut conn, now(t));
    }
    conn.receive_eof(now(t));
    conn.handle_timeout(now(t + Duration::from_secs(5)));
    take_client_events(&mut conn, now(t));
}

fn take_client_events(conn: &mut ClientConnection, at: Now) {
    while let Some(event) = conn.next_event(at) {
        if let ClientEvent::Content { data, .. } = event {
            assert!(
                !data.is_empty() && data.len() <= 64 * 1024,
                "a piece of {} bytes",
                data.len()
            );
        }
    }
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

/// The content decoder in pieces (D19): the first byte picks the encoding,
/// the limit and the most output per call, the next two the cut points.
/// It never panics, never gives more than `max_out` per call nor more than
/// the limit in all, and agrees with the whole-string decoder on every text
/// whose JSON form needs no escape.
pub fn content_pieces(data: &[u8]) {
    use jsontp_protocol::message::ContentDecoder;
    use jsontp_protocol::message::codec::DecodeError;
    let [knob, a, b, text @ ..] = data else {
        return;
    };
    let encoding = Encoding::ALL[usize::from(knob % 4)];
    let limit = 1usize << (4 + (knob >> 2) % 16);
    let max_out = usize::from(*knob >> 6) * 500 + 7;
    let mut cuts = [
        usize::from(*a) * text.len() / 256,
        usize::from(*b) * text.len() / 256,
    ];
    cuts.sort_unstable();
    let mut decoder = ContentDecoder::new(encoding, limit);
    let mut out = Vec::new();
    let mut feed = |piece: &[u8], out: &mut Vec<u8>| -> Result<(), DecodeError> {
        let before = out.len();
        decoder.decode(piece, out, max_out)?;
        assert!(out.len() - before <= max_out, "a call gave more than max_out");
        while decoder.has_pending() {
            let before = out.len();
            decoder.decode(&[], out, max_out)?;
            assert!(out.len() - before <= max_out, "a call gave more than max_out");
        }
        Ok(())
    };
    let mut outcome = feed(&text[..cuts[0]], &mut out)
        .and_then(|()| feed(&text[cuts[0]..cuts[1]], &mut out))
        .and_then(|()| feed(&text[cuts[1]..], &mut out));
    if outcome.is_ok() {
        outcome = loop {
            let before = out.len();
            match decoder.finish(&mut out, max_out) {
                Ok(true) => break Ok(()),
                Ok(false) => assert!(out.len() - before <= max_out),
                Err(e) => break Err(e),
            }
        };
    }
    assert!(out.len() <= limit, "decoded past the limit");
    // Text that JSON writes as it is: the whole-string decoder must agree.
    let plain = text.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\');
    if let (true, Ok(whole)) = (plain, std::str::from_utf8(text)) {
        match (codec::decode(whole, encoding, limit), &outcome) {
            (Ok(bytes), Ok(())) => assert_eq!(bytes, out, "pieces and whole decode differently"),
            (Err(_), Err(_)) => {}
            (whole, pieces) => panic!("whole {whole:?} but pieces {pieces:?}"),
        }
    }
}

/// The lexer with content runs (D19) frames every stream exactly as the
/// lexer without them, and the runs are exactly the content's text: put
/// back where they were taken out, they rebuild the stream.
pub fn scan_differential(data: &[u8]) {
    let plain = Scanner::new().scan(data);
    let mut scanner = Scanner::new().with_content_runs();
    let mut buffer = data.to_vec();
    // (where in the reduced buffer, the bytes) of every run taken out.
    let mut taken: Vec<(usize, Vec<u8>)> = Vec::new();
    let found = loop {
        match scanner.scan(&buffer) {
            Scan::Content(run) => {
                assert!(run.start() <= run.end() && run.end() <= buffer.len());
                let bytes: Vec<u8> = buffer.drain(run.range()).collect();
                taken.push((run.start(), bytes));
            }
            other => break other,
        }
    };
    let removed: usize = taken.iter().map(|(_, bytes)| bytes.len()).sum();
    // Put the runs back, last first, and the stream is whole again.
    let mut rebuilt = buffer.clone();
    for (at, bytes) in taken.iter().rev() {
        rebuilt.splice(*at..*at, bytes.iter().copied());
    }
    assert_eq!(rebuilt, data, "the runs are not the bytes they were taken from");
    match (plain, found) {
        (Scan::Complete(a), Scan::Complete(b)) => {
            assert_eq!(a.start(), b.start());
            assert_eq!(a.end(), b.end() + removed, "the message ends elsewhere");
            assert_eq!(a.max_depth(), b.max_depth());
            // What the parsers make of the whole message, and of the
            // envelope with its content taken out, agree on where it ends
            // and whether it is an object at all.
            let limits = MessageLimits::default();
            let whole = parse_request(&data[a.range()], RequestContext::Fresh, &limits);
            let envelope = parse_request(&buffer[b.range()], RequestContext::Fresh, &limits);
            if let (Ok(whole), Ok(envelope)) = (whole, envelope) {
                assert_eq!(whole.method, envelope.method);
                assert_eq!(whole.resource, envelope.resource);
            }
        }
        (Scan::Error { fault: x, .. }, Scan::Error { fault: y, .. }) => assert_eq!(x, y),
        (Scan::Partial, Scan::Partial) => {}
        // The limit counts the envelope only once content streams.
        (_, Scan::TooLarge { .. }) | (Scan::TooLarge { .. }, _) => {}
        (a, b) => panic!("without runs {a:?}, with runs {b:?}"),
    }
}

/// A client and a server machine wired together, both streaming content
/// (D19), driven by the bytes: each byte is an operation (send a request,
/// whole or streamed; give a piece of content; end it; deliver some bytes
/// either way; let time pass; the application answers, whole or
/// streamed). Nothing panics, the machines never refuse their own moves
/// (debug assertions), every request gets at most one final outcome, and
/// outcomes come in request order.
pub fn pair(data: &[u8]) {
    use jsontp_protocol::machine::{ClientEvent, PeerError, RequestId};
    use jsontp_protocol::message::Request;
    let Some((&knob, ops)) = data.split_first() else {
        return;
    };
    let mut client_config = ClientConfig {
        stream_content: knob & 1 != 0,
        ..ClientConfig::default()
    };
    client_config.limits.max_content_bytes = 1 << 16;
    let mut server_config = ServerConfig {
        stream_content: knob & 2 != 0,
        continue_policy: if knob & 4 != 0 {
            ContinuePolicy::Ask
        } else {
            ContinuePolicy::AutoAccept
        },
        ..ServerConfig::default()
    };
    server_config.limits.max_content_bytes = 1 << 16;
    // The operations move bytes and time themselves: the application
    // answers below, by hand.
    let mut pair = Pair::new(client_config, server_config, App::Hold);
    let mut sent: Vec<RequestId> = Vec::new();
    let mut outcomes: Vec<RequestId> = Vec::new();
    let mut uploading: Option<RequestId> = None;
    let mut unanswered: Vec<RequestId> = Vec::new();
    let mut streaming_reply: Option<RequestId> = None;
    for &op in ops {
        let arg = usize::from(op >> 3);
        match op & 7 {
            0 => {
                let encoding = Encoding::ALL[arg % 4];
                let mut request = Request::new(Method::Put, "/p".parse().expect("a resource"));
                if arg & 8 != 0 {
                    request.headers = request.headers.with_expect_continue(true);
                }
                let body = Body::empty().with_encoding(encoding).expect("empty content");
                let result = if arg & 16 != 0 && uploading.is_none() {
                    let now = pair.now();
                    pair.client
                        .send_request_head(request.with_body(body), now)
                        .inspect(|&id| {
                            uploading = Some(id);
                        })
                } else {
                    let content = Body::new(vec![b'a'; arg * 37], encoding).expect("text");
                    pair.client.send_request(request.with_body(content), pair.now())
                };
                if let Ok(id) = result {
                    sent.push(id);
                }
            }
            1 => {
                if let Some(id) = uploading {
                    let piece = vec![b'x'; arg * 113];
                    let _ = pair.client.send_content(id, &piece, pair.now());
                }
            }
            2 => {
                if let Some(id) = uploading.take() {
                    let _ = pair.client.end_content(id, pair.now());
                }
            }
            3 => {
                pair.move_to_server(arg * 97 + 1);
            }
            4 => {
                pair.move_to_client(arg * 97 + 1);
            }
            5 => pair.advance(Duration::from_millis(1 << (arg % 24))),
            6 => {
                while let Some(event) = pair.server.next_event(pair.now()) {
                    match event {
                        ServerEvent::Request { id, .. } => unanswered.push(id),
                        ServerEvent::ContinueRequested { id, .. } => {
                            let _ = pair.server.accept_continue(id, pair.now());
                        }
                        _ => {}
                    }
                }
                if let Some(id) = streaming_reply {
                    if arg % 2 == 0 {
                        let _ = pair.server.send_content(id, &vec![b'r'; arg * 50], pair.now());
                    } else if pair.server.end_content(id, pair.now()).is_ok() {
                        streaming_reply = None;
                    }
                } else if !unanswered.is_empty() {
                    let id = unanswered.remove(0);
                    let response = Response::new(Status::new(StatusCode::OK, "fine"));
                    if arg % 3 == 0 {
                        if pair.server.send_response_head(id, response, pair.now()).is_ok() {
                            streaming_reply = Some(id);
                        }
                    } else {
                        let _ = pair.server.send_response(id, response, pair.now());
                    }
                }
            }
            _ => {}
        }
        while let Some(event) = pair.client.next_event(pair.now()) {
            let id = match event {
                ClientEvent::Response { id, .. } => Some(id),
                ClientEvent::PeerError(PeerError::Rejected { id: Some(id), .. }) => Some(id),
                ClientEvent::PeerError(PeerError::ResourceMismatch { id, .. }) => Some(id),
                _ => None,
            };
            if let Some(id) = id {
                assert!(sent.contains(&id), "an outcome for a request never sent");
                assert!(!outcomes.contains(&id), "two outcomes for one request");
                assert!(
                    outcomes.last().is_none_or(|&last| last < id),
                    "outcomes out of order"
                );
                outcomes.push(id);
            }
        }
        assert!(
            pair.server.pending_output().len() < 4 << 20,
            "the server's output grew unbounded"
        );
    }
}
