//! The lexer (D1, D3, D4) through its public interface: the differential
//! property that the scanner and the JSON parsers agree on where every
//! message ends (a disagreement would let one message be read as two), and
//! what the parser makes of each framing fault.

use jsontp_protocol::message::framing::{Fault, Scan, Scanner, scan};
use jsontp_protocol::message::{Encoding, MessageLimits, RejectionKind, RequestContext, parse_request};
use proptest::prelude::*;

use super::support::{ok, refused};

/// Where the scanner ends the first message of `text`.
fn frame_end(text: &str) -> Option<usize> {
    match scan(text.as_bytes()) {
        Scan::Complete(frame) => Some(frame.end()),
        _ => None,
    }
}

#[test]
fn d1_a_line_comment_ends_at_cr_and_at_the_unicode_separators_for_both() {
    for end in ["\n", "\r", "\r\n", "\u{2028}", "\u{2029}"] {
        let text = format!(
            "{{\"jsontp\":\"1.0\", // a comment{end}\"type\":\"request\",\"resource\":\"/a\",\"method\":\"GET\",\"headers\":{{}},\"body\":{{\"encoding\":\"identity\"}}}}"
        );
        // The scanner ends the message at its last byte, and the parser
        // reads the field after the comment.
        assert_eq!(frame_end(&text), Some(text.len()), "{end:?}");
        assert_eq!(ok(&text).resource.as_str(), "/a", "{end:?}");
    }
    // U+2027 is no line end: the comment runs on, over the field.
    let text = "{\"jsontp\":\"1.0\", // a comment\u{2027}\"type\":\"request\"}";
    assert_eq!(frame_end(text), None);
}

#[test]
fn d1_each_fault_is_a_framing_rejection() {
    for (text, fault, at) in [
        (r#"{"jsontp":"1.0"]"#, Fault::MismatchedBracket, 15),
        (r#"{"a":[1}]"#, Fault::MismatchedBracket, 7),
        (r#"{"jsontp":"1.0" / "x"}"#, Fault::StraySlash, 16),
        (r#"{"jsontp":"1.0" */ "x"}"#, Fault::StrayCommentEnd, 16),
        (r#"{"jsontp":"1.0" /* a */ */}"#, Fault::StrayCommentEnd, 24),
    ] {
        assert_eq!(scan(text.as_bytes()), Scan::Error { at, fault }, "{text}");
        let e = refused(text);
        assert_eq!(
            (e.status().as_u16(), e.kind(), e.resource.as_str()),
            (400, RejectionKind::Framing, ""),
            "{text}"
        );
        assert!(e.message.contains(&fault.to_string()), "{text}: {e}");
        assert!(e.message.contains(&format!("at byte {at}")), "{text}: {e}");
    }
}

#[test]
fn d1_whole_buffers_are_framed_before_any_parser_runs() {
    let limits = MessageLimits::default();
    // Whitespace and a BOM around the object are fine.
    let text = "\u{FEFF} \r\n{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/a\",\"method\":\"GET\",\"headers\":{},\"body\":{\"encoding\":\"identity\"}}\n\t ";
    assert!(parse_request(text.as_bytes(), RequestContext::Fresh, &limits).is_ok());
    // Anything else after it is not.
    let e = refused("{} // comment");
    assert_eq!(e.kind(), RejectionKind::Syntax);
    assert!(
        e.message.contains("more follows the object's end, at byte 3"),
        "{e}"
    );
    // A message cut short.
    let e = refused(r#"{"jsontp":"1.0","type":"req"#);
    assert_eq!(e.kind(), RejectionKind::Incomplete);
}

#[test]
fn d4_a_lone_surrogate_found_by_the_lexer_is_refused_by_the_parser() {
    let text = r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","x":"\ud800"}}"#;
    let Scan::Complete(frame) = scan(text.as_bytes()) else {
        panic!("framed");
    };
    let at = text.find("\\ud800").unwrap();
    assert_eq!(frame.lone_surrogate(), Some(at));
    let e = refused(&format!("  {text}"));
    assert_eq!(e.kind(), RejectionKind::Syntax);
    assert!(
        e.message
            .contains(&format!("lone surrogate escape at byte {at},")),
        "{e}"
    );
}

// ---------------------------------------------------------------------------
// Documents for the differential test, written the way JSON5 allows.

/// Whitespace and comments that may sit between tokens inside an object.
fn gap() -> impl Strategy<Value = String> {
    let comment_text = proptest::collection::vec(
        prop::sample::select(vec![
            "a", " ", "{", "}", "[", "]", "\"", "'", "/", "*", "\\", "\u{2027}", "€", "\t",
        ]),
        0..6,
    )
    .prop_map(|parts| parts.concat());
    let line_end = prop::sample::select(vec!["\n", "\r", "\r\n", "\u{2028}", "\u{2029}"]);
    let block_text = proptest::collection::vec(
        prop::sample::select(vec![
            "a", " ", "{", "}", "[", "]", "\"", "'", "/", "*", "\n", "/*", "\u{2028}",
        ]),
        0..6,
    )
    .prop_map(|parts| parts.concat().replace("*/", "* /"));
    prop_oneof![
        3 => Just(String::new()),
        2 => prop::sample::select(vec![" ", "\t", "\n", "\r\n", "  ", "\u{A0}", "\u{FEFF}", "\u{2028}"])
            .prop_map(str::to_owned),
        1 => (comment_text, line_end).prop_map(|(text, end)| format!("//{text}{end}")),
        1 => block_text.prop_map(|text| format!("/*{text}*/")),
    ]
}

/// A string literal with the escapes and characters that can fool a
/// framer: the other quote, brackets, slashes, escaped quotes and line
/// continuations.
fn string_literal() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "a", " ", "{", "}", "[", "]", "/", "//", "/*", "*/", "é", "\u{2027}", "\\\\", "\\n", "\\u0041",
        "\\x41", "\\/", "\\\\\\\\",
    ]);
    let pieces = proptest::collection::vec(piece, 0..6);
    (
        any::<bool>(),
        pieces,
        proptest::collection::vec(any::<bool>(), 0..3),
    )
        .prop_map(|(double, pieces, extras)| {
            let quote = if double { '"' } else { '\'' };
            let other = if double { '\'' } else { '"' };
            let mut text = String::new();
            text.push(quote);
            for piece in pieces {
                text.push_str(piece);
            }
            for (n, extra) in extras.into_iter().enumerate() {
                // An escaped own quote, the other quote as is, and line
                // continuations (JSON5).
                match (n, extra) {
                    (0, true) => text.push_str(&format!("\\{quote}")),
                    (0, false) => text.push(other),
                    (1, true) => text.push_str("\\\r\n"),
                    (1, false) => text.push_str("\\\u{2028}"),
                    (_, true) => text.push_str("\\\n"),
                    (_, false) => text.push_str("\\\r"),
                }
            }
            text.push(quote);
            text
        })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        string_literal(),
        prop::sample::select(vec!["abc", "$x", "_y", "k2"]).prop_map(str::to_owned),
    ]
}

fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        string_literal(),
        prop::sample::select(vec!["1", "-2.5", "0x1F", "true", "false", "null", "+3", ".5"])
            .prop_map(str::to_owned),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            object_of(inner.clone()),
            (
                proptest::collection::vec((gap(), inner, gap()), 0..4),
                any::<bool>(),
                gap()
            )
                .prop_map(|(items, trailing, end)| {
                    let body: Vec<String> = items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
                    let comma = if trailing && !body.is_empty() { "," } else { "" };
                    format!("[{}{comma}{end}]", body.join(","))
                }),
        ]
    })
}

fn object_of(values: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (
        proptest::collection::vec((gap(), key(), gap(), gap(), values, gap()), 0..4),
        any::<bool>(),
        gap(),
    )
        .prop_map(|(pairs, trailing, end)| {
            let body: Vec<String> = pairs
                .into_iter()
                .map(|(a, k, b, c, v, d)| format!("{a}{k}{b}:{c}{v}{d}"))
                .collect();
            let comma = if trailing && !body.is_empty() { "," } else { "" };
            format!("{{{}{comma}{end}}}", body.join(","))
        })
}

fn document() -> impl Strategy<Value = String> {
    object_of(value())
}

/// What may follow a message on the stream: the next message's start, or
/// bytes that would end a comment or a string if the scanner had lost
/// track.
fn tail() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "",
        "\n",
        "\n{",
        "}",
        "\"}",
        "'}",
        "*/}",
        "\n}",
        " {\"a\":1}",
    ])
    .prop_map(str::to_owned)
}

/// Where the JSON5 grammar (and serde_json, when the text is strict JSON)
/// says the object ends: the text is the object exactly.
fn parsers_accept(text: &str) -> bool {
    let json5: Result<serde_json::Value, _> = json5::from_str(text);
    let strict: Result<serde_json::Value, _> = serde_json::from_str(text);
    if let Ok(strict) = &strict {
        // When both parse, they must read the same thing.
        if let Ok(json5) = &json5 {
            assert_eq!(strict, json5);
        }
    }
    json5.is_ok_and(|v| v.is_object()) || strict.is_ok_and(|v| v.is_object())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// D1: for every generated message the parsers accept, the scanner ends
    /// it exactly where it ends, whole or byte by byte, whatever follows.
    #[test]
    fn scanner_agrees_with_the_parsers(doc in document(), lead in "[ \t\r\n]{0,3}", tail in tail()) {
        prop_assume!(parsers_accept(&doc));
        let stream = format!("{lead}{doc}{tail}");
        let Scan::Complete(alone) = scan(doc.as_bytes()) else {
            return Err(TestCaseError::fail(format!("no frame for {doc:?}")));
        };
        prop_assert_eq!(alone.range(), 0..doc.len());
        let Scan::Complete(whole) = scan(stream.as_bytes()) else {
            return Err(TestCaseError::fail(format!("no frame in {stream:?}")));
        };
        prop_assert_eq!(whole.range(), lead.len()..lead.len() + doc.len());
        prop_assert_eq!(whole.max_depth(), alone.max_depth());
        let mut scanner = Scanner::new();
        let bytes = stream.as_bytes();
        let mut found = Scan::Partial;
        for n in 1..=bytes.len() {
            found = scanner.scan(&bytes[..n]);
            if found != Scan::Partial {
                break;
            }
        }
        prop_assert_eq!(found, Scan::Complete(whole));
    }

    /// The other direction: random text from the bytes that matter; when a
    /// parser accepts an object, the scanner agrees on its end.
    #[test]
    fn random_texts_the_parsers_accept_frame_the_same(
        parts in proptest::collection::vec(prop::sample::select(vec![
            "{", "}", "[", "]", "\"", "'", "\\", "/", "*", "\n", "\r", "\u{2028}", "a", ":", ",", "1", " ",
        ]), 1..24)
    ) {
        let text = format!("{{{}", parts.concat());
        if parsers_accept(&text) {
            // The scanner's end is the object's: what it frames parses, and
            // what it leaves is only whitespace and comments (`{}` followed
            // by it still parses).
            let found = scan(text.as_bytes());
            let Scan::Complete(frame) = found else {
                return Err(TestCaseError::fail(format!("{found:?} for {text:?}")));
            };
            prop_assert_eq!(frame.start(), 0);
            let end = frame.end();
            prop_assert!(parsers_accept(&text[..end]), "framed {:?} of {:?}", &text[..end], text);
            prop_assert!(parsers_accept(&format!("{{}}{}", &text[end..])), "left {:?}", &text[end..]);
        }
    }

    /// What the scanner frames, our parser reads the same way: a request
    /// written in generated JSON5 around a generated value parses, or is
    /// refused for a reason other than framing.
    #[test]
    fn the_parser_reads_what_the_scanner_frames(doc in document()) {
        prop_assume!(parsers_accept(&doc));
        let text = format!("{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/a\",\"method\":\"GET\",\"headers\":{{}},\"body\":{{\"encoding\":\"identity\",\"x\":{doc}}}}}");
        match parse_request(text.as_bytes(), RequestContext::Fresh, &MessageLimits::default()) {
            Ok(request) => prop_assert!(request.body.extra().contains_key("x")),
            Err(e) => prop_assert!(
                matches!(e.kind(), RejectionKind::DuplicateKey | RejectionKind::NotJsonNumber),
                "{} for {}", e, text
            ),
        }
    }
}

/// Scans `stream` with content runs on, fed in pieces of `chunk` bytes,
/// taking every run out as the contract says; the runs' bytes, the
/// frames found (offsets in the reduced buffer) and what the reduced
/// buffer held of each message.
fn with_runs(stream: &[u8], chunk: usize, limit: usize) -> (Vec<u8>, Vec<Scan>, Vec<String>) {
    let mut scanner = Scanner::with_limit(limit).with_content_runs();
    let mut buffer = Vec::new();
    let (mut runs, mut found, mut messages) = (Vec::new(), Vec::new(), Vec::new());
    for piece in stream.chunks(chunk.max(1)) {
        buffer.extend_from_slice(piece);
        loop {
            match scanner.scan(&buffer) {
                Scan::Partial => break,
                Scan::Content(run) => {
                    runs.extend(buffer.drain(run.range()));
                }
                Scan::Complete(frame) => {
                    messages.push(String::from_utf8_lossy(&buffer[frame.range()]).into_owned());
                    buffer.drain(..frame.end());
                    found.push(Scan::Complete(frame));
                }
                other => {
                    found.push(other);
                    return (runs, found, messages);
                }
            }
        }
    }
    (runs, found, messages)
}

fn streamed_message(encoding: &str, content: &str) -> String {
    format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/a\",\"method\":\"PUT\",\"headers\":{{}},\
         \"body\":{{\"encoding\":\"{encoding}\",\"x\":[1,{{\"content\":\"no\"}}],\"content\" : {}}}}}",
        serde_json::to_string(content).unwrap()
    )
}

#[test]
fn d19_content_runs_are_the_string_text_and_the_envelope_keeps_an_empty_string() {
    let content = "quote \" backslash \\ tab \t é \u{1F600} \u{1} end";
    let text = serde_json::to_string(content).unwrap();
    let inner = &text.as_bytes()[1..text.len() - 1];
    let stream = format!(
        "{}\n{}",
        streamed_message("identity", content),
        streamed_message("gzip", "QUJD")
    );
    for chunk in [1, 2, 3, 7, 64, stream.len()] {
        let (runs, found, messages) = with_runs(stream.as_bytes(), chunk, 1 << 20);
        let mut expected = inner.to_vec();
        expected.extend_from_slice(b"QUJD");
        assert_eq!(runs, expected, "chunk {chunk}");
        assert_eq!(found.len(), 2, "chunk {chunk}: {found:?}");
        for message in &messages {
            assert!(
                message.ends_with("\"content\" : \"\"}}"),
                "chunk {chunk}: {message}"
            );
            // The nested "content" key at level 3 is not the body's.
            assert!(message.contains("{\"content\":\"no\"}"), "{message}");
        }
    }
}

#[test]
fn d19_only_the_body_s_plain_content_runs() {
    let held = [
        // A key written with escapes.
        r#"{"body":{"encoding":"identity","cont\u0065nt":"abc"}}"#,
        // Not the message's own body.
        r#"{"x":{"body":{"encoding":"identity","content":"abc"}}}"#,
        // Single quotes (JSON5).
        r#"{"body":{"encoding":"identity","content":'abc'}}"#,
    ];
    for message in held {
        let (runs, found, _) = with_runs(message.as_bytes(), 5, 1 << 20);
        assert!(runs.is_empty(), "{message}");
        assert!(
            matches!(found.as_slice(), [Scan::Complete(_)]),
            "{message}: {found:?}"
        );
    }
}

#[test]
fn d19_content_before_its_encoding_runs_too_and_says_so() {
    let before = r#"{"body":{"content":"abc","encoding":"gzip"}}"#;
    let unknown = r#"{"body":{"encoding":"zip","content":"abc"}}"#;
    let after = r#"{"body":{"encoding":"br","content":"abc"}}"#;
    for (message, encoding) in [(before, None), (unknown, None), (after, Some(Encoding::Br))] {
        let mut scanner = Scanner::new().with_content_runs();
        match scanner.scan(message.as_bytes()) {
            Scan::Content(run) => {
                assert_eq!(&message.as_bytes()[run.range()], b"abc", "{message}");
                assert_eq!(run.encoding(), encoding, "{message}");
            }
            other => panic!("{message}: {other:?}"),
        }
    }
}

#[test]
fn d19_content_does_not_count_against_the_message_limit_but_the_envelope_does() {
    let big = "x".repeat(200_000);
    let (runs, found, _) = with_runs(streamed_message("identity", &big).as_bytes(), 4096, 1024);
    assert_eq!(runs.len(), big.len());
    assert!(matches!(found.as_slice(), [Scan::Complete(_)]), "{found:?}");
    let header_heavy = streamed_message("identity", "x").replace(
        "\"headers\":{}",
        &format!("\"headers\":{{\"a\":\"{}\"}}", "y".repeat(2000)),
    );
    let (_, found, _) = with_runs(header_heavy.as_bytes(), 4096, 1024);
    assert!(matches!(found.as_slice(), [Scan::TooLarge { .. }]), "{found:?}");
}
