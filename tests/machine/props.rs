//! Property tests of the machine:
//!
//! - split invariance: any chunking of a byte stream gives the same events
//!   and the same output bytes (D3: limits checked on every input);
//! - no panic on arbitrary bytes, in either role.

use std::time::Duration;

use jsontp_protocol::machine::{
    ClientConfig, ClientConnection, ServerConfig, ServerConnection, ServerEvent, UsageError,
};
use jsontp_protocol::message::framing::scan;
use jsontp_protocol::message::{Method, Request};
use proptest::prelude::*;

use crate::support::{Clock, echo_response, render_client, render_server};

// ---------------------------------------------------------------------------
// Split invariance and robustness of whole connections.

const GET_A: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/a\",\"method\":\"GET\",\"headers\":{},\"body\":{\"content\":\"\",\"encoding\":\"identity\"}}\n";
const COMMENTED: &str = "{ // a comment with } and \" in it\n \"jsontp\": \"1.0\", \"type\": 'request', /* } */ \"resource\": \"/b}\", \"method\": \"GET\", \"headers\": {}, \"body\": {\"content\": \"x\\\"}\", \"encoding\": \"identity\",},}";
const FIRST_OF_HANDSHAKE: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/up\",\"method\":\"PUT\",\"headers\":{\"expect\":\"100-continue\"},\"body\":{}}";
const FULL_OF_HANDSHAKE: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/up\",\"method\":\"PUT\",\"headers\":{},\"body\":{\"content\":\"data\",\"encoding\":\"identity\"}}";
const BAD_METHOD: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/c\",\"method\":\"FETCH\",\"headers\":{},\"body\":{}}";
const TOO_DEEP: &str = "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}";
const BROKEN_JSON: &str = "{\"jsontp\":1.0.0}";
/// The shape the one-pass reader takes, with whitespace, an array-valued
/// header and a boolean one; and one it leaves to the lexer (an escape).
const TYPICAL: &str = "{ \"jsontp\": \"1.0\", \"type\": \"request\", \"resource\": \"/t?q=1\", \"method\": \"POST\",\r\n \"headers\": {\"accept-encoding\": [\"gzip\", \"identity\"], \"Accept-Language\": \"en-US\", \"ignore-invalid-headers\": true}, \"body\": {\"encoding\": \"identity\", \"content\": \"a=1\"} }\n";
const ESCAPED: &str = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/\\u0065\",\"method\":\"GET\",\"headers\":{},\"body\":{}}";

fn stream_part() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(GET_A.to_owned()),
        2 => Just(TYPICAL.to_owned()),
        1 => Just(ESCAPED.to_owned()),
        2 => Just(COMMENTED.to_owned()),
        1 => Just(format!("{FIRST_OF_HANDSHAKE}\n{FULL_OF_HANDSHAKE}")),
        1 => Just(BAD_METHOD.to_owned()),
        1 => Just(TOO_DEEP.to_owned()),
        1 => Just(BROKEN_JSON.to_owned()),
        1 => "[ \t\r\n]{1,4}",
    ]
}

/// How a stream ends: cleanly, with garbage (framing error), with an
/// oversize message, or cut in the middle of a message.
fn stream_end() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("garbage".to_owned()),
        Just("{\"jsontp\":\"1.0\",\"padding\":\"".to_owned() + &"x".repeat(700)),
        Just("{\"jsontp\":\"1.0\",\"ty".to_owned()),
    ]
}

/// Cut points, as fractions of the length.
pub fn cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..10_000, 0..12)
}

pub fn chunks(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c * bytes.len() / 10_000).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect()
}

fn small_limits() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.limits.message.max_message_bytes = 512;
    config.max_pipelined = 3;
    config
}

/// Runs a server over the chunks, answering every request at once and
/// writing all output after every call; returns the events and the bytes.
/// The responses reported as taken come after the other events: when each
/// is reported depends on when output is taken, which the split moves;
/// which and in what order must not.
fn run_server(chunks: &[Vec<u8>]) -> (Vec<String>, Vec<u8>) {
    let clock = Clock::new();
    let now = clock.now();
    let mut conn = ServerConnection::new(small_limits(), now);
    let mut events = Vec::new();
    let mut sent = Vec::new();
    let mut output = Vec::new();
    let mut pump = |conn: &mut ServerConnection| loop {
        let mut moved = false;
        while let Some(event) = conn.next_event(now) {
            moved = true;
            if let ServerEvent::Request { id, request } = &event {
                conn.send_response(*id, echo_response(request), now).unwrap();
            }
            match event {
                ServerEvent::ResponseSent { .. } => sent.push(render_server(&event)),
                _ => events.push(render_server(&event)),
            }
        }
        let pending = conn.pending_output().len();
        if pending > 0 {
            moved = true;
            output.extend_from_slice(conn.pending_output());
            conn.consume_output(pending, now);
        }
        if !moved {
            break;
        }
    };
    for chunk in chunks {
        conn.receive_data(chunk, now);
        pump(&mut conn);
    }
    conn.receive_eof(now);
    pump(&mut conn);
    assert!(conn.is_closed(), "after end of stream and every answer");
    events.extend(sent);
    (events, output)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// D3: however TCP splits the same bytes, the server gives the same
    /// events and writes the same bytes.
    #[test]
    fn server_split_invariance(parts in proptest::collection::vec(stream_part(), 1..8), end in stream_end(), cuts in cuts()) {
        let stream = format!("{}{end}", parts.concat());
        let whole = run_server(&[stream.as_bytes().to_vec()]);
        let split = run_server(&chunks(stream.as_bytes(), &cuts));
        let bytewise: Vec<Vec<u8>> = stream.bytes().map(|b| vec![b]).collect();
        prop_assert_eq!(&whole, &split);
        prop_assert_eq!(&whole, &run_server(&bytewise));
    }

    /// The client, too: responses to pipelined requests, cut anywhere.
    #[test]
    fn client_split_invariance(count in 1usize..5, cuts in cuts(), cut_short in any::<bool>()) {
        let clock = Clock::new();
        let now = clock.now();
        let mut stream = String::new();
        for n in 0..count {
            stream.push_str(&format!(
                "{{\"jsontp\":\"1.0\",\"type\":\"response\",\"status\":{{\"code\":200,\"formal-message\":\"ok\",\"human-message\":\"/* }} */\"}},\"resource\":\"/r{n}\",\"headers\":{{\"date\":\"2025-11-22T00:00:00Z+0000\",\"language\":\"en-US\"}},\"body\":{{\"content\":\"}}{{'\",\"encoding\":\"identity\"}}}}\n"
            ));
        }
        if cut_short {
            stream.push_str("{\"jsontp\":");
        }
        let run = |chunks: &[Vec<u8>]| {
            let mut conn = ClientConnection::new(ClientConfig::default(), now);
            for n in 0..count + 1 {
                conn.send_request(Request::new(Method::Get, format!("/r{n}").parse().unwrap()), now).unwrap();
            }
            let mut events = Vec::new();
            for chunk in chunks {
                conn.receive_data(chunk, now);
                events.extend(std::iter::from_fn(|| conn.next_event(now)).map(|e| render_client(&e)));
            }
            conn.receive_eof(now);
            events.extend(std::iter::from_fn(|| conn.next_event(now)).map(|e| render_client(&e)));
            events
        };
        let whole = run(&[stream.as_bytes().to_vec()]);
        prop_assert_eq!(whole.len(), count + 2, "responses, the end-of-stream error, closed");
        prop_assert_eq!(&whole, &run(&chunks(stream.as_bytes(), &cuts)));
    }

    /// Arbitrary bytes, in arbitrary chunks, with time passing: neither
    /// role panics, and a server still closes after end of stream.
    #[test]
    fn no_panic_on_arbitrary_bytes(
        prefix in proptest::collection::vec(stream_part(), 0..3),
        noise in proptest::collection::vec(any::<u8>(), 0..300),
        cuts in cuts(),
        waits in proptest::collection::vec(0u64..100, 0..4),
    ) {
        let mut bytes = prefix.concat().into_bytes();
        bytes.extend_from_slice(&noise);
        let _ = scan(&bytes);
        let pieces = chunks(&bytes, &cuts);

        let mut clock = Clock::new();
        let mut server = ServerConnection::new(small_limits(), clock.now());
        let serve = |conn: &mut ServerConnection, clock: &Clock| {
            while let Some(event) = conn.next_event(clock.now()) {
                if let ServerEvent::Request { id, request } = event {
                    // Closed: a stall timer closed the connection since.
                    let answered = conn.send_response(id, echo_response(&request), clock.now());
                    assert!(matches!(answered, Ok(()) | Err(UsageError::Closed)), "{answered:?}");
                }
            }
        };
        for (n, piece) in pieces.iter().enumerate() {
            server.receive_data(piece, clock.now());
            if let Some(&secs) = waits.get(n) {
                clock.advance(Duration::from_secs(secs));
                server.handle_timeout(clock.now());
            }
            serve(&mut server, &clock);
            let pending = server.pending_output().len();
            server.consume_output(pending, clock.now());
            let _ = (server.wants_read(), server.poll_timeout(), server.is_idle());
        }
        server.receive_eof(clock.now());
        serve(&mut server, &clock);
        prop_assert!(server.is_closed());

        let mut clock = Clock::new();
        let mut client = ClientConnection::new(ClientConfig::default(), clock.now());
        for _ in 0..3 {
            client.send_request(Request::new(Method::Get, "/a".parse().unwrap()), clock.now())
                .expect("an open connection takes requests");
        }
        for (n, piece) in pieces.iter().enumerate() {
            client.receive_data(piece, clock.now());
            if let Some(&secs) = waits.get(n) {
                clock.advance(Duration::from_secs(secs));
                client.handle_timeout(clock.now());
            }
            while client.next_event(clock.now()).is_some() {}
            let pending = client.pending_output().len();
            client.consume_output(pending, clock.now());
            let _ = (client.wants_read(), client.poll_timeout());
        }
        client.receive_eof(clock.now());
        while client.next_event(clock.now()).is_some() {}
        prop_assert!(client.is_closed());
    }
}
