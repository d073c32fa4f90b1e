//! Round trip: any valid request or response, serialized and parsed again,
//! is the same message (D1, D8, D9, D12, D15, D16).

use jsontp_protocol::message::{
    Body, Cookies, Date, Encoding, Headers, LanguageRange, LanguageTag, MediaRange, MediaType, MessageLimits,
    Method, Request, RequestContext, Response, Status, StatusCode, Validation, Version, Weighted,
    parse_request, parse_response,
};
use std::sync::Arc;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use serde_json::Value;

fn version() -> impl Strategy<Value = Version> {
    (0u32..30, option::of(0u32..10)).prop_map(|(minor, rc)| Version { major: 1, minor, rc })
}

fn resource() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec![
        "/",
        "",
        "localhost/",
        "localhost:8080/",
        "example.com/",
        "jsontp://localhost:1/",
        "jsontp://127.0.0.1/",
    ]);
    (
        prefix,
        vec("[a-zA-Z0-9_.~-]{1,8}", 1..4),
        option::of("[a-z0-9=&]{0,8}"),
    )
        .prop_filter_map("no dot segments", |(prefix, segments, query)| {
            if segments.iter().any(|s| s.chars().all(|c| c == '.')) {
                return None;
            }
            let mut r = format!("{prefix}{}", segments.join("/"));
            if let Some(q) = query {
                r.push('?');
                r.push_str(&q);
            }
            Some(r)
        })
}

fn media_type() -> impl Strategy<Value = MediaType> {
    prop::sample::select(vec![
        "text/plain",
        "text/html; charset=utf-8",
        "application/json",
        "application/octet-stream",
        "image/png",
    ])
    .prop_map(|s| s.parse().expect("a media type"))
}

fn media_range() -> impl Strategy<Value = Weighted<MediaRange>> {
    prop::sample::select(vec!["*/*", "text/*", "text/plain", "application/json; q=0.5"])
        .prop_map(|s| s.parse().expect("a media range"))
}

fn language() -> impl Strategy<Value = LanguageTag> {
    prop::sample::select(vec!["en-US", "fr-FR", "de-DE", "pt-BR", "ja-JP"])
        .prop_map(|s| s.parse().expect("a language tag"))
}

fn language_range() -> impl Strategy<Value = LanguageRange> {
    prop_oneof![Just(LanguageRange::Any), language().prop_map(LanguageRange::Tag)]
}

fn encoding() -> impl Strategy<Value = Encoding> {
    prop::sample::select(Encoding::ALL.to_vec())
}

fn cookies() -> impl Strategy<Value = Cookies> {
    prop::collection::btree_map("[a-zA-Z0-9_]{1,6}", any::<String>(), 0..4).prop_map(|pairs| {
        let mut c = Cookies::new();
        for (n, v) in pairs {
            c.set(n, v);
        }
        c
    })
}

fn date() -> impl Strategy<Value = Date> {
    (0i64..4_000_000_000).prop_map(Date::from_unix_seconds)
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn body() -> impl Strategy<Value = Body> {
    let content = prop_oneof![
        any::<String>().prop_map(Body::text),
        (vec(any::<u8>(), 0..64), encoding())
            .prop_filter_map("identity needs UTF-8", |(bytes, e)| Body::new(bytes, e).ok()),
        (vec(any::<u8>(), 0..64), encoding()).prop_filter_map("identity needs UTF-8", |(bytes, e)| {
            Body::shared(Arc::from(bytes), e).ok()
        }),
    ];
    let extra = prop::collection::btree_map("[a-z-]{1,8}", json_value(), 0..3);
    (content, extra).prop_map(|(mut body, extra)| {
        for (k, v) in extra {
            if k != "content" && k != "encoding" && !v.is_null() {
                body = body.with_extra(k, v).expect("a body key");
            }
        }
        body
    })
}

prop_compose! {
    fn request_headers()(
        content_type in option::of(media_type()),
        accept in option::of(vec(media_range(), 0..3)),
        accept_encoding in option::of(vec(encoding(), 0..4)),
        accept_language in option::of(vec(language_range(), 0..3)),
        authorization in option::of(any::<String>()),
        cookies in option::of(cookies()),
        ims in option::of(date()),
        ius in option::of(date()),
        ignore in any::<bool>(),
    ) -> Headers {
        Headers::new()
            .with_content_type(content_type)
            .with_accept(accept.into_iter().flatten())
            .with_accept_encoding(accept_encoding.into_iter().flatten())
            .with_accept_language(accept_language.into_iter().flatten())
            .with_authorization(authorization)
            .with_cookies(cookies)
            .with_if_modified_since(ims)
            .with_if_unmodified_since(ius)
            .with_ignore_invalid_headers(ignore)
    }
}

prop_compose! {
    fn request()(
        version in version(),
        resource in resource(),
        method in prop::sample::select(Method::ALL.to_vec()),
        headers in request_headers(),
        expect in any::<bool>(),
        body in body(),
    ) -> Request {
        let request = Request::new(method, resource.parse().expect("a valid resource"));
        let request = Request { version, ..request };
        if expect {
            // D10: the first request of a handshake has its body ignored.
            request.with_headers(headers.with_expect_continue(true))
        } else {
            request.with_headers(headers).with_body(body)
        }
    }
}

prop_compose! {
    fn response()(
        version in version(),
        code in prop::sample::select(vec![100u16, 200, 201, 204, 304, 400, 401, 404, 405, 406, 412, 413, 415, 431, 500, 501, 505]),
        human in "\\PC{1,20}",
        resource in any::<String>(),
        content_type in option::of(media_type()),
        set_cookies in option::of(cookies()),
        date in date(),
        language in language(),
        body in body(),
    ) -> Response {
        let code = StatusCode::from_u16(code).expect("registered");
        let headers = Headers::new()
            .with_content_type(content_type)
            .with_set_cookies(set_cookies)
            .with_date(date)
            .with_language(language);
        let response = Response::new(Status::new(code, human)).with_resource(resource)
            .with_headers(headers)
            .with_body(body);
        Response { version, ..response }
    }
}

proptest! {
    #[test]
    fn requests_round_trip(request in request()) {
        let bytes = request.to_bytes();
        prop_assert_eq!(bytes.last(), Some(&b'\n'));
        let parsed = parse_request(&bytes, RequestContext::Fresh, &MessageLimits::default());
        prop_assert_eq!(parsed, Ok(request));
    }

    #[test]
    fn responses_round_trip(response in response()) {
        let bytes = response.to_bytes();
        prop_assert_eq!(bytes.last(), Some(&b'\n'));
        let strict = parse_response(&bytes, Validation::Strict, &MessageLimits::default())
            .map(|p| (p.message, p.forgiven));
        prop_assert_eq!(strict, Ok((response, vec![])));
    }
}

/// A valid request with one byte replaced, inserted or removed.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let base = br#"{"jsontp":"1.0","type":"request","resource":"/a?b#c","method":"PUT","headers":{"accept":["text/*"],"cookies":{"a":"b"},"if-modified-since":"2021-06-01T00:00:00Z+0000"},"body":{"content":"x","encoding":"identity","k":[1,{"z":null}]}}"#;
    (0..base.len(), any::<u8>(), 0..3u8).prop_map(move |(at, byte, how)| {
        let mut v = base.to_vec();
        match how {
            0 => v[at] = byte,
            1 => v.insert(at, byte),
            _ => {
                v.remove(at);
            }
        }
        v
    })
}

proptest! {
    /// Bad input never panics, and every refusal is an error status with a
    /// message (D12: the human-message is never empty).
    #[test]
    fn parsing_never_panics(bytes in prop_oneof![vec(any::<u8>(), 0..256), mutated()]) {
        let limits = MessageLimits::default();
        for context in [RequestContext::Fresh, RequestContext::AfterContinue] {
            if let Err(e) = parse_request(&bytes, context, &limits) {
                prop_assert!(e.status().is_error());
                prop_assert!(!e.message.is_empty());
            }
        }
        for validation in [Validation::Strict, Validation::Lenient] {
            if let Err(e) = parse_response(&bytes, validation, &limits) {
                prop_assert!(e.status().is_error());
                prop_assert!(!e.message.is_empty());
            }
        }
    }
}

#[test]
fn shared_and_static_content_is_the_same_body_as_owned_content() {
    let owned = Body::text("Hello, world!");
    let fixed = Body::from_static("Hello, world!");
    let shared = Body::shared(Arc::from(&b"Hello, world!"[..]), Encoding::Identity).expect("UTF-8");
    for body in [&fixed, &shared] {
        assert_eq!(body, &owned);
        assert_eq!(body.content(), b"Hello, world!");
        assert_eq!(body.as_text(), Some("Hello, world!"));
        let response = Response::new(Status::new(StatusCode::OK, "hi")).with_body(body.clone());
        let expected = Response::new(Status::new(StatusCode::OK, "hi")).with_body(owned.clone());
        assert_eq!(response.to_bytes(), expected.to_bytes());
    }
    assert_eq!(fixed.into_content(), b"Hello, world!");
    assert_eq!(shared.into_content(), b"Hello, world!");
    // Identity content must be UTF-8, shared or not (D9); other encodings
    // carry any bytes.
    let bytes: Arc<[u8]> = Arc::from(&[0xff, 0xfe][..]);
    let refused = Body::shared(Arc::clone(&bytes), Encoding::Identity).expect_err("not UTF-8");
    assert!(refused.to_string().contains("not UTF-8"), "{refused}");
    let gzip = Body::shared(bytes, Encoding::Gzip).expect("any bytes");
    assert_eq!(gzip.content(), [0xff, 0xfe]);
    assert!(gzip.with_encoding(Encoding::Identity).is_err());
}
