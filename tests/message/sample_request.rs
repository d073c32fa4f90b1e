//! A valid request as JSON to edit, and its parse.

use jsontp_protocol::message::{MessageLimits, Rejection, Request, RequestContext, parse_request};
use serde_json::{Value, json};

/// A valid GET of /hello.txt, as a JSON value to edit.
pub fn base() -> Value {
    json!({
        "jsontp": "1.0", "type": "request", "resource": "/hello.txt", "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    })
}

/// The base request with `edit` applied.
pub fn with(edit: impl FnOnce(&mut Value)) -> Value {
    let mut v = base();
    edit(&mut v);
    v
}

/// The base request with one header.
pub fn header(name: &str, value: Value) -> Value {
    with(|m| m["headers"][name] = value)
}

/// The request parsed as the first of an exchange.
pub fn parse(message: &Value) -> Result<Request, Rejection> {
    parse_request(
        message.to_string().as_bytes(),
        RequestContext::Fresh,
        &MessageLimits::default(),
    )
}

#[track_caller]
pub fn ok(message: &Value) -> Request {
    parse(message).unwrap_or_else(|e| panic!("{message}\nmust parse, got {e}"))
}

#[track_caller]
pub fn refused(message: &Value) -> Rejection {
    match parse(message) {
        Ok(r) => panic!("{message}\nmust be refused, got {r:?}"),
        Err(e) => e,
    }
}

/// The status code a refused request gets.
#[track_caller]
pub fn code(message: &Value) -> u16 {
    refused(message).status().as_u16()
}
