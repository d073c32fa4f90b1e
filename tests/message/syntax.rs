//! The syntax layer (D4, D9) and the depth limit (D3), through the public
//! parser: strict JSON and JSON5, what neither accepts, duplicate keys at
//! every level, numbers JSON cannot carry, UTF-8 and lone surrogates.

use jsontp_protocol::message::{MessageLimits, Method, RejectionKind, RequestContext, parse_request};
use serde_json::{Value, json};

use super::support::{base, ok, parse, refused, with};

#[test]
fn d4_published_examples_with_comments_and_trailing_commas() {
    let text = r#"{
        "jsontp": "1.0", // the version
        "type": "request", // the only type a client sends
        "resource": "/hello.txt", // shape 1
        "method": "GET", /* retrieval */
        "headers": {
            "accept-encoding": ["gzip", "identity",], // in order
        },
        "body": {
            "content": "", // nothing
            "encoding": "identity",
        },
    }"#;
    let r = ok(text);
    assert_eq!(r.resource.as_str(), "/hello.txt");
    let listed: Option<Vec<String>> = r
        .headers
        .accept_encoding()
        .map(|list| list.iter().map(ToString::to_string).collect());
    assert_eq!(listed, Some(vec!["gzip".to_owned(), "identity".to_owned()]));
}

#[test]
fn d4_json5_quotes_and_keys() {
    let text = "{jsontp: '1.0', type: 'request', resource: '/it\\'s', method: 'GET', headers: {'Accept': '*/*'}, body: {content: 'a\\nb', encoding: 'identity', n: 0x10}}";
    let r = ok(text);
    assert_eq!(r.resource.as_str(), "/it's");
    assert_eq!(r.body.as_text(), Some("a\nb"));
    assert_eq!(r.body.extra()["n"], json!(16));
    // Duplicates are found in JSON5 as well.
    let text = "{jsontp: '1.0', jsontp: '1.0', type: 'request', resource: '/', method: 'GET', headers: {}, body: {encoding: 'identity'}}";
    assert_eq!(refused(text).kind(), RejectionKind::DuplicateKey);
}

#[test]
fn d4_neither_json_nor_json5() {
    for (text, kind) in [
        ("{", RejectionKind::Incomplete),
        ("{\"a\" 1}", RejectionKind::Syntax),
        ("{\"jsontp\":\"1.0\",}}", RejectionKind::Syntax),
        ("", RejectionKind::Syntax),
        ("  \n", RejectionKind::Syntax),
        ("nul", RejectionKind::Syntax),
        ("hello", RejectionKind::Syntax),
        ("{} {}", RejectionKind::Syntax),
    ] {
        let e = refused(text);
        assert_eq!(
            (e.status().as_u16(), e.resource.as_str(), e.kind()),
            (400, "", kind),
            "{text}"
        );
        assert!(
            e.message.starts_with("message is not valid JSON or JSON5"),
            "{text}: {e}"
        );
    }
}

#[test]
fn d4_not_an_object() {
    for text in [
        "[1,2,3]",
        "\"text\"",
        "5",
        "null",
        "true",
        "['json5',]",
        "'json5'",
        "[[[[[[[",
    ] {
        let e = refused(text);
        assert_eq!(
            (e.status().as_u16(), e.resource.as_str(), e.kind()),
            (400, "", RejectionKind::NotAnObject),
            "{text}"
        );
        assert!(e.message.ends_with("not a JSON object"), "{e}");
    }
}

#[test]
fn d4_duplicate_keys_at_every_level() {
    let b = base().to_string();
    let cases = [
        b.replacen("\"method\":\"GET\"", "\"method\":\"GET\",\"method\":\"PUT\"", 1),
        b.replacen(
            "\"method\":\"GET\"",
            "\"method\":\"GET\",\"\\u006dethod\":\"GET\"",
            1,
        ),
        b.replacen(
            "\"headers\":{}",
            "\"headers\":{\"accept\":\"*/*\",\"ACCEPT\":\"*/*\"}",
            1,
        ),
        b.replacen(
            "\"encoding\":\"identity\"",
            "\"encoding\":\"identity\",\"encoding\":\"gzip\"",
            1,
        ),
        b.replacen(
            "\"encoding\":\"identity\"",
            "\"encoding\":\"identity\",\"x\":1,\"x\":1",
            1,
        ),
        b.replacen(
            "\"encoding\":\"identity\"",
            "\"encoding\":\"identity\",\"x\":null,\"x\":null",
            1,
        ),
        format!("{},\"q\":1,\"q\":2}}", &b[..b.len() - 1]),
    ];
    for text in cases {
        let e = refused(&text);
        assert_eq!(
            (e.status().as_u16(), e.kind()),
            (400, RejectionKind::DuplicateKey),
            "{text}"
        );
        assert_eq!(e.resource, "/hello.txt", "{text}");
    }
    // A key spelled with escapes is the decoded key.
    let text = b.replacen("\"method\"", "\"\\u006dethod\"", 1);
    assert_eq!(ok(&text).method, Method::Get);
    // Two resources: no one can say which to echo.
    let text = b.replacen("\"method\"", "\"resource\":\"/other\",\"method\"", 1);
    assert_eq!(refused(&text).resource, "");
}

#[test]
fn d4_invalid_utf8_and_lone_surrogates() {
    let mut bytes = with(|m| m["body"]["content"] = json!("abX")).into_bytes();
    let at = bytes.iter().position(|&b| b == b'X').unwrap();
    bytes[at] = 0xFF;
    let e = parse_request(&bytes, RequestContext::Fresh, &MessageLimits::default()).unwrap_err();
    assert_eq!((e.status().as_u16(), e.kind()), (400, RejectionKind::Syntax));
    assert!(e.message.contains("UTF-8"), "{e}");
    let b = base().to_string();
    for (from, to) in [
        ("\"content\":\"\"", "\"content\":\"\\ud800\""),
        ("\"content\":\"\"", "\"content\":\"\\udc00x\""),
        ("\"content\":\"\"", "\"content\":\"\", \"x\": [\"\\ud800\"]"),
        (
            "\"headers\":{}",
            "\"headers\":{\"x\\ud800\":1,\"ignore-invalid-headers\":true}",
        ),
    ] {
        let text = b.replacen(from, to, 1);
        let e = refused(&text);
        assert_eq!(
            (e.status().as_u16(), e.kind()),
            (400, RejectionKind::Syntax),
            "{text}"
        );
        assert!(e.message.contains("lone surrogate"), "{text}: {e}");
    }
    // A proper pair is a character.
    let r = ok(&b.replacen("\"content\":\"\"", "\"content\":\"\\ud83d\\ude00\"", 1));
    assert_eq!(r.body.as_text(), Some("😀"));
}

// ---------------------------------------------------------------------------
// D3 depth
// ---------------------------------------------------------------------------

fn nested_in_body(levels: usize, json5: bool) -> String {
    let mut s = String::with_capacity(levels * 2 + 200);
    s.push_str(r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"content":"","encoding":"identity","deep":"#);
    s.extend(std::iter::repeat_n('[', levels));
    s.extend(std::iter::repeat_n(']', levels));
    s.push_str(if json5 { "}, // json5\n}" } else { "}}" });
    s
}

#[test]
fn d3_depth_limit() {
    // The envelope is 1, body 2, so 62 brackets reach 64.
    assert!(parse(&nested_in_body(62, false)).is_ok());
    assert!(parse(&nested_in_body(62, true)).is_ok());
    let e = refused(&nested_in_body(63, false));
    assert_eq!(
        (e.status().as_u16(), e.resource.as_str(), e.kind()),
        (400, "", RejectionKind::TooDeep)
    );
    assert!(e.message.contains("deeper than the limit of 64"), "{e}");
}

#[test]
fn d3_deep_nesting_never_reaches_a_recursive_parser() {
    let limits = MessageLimits {
        max_message_bytes: 4 << 20,
        ..MessageLimits::default()
    };
    for levels in [100_000, 1_000_000] {
        for json5 in [false, true] {
            let text = nested_in_body(levels, json5);
            let e = parse_request(text.as_bytes(), RequestContext::Fresh, &limits).unwrap_err();
            assert_eq!(e.kind(), RejectionKind::TooDeep, "{levels}");
            assert!(e.message.contains("deeper"), "{e}");
        }
    }
}

#[test]
fn d4_duplicates_inside_values_a_header_or_a_body_key_carries() {
    let b = base().to_string();
    let cases = [
        // In a body key's value, strict and JSON5, plain and escaped.
        with(|m| m["body"]["meta"] = json!({"a": 1})).replacen("{\"a\":1}", "{\"a\":1,\"a\":2}", 1),
        with(|m| m["body"]["meta"] = json!({"a": 1})).replacen("{\"a\":1}", "{\"a\":1,\"\\u0061\":2}", 1),
        with(|m| m["body"]["list"] = json!([{"a": 1}])).replacen("{\"a\":1}", "{\"a\":1,\"a\":1}", 1),
        "{jsontp: '1.0', type: 'request', resource: '/hello.txt', method: 'GET', headers: {}, body: {encoding: 'identity', meta: {a: 1, 'a': 2,},},}".to_owned(),
        // In a header's value, even one that is dropped.
        b.replacen("\"headers\":{}", "\"headers\":{\"cookies\":{\"a\":\"1\",\"a\":\"2\"}}", 1),
        b.replacen(
            "\"headers\":{}",
            "\"headers\":{\"ignore-invalid-headers\":true,\"x-y\":{\"a\":[{\"b\":1,\"b\":2}]}}",
            1,
        ),
    ];
    for text in cases {
        let e = refused(&text);
        assert_eq!(
            (e.status().as_u16(), e.kind()),
            (400, RejectionKind::DuplicateKey),
            "{text}"
        );
        assert!(e.message.ends_with("twice (D4)"), "{text}: {e}");
    }
    let e = refused(&cases_message());
    assert_eq!(e.message, "body.meta.x[0] has the key \"a\" twice (D4)");
    // The same key in two different objects is no duplicate.
    assert!(
        parse(&with(|m| {
            m["body"]["meta"] = json!({"a": {"a": 1}, "b": {"a": 2}});
        }))
        .is_ok()
    );
}

fn cases_message() -> String {
    with(|m| m["body"]["meta"] = json!({"x": [{"a": 1}]})).replacen("{\"a\":1}", "{\"a\":1,\"a\":1}", 1)
}

#[test]
fn d4_a_huge_body_object_is_checked_for_duplicates_in_linear_time() {
    let keys: Vec<String> = (0..50_000).map(|i| format!("\"k{i}\":{i}")).collect();
    let limits = MessageLimits {
        max_message_bytes: 4 << 20,
        ..MessageLimits::default()
    };
    let text = with(|m| m["body"]["meta"] = json!({})).replacen(
        "\"meta\":{}",
        &format!("\"meta\":{{{}}}", keys.join(",")),
        1,
    );
    assert!(parse_request(text.as_bytes(), RequestContext::Fresh, &limits).is_ok());
    let text = text.replacen("\"k0\":0", "\"k0\":0,\"k49999\":1", 1);
    let e = parse_request(text.as_bytes(), RequestContext::Fresh, &limits).unwrap_err();
    assert_eq!(e.kind(), RejectionKind::DuplicateKey);
}

#[test]
fn d4_a_mistake_in_json5_text_is_named_with_its_place() {
    // JSON5 (unquoted keys, single quotes, comments, trailing commas),
    // then a mistake: the complaint says what and where.
    for text in [
        "{jsontp: '1.0', type: 'request' resource: '/'}",
        "{'jsontp': '1.0', 'type': 'request', 'resource': '/', method: GET}",
        "{\"jsontp\": \"1.0\", // the version\n \"type\" \"request\"}",
        "{\"jsontp\": \"1.0\", \"headers\": {\"a\": \"b\",}, \"type\" \"request\"}",
    ] {
        let e = refused(text);
        assert_eq!(e.kind(), RejectionKind::Syntax, "{text}");
        assert!(
            e.message.starts_with("message is not valid JSON or JSON5: "),
            "{e}"
        );
        assert!(e.message.contains("line"), "{text}: {e}");
    }
    // Strict JSON with a mistake: the same reader, the same words.
    let e = refused(r#"{"jsontp":"1.0" "type":"request"}"#);
    assert_eq!(
        e.message,
        "message is not valid JSON or JSON5: expected ',' or '}' after an entry at line 1 column 17"
    );
}

#[test]
fn d9_infinity_and_nan_are_refused_wherever_they_are() {
    let json5 = |field: &str| {
        format!(
            "{{jsontp: '1.0', type: 'request', resource: '/a', method: 'GET', headers: {{'ignore-invalid-headers': true}}, body: {{encoding: 'identity', {field}}}}}"
        )
    };
    for (field, path) in [
        ("x: Infinity", "body.x"),
        ("x: -Infinity", "body.x"),
        ("x: NaN", "body.x"),
        ("x: [1, {y: NaN}]", "body.x[1].y"),
        ("x: 1e999", "body.x"),
        ("content: Infinity", "body.content"),
    ] {
        let e = refused(&json5(field));
        assert_eq!(
            (e.status().as_u16(), e.kind()),
            (400, RejectionKind::NotJsonNumber),
            "{field}"
        );
        assert!(e.message.contains("JSON cannot carry"), "{field}: {e}");
        assert!(e.message.contains(&format!("\"{path}\"")), "{field}: {e}");
        // The message was read: its resource is echoed.
        assert_eq!(e.resource, "/a");
    }
    let e = refused(
        "{jsontp: '1.0', type: 'request', resource: '/a', method: 'GET', headers: {'x-n': NaN, 'ignore-invalid-headers': true}, body: {encoding: 'identity'}}",
    );
    assert_eq!(e.kind(), RejectionKind::NotJsonNumber);
    let e = refused(
        "{jsontp: '1.0', type: 'request', resource: '/a', method: 'GET', headers: {}, body: {encoding: 'identity'}, extra: -Infinity}",
    );
    assert_eq!(e.kind(), RejectionKind::NotJsonNumber);
}

#[test]
fn d9_every_json5_number_form_reaches_the_application_as_json() {
    let text = "{jsontp: '1.0', type: 'request', resource: '/a', method: 'GET', headers: {}, body: {encoding: 'identity', hex: 0xff, neg: -0xff, up: 0XA, lead: .5, trail: 5., plus: +1, exp: -.5e1, big: 18446744073709551616}}";
    let r = ok(text);
    let extra = r.body.extra();
    for (key, value) in [
        ("hex", json!(255)),
        ("neg", json!(-255)),
        ("up", json!(10)),
        ("lead", json!(0.5)),
        ("trail", json!(5.0)),
        ("plus", json!(1)),
        ("exp", json!(-5.0)),
        ("big", json!(18446744073709551616.0)),
    ] {
        assert_eq!(extra[key], value, "{key}");
    }
}

#[test]
fn d9_null_inside_a_body_keys_value_but_not_as_it() {
    let r = ok(&with(|m| {
        m["body"]["meta"] = json!({"a": null});
        m["body"]["list"] = json!([null]);
    }));
    assert_eq!(r.body.extra()["meta"], json!({"a": null}));
    assert_eq!(r.body.extra()["list"], json!([null]));
    let e = refused(&with(|m| m["body"]["meta"] = Value::Null));
    assert_eq!((e.status().as_u16(), e.kind()), (400, RejectionKind::Envelope));
    let e = refused(
        "{jsontp: '1.0', type: 'request', resource: '/a', method: 'GET', headers: {}, body: {encoding: 'identity', meta: null}}",
    );
    assert_eq!(e.kind(), RejectionKind::Envelope);
}

#[test]
fn d3_a_configured_depth_past_the_parsers_own_stops_at_their_limit() {
    // The reader refuses past 127 levels on its own: a larger configured
    // limit cannot drive it into deeper recursion.
    let limits = MessageLimits {
        max_depth: 10_000,
        ..MessageLimits::default()
    };
    let parse = |levels: usize, json5: bool| {
        let text = nested_in_body(levels, json5);
        parse_request(text.as_bytes(), RequestContext::Fresh, &limits)
    };
    assert!(parse(120, false).is_ok());
    assert!(parse(120, true).is_ok());
    for json5 in [false, true] {
        let e = parse(1000, json5).unwrap_err();
        assert_eq!(e.kind(), RejectionKind::Syntax);
        assert!(e.message.contains("nesting deeper than 127 levels"), "{e}");
    }
}
