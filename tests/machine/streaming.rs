//! Streamed content (D19) in both roles: pieces split anywhere give the
//! same content, a rejection after pieces names their exchange, the content
//! limit and the streamed timers hold, and streamed messages written by one
//! machine are read back by the other.

use std::time::Duration;

use jsontp_protocol::machine::{
    ClientConfig, ClientConnection, ClientEvent, ContinuePolicy, Limits, PeerError, RequestId, ServerConfig,
    ServerConnection, ServerEvent, UsageError,
};
use jsontp_protocol::message::Encoding;
use jsontp_protocol::message::codec;
use jsontp_protocol::message::{Body, Method, Request, Response, Status, StatusCode};

use proptest::prelude::*;

use crate::support::{App, Clock, Pair};

fn streaming_server(limits: Limits) -> ServerConfig {
    ServerConfig {
        limits,
        stream_content: true,
        ..ServerConfig::default()
    }
}

fn streaming_client() -> ClientConfig {
    ClientConfig {
        stream_content: true,
        ..ClientConfig::default()
    }
}

/// A request as a streaming sender writes it: `body` last, `content` last
/// in it (D19), the content's text as given.
fn put_message(path: &str, encoding: Encoding, text: &str) -> Vec<u8> {
    let content = serde_json::to_string(text).unwrap();
    put_with_body(
        path,
        &format!("{{\"encoding\":\"{encoding}\",\"content\":{content}}}"),
    )
}

/// A `PUT` of `path` whose `body` is written as given, last.
fn put_with_body(path: &str, body: &str) -> Vec<u8> {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"{path}\",\"method\":\"PUT\",\
         \"headers\":{{}},\"body\":{body}}}\n"
    )
    .into_bytes()
}

/// Some text with every kind of escape and multi-byte characters.
fn sample_text(len: usize) -> String {
    let alphabet = [
        "a",
        "b\"",
        "\\",
        "é",
        "\n",
        "\u{1F600}",
        "\t",
        "x",
        "\u{1}",
        "日本",
    ];
    let mut text = String::new();
    let mut i = 0usize;
    while text.len() < len {
        text.push_str(alphabet[(i * 7 + i / 3) % alphabet.len()]);
        i += 1;
    }
    text
}

/// What the server machine made of `wire`, given in pieces of `chunk`
/// bytes: the content pieces (by id), then every other event.
struct Received {
    content: Vec<u8>,
    piece_ids: Vec<RequestId>,
    largest_piece: usize,
    events: Vec<ServerEvent>,
}

fn receive_in_chunks(config: ServerConfig, wire: &[u8], chunk: usize, clock: &Clock) -> Received {
    let mut server = ServerConnection::new(config, clock.now());
    let mut got = Received {
        content: Vec::new(),
        piece_ids: Vec::new(),
        largest_piece: 0,
        events: Vec::new(),
    };
    let take = |server: &mut ServerConnection, got: &mut Received| {
        while let Some(event) = server.next_event(clock.now()) {
            match event {
                ServerEvent::Content { id, data } => {
                    assert!(!data.is_empty(), "an empty piece");
                    got.largest_piece = got.largest_piece.max(data.len());
                    got.content.extend_from_slice(&data);
                    got.piece_ids.push(id);
                }
                ServerEvent::Request { id, request } => {
                    // The application answers at once, so that the next
                    // request is read.
                    let response = Response::new(Status::new(StatusCode::CREATED, "stored"));
                    server.send_response(id, response, clock.now()).unwrap();
                    got.events.push(ServerEvent::Request { id, request });
                }
                ServerEvent::ContentDiscarded { id } => {
                    // What an application does: the pieces so far are void.
                    got.content.clear();
                    got.events.push(ServerEvent::ContentDiscarded { id });
                }
                other => got.events.push(other),
            }
        }
    };
    for piece in wire.chunks(chunk.max(1)) {
        if server.is_closed() {
            break;
        }
        server.receive_data(piece, clock.now());
        take(&mut server, &mut got);
    }
    take(&mut server, &mut got);
    got
}

fn only_request(got: &Received) -> (RequestId, &Request) {
    let requests: Vec<_> = got
        .events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::Request { id, request } => Some((*id, &**request)),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 1, "{:?}", got.events);
    requests[0]
}

fn rejection(got: &Received) -> (Option<RequestId>, u16, String, bool) {
    got.events
        .iter()
        .find_map(|e| match e {
            ServerEvent::PeerError(PeerError::Rejected {
                id,
                rejection,
                closes,
            }) => Some((
                *id,
                rejection.status().as_u16(),
                rejection.message.clone(),
                *closes,
            )),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no rejection in {:?}", got.events))
}

#[test]
fn identity_content_split_anywhere_arrives_whole_and_the_request_follows() {
    let clock = Clock::new();
    let text = sample_text(300_000);
    let wire = put_message("/big.txt", Encoding::Identity, &text);
    for chunk in [1, 2, 3, 5, 7, 64, 1000, 4096, 65_536, wire.len()] {
        let got = receive_in_chunks(streaming_server(Limits::default()), &wire, chunk, &clock);
        assert!(
            got.content == text.as_bytes(),
            "chunk {chunk}: {} bytes",
            got.content.len()
        );
        let (id, request) = only_request(&got);
        assert!(got.piece_ids.iter().all(|&p| p == id), "chunk {chunk}");
        // The request itself carries no content: it came in pieces.
        assert!(request.body.content().is_empty());
        assert_eq!(request.body.encoding(), Encoding::Identity);
        assert_eq!(request.method, Method::Put);
        assert!(got.largest_piece <= 64 * 1024);
    }
}

#[test]
fn every_split_point_of_a_small_message_gives_the_same_content_in_either_order() {
    let clock = Clock::new();
    let text = "tab\there, quote\" backslash\\ é \u{1F600} end";
    for encoding in [Encoding::Identity, Encoding::Gzip] {
        let content = match encoding {
            Encoding::Identity => text.to_owned(),
            other => codec::encode(text.as_bytes(), other),
        };
        // Encoding first, as streaming senders write it, with its head at
        // the content's start; content first, or before the other fields
        // (D19: any order), held to the message's end, with its head then.
        for wire in [
            put_message("/s", encoding, &content),
            content_first_put("/s", encoding, &content),
            body_first_put("/s", encoding, &content),
        ] {
            each_split_gives(&wire, text.as_bytes(), true, &clock, encoding);
        }
    }
}

/// Every split of `wire` (content in `what`) in two gives the head before
/// any piece (if `head`), `content` in pieces, then the one request, and
/// nothing else.
fn each_split_gives(wire: &[u8], content: &[u8], head: bool, clock: &Clock, what: Encoding) {
    for cut in 0..=wire.len() {
        let mut server = ServerConnection::new(streaming_server(Limits::default()), clock.now());
        let mut got = Vec::new();
        let mut heads = Vec::new();
        let mut requests = 0;
        for part in [&wire[..cut], &wire[cut..]] {
            server.receive_data(part, clock.now());
            while let Some(event) = server.next_event(clock.now()) {
                match event {
                    ServerEvent::ContentHead { .. } => heads.push(got.len()),
                    ServerEvent::Content { data, .. } => got.extend(data),
                    ServerEvent::Request { .. } => requests += 1,
                    other => panic!("{what} cut {cut}: {other:?}"),
                }
            }
        }
        assert!(got == content, "{what} cut {cut}");
        assert_eq!(requests, 1, "{what} cut {cut}");
        let expected: &[usize] = if head { &[0] } else { &[] };
        assert_eq!(heads, expected, "{what} cut {cut}: heads, by content before them");
    }
}

#[test]
fn compressed_content_is_decoded_piece_by_piece() {
    let clock = Clock::new();
    let original: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i % 251) as u8 ^ (i / 4096) as u8)
        .collect();
    for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
        let wire = put_message("/bin", encoding, &codec::encode(&original, encoding));
        for chunk in [13, 16 * 1024] {
            let got = receive_in_chunks(streaming_server(Limits::default()), &wire, chunk, &clock);
            assert_eq!(got.content.len(), original.len(), "{encoding} {chunk}");
            assert!(got.content == original, "{encoding} {chunk}");
            only_request(&got);
        }
    }
}

#[test]
fn content_that_breaks_mid_stream_is_refused_at_the_end_and_names_its_pieces() {
    let clock = Clock::new();
    // Incompressible, so that pieces go out long before the fault.
    let original: Vec<u8> = (0..300_000u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut text = codec::encode(&original, Encoding::Gzip);
    // Base64 broken well after the first pieces went out.
    let at = text.len() - 20;
    text.replace_range(at..at + 1, "*");
    let mut wire = put_message("/bad", Encoding::Gzip, &text);
    // The connection goes on: a good request follows.
    wire.extend(put_message("/good", Encoding::Identity, "fine"));
    let got = receive_in_chunks(streaming_server(Limits::default()), &wire, 4096, &clock);
    let (id, status, message, closes) = rejection(&got);
    assert_eq!(status, 400);
    assert!(
        message.contains("body.content") && message.contains("base64"),
        "{message}"
    );
    assert!(!closes);
    // The refusal names the exchange its pieces carried: they are discarded.
    let id = id.expect("the refusal names its exchange");
    assert!(got.piece_ids.iter().filter(|&&p| p == id).count() > 1);
    let (next, request) = only_request(&got);
    assert_eq!(request.resource.path(), "/good");
    assert!(next > id);
}

#[test]
fn a_header_that_fails_after_the_content_refuses_the_request_as_a_whole_message_would() {
    let clock = Clock::new();
    let text = sample_text(100_000);
    let wire = format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/x\",\"method\":\"PUT\",\
         \"body\":{{\"encoding\":\"identity\",\"content\":{}}},\"headers\":{{\"accept\":7}}}}",
        serde_json::to_string(&text).unwrap()
    );
    let streamed = receive_in_chunks(streaming_server(Limits::default()), wire.as_bytes(), 999, &clock);
    let whole = receive_in_chunks(ServerConfig::default(), wire.as_bytes(), 999, &clock);
    let (id, status, message, _) = rejection(&streamed);
    let (_, whole_status, whole_message, _) = rejection(&whole);
    assert_eq!((status, &message), (whole_status, &whole_message));
    assert_eq!(status, 400);
    assert!(id.is_some());
    // The content came before the headers, so it was held (D19); once the
    // message ended its head did not read, and none of it was handed out.
    assert!(streamed.piece_ids.is_empty(), "{:?}", streamed.piece_ids.len());
    assert_eq!(heads(&streamed), 0);
}

#[test]
fn content_past_the_limit_is_413_and_close_without_decoding_on() {
    let clock = Clock::new();
    let limits = Limits {
        max_content_bytes: 1 << 20,
        ..Limits::default()
    };
    // A bomb: 200 MiB of zeros in a few hundred KB of gzip.
    let zeros = vec![0u8; 200 << 20];
    let wire = put_message("/bomb", Encoding::Gzip, &codec::encode(&zeros, Encoding::Gzip));
    drop(zeros);
    let got = receive_in_chunks(streaming_server(limits), &wire, 64 * 1024, &clock);
    let (_, status, message, closes) = rejection(&got);
    assert_eq!(status, 413, "{message}");
    assert!(closes);
    assert!(got.content.len() <= 1 << 20);
    assert!(got.largest_piece <= 64 * 1024);
    assert!(got.events.iter().any(|e| matches!(e, ServerEvent::Closed)));
}

/// A request whose body writes `content` before `encoding`, as senders
/// that do not stream write it (the published crate 0.1.3 among them).
fn content_first_put(path: &str, encoding: Encoding, text: &str) -> Vec<u8> {
    let content = serde_json::to_string(text).unwrap();
    put_with_body(
        path,
        &format!("{{\"content\":{content},\"encoding\":\"{encoding}\"}}"),
    )
}

/// A `PUT` written `body` first, `encoding` before `content` in it, and
/// every other field after it: its content arrives before its head.
fn body_first_put(path: &str, encoding: Encoding, text: &str) -> Vec<u8> {
    let content = serde_json::to_string(text).unwrap();
    format!(
        "{{\"body\":{{\"encoding\":\"{encoding}\",\"content\":{content}}},\"jsontp\":\"1.0\",\
         \"type\":\"request\",\"resource\":\"{path}\",\"method\":\"PUT\",\"headers\":{{}}}}\n"
    )
    .into_bytes()
}

fn small_message_limit(max_message_bytes: usize) -> Limits {
    Limits {
        message: jsontp_protocol::message::MessageLimits {
            max_message_bytes,
            ..Default::default()
        },
        ..Limits::default()
    }
}

/// Bytes no encoding compresses.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x853c_49e6_748f_ea9b_u64;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

fn discards(got: &Received) -> usize {
    got.events
        .iter()
        .filter(|e| matches!(e, ServerEvent::ContentDiscarded { .. }))
        .count()
}

#[test]
fn d19_identity_content_before_its_encoding_comes_in_pieces_within_the_message_limit() {
    let clock = Clock::new();
    let text = sample_text(200_000);
    let wire = content_first_put("/x", Encoding::Identity, &text);
    assert!(wire.len() > 200_000 && wire.len() < 1 << 20);
    for chunk in [1, 7, 100, 4096, wire.len()] {
        let got = receive_in_chunks(streaming_server(Limits::default()), &wire, chunk, &clock);
        assert!(got.content == text.as_bytes(), "chunk {chunk}");
        let (id, request) = only_request(&got);
        assert!(got.piece_ids.iter().all(|&p| p == id), "chunk {chunk}");
        assert_eq!(discards(&got), 0, "chunk {chunk}");
        assert_eq!(request.body.encoding(), Encoding::Identity);
        assert!(got.largest_piece <= 64 * 1024);
    }
}

#[test]
fn d19_compressed_content_before_its_encoding_is_held_then_decoded_in_pieces() {
    let clock = Clock::new();
    let original: Vec<u8> = sample_text(300_000).into_bytes();
    for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
        let wire = content_first_put("/c", encoding, &codec::encode(&original, encoding));
        for chunk in [13, 4096, wire.len()] {
            let got = receive_in_chunks(streaming_server(Limits::default()), &wire, chunk, &clock);
            assert!(
                got.content == original,
                "{encoding} {chunk}: {} bytes",
                got.content.len()
            );
            let (id, request) = only_request(&got);
            assert!(got.piece_ids.iter().all(|&p| p == id), "{encoding} {chunk}");
            // Nothing went out before the encoding was known.
            assert_eq!(discards(&got), 0, "{encoding} {chunk}");
            assert_eq!(request.body.encoding(), encoding);
            assert!(got.largest_piece <= 64 * 1024);
        }
    }
}

#[test]
fn d19_content_before_its_encoding_past_the_message_limit_is_413_as_if_held() {
    // Only content written last streams past the message limit: written
    // first, the message is bounded as a whole (D3, D19), whatever the
    // encoding.
    let clock = Clock::new();
    // The message received by a streaming server, and by one that holds
    // every message whole.
    let streamed_and_held = |wire: &[u8]| {
        let limits = small_message_limit(10_000);
        let held = ServerConfig {
            limits,
            ..ServerConfig::default()
        };
        (
            receive_in_chunks(streaming_server(limits), wire, 999, &clock),
            receive_in_chunks(held, wire, 999, &clock),
        )
    };
    let answered = |r: &Received| r.events.iter().any(|e| matches!(e, ServerEvent::Request { .. }));
    let original = noise(20_000);
    let gzip = codec::encode(&original, Encoding::Gzip);
    let identity = "a".repeat(20_000);
    for (encoding, text) in [
        (Encoding::Gzip, gzip.as_str()),
        (Encoding::Identity, identity.as_str()),
    ] {
        // Before its encoding, or before the fields that make its head:
        // held the same way.
        for wire in [
            content_first_put("/big", encoding, text),
            body_first_put("/big", encoding, text),
        ] {
            let (streamed, held) = streamed_and_held(&wire);
            let (_, status, message, closes) = rejection(&streamed);
            assert_eq!((status, closes), (413, true), "{encoding}: {message}");
            assert_eq!(message, rejection(&held).2, "{encoding}");
            assert!(streamed.piece_ids.is_empty(), "{encoding}: no piece went out");
            assert!(!answered(&streamed));
        }
        // Written last, the same content streams past the message limit.
        let (streamed, _) = streamed_and_held(&put_message("/big", encoding, text));
        assert!(answered(&streamed), "{encoding}: {:?}", streamed.events);
    }
    // Just within the limit with its envelope, and just past it (the
    // newline after the message is not part of it).
    let envelope = content_first_put("/big", Encoding::Identity, "").len() - 1;
    for (len, fits) in [(10_000 - envelope, true), (10_001 - envelope, false)] {
        let (got, whole) =
            streamed_and_held(&content_first_put("/big", Encoding::Identity, &"a".repeat(len)));
        assert_eq!(answered(&got), fits, "{len}");
        assert_eq!(answered(&whole), fits, "{len}: as if held");
    }
}

#[test]
fn d19_corrupt_content_before_its_encoding_is_refused_at_the_end_and_the_connection_goes_on() {
    let clock = Clock::new();
    let mut text = codec::encode(sample_text(5_000).as_bytes(), Encoding::Gzip);
    let at = text.len() / 2;
    text.replace_range(at..at + 1, "*");
    let mut wire = content_first_put("/bad", Encoding::Gzip, &text);
    wire.extend(content_first_put("/good", Encoding::Identity, "fine"));
    let got = receive_in_chunks(streaming_server(Limits::default()), &wire, 512, &clock);
    let (id, status, message, closes) = rejection(&got);
    assert_eq!((status, closes), (400, false), "{message}");
    assert!(
        message.contains("body.content") && message.contains("base64"),
        "{message}"
    );
    assert!(id.is_some());
    let (_, request) = only_request(&got);
    assert_eq!(request.resource.path(), "/good");
    assert_eq!(got.content, b"fine");
}

#[test]
fn d19_content_before_its_encoding_is_held_to_the_content_limit_of_what_it_decodes_to() {
    let clock = Clock::new();
    let limits = Limits {
        max_content_bytes: 1_000,
        ..Limits::default()
    };
    // As identity, 5,000 bytes: past the limit.
    let identity = content_first_put("/i", Encoding::Identity, &"a".repeat(5_000));
    let got = receive_in_chunks(streaming_server(limits), &identity, 256, &clock);
    let (_, status, message, closes) = rejection(&got);
    assert_eq!((status, closes), (413, true), "{message}");
    assert!(message.contains("1000"), "{message}");
    // Its text is longer than the limit, but it decodes to 900 bytes:
    // within it.
    let original = noise(900);
    let text = codec::encode(&original, Encoding::Gzip);
    assert!(text.len() > 1_000);
    let gzip = content_first_put("/g", Encoding::Gzip, &text);
    let got = receive_in_chunks(streaming_server(limits), &gzip, 256, &clock);
    assert!(got.content == original, "{:?}", got.events);
    only_request(&got);
}

/// How a streamed request fed with simulated time ([`paced`]) ended.
#[derive(Debug, PartialEq, Eq)]
enum Paced {
    /// Refused at this many seconds, with this status and message.
    Refused(u64, u16, String),
    /// Handed to the application whole, this many content bytes.
    Handed(usize),
    /// Neither, when the bytes ran out.
    Open,
}

/// Feeds a streaming server `steps`, each some bytes at a moment (from
/// the start), acting on every deadline on the way as a runtime would.
fn paced(steps: impl IntoIterator<Item = (Duration, Vec<u8>)>) -> Paced {
    let mut clock = Clock::new();
    let start = clock.now().instant;
    let mut server = ServerConnection::new(streaming_server(Limits::default()), clock.now());
    let mut content = 0;
    let mut outcome = |server: &mut ServerConnection, clock: &Clock| {
        while let Some(event) = server.next_event(clock.now()) {
            match event {
                ServerEvent::PeerError(PeerError::Rejected { rejection, .. }) => {
                    let at = clock.now().instant.duration_since(start).as_secs();
                    let status = rejection.status().as_u16();
                    return Some(Paced::Refused(at, status, rejection.message));
                }
                ServerEvent::Content { data, .. } => content += data.len(),
                ServerEvent::Request { .. } => return Some(Paced::Handed(content)),
                _ => {}
            }
        }
        None
    };
    for (at, bytes) in steps {
        let next = start + at;
        while let Some(deadline) = server.poll_timeout().filter(|&d| d <= next) {
            clock.advance_to(deadline);
            server.handle_timeout(clock.now());
            if let Some(done) = outcome(&mut server, &clock) {
                return done;
            }
        }
        clock.advance_to(next);
        server.receive_data(&bytes, clock.now());
        if let Some(done) = outcome(&mut server, &clock) {
            return done;
        }
    }
    Paced::Open
}

/// Feeds a streamed request at `rate` bytes per `every`, with simulated
/// time; returns the moment (seconds) and status of any rejection.
fn trickle(bytes_per_step: usize, every: Duration, total: usize) -> Option<(u64, u16)> {
    let wire = put_message("/slow", Encoding::Identity, &"z".repeat(total));
    let steps = wire
        .chunks(bytes_per_step)
        .enumerate()
        .map(|(i, piece)| (every * (i as u32 + 1), piece.to_vec()));
    match paced(steps) {
        Paced::Refused(at, status, _) => Some((at, status)),
        Paced::Handed(_) | Paced::Open => None,
    }
}

/// The head of a `deflate` `PUT` as a streaming sender writes it, up to
/// the content's opening quote.
fn deflate_head(path: &str) -> Vec<u8> {
    let whole = put_with_body(path, "{\"encoding\":\"deflate\",\"content\":\"\"}");
    let cut = whole.len() - "\"}}\n".len();
    whole[..cut].to_vec()
}

/// A `deflate` content written a part at a time, as a sender that flushes
/// does: each part's compressed bytes end on a byte boundary (a sync
/// flush), and its base64 text on a whole group, so that the next part
/// continues the same stream and the same text.
struct DeflateText {
    compress: flate2::Compress,
    carry: Vec<u8>,
}

impl DeflateText {
    fn new() -> DeflateText {
        DeflateText {
            compress: flate2::Compress::new(flate2::Compression::fast(), true),
            carry: Vec::new(),
        }
    }

    /// The text of `content`, compressed and flushed.
    fn content(&mut self, content: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(content.len() + 64);
        let mut taken = 0;
        loop {
            out.reserve(64 * 1024);
            let before = self.compress.total_in();
            self.compress
                .compress_vec(&content[taken..], &mut out, flate2::FlushCompress::Sync)
                .expect("compress");
            taken += (self.compress.total_in() - before) as usize;
            if taken == content.len() && out.len() < out.capacity() {
                break;
            }
        }
        self.text(&out)
    }

    /// The text of `count` empty stored blocks: compressed bytes that
    /// decode to nothing, five bytes each, valid after a flush.
    fn empty_blocks(&mut self, count: usize) -> Vec<u8> {
        self.text(&[0, 0, 0, 0xff, 0xff].repeat(count))
    }

    /// The rest of the text: the stream's end, the last group padded.
    fn finish(&mut self) -> Vec<u8> {
        use base64::Engine;
        let mut end = Vec::with_capacity(64);
        while self
            .compress
            .compress_vec(&[], &mut end, flate2::FlushCompress::Finish)
            .expect("compress")
            != flate2::Status::StreamEnd
        {
            end.reserve(64);
        }
        self.carry.extend_from_slice(&end);
        let text = base64::engine::general_purpose::STANDARD.encode(&self.carry);
        self.carry.clear();
        text.into_bytes()
    }

    fn text(&mut self, compressed: &[u8]) -> Vec<u8> {
        use base64::Engine;
        self.carry.extend_from_slice(compressed);
        let whole = self.carry.len() / 3 * 3;
        let text = base64::engine::general_purpose::STANDARD.encode(&self.carry[..whole]);
        self.carry.drain(..whole);
        text.into_bytes()
    }
}

#[test]
fn a_streamed_message_may_take_longer_than_the_message_timeout_while_it_keeps_pace() {
    // 32 KiB/s for 64 s: twice D3's 30 s, within D19's rate.
    assert_eq!(trickle(32 * 1024, Duration::from_secs(1), 64 * 32 * 1024), None);
}

#[test]
fn a_streamed_message_that_pauses_too_long_is_408() {
    // The first bytes at 40 s, then 40 s of silence: the 30 s gap runs
    // out at 70 s, before the rate would (200,000 bytes buy 12 s).
    let got = trickle(200_000, Duration::from_secs(40), 1_000_000);
    assert_eq!(got, Some((70, 408)));
}

#[test]
fn a_streamed_message_slower_than_the_average_rate_is_408_after_its_first_30_s() {
    // 8 KiB every second from 1 s on: never a long gap, half the rate D19
    // asks, so it fails once the first 30 s are over (at 31 s: the message
    // began at 1 s).
    let got = trickle(8 * 1024, Duration::from_secs(1), 2_000_000);
    assert_eq!(got, Some((31, 408)));
}

#[test]
fn d19_a_burst_then_empty_compressed_blocks_is_408_once_the_burst_has_paid_its_30_s() {
    // 4 MiB of content at once, then 32 KiB/s of empty deflate blocks:
    // twice D19's rate on the wire, nothing decoded. The burst pays for
    // 30 s at most; the blocks for nothing.
    let mut deflate = DeflateText::new();
    let mut first = deflate_head("/held");
    first.extend(deflate.content(&vec![b'x'; 4 << 20]));
    let mut steps = vec![(Duration::ZERO, first)];
    for second in 1..=120 {
        steps.push((
            Duration::from_secs(second),
            deflate.empty_blocks(32 * 1024 / 20 * 3),
        ));
    }
    let Paced::Refused(at, status, message) = paced(steps) else {
        panic!("kept alive by bytes that decode to nothing")
    };
    assert_eq!((at, status), (30, 408));
    assert!(message.contains("decoded to nothing for 30 s"), "{message}");
}

#[test]
fn d19_a_burst_then_a_trickle_of_content_is_408_once_the_burst_has_paid_its_30_s() {
    // 8 MiB at once would pay for 512 s of D19's rate if it counted whole;
    // then a byte every 10 s, never a gap of 30 s.
    let wire = put_message("/trickled", Encoding::Identity, &"z".repeat((8 << 20) + 100));
    let head = wire.len() - 100 - "\"}}\n".len();
    let mut steps = vec![(Duration::ZERO, wire[..head].to_vec())];
    for (i, byte) in wire[head..].iter().enumerate() {
        steps.push((Duration::from_secs(10 * (i as u64 + 1)), vec![*byte]));
    }
    let Paced::Refused(at, status, message) = paced(steps) else {
        panic!("a burst held the message open")
    };
    assert_eq!((at, status), (30, 408));
    assert!(
        message.contains("came too slowly") && message.contains("16384 bytes/s"),
        "{message}"
    );
}

#[test]
fn d19_a_slow_upload_above_the_rate_is_never_cut_whatever_its_wire_bytes() {
    // 21 KiB of content a second for 100 s, compressed to a few bytes on
    // the wire: the pace is what decodes.
    let mut deflate = DeflateText::new();
    let mut steps = vec![(Duration::ZERO, deflate_head("/compressible"))];
    for second in 1..=100u64 {
        let content = format!("{second:>20}\n").repeat(1024);
        steps.push((Duration::from_secs(second), deflate.content(content.as_bytes())));
    }
    let mut last = deflate.finish();
    last.extend_from_slice(b"\"}}\n");
    steps.push((Duration::from_secs(101), last));
    assert_eq!(paced(steps), Paced::Handed(100 * 21 * 1024));
    // Above the rate with pauses of up to 25 s: 600 KiB every 25 s, each
    // burst paying for the pause after it.
    let wire = put_message("/jittery", Encoding::Identity, &"j".repeat(12 * 600 * 1024));
    let steps = wire
        .chunks(600 * 1024)
        .enumerate()
        .map(|(i, piece)| (Duration::from_secs(25 * i as u64), piece.to_vec()));
    assert_eq!(paced(steps), Paced::Handed(12 * 600 * 1024));
}

fn content_head(encoding: Encoding) -> Body {
    Body::empty().with_encoding(encoding).unwrap()
}

#[test]
fn a_streamed_response_reaches_a_streaming_client_in_every_encoding() {
    let original: Vec<u8> = sample_text(700_000).into_bytes();
    for encoding in Encoding::ALL {
        let mut wire = Pair::new(streaming_client(), ServerConfig::default(), App::Hold);
        let first = wire
            .client
            .send_request(Request::new(Method::Get, "/file".parse().unwrap()), wire.now())
            .unwrap();
        let second = wire
            .client
            .send_request(Request::new(Method::Get, "/after".parse().unwrap()), wire.now())
            .unwrap();
        wire.shuttle();
        let mut ids = Vec::new();
        while let Some(event) = wire.server.next_event(wire.now()) {
            if let ServerEvent::Request { id, .. } = event {
                ids.push(id);
            }
        }
        assert_eq!(ids.len(), 2);
        let head = Response::new(Status::new(StatusCode::OK, "here")).with_body(content_head(encoding));
        wire.server.send_response_head(ids[0], head, wire.now()).unwrap();
        // The second answer waits until the streamed one ends (D2).
        wire.server
            .send_response(
                ids[1],
                Response::new(Status::new(StatusCode::OK, "later")),
                wire.now(),
            )
            .unwrap();
        assert_eq!(wire.server.content_room(ids[1]), 0);
        let mut sent = 0;
        let mut received = Vec::new();
        let mut responses = Vec::new();
        let mut heads = Vec::new();
        loop {
            let room = wire.server.content_room(ids[0]);
            if sent < original.len() && room > 0 {
                let end = (sent + room.min(10_000)).min(original.len());
                wire.server
                    .send_content(ids[0], &original[sent..end], wire.now())
                    .unwrap();
                sent = end;
                if sent == original.len() {
                    wire.server.end_content(ids[0], wire.now()).unwrap();
                }
            }
            // The output owed stays bounded whatever the content's size.
            assert!(wire.server.pending_output().len() < 512 * 1024);
            wire.shuttle();
            let mut moved = false;
            while let Some(event) = wire.client.next_event(wire.now()) {
                moved = true;
                match event {
                    // The head first: a download knows its status before its bytes.
                    ClientEvent::ContentHead { id, head } => {
                        assert!(received.is_empty(), "{encoding}: the head after content");
                        assert_eq!(head.status.code, StatusCode::OK);
                        assert_eq!(head.body.encoding(), encoding);
                        heads.push(id);
                    }
                    ClientEvent::Content { id, data } => {
                        assert_eq!(id, first);
                        assert_eq!(heads, [first], "{encoding}: content before its head");
                        received.extend(data);
                    }
                    ClientEvent::Response { id, response, .. } => responses.push((id, response)),
                    other => panic!("{encoding}: {other:?}"),
                }
            }
            if responses.len() == 2
                || (!moved && sent == original.len() && wire.server.pending_output().is_empty())
            {
                break;
            }
        }
        assert!(
            received == original,
            "{encoding}: {} of {} bytes",
            received.len(),
            original.len()
        );
        assert_eq!(responses.len(), 2, "{encoding}");
        assert_eq!(responses[0].0, first);
        assert!(responses[0].1.body.content().is_empty());
        assert_eq!(responses[1].0, second);
        assert_eq!(responses[1].1.status.human_message, "later");
    }
}

/// Streams `original` from a client to a streaming server; returns what the
/// server's pieces held and the request it saw, after checking that the
/// head of its content came once, before every piece, and says what the
/// request says but its content.
fn upload(original: &[u8], encoding: Encoding, expect_continue: bool) -> (Vec<u8>, Request) {
    let server = ServerConfig {
        continue_policy: ContinuePolicy::AutoAccept,
        ..streaming_server(Limits::default())
    };
    let mut wire = Pair::new(ClientConfig::default(), server, App::Hold);
    let mut head = Request::new(Method::Put, "/up".parse().unwrap()).with_body(content_head(encoding));
    if expect_continue {
        head.headers = head.headers.with_expect_continue(true);
    }
    let id = wire.client.send_request_head(head, wire.now()).unwrap();
    let mut sent = 0;
    let mut ended = false;
    let mut pieces = Vec::new();
    let mut request = None;
    let mut heads = Vec::new();
    for _ in 0..100_000 {
        let room = wire.client.content_room(id);
        if !ended && room > 0 {
            let end = (sent + room.min(7_777)).min(original.len());
            wire.client
                .send_content(id, &original[sent..end], wire.now())
                .unwrap();
            sent = end;
            if sent == original.len() {
                wire.client.end_content(id, wire.now()).unwrap();
                ended = true;
            }
        }
        wire.shuttle();
        while let Some(event) = wire.server.next_event(wire.now()) {
            match event {
                ServerEvent::ContentHead { id, head } => heads.push((id, head, pieces.len())),
                ServerEvent::Content { data, .. } => pieces.extend(data),
                ServerEvent::ContentDiscarded { .. } => pieces.clear(),
                ServerEvent::Request { id, request: got } => request = Some((id, got)),
                other => panic!("{other:?}"),
            }
        }
        while wire.client.next_event(wire.now()).is_some() {}
        if request.is_some() {
            break;
        }
    }
    let (id, request) = request.expect("the request arrived");
    // With or without a handshake: AutoAccept asked no one at the
    // handshake, so the full request's head comes as any other's (D10).
    assert_eq!(heads.len(), 1, "one head: {heads:?}");
    let (head_id, head, before) = heads.pop().unwrap();
    assert_eq!(
        (head_id, before),
        (id, 0),
        "the head names the exchange, before its pieces"
    );
    assert_eq!(head, request, "the request is its head, its content streamed");
    (pieces, *request)
}

#[test]
fn a_streamed_upload_reaches_a_streaming_server() {
    let text = sample_text(500_000).into_bytes();
    let binary: Vec<u8> = (0..400_000u32).map(|i| (i * 31 % 256) as u8).collect();
    for (original, encoding) in [
        (&text, Encoding::Identity),
        (&binary, Encoding::Gzip),
        (&binary, Encoding::Deflate),
        (&binary, Encoding::Br),
    ] {
        for expect_continue in [false, true] {
            let (got, request) = upload(original, encoding, expect_continue);
            assert!(&got == original, "{encoding} expect={expect_continue}");
            assert_eq!(request.body.encoding(), encoding);
            assert!(!request.headers.expect_continue());
        }
    }
}

#[test]
fn content_waits_for_its_turn_and_identity_must_be_text() {
    let mut wire = Pair::new(ClientConfig::default(), ServerConfig::default(), App::Hold);
    let head = Request::new(Method::Put, "/a".parse().unwrap()).with_body(content_head(Encoding::Identity));
    let id = wire.client.send_request_head(head, wire.now()).unwrap();
    assert!(wire.client.content_room(id) > 0);
    // A request queued behind a streamed one waits for its end.
    let other = wire
        .client
        .send_request(Request::new(Method::Get, "/b".parse().unwrap()), wire.now())
        .unwrap();
    assert_eq!(wire.client.content_room(other), 0);
    assert_eq!(
        wire.client.send_content(other, b"x", wire.now()),
        Err(UsageError::NotStreaming(other))
    );
    let before = wire.client.pending_output().len();
    assert!(!String::from_utf8_lossy(wire.client.pending_output()).contains("/b"));
    // Half of a two-byte character is held for the next piece.
    wire.client
        .send_content(id, "é".as_bytes().get(..1).unwrap(), wire.now())
        .unwrap();
    wire.client
        .send_content(id, &"é".as_bytes()[1..], wire.now())
        .unwrap();
    assert!(wire.client.pending_output().len() > before);
    assert_eq!(
        wire.client.send_content(id, &[0xff, 0xfe], wire.now()),
        Err(UsageError::NotText(id))
    );
    assert!(wire.client.is_closed());
}

#[test]
fn the_first_request_of_a_handshake_hands_out_none_of_its_ignored_content() {
    // D10: the first request's body is ignored, so its content is decoded
    // and checked (D5's order) but never handed out: no head, no piece,
    // nothing to discard; the application is asked about the handshake.
    let clock = Clock::new();
    let mut wire = put_message("/h", Encoding::Identity, &sample_text(200_000));
    let at = wire.windows(12).position(|w| w == b"\"headers\":{}").unwrap();
    wire.splice(
        at..at + 12,
        b"\"headers\":{\"expect\":\"100-continue\"}".iter().copied(),
    );
    let config = ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..streaming_server(Limits::default())
    };
    let got = receive_in_chunks(config, &wire, 8192, &clock);
    assert!(got.piece_ids.is_empty(), "{} pieces", got.piece_ids.len());
    assert_eq!(discards(&got), 0, "{:?}", got.events);
    assert_eq!(heads(&got), 0, "{:?}", got.events);
    let asked = got
        .events
        .iter()
        .any(|e| matches!(e, ServerEvent::ContinueRequested { .. }));
    assert!(asked, "{:?}", got.events);
}

#[test]
fn a_message_still_arriving_that_nests_too_deep_is_refused_at_once() {
    // D3: the depth limit is met at level 65, not when (or if) the message
    // ends: the peer is answered at once; the rest of the message is
    // dropped and the connection goes on.
    let clock = Clock::new();
    let mut server = ServerConnection::new(ServerConfig::default(), clock.now());
    server.receive_data(b"{\"a\":", clock.now());
    server.receive_data("[".repeat(64).as_bytes(), clock.now());
    let mut events = Vec::new();
    while let Some(event) = server.next_event(clock.now()) {
        events.push(event);
    }
    let refused = events.iter().find_map(|e| match e {
        ServerEvent::PeerError(PeerError::Rejected {
            rejection, closes, ..
        }) => Some((rejection.status().as_u16(), rejection.message.clone(), *closes)),
        _ => None,
    });
    let (status, message, closes) = refused.expect("refused before the message ends");
    assert_eq!(status, 400);
    assert!(
        message.contains("deeper than the limit of 64 levels"),
        "{message}"
    );
    assert!(!closes);
    assert!(String::from_utf8_lossy(server.pending_output()).contains("\"code\":400"));
    // The message ends, then a good request follows and is served.
    let rest = format!(
        "{}}}{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/next\",\"method\":\"GET\",\"headers\":{{}},\"body\":{{\"encoding\":\"identity\",\"content\":\"\"}}}}",
        "]".repeat(64)
    );
    server.receive_data(rest.as_bytes(), clock.now());
    let mut served = false;
    while let Some(event) = server.next_event(clock.now()) {
        if let ServerEvent::Request { request, .. } = event {
            served = request.resource.path() == "/next";
        }
    }
    assert!(served);
}

/// Streamed requests ended before their turn all go out, in order, when
/// the handshake in front of them ends, however many wait: sending them is
/// a loop, not a call per request on the machine's stack.
#[test]
fn thousands_of_ended_streams_queued_behind_a_handshake_go_out_in_order() {
    const QUEUED: usize = 20_000;
    let run = || {
        let mut clock = Clock::new();
        let mut client = ClientConnection::new(ClientConfig::default(), clock.now());
        let mut first = Request::new(Method::Put, "/first".parse().unwrap()).with_body(Body::text("x"));
        first.headers = first.headers.with_expect_continue(true);
        client.send_request(first, clock.now()).unwrap();
        for _ in 0..QUEUED {
            let head =
                Request::new(Method::Put, "/q".parse().unwrap()).with_body(content_head(Encoding::Identity));
            let id = client.send_request_head(head, clock.now()).unwrap();
            client.end_content(id, clock.now()).unwrap();
        }
        let before = client.pending_output().len();
        // No 100 comes: the wait runs out and the full request goes (D10),
        // then everything behind it.
        clock.advance(ClientConfig::default().continue_wait);
        client.handle_timeout(clock.now());
        let out = String::from_utf8_lossy(&client.pending_output()[before..]).into_owned();
        assert!(out.starts_with("{\"jsontp\""), "{}", &out[..out.len().min(200)]);
        assert_eq!(out.matches("\"resource\":\"/first\"").count(), 1);
        assert_eq!(out.matches("\"resource\":\"/q\"").count(), QUEUED);
    };
    // A small stack, as an embedding thread may have: the number queued
    // must not decide whether the machine survives.
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

/// A response whose body writes `content` before `encoding`, as the
/// published crate's server writes it.
fn content_first_response(encoding: Encoding, text: &str) -> Vec<u8> {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"response\",\"status\":{{\"code\":200,\"formal-message\":\"OK\",\
         \"human-message\":\"fine\"}},\"resource\":\"/f\",\"headers\":{{\"date\":\"2025-11-22T00:00:00Z+0000\",\
         \"language\":\"en-US\"}},\"body\":{{\"content\":{},\"encoding\":\"{encoding}\"}}}}\n",
        serde_json::to_string(text).unwrap()
    )
    .into_bytes()
}

#[test]
fn d19_a_streaming_client_takes_content_before_its_encoding_too() {
    let clock = Clock::new();
    let original = sample_text(50_000).into_bytes();
    let gzip = codec::encode(&original, Encoding::Gzip);
    let identity = String::from_utf8(original.clone()).unwrap();
    for (encoding, text) in [
        (Encoding::Identity, identity.as_str()),
        (Encoding::Gzip, gzip.as_str()),
    ] {
        let mut client = ClientConnection::new(streaming_client(), clock.now());
        let id = client
            .send_request(Request::new(Method::Get, "/f".parse().unwrap()), clock.now())
            .unwrap();
        let mut content = Vec::new();
        let mut response = None;
        let mut heads = 0;
        for piece in content_first_response(encoding, text).chunks(1000) {
            client.receive_data(piece, clock.now());
            while let Some(event) = client.next_event(clock.now()) {
                match event {
                    // Held to the message's end, the content still comes
                    // after the head, read from the whole message.
                    ClientEvent::ContentHead { id: of, head } => {
                        assert_eq!(of, id);
                        assert!(content.is_empty(), "{encoding}: the head after content");
                        assert_eq!(head.body.encoding(), encoding);
                        heads += 1;
                    }
                    ClientEvent::Content { id: of, data } => {
                        assert_eq!(of, id);
                        assert!(response.is_none(), "content after the response");
                        content.extend(data);
                    }
                    ClientEvent::Response {
                        id: of, response: r, ..
                    } => {
                        assert_eq!(of, id);
                        response = Some(r);
                    }
                    other => panic!("{encoding}: {other:?}"),
                }
            }
        }
        let response = response.unwrap_or_else(|| panic!("{encoding}: no response"));
        assert_eq!(heads, 1, "{encoding}: one head");
        assert_eq!(response.body.encoding(), encoding);
        assert!(content == original, "{encoding}: {} bytes", content.len());
    }
}

// ---------------------------------------------------------------------------
// The head of a streamed request (D19: `body` last, `content` last in it).

fn heads(got: &Received) -> usize {
    got.events
        .iter()
        .filter(|e| matches!(e, ServerEvent::ContentHead { .. }))
        .count()
}

/// Every event of `wire` given in `chunk`-byte pieces, in order, the
/// application answering each request at once.
fn events_in_chunks(config: ServerConfig, wire: &[u8], chunk: usize, clock: &Clock) -> Vec<ServerEvent> {
    let mut server = ServerConnection::new(config, clock.now());
    let mut events = Vec::new();
    for piece in wire.chunks(chunk) {
        server.receive_data(piece, clock.now());
        while let Some(event) = server.next_event(clock.now()) {
            if let ServerEvent::Request { id, .. } = &event {
                let response = Response::new(Status::new(StatusCode::CREATED, "stored"));
                server.send_response(*id, response, clock.now()).unwrap();
            }
            events.push(event);
        }
    }
    events
}

#[test]
fn d19_a_put_written_body_last_gives_its_head_then_its_pieces_then_the_request() {
    let clock = Clock::new();
    let text = sample_text(200_000);
    let content = serde_json::to_string(&text).unwrap();
    // A body key before the content is in the head; one after it is not.
    let wire = format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/up.txt\",\"method\":\"PUT\",\
         \"headers\":{{\"content-type\":\"text/plain\",\"authorization\":\"s3cret\"}},\
         \"body\":{{\"encoding\":\"identity\",\"meta\":{{\"k\":[1,2]}},\"content\":{content},\"after\":true}}}}\n"
    );
    for chunk in [1, 7, 4096, wire.len()] {
        let events = events_in_chunks(
            streaming_server(Limits::default()),
            wire.as_bytes(),
            chunk,
            &clock,
        );
        let Some(ServerEvent::ContentHead { id, head }) = events.first() else {
            panic!("chunk {chunk}: the head first: {:?}", events.first());
        };
        let Some(ServerEvent::Request { id: last, request }) = events.last() else {
            panic!("chunk {chunk}: the request last");
        };
        assert_eq!(id, last, "chunk {chunk}");
        let mut content: Vec<u8> = Vec::new();
        for event in &events[1..events.len() - 1] {
            match event {
                ServerEvent::Content { id: piece, data } if piece == id => content.extend(data),
                other => panic!("chunk {chunk}: {other:?} between the head and the request"),
            }
        }
        assert!(content == text.as_bytes(), "chunk {chunk}");
        assert!(head.body.content().is_empty());
        assert_eq!(head.body.extra().keys().collect::<Vec<_>>(), ["meta"]);
        assert_eq!(request.body.extra().len(), 2);
        // The rest is the request's own.
        let mut whole = head.clone();
        whole.body = request.body.clone();
        assert_eq!(&whole, request, "chunk {chunk}");
    }
}

#[test]
fn d19_content_held_to_its_messages_end_gets_its_head_before_its_pieces() {
    // Content written before its encoding, or before the fields that make
    // the head (D19: any order), is held: no piece and no head while the
    // message goes on; at its end the head, read from the whole message,
    // then the pieces, then the request, so that the application decides
    // what becomes of the content before any of it is handed on.
    let clock = Clock::new();
    let text = sample_text(200_000);
    for wire in [
        content_first_put("/late.txt", Encoding::Identity, &text),
        body_first_put("/late.txt", Encoding::Identity, &text),
    ] {
        let mut server = ServerConnection::new(streaming_server(Limits::default()), clock.now());
        server.receive_data(&wire[..wire.len() - 2], clock.now());
        let early = server.next_event(clock.now());
        assert!(early.is_none(), "before the message's end: {early:?}");
        for chunk in [1000, 4096, wire.len()] {
            let got = receive_in_chunks(streaming_server(Limits::default()), &wire, chunk, &clock);
            assert!(got.content == text.as_bytes(), "chunk {chunk}");
            let (id, request) = only_request(&got);
            assert_eq!(heads(&got), 1, "chunk {chunk}: {:?}", got.events);
            let head = got.events.iter().find_map(|e| match e {
                ServerEvent::ContentHead { id: of, head } if *of == id => Some(head),
                _ => None,
            });
            assert_eq!(
                head.map(|h| &**h),
                Some(request),
                "chunk {chunk}: the head is the request"
            );
            assert!(got.piece_ids.iter().all(|&p| p == id), "chunk {chunk}");
        }
    }
}

/// A `PUT` whose fields before its content are given: `top` (the
/// top-level fields before `headers`), `headers`, and `body` (the body's
/// keys before `content`); a long content, then nothing but what closes.
fn envelope_then_content(top: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "{{{top},\"headers\":{headers},\"body\":{{{body},\"content\":\"{}\"}}}}\n",
        "x".repeat(100_000)
    )
    .into_bytes()
}

const TOP: &str = "\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/f\",\"method\":\"PUT\"";
const ENCODING: &str = "\"encoding\":\"identity\"";

#[test]
fn d19_no_head_nor_piece_for_a_request_refused_for_what_came_before_its_content() {
    let clock = Clock::new();
    let mut limits = Limits::default();
    limits.message.max_headers = 2;
    let config = streaming_server(limits);
    // The sound envelope has a head.
    let sound = envelope_then_content(TOP, "{}", ENCODING);
    let got = receive_in_chunks(config.clone(), &sound, 4096, &clock);
    only_request(&got);
    assert_eq!(heads(&got), 1);

    let with_top = |top: &str| envelope_then_content(top, "{}", ENCODING);
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        // D5 level 1: syntax, duplicates, lone surrogates, null and
        // numbers JSON cannot carry.
        ("syntax", with_top(&format!("{TOP},,")), 400),
        ("duplicate", with_top(&format!("{TOP},\"method\":\"PUT\"")), 400),
        (
            "duplicate header",
            envelope_then_content(TOP, "{\"accept\":\"*/*\",\"Accept\":\"*/*\"}", ENCODING),
            400,
        ),
        ("lone surrogate", with_top(&TOP.replace("/f", "/\\ud800")), 400),
        (
            "Infinity",
            envelope_then_content(TOP, "{}", &format!("{ENCODING},\"n\":Infinity")),
            400,
        ),
        // Level 2.
        ("version form", with_top(&TOP.replace("1.0", "1.0.0")), 400),
        ("version", with_top(&TOP.replace("1.0", "2.0")), 505),
        (
            "too many headers",
            envelope_then_content(
                TOP,
                "{\"accept\":\"*/*\",\"accept-language\":\"*\",\"accept-encoding\":\"identity\"}",
                ENCODING,
            ),
            431,
        ),
        // Level 3.
        ("type", with_top(&TOP.replace("\"request\"", "\"response\"")), 400),
        ("method", with_top(&TOP.replace("PUT", "FETCH")), 400),
        ("resource", with_top(&TOP.replace("/f", "http://h/f")), 400),
        ("unknown field", with_top(&format!("{TOP},\"extra\":1")), 400),
        (
            "unknown header",
            envelope_then_content(TOP, "{\"x-custom\":\"1\"}", ENCODING),
            400,
        ),
        (
            "null header",
            envelope_then_content(TOP, "{\"accept\":null}", ENCODING),
            400,
        ),
        (
            "null body key",
            envelope_then_content(TOP, "{}", &format!("{ENCODING},\"meta\":null")),
            400,
        ),
        // Level 4 too.
        (
            "expectation",
            envelope_then_content(TOP, "{\"expect\":\"coffee\"}", ENCODING),
            501,
        ),
    ];
    for (what, wire, status) in cases {
        let got = receive_in_chunks(config.clone(), &wire, 4096, &clock);
        assert_eq!(rejection(&got).1, status, "{what}: {:?}", rejection(&got));
        assert_eq!(heads(&got), 0, "{what}: {:?}", got.events);
        // Refused whatever its content: it was held, checked and dropped,
        // never handed out to be stored (D19).
        assert!(got.piece_ids.is_empty(), "{what}: {} pieces", got.piece_ids.len());
    }
}

/// Every event of `wire` given in `chunk`-byte pieces, under `policy`: the
/// application accepts every handshake it is asked about and answers each
/// request at once.
fn events_accepting(policy: ContinuePolicy, wire: &[u8], chunk: usize, clock: &Clock) -> Vec<ServerEvent> {
    let config = ServerConfig {
        continue_policy: policy,
        ..streaming_server(Limits::default())
    };
    let mut server = ServerConnection::new(config, clock.now());
    let mut events = Vec::new();
    for piece in wire.chunks(chunk) {
        server.receive_data(piece, clock.now());
        while let Some(event) = server.next_event(clock.now()) {
            match &event {
                ServerEvent::ContinueRequested { id, .. } => {
                    server.accept_continue(*id, clock.now()).unwrap()
                }
                ServerEvent::Request { id, .. } => {
                    let response = Response::new(Status::new(StatusCode::CREATED, "stored"));
                    server.send_response(*id, response, clock.now()).unwrap();
                }
                _ => {}
            }
            events.push(event);
        }
    }
    events
}

#[test]
fn d19_the_full_request_of_a_handshake_has_a_head_when_no_one_was_asked_at_the_handshake() {
    // D10: under AutoAccept the application never saw the exchange, so the
    // full request's head comes before its content, as for any streamed
    // request, under the handshake's id. Under Ask the application decided
    // from the first request: it is not asked again. A full request naming
    // another resource is refused (400), so it has no head either.
    let clock = Clock::new();
    let first = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/h\",\"method\":\"PUT\",\"headers\":{\"expect\":\"100-continue\"},\"body\":{}}\n";
    for policy in [ContinuePolicy::AutoAccept, ContinuePolicy::Ask] {
        for path in ["/h", "/other"] {
            let mut wire = first.as_bytes().to_vec();
            wire.extend(put_message(path, Encoding::Identity, &sample_text(100_000)));
            let events = events_accepting(policy, &wire, 4096, &clock);
            let heads: Vec<_> = events
                .iter()
                .enumerate()
                .filter_map(|(at, e)| match e {
                    ServerEvent::ContentHead { id, head } => Some((at, *id, head)),
                    _ => None,
                })
                .collect();
            let first_piece = events
                .iter()
                .position(|e| matches!(e, ServerEvent::Content { .. }));
            let request = events.iter().find_map(|e| match e {
                ServerEvent::Request { id, request } if id.index() == 0 => Some(request),
                _ => None,
            });
            assert_eq!(request.is_some(), path == "/h", "{policy:?} {path}: {events:?}");
            match (policy, request) {
                (ContinuePolicy::AutoAccept, Some(request)) => {
                    assert_eq!(heads.len(), 1, "{policy:?} {path}: one head");
                    let (at, id, head) = heads[0];
                    assert_eq!(id.index(), 0, "the handshake's exchange");
                    let first_piece = first_piece.expect("the full request's content streams");
                    assert!(at < first_piece, "the head comes before any piece");
                    assert_eq!(head, request, "the head is the full request but its content");
                    assert!(!head.headers.expect_continue(), "{head:?}");
                }
                (_, Some(_)) => {
                    assert!(heads.is_empty(), "{policy:?} {path}: {heads:?}");
                    assert!(first_piece.is_some(), "{policy:?}: decided at the handshake");
                }
                // Refused (400) whatever its content: none of it handed out.
                (_, None) => assert_eq!((heads.len(), first_piece), (0, None), "{policy:?} {path}"),
            }
        }
    }
}

/// Each field of a request before its content, sound or not: what a
/// property picks from.
const VERSIONS: [&str; 3] = ["\"1.0\"", "\"9.0\"", "1"];
const TYPES: [&str; 2] = ["\"request\"", "\"reply\""];
const METHODS: [&str; 3] = ["\"PUT\"", "\"POST\"", "\"put\""];
const RESOURCES: [&str; 3] = ["\"/a/b.txt\"", "\"../x\"", "\"\""];
const HEADERS: [&str; 4] = [
    "{}",
    "{\"content-type\":\"text/plain\"}",
    "{\"content-type\":7}",
    "{\"expect\":\"100-continue\"}",
];
const BODIES: [&str; 4] = [
    "\"encoding\":\"identity\"",
    "\"encoding\":\"identity\",\"meta\":{\"a\":1}",
    "\"encoding\":\"identity\",\"encoding\":\"identity\"",
    "\"encoding\":\"identity\",\"meta\":NaN",
];

/// One of `n` variants, the sound one (the first) most often, so that
/// about a third of the requests are handed on.
fn pick(n: usize) -> impl Strategy<Value = usize> {
    prop_oneof![4 => Just(0), 1 => 0..n]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// With nothing after the content, the head comes exactly when the
    /// request does, and is the request but its content: a request refused
    /// for what came before its content never had a head.
    #[test]
    fn d19_a_head_comes_exactly_for_the_requests_handed_on(
        version in pick(VERSIONS.len()),
        kind in pick(TYPES.len()),
        method in pick(METHODS.len()),
        resource in pick(RESOURCES.len()),
        headers in pick(HEADERS.len()),
        body in pick(BODIES.len()),
        chunk in 1usize..5000,
    ) {
        let top = format!(
            "\"jsontp\":{},\"type\":{},\"resource\":{},\"method\":{}",
            VERSIONS[version], TYPES[kind], RESOURCES[resource], METHODS[method]
        );
        let wire = envelope_then_content(&top, HEADERS[headers], BODIES[body]);
        let clock = Clock::new();
        let config = ServerConfig {
            continue_policy: ContinuePolicy::Ask,
            ..streaming_server(Limits::default())
        };
        let events = events_in_chunks(config, &wire, chunk, &clock);
        let head = events.iter().find_map(|e| match e {
            ServerEvent::ContentHead { head, .. } => Some(head),
            _ => None,
        });
        let request = events.iter().find_map(|e| match e {
            ServerEvent::Request { request, .. } => Some(request),
            _ => None,
        });
        prop_assert_eq!(head.is_some(), request.is_some(), "{:?}", events);
        if let (Some(head), Some(request)) = (head, request) {
            prop_assert_eq!(head, request);
        }
    }
}

/// JSON5's string forms (D4) mean the same in streamed content as in a
/// message read whole, whatever the quoting of the key: `(text as
/// written, what it means)`.
const JSON5_STRING_FORMS: [(&str, &str); 8] = [
    ("Hello, \\\nworld", "Hello, world"),
    ("a\\\r\nb\\\rc", "abc"),
    ("a\\\u{2028}b", "ab"),
    ("\\x41\\xe9", "Aé"),
    ("\\v\\'\\0!", "\u{b}'\0!"),
    ("\\q\\ \\é", "q é"),
    ("tab\traw", "tab\traw"),
    ("\\uD83D\\uDE00", "\u{1F600}"),
];

#[test]
fn json5_string_forms_decode_in_streamed_content_as_in_every_other_string() {
    let clock = Clock::new();
    for (written, meant) in JSON5_STRING_FORMS {
        let body = format!("{{\"encoding\":\"identity\",\"content\":\"{written}\"}}");
        each_split_gives(
            &put_with_body("/s", &body),
            meant.as_bytes(),
            true,
            &clock,
            Encoding::Identity,
        );
        // The same text read whole, with the key quoted, unquoted, or the
        // string single-quoted.
        for body in [
            body.clone(),
            format!("{{encoding:\"identity\",content:\"{written}\"}}"),
            format!("{{'encoding':'identity','content':'{written}'}}"),
        ] {
            let wire = put_with_body("/s", &body);
            let parsed = jsontp_protocol::message::parse_request(
                &wire,
                jsontp_protocol::message::RequestContext::Fresh,
                &Default::default(),
            )
            .unwrap_or_else(|r| panic!("{body}: {}", r.message));
            assert_eq!(parsed.body.content(), meant.as_bytes(), "{body}");
        }
    }
}

#[test]
fn json5_string_faults_in_streamed_content_are_400_as_in_a_whole_message() {
    let clock = Clock::new();
    for written in ["a\\1", "\\01", "\\x4z", "raw\nline"] {
        let body = format!("{{\"encoding\":\"identity\",\"content\":\"{written}\"}}");
        let wire = put_with_body("/s", &body);
        let got = receive_in_chunks(streaming_server(Limits::default()), &wire, 3, &clock);
        let (_, status, message, _) = rejection(&got);
        assert_eq!(status, 400, "{written:?}: {message}");
        assert!(
            jsontp_protocol::message::parse_request(
                &wire,
                jsontp_protocol::message::RequestContext::Fresh,
                &Default::default()
            )
            .is_err(),
            "{written:?} read whole"
        );
    }
}
