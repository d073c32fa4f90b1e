//! Helpers shared by the modules of this binary: a valid request as a JSON
//! value to edit, and shorthands to parse it.
#![allow(dead_code)]

use jsontp_protocol::message::{MessageLimits, Rejection, Request, RequestContext, parse_request};
use serde_json::{Value, json};

/// A valid GET of /hello.txt, as a JSON value to edit.
pub fn base() -> Value {
    json!({
        "jsontp": "1.0", "type": "request", "resource": "/hello.txt", "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    })
}

pub fn with(edit: impl FnOnce(&mut Value)) -> String {
    let mut v = base();
    edit(&mut v);
    v.to_string()
}

pub fn header(name: &str, value: Value) -> String {
    with(|m| m["headers"][name] = value)
}

pub fn parse(text: &str) -> Result<Request, Rejection> {
    parse_request(text.as_bytes(), RequestContext::Fresh, &MessageLimits::default())
}

pub fn parse_after_continue(text: &str) -> Result<Request, Rejection> {
    parse_request(
        text.as_bytes(),
        RequestContext::AfterContinue,
        &MessageLimits::default(),
    )
}

#[track_caller]
pub fn ok(text: &str) -> Request {
    match parse(text) {
        Ok(r) => r,
        Err(e) => panic!("{text}\nmust parse, got {e}"),
    }
}

#[track_caller]
pub fn refused(text: &str) -> Rejection {
    match parse(text) {
        Ok(r) => panic!("{text}\nmust be refused, got {r:?}"),
        Err(e) => e,
    }
}

#[track_caller]
pub fn code(text: &str) -> u16 {
    refused(text).status().as_u16()
}

pub fn remove(field: &'static str) -> impl FnOnce(&mut Value) {
    move |m| {
        m.as_object_mut().map(|o| o.remove(field));
    }
}
