//! Parsing and validation of single messages: every row of the reference's
//! field tables and every D-rule that concerns one message (D3-D10, D12,
//! D13, D15, D16, D18), and the D5 precedence between them.

use jsontp_protocol::message::{
    Encoding, Forgiven, MessageLimits, Method, Rejection, RejectionKind, RequestContext, Response,
    StatusCode, Validation, parse_request, parse_response,
};
use serde_json::{Value, json};

use super::support::{base, code, header, ok, parse, parse_after_continue, refused, remove, with};

// ---------------------------------------------------------------------------
// Request message table
// ---------------------------------------------------------------------------

#[test]
fn valid_minimal_request() {
    let r = ok(&base().to_string());
    assert_eq!(r.method, Method::Get);
    assert_eq!(r.resource.as_str(), "/hello.txt");
    assert_eq!(r.version.to_string(), "1.0");
    assert!(r.headers.is_empty());
    assert_eq!(r.body.content(), b"");
    assert_eq!(r.body.encoding(), Encoding::Identity);
}

#[test]
fn field_jsontp_d6() {
    assert_eq!(code(&with(remove("jsontp"))), 400);
    assert_eq!(code(&with(|m| m["jsontp"] = json!(1.0))), 400);
    assert_eq!(code(&with(|m| m["jsontp"] = json!("1"))), 400);
    assert_eq!(code(&with(|m| m["jsontp"] = json!("1.0.0"))), 400);
    assert_eq!(code(&with(|m| m["jsontp"] = json!("2.0"))), 505);
    assert_eq!(code(&with(|m| m["jsontp"] = json!("0.9"))), 505);
    for v in ["1.0-rc1", "1.0-rc2", "1.3"] {
        assert_eq!(ok(&with(|m| m["jsontp"] = json!(v))).version.to_string(), v);
    }
    let e = refused(&with(|m| m["jsontp"] = json!("1")));
    assert_eq!(
        e.message,
        "field \"jsontp\": \"1\" is not a version of the form MAJOR.MINOR or MAJOR.MINOR-rcN"
    );
    assert_eq!(e.resource, "/hello.txt");
}

#[test]
fn field_type() {
    assert_eq!(code(&with(remove("type"))), 400);
    assert_eq!(code(&with(|m| m["type"] = json!("response"))), 400);
    assert_eq!(code(&with(|m| m["type"] = json!("Request"))), 400);
    assert_eq!(code(&with(|m| m["type"] = json!(true))), 400);
    assert_eq!(
        refused(&with(|m| m["type"] = json!("response"))).message,
        "field \"type\": \"response\" is not \"request\""
    );
}

#[test]
fn field_resource_d7_and_echo_d12() {
    let e = refused(&with(remove("resource")));
    assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, ""));
    let e = refused(&with(|m| m["resource"] = json!(5)));
    assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, ""));
    let e = refused(&with(|m| m["resource"] = json!("")));
    assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, ""));
    for bad in [
        "http://localhost/hello.txt",
        "/../hello.txt",
        "/a b",
        "localhost:0/x",
    ] {
        let e = refused(&with(|m| m["resource"] = json!(bad)));
        assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, bad), "{bad}");
        assert!(e.message.starts_with("field \"resource\": "), "{}", e.message);
    }
    for shape in [
        "/hello.txt",
        "/hello.txt?x=1&y=2",
        "hello.txt",
        "localhost/hello.txt",
        "localhost:8080/hello.txt",
        "localhost:8080/hello.txt?q=1#top",
        "jsontp://localhost:8080/hello.txt",
        "jsontp://localhost/hello.txt",
    ] {
        let r = ok(&with(|m| m["resource"] = json!(shape)));
        assert_eq!(r.resource.as_str(), shape);
    }
}

#[test]
fn field_method_exact_case() {
    for m in Method::ALL {
        assert_eq!(ok(&with(|v| v["method"] = json!(m.as_str()))).method, m);
    }
    for bad in [json!("get"), json!("PATCH"), json!(""), json!(1), json!(null)] {
        assert_eq!(code(&with(|v| v["method"] = bad.clone())), 400, "{bad}");
    }
    assert_eq!(code(&with(remove("method"))), 400);
}

#[test]
fn field_headers_and_body_are_objects() {
    assert_eq!(code(&with(remove("headers"))), 400);
    assert_eq!(code(&with(|m| m["headers"] = json!([]))), 400);
    assert_eq!(code(&with(|m| m["headers"] = json!("accept: */*"))), 400);
    assert_eq!(code(&with(remove("body"))), 400);
    assert_eq!(code(&with(|m| m["body"] = json!("hello"))), 400);
    assert_eq!(
        refused(&with(|m| m["headers"] = json!([]))).message,
        "field \"headers\" must be an object, not an array"
    );
}

#[test]
fn unknown_top_level_fields() {
    assert_eq!(code(&with(|m| m["extra"] = json!(true))), 400);
    let e = refused(&with(|m| m["status"] = json!({})));
    assert_eq!(e.status().as_u16(), 400);
    assert!(e.message.contains("\"status\""), "{}", e.message);
}

// ---------------------------------------------------------------------------
// body (D9)
// ---------------------------------------------------------------------------

#[test]
fn body_content_rules_d9() {
    // Missing content on GET, DELETE, OPTIONS means "".
    for m in ["GET", "DELETE", "OPTIONS"] {
        let r = ok(&with(|v| {
            v["method"] = json!(m);
            v["body"] = json!({"encoding": "identity"});
        }));
        assert_eq!(r.body.content(), b"");
    }
    // Missing on POST and PUT without expect: 400 (D5 level 4).
    for m in ["POST", "PUT"] {
        let e = refused(&with(|v| {
            v["method"] = json!(m);
            v["body"] = json!({"encoding": "identity"});
        }));
        assert_eq!(e.status().as_u16(), 400);
        assert!(e.message.contains("\"body.content\" is missing"), "{}", e.message);
    }
    assert_eq!(code(&with(|v| v["body"]["content"] = json!(5))), 400);
    assert_eq!(code(&with(|v| v["body"]["content"] = json!(null))), 400);
}

#[test]
fn body_encoding_rules_d9() {
    assert_eq!(code(&with(|v| v["body"] = json!({"content": ""}))), 400);
    assert_eq!(code(&with(|v| v["body"] = json!({}))), 400);
    assert_eq!(code(&with(|v| v["body"]["encoding"] = json!("compress"))), 412);
    assert_eq!(code(&with(|v| v["body"]["encoding"] = json!("GZIP"))), 412);
    assert_eq!(code(&with(|v| v["body"]["encoding"] = json!(""))), 412);
    assert_eq!(code(&with(|v| v["body"]["encoding"] = json!(1))), 400);
    assert_eq!(
        refused(&with(|v| v["body"]["encoding"] = json!("zip"))).message,
        "field \"body.encoding\": \"zip\" is not one of gzip, deflate, br, identity (D9)"
    );
}

#[test]
fn body_content_decodes_d9() {
    for (encoding, content, text) in [
        (
            "gzip",
            "H4sIAAAAAAACA0vOzy0oSi0uTk1RyEjNyckHALYBmUYQAAAA",
            "compressed hello",
        ),
        ("deflate", "eJxLSU3LSSxJTVHISM3JyQcAKLwFbg==", "deflated hello"),
        ("br", "iwWAYnJvdGxpIGhlbGxvAw==", "brotli hello"),
        ("identity", "plain hello", "plain hello"),
    ] {
        let r = ok(&with(|v| {
            v["method"] = json!("PUT");
            v["body"] = json!({"content": content, "encoding": encoding});
        }));
        assert_eq!(r.body.as_text(), Some(text), "{encoding}");
        assert_eq!(r.body.encoding().as_str(), encoding);
    }
    let e = refused(&with(|v| {
        v["body"] = json!({"content": "not base64!!", "encoding": "gzip"})
    }));
    assert_eq!(e.status().as_u16(), 400);
    assert!(
        e.message
            .starts_with("field \"body.content\" does not decode as gzip"),
        "{}",
        e.message
    );
}

#[test]
fn decoded_content_limit_d3() {
    let limits = MessageLimits {
        max_decoded_body: 10,
        ..MessageLimits::default()
    };
    let text = with(|v| v["body"]["content"] = json!("01234567890"));
    let e = parse_request(text.as_bytes(), RequestContext::Fresh, &limits).unwrap_err();
    assert_eq!(e.status().as_u16(), 413);
    let text = with(|v| v["body"]["content"] = json!("0123456789"));
    assert!(parse_request(text.as_bytes(), RequestContext::Fresh, &limits).is_ok());
    // gzip of "compressed hello" (16 bytes) decodes past 10.
    let text = with(|v| {
        v["body"] = json!({"content": "H4sIAAAAAAACA0vOzy0oSi0uTk1RyEjNyckHALYBmUYQAAAA", "encoding": "gzip"})
    });
    let e = parse_request(text.as_bytes(), RequestContext::Fresh, &limits).unwrap_err();
    assert_eq!(e.status().as_u16(), 413);
}

#[test]
fn body_extra_keys_d9() {
    let r = ok(&with(|v| {
        v["body"]["meta"] = json!({"a": [1, 2.5, "x"]});
        v["body"]["n"] = json!(3);
    }));
    assert_eq!(r.body.extra()["meta"], json!({"a": [1, 2.5, "x"]}));
    assert_eq!(r.body.extra()["n"], json!(3));
    let e = refused(&with(|v| v["body"]["meta"] = json!(null)));
    assert_eq!(e.status().as_u16(), 400);
    assert_eq!(
        e.message,
        "field \"body.meta\" is null, which a body key may not be (D9)"
    );
    // A null nested deeper is a value like any other.
    assert!(parse(&with(|v| v["body"]["meta"] = json!({"a": null}))).is_ok());
}

// ---------------------------------------------------------------------------
// headers (D8)
// ---------------------------------------------------------------------------

#[test]
fn header_names_case_insensitive_d8() {
    let r = ok(&header("Accept-Encoding", json!("gzip")));
    assert_eq!(entries(r.headers.accept_encoding()), Some(vec!["gzip".into()]));
    let text = with(|m| m["headers"] = json!({"accept": "*/*", "Accept": "*/*"}));
    let e = refused(&text);
    assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, "/hello.txt"));
    let text = with(|m| m["headers"] = json!({"x-a": "1", "X-A": "1", "ignore-invalid-headers": true}));
    assert_eq!(code(&text), 400);
}

#[test]
fn unknown_headers_and_the_ignore_flag_d8() {
    let e = refused(&header("x-custom", json!("1")));
    assert_eq!(e.status().as_u16(), 400);
    assert!(
        e.message
            .starts_with("header \"x-custom\" is not a header the protocol lists"),
        "{}",
        e.message
    );
    // The flag may come after the unknown header; its value does not matter.
    for value in [json!("1"), json!(null), json!([1, {"a": null}])] {
        let text = with(|m| m["headers"] = json!({"x-custom": value, "ignore-invalid-headers": true}));
        let r = ok(&text);
        assert!(r.headers.ignore_invalid_headers());
        assert_eq!(r.headers.len(), 1);
    }
    let text = with(|m| m["headers"] = json!({"x-custom": "1", "ignore-invalid-headers": false}));
    assert_eq!(code(&text), 400);
    let text = with(|m| m["headers"] = json!({"x-custom": "1", "ignore-invalid-headers": "true"}));
    assert_eq!(code(&text), 400);
    assert_eq!(code(&header("ignore-invalid-headers", json!("true"))), 400);
}

#[test]
fn header_null_and_wrong_types_d8() {
    for name in [
        "content-type",
        "accept",
        "accept-encoding",
        "accept-language",
        "authorization",
        "cookies",
        "if-modified-since",
        "if-unmodified-since",
        "expect",
        "ignore-invalid-headers",
        "date",
        "language",
        "set-cookies",
    ] {
        let e = refused(&header(name, json!(null)));
        assert_eq!(e.status().as_u16(), 400, "{name}");
        assert_eq!(
            e.message,
            format!("header \"{name}\" is null, which no header may be")
        );
    }
    for (name, wrong) in [
        ("content-type", json!(["text/plain"])),
        ("accept", json!(1)),
        ("accept", json!(["text/plain", 1])),
        ("accept-encoding", json!({"gzip": true})),
        ("accept-language", json!(true)),
        ("authorization", json!(["token"])),
        ("cookies", json!(["a=b"])),
        ("cookies", json!({"a": 1})),
        ("if-modified-since", json!(1700000000)),
        ("expect", json!(100)),
        ("ignore-invalid-headers", json!("true")),
    ] {
        assert_eq!(code(&header(name, wrong.clone())), 400, "{name}: {wrong}");
    }
    assert_eq!(
        refused(&header("content-type", json!(["text/plain"]))).message,
        "header \"content-type\" must be a string, not an array"
    );
}

#[test]
fn header_content_type_and_accept() {
    let r = ok(&header("content-type", json!("text/plain; charset=utf-8")));
    assert_eq!(r.headers.content_type().map(|m| m.essence()), Some("text/plain"));
    assert_eq!(code(&header("content-type", json!("textplain"))), 400);
    let r = ok(&header("accept", json!("text/html, application/json")));
    assert_eq!(r.headers.accept().map(<[_]>::len), Some(2));
    let r = ok(&header("accept", json!(["image/png", "*/*"])));
    assert_eq!(r.headers.accept().map(<[_]>::len), Some(2));
    assert_eq!(code(&header("accept", json!("nonsense"))), 400);
}

#[test]
fn header_accept_encoding_skips_unknown_d8() {
    let r = ok(&header("accept-encoding", json!(["compress", "gzip"])));
    assert_eq!(entries(r.headers.accept_encoding()), Some(vec!["gzip".into()]));
    let r = ok(&header("accept-encoding", json!("deflate, gzip")));
    assert_eq!(
        entries(r.headers.accept_encoding()),
        Some(vec!["deflate".into(), "gzip".into()])
    );
    // Only unknown names: held as "nothing known is acceptable" (D8).
    let r = ok(&header("accept-encoding", json!("compress")));
    assert_eq!(entries(r.headers.accept_encoding()), Some(vec!["*;q=0".into()]));
}

#[test]
fn header_accept_language_d18() {
    let r = ok(&header("accept-language", json!(["de-DE", "en-US"])));
    assert_eq!(r.headers.accept_language().map(<[_]>::len), Some(2));
    let r = ok(&header("accept-language", json!("*")));
    assert_eq!(entries(r.headers.accept_language()), Some(vec!["*".into()]));
    let e = refused(&header("accept-language", json!("english")));
    assert_eq!(e.status().as_u16(), 400);
    assert_eq!(
        e.message,
        "header \"accept-language\": \"english\" is not a language tag like en-US"
    );
}

#[test]
fn header_cookies_both_forms_d15() {
    let r = ok(&header("cookies", json!({"session": "abc", "theme": "dark"})));
    let c = r.headers.cookies().expect("cookies");
    assert_eq!((c.get("session"), c.get("theme")), (Some("abc"), Some("dark")));
    let r = ok(&header("cookies", json!("session=abc; theme=dark")));
    assert_eq!(r.headers.cookies().and_then(|c| c.get("theme")), Some("dark"));
    assert_eq!(code(&header("cookies", json!("garbage"))), 400);
    let text = with(|m| m["headers"]["cookies"] = json!({}));
    let text = text.replace("\"cookies\":{}", "\"cookies\":{\"a\":\"1\",\"a\":\"2\"}");
    assert_eq!(code(&text), 400);
}

#[test]
fn header_dates_d16() {
    let r = ok(&header("if-modified-since", json!("2021-06-01T00:00:00Z+0000")));
    let a = r.headers.if_modified_since().expect("date");
    let r = ok(&header("if-modified-since", json!("2021-06-01T02:00:00Z+02:00")));
    assert_eq!(r.headers.if_modified_since(), Some(a));
    let r = ok(&header("if-unmodified-since", json!("2021-06-01T00:00:00Z+0000")));
    assert_eq!(r.headers.if_unmodified_since(), Some(a));
    assert_eq!(code(&header("if-modified-since", json!("yesterday"))), 400);
    assert_eq!(code(&header("if-unmodified-since", json!("2021-06-01"))), 400);
}

#[test]
fn response_only_headers_in_a_request_are_ignored_d8() {
    let text =
        with(|m| m["headers"] = json!({"date": "not a date", "language": "klingon", "set-cookies": ["x"]}));
    let r = ok(&text);
    assert!(r.headers.is_empty());
}

#[test]
fn too_many_headers_d3() {
    let limits = MessageLimits::default();
    let many = |n: usize| {
        let mut headers = serde_json::Map::new();
        headers.insert("ignore-invalid-headers".into(), json!(true));
        for i in 1..n {
            headers.insert(format!("x-h{i}"), json!("v"));
        }
        with(|m| m["headers"] = Value::Object(headers))
    };
    assert!(parse(&many(limits.max_headers)).is_ok());
    let e = refused(&many(limits.max_headers + 1));
    assert_eq!(
        (e.status().as_u16(), e.resource.as_str(), e.kind()),
        (431, "/hello.txt", RejectionKind::TooManyHeaders)
    );
    // Without the flag, a flood of unknown names is still 431, not 400.
    let mut headers = serde_json::Map::new();
    for i in 0..=limits.max_headers {
        headers.insert(format!("x-h{i}"), json!("v"));
    }
    assert_eq!(
        code(&with(|m| m["headers"] = Value::Object(headers.clone()))),
        431
    );
    // 505 still wins (level 2); 431 beats the envelope (level 3).
    assert_eq!(
        code(&with(|m| {
            m["headers"] = Value::Object(headers.clone());
            m["jsontp"] = json!("2.0");
        })),
        505
    );
    assert_eq!(
        code(&with(|m| {
            m["headers"] = Value::Object(headers.clone());
            m["method"] = json!("get");
        })),
        431
    );
}

// ---------------------------------------------------------------------------
// expect and the 100-continue handshake (D10)
// ---------------------------------------------------------------------------

#[test]
fn expect_d10() {
    let first = with(|m| {
        m["method"] = json!("PUT");
        m["headers"]["expect"] = json!("100-continue");
        m["body"] = json!({});
    });
    let r = ok(&first);
    assert!(r.headers.expect_continue());
    assert_eq!(r.body.content(), b"");
    // The first request's body is ignored whatever it holds, but must be an object.
    let r = ok(&with(|m| {
        m["headers"]["expect"] = json!("100-continue");
        m["body"] = json!({"content": 5, "encoding": "zip", "x": null});
    }));
    assert!(r.headers.expect_continue());
    assert_eq!(
        code(&with(|m| {
            m["headers"]["expect"] = json!("100-continue");
            m["body"] = json!("x");
        })),
        400
    );
    // Another value: 501.
    let e = refused(&header("expect", json!("200-ok")));
    assert_eq!((e.status().as_u16(), e.resource.as_str()), (501, "/hello.txt"));
    // After the acknowledgement, expect is ignored, even another value, and
    // the body is checked as usual.
    let r = parse_after_continue(&header("expect", json!("200-ok"))).unwrap();
    assert!(!r.headers.expect_continue());
    let r = parse_after_continue(&header("expect", json!("100-continue"))).unwrap();
    assert!(!r.headers.expect_continue());
    let e = parse_after_continue(&first).unwrap_err();
    assert_eq!(e.status().as_u16(), 400);
    // An envelope error in the first request is a final 400 (D10 step 2c).
    let e = refused(&with(|m| {
        m["method"] = json!("FETCH");
        m["headers"]["expect"] = json!("100-continue");
        m["body"] = json!({});
    }));
    assert_eq!(e.status().as_u16(), 400);
}

// ---------------------------------------------------------------------------
// D5 precedence
// ---------------------------------------------------------------------------

#[test]
fn d5_precedence() {
    let cases: Vec<(&str, String, u16, &str, RejectionKind)> = vec![
        (
            "lowercase method (3) before unknown encoding (4)",
            with(|m| {
                m["method"] = json!("get");
                m["body"]["encoding"] = json!("zip");
            }),
            400,
            "field \"method\"",
            RejectionKind::Envelope,
        ),
        (
            "bad version (2) before unknown field (3)",
            with(|m| {
                m["jsontp"] = json!("1");
                m["extra"] = json!(1);
            }),
            400,
            "field \"jsontp\"",
            RejectionKind::Version,
        ),
        (
            "505 (2) before unknown field (3)",
            with(|m| {
                m["jsontp"] = json!("2.0");
                m["extra"] = json!(1);
            }),
            505,
            "version",
            RejectionKind::UnsupportedVersion,
        ),
        (
            "505 (2) before bad resource (3)",
            with(|m| {
                m["jsontp"] = json!("2.0");
                m["resource"] = json!("http://x/");
            }),
            505,
            "version",
            RejectionKind::UnsupportedVersion,
        ),
        (
            "missing jsontp (2) before missing type (3)",
            with(|m| {
                remove("jsontp")(m);
                remove("type")(m);
            }),
            400,
            "field \"jsontp\" is missing",
            RejectionKind::Version,
        ),
        (
            "expect other (4, first) before encoding zip (4, second)",
            with(|m| {
                m["headers"]["expect"] = json!("200-ok");
                m["body"]["encoding"] = json!("zip");
            }),
            501,
            "expect",
            RejectionKind::Expectation,
        ),
        (
            "encoding zip (412) before content missing on POST (400)",
            with(|m| {
                m["method"] = json!("POST");
                m["body"] = json!({"encoding": "zip"});
            }),
            412,
            "body.encoding",
            RejectionKind::Encoding,
        ),
        (
            "encoding zip (412) before content that does not decode",
            with(|m| m["body"] = json!({"content": "!!", "encoding": "zip"})),
            412,
            "body.encoding",
            RejectionKind::Encoding,
        ),
        (
            "header type (3) before expect other (4)",
            with(|m| {
                m["headers"]["expect"] = json!("200-ok");
                m["headers"]["accept"] = json!(1);
            }),
            400,
            "header \"accept\"",
            RejectionKind::Envelope,
        ),
        (
            "body field type (3) before expect other (4)",
            with(|m| {
                m["headers"]["expect"] = json!("200-ok");
                m["body"]["content"] = json!(1);
            }),
            400,
            "body.content",
            RejectionKind::Envelope,
        ),
        (
            "duplicate key (1) before 505 (2)",
            with(|m| m["jsontp"] = json!("2.0")).replacen("\"body\":", "\"type\":\"request\",\"body\":", 1),
            400,
            "twice",
            RejectionKind::DuplicateKey,
        ),
        (
            "fixed order in level 3: type before method",
            with(|m| {
                m["method"] = json!("get");
                m["type"] = json!("x");
            }),
            400,
            "field \"type\"",
            RejectionKind::Envelope,
        ),
    ];
    for (what, text, status, needle, kind) in cases {
        let e = refused(&text);
        assert_eq!((e.status().as_u16(), e.kind()), (status, kind), "{what}: {e}");
        assert!(e.message.contains(needle), "{what}: {e}");
    }
}

#[test]
fn d10_unsupported_expect_sits_at_level_4() {
    let expect_other = |m: &mut Value| m["headers"]["expect"] = json!("200-ok");
    // An envelope error (level 3) and the version (level 2) win over 501.
    for (what, edit, status, kind) in [
        (
            "bad resource",
            (|m: &mut Value| m["resource"] = json!("http://x/")) as fn(&mut Value),
            400,
            RejectionKind::Envelope,
        ),
        (
            "bad method",
            |m| m["method"] = json!("FETCH"),
            400,
            RejectionKind::Envelope,
        ),
        (
            "unknown field",
            |m| m["x"] = json!(1),
            400,
            RejectionKind::Envelope,
        ),
        (
            "unknown header",
            |m| m["headers"]["x-y"] = json!("1"),
            400,
            RejectionKind::Envelope,
        ),
        (
            "body not an object",
            |m| m["body"] = json!([]),
            400,
            RejectionKind::Envelope,
        ),
        (
            "version 2.0",
            |m| m["jsontp"] = json!("2.0"),
            505,
            RejectionKind::UnsupportedVersion,
        ),
        (
            "version malformed",
            |m| m["jsontp"] = json!("1"),
            400,
            RejectionKind::Version,
        ),
    ] {
        let e = refused(&with(|m| {
            expect_other(m);
            edit(m);
        }));
        assert_eq!((e.status().as_u16(), e.kind()), (status, kind), "{what}: {e}");
    }
    // Then 501, before the rest of level 4 (encoding, content).
    let e = refused(&with(|m| {
        expect_other(m);
        m["method"] = json!("PUT");
        m["body"] = json!({"encoding": "zip"});
    }));
    assert_eq!((e.status().as_u16(), e.kind()), (501, RejectionKind::Expectation));
    // The first request of a handshake passes levels 1 to 4 whatever its
    // body holds (it is ignored), so the server can still refuse it at
    // levels 5 and 6, or at level 4 when it takes no handshake at all.
    let r = ok(&with(|m| {
        m["method"] = json!("PUT");
        m["headers"]["expect"] = json!("100-continue");
        m["headers"]["content-type"] = json!("application/x-unknown");
        m["body"] = json!({"encoding": "zip", "content": "!!"});
    }));
    assert!(r.headers.expect_continue());
    assert_eq!(
        r.headers.content_type().map(|t| t.to_string()).as_deref(),
        Some("application/x-unknown")
    );
}

#[test]
fn d9_empty_content_is_empty_in_every_encoding() {
    for encoding in ["identity", "gzip", "deflate", "br"] {
        for method in ["GET", "POST", "PUT"] {
            let r = ok(&with(|m| {
                m["method"] = json!(method);
                m["body"] = json!({"content": "", "encoding": encoding});
            }));
            assert_eq!(r.body.content(), b"", "{method} {encoding}");
            assert_eq!(r.body.encoding().as_str(), encoding);
        }
    }
}

#[test]
fn kinds_of_level_4_refusals() {
    let limits = MessageLimits {
        max_decoded_body: 4,
        ..MessageLimits::default()
    };
    let text = with(|m| m["body"]["content"] = json!("12345"));
    let e = parse_request(text.as_bytes(), RequestContext::Fresh, &limits).unwrap_err();
    assert_eq!(
        (e.status().as_u16(), e.kind()),
        (413, RejectionKind::ContentTooLarge)
    );
    let e = refused(&with(|m| {
        m["body"] = json!({"content": "!!", "encoding": "gzip"})
    }));
    assert_eq!((e.status().as_u16(), e.kind()), (400, RejectionKind::Content));
    let e = refused(&with(|m| {
        m["method"] = json!("PUT");
        m["body"] = json!({"encoding": "identity"});
    }));
    assert_eq!((e.status().as_u16(), e.kind()), (400, RejectionKind::Content));
    let e = refused(&with(|m| m["body"]["encoding"] = json!("zip")));
    assert_eq!((e.status().as_u16(), e.kind()), (412, RejectionKind::Encoding));
}

#[test]
fn d5_syntax_before_everything() {
    // An invalid version and a syntax error: the syntax error (level 1).
    let text = r#"{"jsontp":"2.0","type":"request" "resource":"/a"}"#;
    let e = refused(text);
    assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, ""));
    assert!(
        e.message.starts_with("message is not valid JSON or JSON5: "),
        "{e}"
    );
    assert!(e.message.contains("at line 1 column"), "{e}");
    // Size first of all.
    let limits = MessageLimits {
        max_message_bytes: 10,
        ..MessageLimits::default()
    };
    let e = parse_request(b"{\"a\":[[[[[[[[[[", RequestContext::Fresh, &limits).unwrap_err();
    assert_eq!(
        (e.status().as_u16(), e.resource.as_str(), e.kind()),
        (413, "", RejectionKind::TooLarge)
    );
}

// ---------------------------------------------------------------------------
// Responses (client side, D12, D13)
// ---------------------------------------------------------------------------

fn response_base() -> Value {
    json!({
        "jsontp": "1.0", "type": "response",
        "status": {"code": 200, "formal-message": "OK", "human-message": "here it is"},
        "resource": "/hello.txt",
        "headers": {"date": "2024-01-01T00:00:00Z+0000", "language": "en-US"},
        "body": {"content": "Hello, world!", "encoding": "identity"}
    })
}

fn response(
    edit: impl FnOnce(&mut Value),
    validation: Validation,
) -> Result<(Response, Vec<Forgiven>), Rejection> {
    let mut v = response_base();
    edit(&mut v);
    parse_response(v.to_string().as_bytes(), validation, &MessageLimits::default())
        .map(|p| (p.message, p.forgiven))
}

#[test]
fn response_valid() {
    let (r, forgiven) = response(|_| {}, Validation::Strict).unwrap();
    assert!(forgiven.is_empty());
    assert_eq!(r.status.code, StatusCode::OK);
    assert_eq!(r.status.human_message, "here it is");
    assert_eq!(r.resource, "/hello.txt");
    assert_eq!(r.body.as_text(), Some("Hello, world!"));
    assert_eq!(
        r.headers.language().map(|l| l.to_string()).as_deref(),
        Some("en-US")
    );
    // formal-message compared case-insensitively; date with a colon offset.
    let (r, _) = response(
        |v| {
            v["status"] = json!({"code": 100, "formal-message": "CONTINUE", "human-message": "go on"});
            v["headers"]["date"] = json!("2024-01-01T02:00:00Z+02:00");
        },
        Validation::Strict,
    )
    .unwrap();
    assert_eq!(r.status.code, StatusCode::CONTINUE);
    assert_eq!(r.headers.date().map(|d| d.unix_seconds()), Some(1_704_067_200));
}

#[test]
fn response_status_table() {
    let bad_status = [
        json!({"code": 299, "formal-message": "OK", "human-message": "x"}),
        json!({"code": "200", "formal-message": "OK", "human-message": "x"}),
        json!({"code": 200.5, "formal-message": "OK", "human-message": "x"}),
        json!({"code": -200, "formal-message": "OK", "human-message": "x"}),
        json!({"code": 200, "formal-message": "Okay", "human-message": "x"}),
        json!({"code": 200, "formal-message": "OK", "human-message": ""}),
        json!({"code": 200, "formal-message": "OK"}),
        json!({"code": 200, "human-message": "x"}),
        json!({"formal-message": "OK", "human-message": "x"}),
        json!({"code": 200, "formal-message": "OK", "human-message": "x", "message": "y"}),
        json!("200 OK"),
    ];
    for status in bad_status {
        let e = response(|v| v["status"] = status.clone(), Validation::Lenient).unwrap_err();
        assert_eq!(e.status().as_u16(), 400, "{status}");
    }
    let e = response(
        |v| v["status"]["formal-message"] = json!("Okay"),
        Validation::Strict,
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "field \"status.formal-message\": \"Okay\" is not the reason phrase of 200 OK"
    );
}

#[test]
fn response_envelope_table() {
    for edit in [
        (|v: &mut Value| v["type"] = json!("request")) as fn(&mut Value),
        |v| v["method"] = json!("GET"),
        |v| v["resource"] = json!(1),
        |v| {
            v.as_object_mut().map(|o| o.remove("body"));
        },
        |v| v["body"] = json!({"encoding": "identity"}),
        |v| v["headers"]["set-cookies"] = json!("a=b"),
        |v| v["headers"]["language"] = json!("english"),
        |v| v["headers"]["date"] = json!("today"),
    ] {
        let e = response(edit, Validation::Lenient).unwrap_err();
        assert_eq!(e.status().as_u16(), 400, "{e}");
    }
    assert_eq!(
        response(|v| v["jsontp"] = json!("2.0"), Validation::Strict)
            .unwrap_err()
            .status()
            .as_u16(),
        505
    );
    assert_eq!(
        response(|v| v["body"]["encoding"] = json!("zip"), Validation::Strict)
            .unwrap_err()
            .status()
            .as_u16(),
        412
    );
    let (r, _) = response(
        |v| v["headers"]["set-cookies"] = json!({"a": "b"}),
        Validation::Strict,
    )
    .unwrap();
    assert_eq!(r.headers.set_cookies().and_then(|c| c.get("a")), Some("b"));
}

#[test]
fn d13_strict_and_lenient() {
    let strip = |v: &mut Value| {
        v["headers"] = json!({"x-powered-by": "ref"});
        v["body"]["encoding"] = json!("");
    };
    let e = response(strip, Validation::Strict).unwrap_err();
    assert_eq!(e.status().as_u16(), 400);
    let (r, forgiven) = response(strip, Validation::Lenient).unwrap();
    assert_eq!(r.body.encoding(), Encoding::Identity);
    assert_eq!(r.headers.date(), None);
    for f in [
        Forgiven::UnknownHeader,
        Forgiven::MissingDate,
        Forgiven::MissingLanguage,
        Forgiven::EmptyEncoding,
    ] {
        assert!(forgiven.contains(&f), "{f:?} in {forgiven:?}");
    }
    // Strict: each one alone is refused with a clear message.
    let e = response(|v| v["body"]["encoding"] = json!(""), Validation::Strict).unwrap_err();
    assert_eq!(e.status().as_u16(), 412);
    let e = response(
        |v| v["headers"] = json!({"language": "en-US"}),
        Validation::Strict,
    )
    .unwrap_err();
    assert!(e.message.starts_with("header \"date\" is missing"), "{e}");
    let e = response(
        |v| v["headers"] = json!({"date": "2024-01-01T00:00:00Z+0000"}),
        Validation::Strict,
    )
    .unwrap_err();
    assert!(e.message.starts_with("header \"language\" is missing"), "{e}");
}

#[test]
fn d11_post_content_reads_as_form_pairs_or_stays_raw() {
    let post = |content: &str| {
        let text = with(|m| {
            m["method"] = json!("POST");
            m["body"]["content"] = json!(content);
        });
        parse(&text).expect("a valid POST")
    };
    let pairs = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        post("name=Ada+Lovelace&lang=en%2DGB").form(),
        Some(pairs(&[("name", "Ada Lovelace"), ("lang", "en-GB")]))
    );
    // Not form data: the request goes on with the raw content (D11).
    let raw = post("just some text");
    assert_eq!(raw.form(), None);
    assert_eq!(raw.body.as_text(), Some("just some text"));
    // Only POST content is form data.
    let get = parse(&with(|m| m["body"]["content"] = json!("a=1"))).expect("a valid GET");
    assert_eq!(get.form(), None);
}

/// The entries of a list header as written back, weights included.
fn entries<T: std::fmt::Display>(list: Option<&[T]>) -> Option<Vec<String>> {
    list.map(|l| l.iter().map(ToString::to_string).collect())
}
