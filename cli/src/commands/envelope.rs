//! An exchange's envelopes as the client command shows them: `-v` on
//! stderr, each line after `> ` (the request) or `< ` (the answer), and
//! `-i`/`-I` on stdout.

use std::io::{self, Write};

use jsontp_protocol::message::{Encoding, Request, Response};
use serde_json::Value;

/// `-v`: the request's envelope on stderr, each line after `> `.
pub fn print_request(request: &Request) {
    let mut err = io::stderr().lock();
    let _ = writeln!(
        err,
        "> jsontp {} {} {}",
        request.version,
        request.method,
        request.resource.as_str()
    );
    let written: Value = serde_json::from_slice(&request.to_bytes()).unwrap_or(Value::Null);
    let _ = write_fields(&mut err, "> ", &written, request.body.encoding());
}

/// `-v`: the answer's envelope on stderr, each line after `< `; first,
/// when `continued`, the `100 Continue` that came before it.
pub fn print_head(response: &Response, continued: bool) {
    let mut err = io::stderr().lock();
    // Lines on stderr are best effort: nothing to do if it is closed.
    let _ = write_envelope(&mut err, "< ", response, continued);
}

/// `-v`: the server's `100 Continue`, as it comes.
pub fn print_continue() {
    let mut err = io::stderr().lock();
    let _ = write_continue(&mut err, "< ");
}

/// The line that says a `100 Continue` came.
fn write_continue(out: &mut dyn Write, prefix: &str) -> io::Result<()> {
    writeln!(out, "{prefix}(the server answered 100 Continue)")
}

/// The status line, the headers and the other body keys of an answer,
/// one a line, each after `prefix`.
pub fn write_envelope(
    out: &mut dyn Write,
    prefix: &str,
    response: &Response,
    continued: bool,
) -> io::Result<()> {
    if continued {
        write_continue(out, prefix)?;
    }
    let status = &response.status;
    writeln!(
        out,
        "{prefix}jsontp {} {} {} ({})",
        response.version,
        status.code.as_u16(),
        status.formal_message(),
        status.human_message
    )?;
    // The typed headers, written as the wire writes them.
    let written: Value = serde_json::from_slice(&response.to_bytes()).unwrap_or(Value::Null);
    write_fields(out, prefix, &written, response.body.encoding())
}

/// A written message's headers and body keys (not its content), one a line.
fn write_fields(out: &mut dyn Write, prefix: &str, written: &Value, encoding: Encoding) -> io::Result<()> {
    if let Some(headers) = written.get("headers").and_then(Value::as_object) {
        for (name, value) in headers {
            writeln!(out, "{prefix}{name}: {}", header_text(value))?;
        }
    }
    writeln!(out, "{prefix}(body encoding {encoding})")?;
    if let Some(body) = written.get("body").and_then(Value::as_object) {
        for (key, value) in body {
            if key != "content" && key != "encoding" {
                writeln!(out, "{prefix}(body {key}: {value})")?;
            }
        }
    }
    Ok(())
}

fn header_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
