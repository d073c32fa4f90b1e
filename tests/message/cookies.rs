//! Cookies (D15): both forms, and a name given twice.

use jsontp_protocol::message::{Cookies, MessageLimits, Validation, parse_response};
use serde_json::json;

use crate::sample_request::{code, header, ok, refused};

#[test]
fn d15_a_name_given_twice_is_400_in_the_string_form() {
    for twice in ["a=1; a=2", "a=1;a=1", "a=1; b=2; a=3", " a = 1 ; a=2"] {
        let e = refused(&header("cookies", json!(twice)));
        assert_eq!(e.status().as_u16(), 400, "{twice}");
        assert!(e.message.contains("cookie \"a\" is given twice"), "{}", e.message);
        assert!(twice.parse::<Cookies>().is_err());
    }
    // Names are case-sensitive, as in HTTP: `a` and `A` are two cookies.
    let r = ok(&header("cookies", json!("a=1; A=2")));
    let c = r.headers.cookies().expect("cookies");
    assert_eq!((c.get("a"), c.get("A")), (Some("1"), Some("2")));
}

#[test]
fn d15_a_name_given_twice_is_400_in_the_object_form() {
    let text = r#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","method":"GET",
        "headers":{"cookies":{"a":"1","a":"2"}},"body":{"content":"","encoding":"identity"}}"#;
    let e = jsontp_protocol::message::parse_request(
        text.as_bytes(),
        jsontp_protocol::message::RequestContext::Fresh,
        &MessageLimits::default(),
    )
    .expect_err("a cookie named twice");
    assert_eq!(e.status().as_u16(), 400);
    // The same in JSON5 (D4), with the name once quoted and once not.
    let text = r#"{jsontp:'1.0',type:'request',resource:'/hello.txt',method:'GET',
        headers:{cookies:{a:'1','a':'2'}},body:{content:'',encoding:'identity'},}"#;
    let e = jsontp_protocol::message::parse_request(
        text.as_bytes(),
        jsontp_protocol::message::RequestContext::Fresh,
        &MessageLimits::default(),
    )
    .expect_err("a cookie named twice");
    assert_eq!(e.status().as_u16(), 400);
    // Distinct names are fine; values must be strings.
    let r = ok(&header("cookies", json!({"a": "1", "A": "2"})));
    assert_eq!(r.headers.cookies().map(Cookies::len), Some(2));
    assert_eq!(code(&header("cookies", json!({"a": 1}))), 400);
}

#[test]
fn d15_set_cookies_named_twice_in_a_response_is_refused() {
    let text = r#"{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK",
        "human-message":"ok"},"resource":"/","headers":{"date":"2024-01-01T00:00:00Z+0000",
        "language":"en-US","set-cookies":{"s":"1","s":"2"}},"body":{"content":"","encoding":"identity"}}"#;
    let e = parse_response(text.as_bytes(), Validation::Strict, &MessageLimits::default())
        .expect_err("a cookie named twice");
    assert_eq!(e.status().as_u16(), 400);
    // set-cookies has no string form.
    let text = text.replace(r#"{"s":"1","s":"2"}"#, r#""s=1""#);
    assert!(parse_response(text.as_bytes(), Validation::Strict, &MessageLimits::default()).is_err());
}
