//! The rejection (code, echoed resource, human message) of a table of bad
//! requests, as one snapshot: any change of what the server answers is seen
//! in review (D5, D12).

use jsontp_protocol::message::{MessageLimits, RequestContext, parse_request};

/// (what, message text). The messages are written out in full so that the
/// snapshot shows exactly what went in.
const CASES: &[(&str, &str)] = &[
    ("empty input", ""),
    ("not JSON", "hello"),
    ("truncated", r#"{"jsontp":"1.0","type":"req"#),
    ("missing comma", r#"{"jsontp":"1.0" "type":"request"}"#),
    ("array", "[1,2,3]"),
    ("string", r#""request""#),
    ("trailing garbage", r#"{"jsontp":"1.0"} x"#),
    ("lone surrogate", r#"{"jsontp":"1.0","x":"\ud800"}"#),
    ("stray slash", r#"{"jsontp":"1.0" / }"#),
    ("stray comment end", r#"{"jsontp":"1.0" */ }"#),
    ("mismatched bracket", r#"{"jsontp":"1.0","x":[}"#),
    (
        "duplicate inside a body key",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","meta":{"a":1,"\u0061":2}}}"#,
    ),
    (
        "JSON5 with a mistake",
        "{jsontp: '1.0', type: 'request' resource: '/a'}",
    ),
    (
        "NaN in a body key",
        "{jsontp: '1.0', type: 'request', resource: '/a', method: 'GET', headers: {}, body: {encoding: 'identity', n: NaN}}",
    ),
    (
        "duplicate top-level key",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","\u006dethod":"PUT","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "duplicate header, case-insensitive",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"accept":"*/*","Accept":"*/*"},"body":{"encoding":"identity"}}"#,
    ),
    (
        "duplicate body key",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","encoding":"gzip"}}"#,
    ),
    (
        "jsontp missing",
        r#"{"type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "jsontp a number",
        r#"{"jsontp":1.0,"type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "jsontp 1",
        r#"{"jsontp":"1","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "jsontp 1.0.0",
        r#"{"jsontp":"1.0.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "jsontp 2.0",
        r#"{"jsontp":"2.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "2.0 and an unknown field",
        r#"{"jsontp":"2.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"},"x":1}"#,
    ),
    (
        "type missing",
        r#"{"jsontp":"1.0","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "type response",
        r#"{"jsontp":"1.0","type":"response","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "resource missing",
        r#"{"jsontp":"1.0","type":"request","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "resource empty",
        r#"{"jsontp":"1.0","type":"request","resource":"","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "resource http scheme",
        r#"{"jsontp":"1.0","type":"request","resource":"http://localhost/hello.txt","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "resource climbs",
        r#"{"jsontp":"1.0","type":"request","resource":"/../hello.txt","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "resource a number",
        r#"{"jsontp":"1.0","type":"request","resource":7,"method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "method lower-case",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"get","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "method PATCH",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"PATCH","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "headers an array",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":[],"body":{"encoding":"identity"}}"#,
    ),
    (
        "body a string",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":"hello"}"#,
    ),
    (
        "unknown field",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity"},"extra":true}"#,
    ),
    (
        "unknown header",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"x-custom":"1"},"body":{"encoding":"identity"}}"#,
    ),
    (
        "ignore flag a string",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"x-custom":"1","ignore-invalid-headers":"true"},"body":{"encoding":"identity"}}"#,
    ),
    (
        "header null",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"accept":null},"body":{"encoding":"identity"}}"#,
    ),
    (
        "content-type an array",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"content-type":["text/plain"]},"body":{"encoding":"identity"}}"#,
    ),
    (
        "content-type malformed",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"PUT","headers":{"content-type":"textplain"},"body":{"content":"x","encoding":"identity"}}"#,
    ),
    (
        "accept-language english",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"accept-language":"english"},"body":{"encoding":"identity"}}"#,
    ),
    (
        "accept element a number",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"accept":["text/plain",1]},"body":{"encoding":"identity"}}"#,
    ),
    (
        "cookies garbage",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"cookies":"garbage"},"body":{"encoding":"identity"}}"#,
    ),
    (
        "if-modified-since yesterday",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"if-modified-since":"yesterday"},"body":{"encoding":"identity"}}"#,
    ),
    (
        "expect 200-ok",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"expect":"200-ok"},"body":{"encoding":"identity"}}"#,
    ),
    (
        "expect other and encoding zip",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"expect":"200-ok"},"body":{"encoding":"zip"}}"#,
    ),
    (
        "encoding missing",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"content":""}}"#,
    ),
    (
        "encoding compress",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"content":"","encoding":"compress"}}"#,
    ),
    (
        "lower-case method and encoding zip",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"get","headers":{},"body":{"content":"","encoding":"zip"}}"#,
    ),
    (
        "content not base64",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"PUT","headers":{},"body":{"content":"not base64!!","encoding":"gzip"}}"#,
    ),
    (
        "content missing on POST",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"POST","headers":{},"body":{"encoding":"identity"}}"#,
    ),
    (
        "content a number",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"content":1,"encoding":"identity"}}"#,
    ),
    (
        "body key null",
        r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","meta":null}}"#,
    ),
];

#[test]
fn rejections_of_bad_requests() {
    let limits = MessageLimits::default();
    let mut table = String::new();
    for (what, text) in CASES {
        let line = match parse_request(text.as_bytes(), RequestContext::Fresh, &limits) {
            Ok(_) => format!("{what}: ACCEPTED\n"),
            Err(e) => format!(
                "{what}\n    {} {:?} {:?}\n    {}\n",
                e.status().as_u16(),
                e.kind(),
                e.resource,
                e.message
            ),
        };
        table.push_str(&line);
    }
    // Depth and size, built rather than written out.
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(100), "]".repeat(100));
    let big = format!("{{\"a\":\"{}\"}}", "x".repeat(limits.max_message_bytes));
    for (what, text) in [("nested 101 deep", deep), ("over 1 MiB", big)] {
        let e = parse_request(text.as_bytes(), RequestContext::Fresh, &limits).unwrap_err();
        table.push_str(&format!(
            "{what}\n    {} {:?} {:?}\n    {}\n",
            e.status().as_u16(),
            e.kind(),
            e.resource,
            e.message
        ));
    }
    insta::assert_snapshot!(table);
}
