//! Parsing and validating one message from bytes (D4, D5, D6, D8, D9).
//!
//! Two steps: `json.rs` turns the text into a shallow [`Envelope`] (syntax,
//! duplicate keys, types as found), then the functions here judge it in the
//! order of D5 and stop at the first level that finds a problem:
//!
//! 1. size (`413`), UTF-8, syntax, depth and lone surrogates,
//!    not an object, duplicate keys (`400`);
//! 2. `jsontp` (`400`, or `505` for another major);
//!
//!    2½. more than `max_headers` headers (`431`). It sits after the version,
//!    so `505` still wins, and before every other envelope check: a flood
//!    of headers is refused as a flood, whatever names it uses (the
//!    conformance suite: "over 100 headers → 431");
//! 3. the envelope (`400`), in a fixed order rather than document order, so
//!    that the answer does not depend on how a client orders its keys:
//!    `type`, `resource`, `method` (requests) or `status` (responses),
//!    `headers` (entries in document order), `body`, then unknown
//!    top-level fields (the first in document order);
//! 4. in D5's own order: `expect` (`501`), `body.encoding` (`412`),
//!    `content` that does not decode (`400`) or decodes past the limit
//!    (`413`), `content` missing on `POST`/`PUT` (`400`).
//!
//! Levels 5 and 6 belong to the application ([`super::negotiate`]).

use std::borrow::Cow;

use super::codec::{self, DecodeError};
use super::header_values::{quoted, request_headers, response_headers};
use super::json::{Envelope, Kind, Loose, Number, RawBody, parse_top};
use super::{
    Body, Encoding, MessageLimits, Method, Rejection, Request, Resource, Response, Status, StatusCode,
    Version,
};

/// Where a request stands in its exchange, which changes what is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestContext {
    /// A new exchange: `expect: 100-continue` starts a handshake, and then
    /// the body is ignored (D10).
    #[default]
    Fresh,
    /// The full request after a `100` acknowledgement: its `expect` header
    /// is ignored (D10).
    AfterContinue,
}

/// How strictly a client checks responses (D13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Validation {
    /// Every rule of the response message holds.
    #[default]
    Strict,
    /// Missing `date`/`language` and an empty `encoding` are forgiven (the
    /// published reference crate sends both) and reported; so are header
    /// names outside the protocol's list, which are dropped.
    Lenient,
}

/// What a lenient parse forgave in a response (D13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forgiven {
    /// `headers.date` was missing.
    MissingDate,
    /// `headers.language` was missing.
    MissingLanguage,
    /// `body.encoding` was `""`; read as `identity`.
    EmptyEncoding,
    /// One or more header names outside the protocol's list were dropped.
    UnknownHeader,
}

/// A parsed message and what was forgiven to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<T> {
    /// The message.
    pub message: T,
    /// Empty in strict mode.
    pub forgiven: Vec<Forgiven>,
}

/// Parses and validates the bytes of one request message.
///
/// The bytes are one message as the framing found it (D1); whitespace
/// around the object is allowed. On failure the [`Rejection`] carries the
/// status of the first D5 level that applies, a message naming the field,
/// and the `resource` to echo (D12).
pub fn parse_request(
    bytes: &[u8],
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<Request, Rejection> {
    parse_request_scanned(bytes, None, context, limits)
}

/// [`parse_request`] for a caller that already knows how deep the message
/// nests: the connection's framing scanner counts `{ [` outside strings
/// and comments, so `max_depth_seen` (the message object is depth 1) over
/// the limit is refused at once, before any parser runs. Within the limit
/// the parse is the same as [`parse_request`]'s (which measures the depth
/// itself, D3); `None` says the depth is not known.
#[inline]
pub(crate) fn parse_request_scanned(
    bytes: &[u8],
    max_depth_seen: Option<usize>,
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<Request, Rejection> {
    let mut env = Envelope::default();
    syntax(bytes, max_depth_seen, limits, &mut env)?;
    validate_request(&env, context, limits).map_err(|(status, message)| Rejection {
        status,
        message,
        resource: env.resource_echo(),
    })
}

/// Parses and validates the bytes of one response message (client side,
/// D13). The echoed `resource` is returned as written; comparing it with
/// the request's is the caller's job.
pub fn parse_response(
    bytes: &[u8],
    validation: Validation,
    limits: &MessageLimits,
) -> Result<Parsed<Response>, Rejection> {
    parse_response_scanned(bytes, None, validation, limits)
}

/// [`parse_response`] with the depth already known; see
/// [`parse_request_scanned`].
pub(crate) fn parse_response_scanned(
    bytes: &[u8],
    max_depth_seen: Option<usize>,
    validation: Validation,
    limits: &MessageLimits,
) -> Result<Parsed<Response>, Rejection> {
    let mut env = Envelope::default();
    syntax(bytes, max_depth_seen, limits, &mut env)?;
    validate_response(&env, validation, limits).map_err(|(status, message)| Rejection {
        status,
        message,
        resource: env.resource_echo(),
    })
}

/// A problem found past level 1: the status and the message. The caller
/// adds the echo.
type Problem = (StatusCode, String);

fn bad(message: String) -> Problem {
    (StatusCode::BAD_REQUEST, message)
}

/// D5 level 1 up to the envelope: size, UTF-8, syntax, depth. A
/// failure here echoes `""`: the message could not be read.
fn syntax<'a>(
    bytes: &'a [u8],
    max_depth_seen: Option<usize>,
    limits: &MessageLimits,
    env: &mut Envelope<'a>,
) -> Result<(), Rejection> {
    let refuse = |status, message: String| Rejection::new(status, message, "");
    if bytes.len() > limits.max_message_bytes {
        return Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "message is {} bytes, more than the limit of {} (D3)",
                bytes.len(),
                limits.max_message_bytes
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        refuse(
            StatusCode::BAD_REQUEST,
            format!("message is not valid UTF-8 (byte {}) (D4)", e.valid_up_to()),
        )
    })?;
    // The framing scanner's count, when given, refuses a deep message
    // before any parser runs; otherwise `parse_top` measures the depth.
    if let Some(depth) = max_depth_seen.filter(|depth| *depth > limits.max_depth) {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "message nests objects and arrays {depth} levels deep, deeper than the limit of {} levels",
                limits.max_depth
            ),
        ));
    }
    if let Some(kind) =
        parse_top(text, env, limits.max_depth).map_err(|m| refuse(StatusCode::BAD_REQUEST, m))?
    {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("message is {}, not a JSON object", kind.described()),
        ));
    }
    if let Some(dup) = env.first_duplicate() {
        // Still level 1 (D4), but the message was read: echo it.
        return Err(Rejection::new(
            StatusCode::BAD_REQUEST,
            format!("{dup} (D4)"),
            env.resource_echo(),
        ));
    }
    Ok(())
}

/// A top-level string field: missing, another type, or the string.
fn string_field<'e>(name: &str, value: &'e Option<Loose<'_>>) -> Result<&'e str, Problem> {
    match value {
        None => Err(bad(format!("field \"{name}\" is missing"))),
        Some(Loose::Str(s)) => Ok(s),
        Some(other) => Err(bad(format!(
            "field \"{name}\" must be a string, not {}",
            other.kind().described()
        ))),
    }
}

/// An object field: missing, another type, or the object.
fn object_field<'e, T>(name: &str, value: &'e Option<Result<T, Kind>>) -> Result<&'e T, Problem> {
    match value {
        None => Err(bad(format!("field \"{name}\" is missing"))),
        Some(Ok(t)) => Ok(t),
        Some(Err(kind)) => Err(bad(format!(
            "field \"{name}\" must be an object, not {}",
            kind.described()
        ))),
    }
}

/// Level 2 (D6): the version form, then whether we speak it.
fn version(env: &Envelope<'_>) -> Result<Version, Problem> {
    let text = string_field("jsontp", &env.jsontp)?;
    let version: Version = text
        .parse()
        .map_err(|e| bad(format!("field \"jsontp\": {} {e}", quoted(text))))?;
    if !version.is_supported() {
        return Err((
            StatusCode::VERSION_NOT_SUPPORTED,
            format!(
                "version {} is not supported; this implementation speaks major version 1 (D6)",
                quoted(text)
            ),
        ));
    }
    Ok(version)
}

/// Level 2½: the number of headers (D3).
fn header_count(env: &Envelope<'_>, limits: &MessageLimits) -> Result<(), Problem> {
    if let Some(Ok(headers)) = &env.headers {
        if headers.entries.len() > limits.max_headers {
            return Err((
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                format!(
                    "headers: {} headers, more than the limit of {} (D3)",
                    headers.entries.len(),
                    limits.max_headers
                ),
            ));
        }
    }
    Ok(())
}

fn message_type(env: &Envelope<'_>, expected: &str) -> Result<(), Problem> {
    let found = string_field("type", &env.type_)?;
    if found != expected {
        return Err(bad(format!(
            "field \"type\": {} is not \"{expected}\"",
            quoted(found)
        )));
    }
    Ok(())
}

fn unknown_field(env: &Envelope<'_>, not_here: &str) -> Result<(), Problem> {
    let unknown = env.unknown.as_deref().or_else(|| {
        let present = match not_here {
            "status" => env.status.is_some(),
            _ => env.method.is_some(),
        };
        present.then_some(not_here)
    });
    match unknown {
        Some(name) => Err(bad(format!(
            "field {} is not a field of a {} message",
            quoted(name),
            if not_here == "status" {
                "request"
            } else {
                "response"
            }
        ))),
        None => Ok(()),
    }
}

/// The string fields of a body, checked at level 3 (D9).
struct BodyFields<'e> {
    content: Option<&'e str>,
    encoding: &'e str,
}

/// Level 3 for `body`: field types, `encoding` present, no `null` key.
fn body_fields<'e>(body: &'e RawBody<'_>) -> Result<BodyFields<'e>, Problem> {
    let content = match &body.content {
        None => None,
        Some(Loose::Str(s)) => Some(&**s),
        Some(other) => {
            return Err(bad(format!(
                "field \"body.content\" must be a string, not {}",
                other.kind().described()
            )));
        }
    };
    let encoding = match &body.encoding {
        None => return Err(bad("field \"body.encoding\" is missing (D9)".to_owned())),
        Some(Loose::Str(s)) => &**s,
        Some(other) => {
            return Err(bad(format!(
                "field \"body.encoding\" must be a string, not {}",
                other.kind().described()
            )));
        }
    };
    if let Some(key) = &body.null_key {
        return Err(bad(format!(
            "field \"body.{key}\" is null, which a body key may not be (D9)"
        )));
    }
    Ok(BodyFields { content, encoding })
}

/// Level 4: `body.encoding` is one of the four (`412`, D9).
fn encoding(text: &str) -> Result<Encoding, Problem> {
    text.parse().map_err(|e| {
        (
            StatusCode::PRECONDITION_FAILED,
            format!("field \"body.encoding\": {} {e} (D9)", quoted(text)),
        )
    })
}

/// Level 4: the content decodes (`400`) within the limit (`413`, D3).
fn decode_content(content: &str, encoding: Encoding, limits: &MessageLimits) -> Result<Vec<u8>, Problem> {
    let too_large = |limit| {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("field \"body.content\" decodes to more than the limit of {limit} bytes (D3)"),
        )
    };
    match encoding {
        // The text itself: no decoder needed, only the limit.
        Encoding::Identity if content.len() > limits.max_decoded_body => {
            Err(too_large(limits.max_decoded_body))
        }
        Encoding::Identity => Ok(content.as_bytes().to_vec()),
        _ => codec::decode(content, encoding, limits.max_decoded_body).map_err(|e| match e {
            DecodeError::Corrupt(why) => bad(format!(
                "field \"body.content\" does not decode as {encoding}: it {why}"
            )),
            DecodeError::TooLarge { limit } => too_large(limit),
        }),
    }
}

#[inline]
fn validate_request(
    env: &Envelope<'_>,
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<Request, Problem> {
    // Level 2.
    let version = version(env)?;
    header_count(env, limits)?;

    // Level 3.
    message_type(env, "request")?;
    let resource_text = string_field("resource", &env.resource)?;
    let resource: Resource = resource_text
        .parse()
        .map_err(|e| bad(format!("field \"resource\": {} {e} (D7)", quoted(resource_text))))?;
    let method_text = string_field("method", &env.method)?;
    let method = Method::from_wire(method_text).ok_or_else(|| {
        bad(format!(
            "field \"method\": {} is not one of GET, POST, PUT, DELETE, OPTIONS (compared exactly)",
            quoted(method_text)
        ))
    })?;
    let raw_headers = object_field("headers", &env.headers)?;
    let checked = request_headers(raw_headers).map_err(bad)?;
    let mut headers = checked.headers;
    let raw_body = object_field("body", &env.body)?;
    // D10: after the acknowledgement, `expect` is ignored altogether.
    let expect = match context {
        RequestContext::Fresh => checked.expect,
        RequestContext::AfterContinue => None,
    };
    let handshake = expect == Some("100-continue");
    // The first request of a handshake: its body is ignored (D10).
    let fields = if handshake {
        None
    } else {
        Some(body_fields(raw_body)?)
    };
    unknown_field(env, "status")?;

    // Level 4.
    if let Some(other) = expect.filter(|e| *e != "100-continue") {
        return Err((
            StatusCode::NOT_IMPLEMENTED,
            format!(
                "header \"expect\": {} is not supported; the only expectation is \"100-continue\" (D10)",
                quoted(other)
            ),
        ));
    }
    headers.expect_continue = handshake;
    let body = match fields {
        None => Body::empty(),
        Some(BodyFields {
            content,
            encoding: name,
        }) => {
            let encoding = encoding(name)?;
            let bytes = match content {
                Some(content) => decode_content(content, encoding, limits)?,
                None if method.requires_content() => {
                    return Err(bad(format!(
                        "field \"body.content\" is missing, which a {method} request without \"expect\": \"100-continue\" must carry (D9)"
                    )));
                }
                // D9: on other methods a missing `content` means "".
                None => Vec::new(),
            };
            Body::from_parts(bytes, encoding, raw_body.extra.clone())
        }
    };
    Ok(Request {
        version,
        resource,
        method,
        headers,
        body,
    })
}

fn validate_response(
    env: &Envelope<'_>,
    validation: Validation,
    limits: &MessageLimits,
) -> Result<Parsed<Response>, Problem> {
    let mut forgiven = Vec::new();
    // Level 2.
    let version = version(env)?;
    header_count(env, limits)?;

    // Level 3.
    message_type(env, "response")?;
    let status = status(object_field("status", &env.status)?)?;
    let resource = string_field("resource", &env.resource)?;
    let headers =
        response_headers(object_field("headers", &env.headers)?, validation, &mut forgiven).map_err(bad)?;
    let raw_body = object_field("body", &env.body)?;
    let fields = body_fields(raw_body)?;
    let content = fields
        .content
        .ok_or_else(|| bad("field \"body.content\" is missing; every response carries it".to_owned()))?;
    unknown_field(env, "method")?;

    // Level 4.
    let mut encoding: &str = fields.encoding;
    if encoding.is_empty() && validation == Validation::Lenient {
        forgiven.push(Forgiven::EmptyEncoding);
        encoding = Encoding::Identity.as_str();
    }
    let encoding = self::encoding(encoding)?;
    let bytes = decode_content(content, encoding, limits)?;
    let body = Body::from_parts(bytes, encoding, raw_body.extra.clone());
    Ok(Parsed {
        message: Response {
            version,
            status,
            resource: resource.to_owned(),
            headers,
            body,
        },
        forgiven,
    })
}

/// The `status` object (reference: status fields; D12, D13).
fn status(raw: &super::json::RawStatus<'_>) -> Result<Status, Problem> {
    let code = match &raw.code {
        None => return Err(bad("field \"status.code\" is missing".to_owned())),
        Some(Loose::Number(n)) => {
            let integer = match *n {
                Number::Unsigned(u) => u16::try_from(u).ok(),
                Number::Signed(i) => u16::try_from(i).ok(),
                Number::Float(_) => None,
            };
            integer.and_then(StatusCode::from_u16).ok_or_else(|| {
                bad(format!(
                    "field \"status.code\": {} is not a registered HTTP status code",
                    number_text(*n)
                ))
            })?
        }
        Some(other) => {
            return Err(bad(format!(
                "field \"status.code\" must be a number, not {}",
                other.kind().described()
            )));
        }
    };
    let formal = string_field("status.formal-message", &raw.formal_message)?;
    if !code.reason_matches(formal) {
        return Err(bad(format!(
            "field \"status.formal-message\": {} is not the reason phrase of {code}",
            quoted(formal)
        )));
    }
    let human = string_field("status.human-message", &raw.human_message)?;
    if human.is_empty() {
        return Err(bad("field \"status.human-message\" is empty (D12)".to_owned()));
    }
    if let Some(key) = &raw.unknown {
        return Err(bad(format!(
            "field \"status.{key}\" is not one of code, formal-message, human-message"
        )));
    }
    Ok(Status::new(code, human))
}

fn number_text(n: Number) -> Cow<'static, str> {
    match n {
        Number::Unsigned(u) => u.to_string().into(),
        Number::Signed(i) => i.to_string().into(),
        Number::Float(f) => f.to_string().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: &str = r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","x":"\ud800"}}"#;

    #[test]
    fn scanned_entry_trusts_the_depth_but_still_checks_surrogates() {
        let limits = MessageLimits::default();
        // The caller's depth decides: over the limit is 400 without a scan.
        let e = parse_request_scanned(b"{}", Some(65), RequestContext::Fresh, &limits).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.contains("deeper than the limit of 64"), "{e}");
        // A lone surrogate is found even when the depth is known (D4).
        let e = parse_request_scanned(GET.as_bytes(), Some(3), RequestContext::Fresh, &limits).unwrap_err();
        assert!(e.message.contains("lone surrogate"), "{e}");
        let e = parse_response_scanned(GET.as_bytes(), Some(3), Validation::Lenient, &limits).unwrap_err();
        assert!(e.message.contains("lone surrogate"), "{e}");
    }
}
