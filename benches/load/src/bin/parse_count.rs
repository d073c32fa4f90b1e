//! Parses one typical request N times, for callgrind to count the
//! instructions of one parse (the suite's `instructions` mode runs it twice
//! with different N and divides the difference).
//!
//! ```text
//! parse_count jsontp|hello|httparse|value N
//! ```
//!
//! - `jsontp`: `parse_request` of the GET with headers a file server sees
//!   (framing, syntax, duplicate keys, depth, D5 validation, the typed
//!   `Request`);
//! - `hello`: `parse_request` of a GET without headers, as the load generator sends
//!   (what the hello servers parse in the throughput and instructions
//!   runs; not in the suite's table, for looking at that part alone);
//! - `httparse`: the same request as HTTP/1.1, parsed by httparse into its
//!   header array (it validates the syntax only; nothing is typed);
//! - `value`: `serde_json::from_slice::<Value>` of the jsontp bytes (parsing
//!   only).

use std::hint::black_box;
use std::process::ExitCode;

use jsontp_protocol::message::{MessageLimits, RequestContext, parse_request};

/// The typical request: a GET with the headers a browser-like client sends.
pub const JSONTP: &[u8] = br#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","method":"GET","headers":{"accept-encoding":["gzip","identity"],"accept-language":"en-US","if-modified-since":"2021-06-01T00:00:00Z+0000"},"body":{"content":"","encoding":"identity"}}"#;

/// The load generator's request: a GET without headers.
pub const HELLO: &[u8] = br#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#;

/// The same request in HTTP/1.1.
pub const HTTP: &[u8] = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip, identity\r\nAccept-Language: en-US\r\nIf-Modified-Since: Tue, 01 Jun 2021 00:00:00 GMT\r\n\r\n";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(what), Some(n)) = (args.first(), args.get(1).and_then(|n| n.parse::<u64>().ok())) else {
        eprintln!("usage: parse_count jsontp|hello|httparse|value N");
        return ExitCode::from(2);
    };
    let limits = MessageLimits::default();
    let mut ok = 0u64;
    for _ in 0..n {
        let parsed = match what.as_str() {
            "jsontp" => parse_request(black_box(JSONTP), RequestContext::Fresh, &limits).is_ok(),
            "hello" => parse_request(black_box(HELLO), RequestContext::Fresh, &limits).is_ok(),
            "httparse" => {
                let mut headers = [httparse::EMPTY_HEADER; 16];
                let mut request = httparse::Request::new(&mut headers);
                matches!(request.parse(black_box(HTTP)), Ok(httparse::Status::Complete(_)))
            }
            "value" => serde_json::from_slice::<serde_json::Value>(black_box(JSONTP)).is_ok(),
            _ => {
                eprintln!("parse_count: jsontp, hello, httparse or value");
                return ExitCode::from(2);
            }
        };
        ok += u64::from(parsed);
    }
    if ok != n {
        eprintln!("parse_count: {} of {n} parses failed", n - ok);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
