//! Status codes and the response shortcuts, from outside the crate.

use jsontp_protocol::message::{Method, Response, Status, StatusCode};

#[test]
fn every_code_handlers_reach_for_has_a_constant() {
    for (code, n, phrase) in [
        (StatusCode::FORBIDDEN, 403, "Forbidden"),
        (StatusCode::CONFLICT, 409, "Conflict"),
        (StatusCode::GONE, 410, "Gone"),
        (StatusCode::TOO_MANY_REQUESTS, 429, "Too Many Requests"),
        (StatusCode::SERVICE_UNAVAILABLE, 503, "Service Unavailable"),
        (StatusCode::GATEWAY_TIMEOUT, 504, "Gateway Timeout"),
        (StatusCode::PERMANENT_REDIRECT, 308, "Permanent Redirect"),
        (StatusCode::ACCEPTED, 202, "Accepted"),
    ] {
        assert_eq!((code.as_u16(), code.reason()), (n, phrase));
        assert_eq!(StatusCode::from_u16(n), Some(code));
        assert_eq!(code.to_string(), format!("{n} {phrase}"));
    }
}

#[test]
fn checked_and_http_conversions() {
    assert_eq!(StatusCode::from_u16(299), None);
    assert_eq!(StatusCode::from_u16(0), None);
    assert_eq!(StatusCode::from_u16(u16::MAX), None);
    assert_eq!(StatusCode::from(http::StatusCode::CONFLICT), StatusCode::CONFLICT);
    assert_eq!(
        StatusCode::from(http::StatusCode::from_u16(451).expect("451")),
        StatusCode::UNAVAILABLE_FOR_LEGAL_REASONS
    );
    // An unregistered code reads as its class's x00 (RFC 9110 §15).
    let unregistered = http::StatusCode::from_u16(432).expect("432");
    assert_eq!(StatusCode::from(unregistered), StatusCode::BAD_REQUEST);
    assert_eq!(
        http::StatusCode::from(StatusCode::TOO_MANY_REQUESTS).as_u16(),
        429
    );
    assert!(StatusCode::NO_CONTENT.is_success() && !StatusCode::NOT_MODIFIED.is_success());
}

#[test]
fn shortcuts_make_the_common_responses() {
    assert_eq!(
        Response::not_found("no such file"),
        Response::new(Status::new(StatusCode::NOT_FOUND, "no such file"))
    );
    assert_eq!(Response::conflict("a folder").status.code, StatusCode::CONFLICT);
    assert_eq!(Response::forbidden("").status.human_message, "Forbidden");
    let options = Response::allowed_methods(&Method::ALL);
    assert_eq!(
        options.body.extra()["allowed-methods"],
        serde_json::json!(["GET", "POST", "PUT", "DELETE", "OPTIONS"])
    );
    let refused = Response::method_not_allowed(Method::Put, &[Method::Get, Method::Options]);
    assert_eq!(refused.status.code.as_u16(), 405);
    assert_eq!(
        refused.body.extra()["allowed-methods"],
        serde_json::json!(["GET", "OPTIONS"])
    );
    // Written as the wire wants it.
    let text = String::from_utf8(refused.with_resource("/x").to_bytes()).expect("UTF-8");
    assert!(
        text.contains(r#""formal-message":"Method Not Allowed""#),
        "{text}"
    );
    assert!(text.contains(r#""allowed-methods":["GET","OPTIONS"]"#), "{text}");
}
