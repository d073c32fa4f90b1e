//! Parsing and validating one message from bytes (D4, D5, D6, D8, D9).
//!
//! Three steps, and the first that finds a problem answers:
//!
//! 1. the lexer ([`crate::message::framing`]) frames the bytes: one object and only
//!    whitespace around it, how deep it nests, lone surrogates. The
//!    connection machine has done this already and hands its [`Frame`]
//!    over; [`parse_request`] and [`parse_response`] do it themselves;
//! 2. the text reader (`reader.rs`, JSON and JSON5 in one pass) fills the
//!    shallow [`Envelope`] of `envelope.rs` through the seeds of
//!    `syntax.rs` (duplicate keys and numbers JSON cannot carry are
//!    noted); the common message is framed and read in one pass by
//!    `quick.rs` instead, into the same envelope;
//! 3. the functions here judge the envelope in the order of D5 and stop at
//!    the first level that finds a problem:
//!
//! 1. size (`413`), framing, UTF-8, depth, lone surrogates, syntax,
//!    not an object, duplicate keys, `Infinity`/`NaN` (`400`);
//! 2. `jsontp` (`400`, or `505` for another major);
//!
//!    2½. more than `max_headers` headers (`431`). It sits after the version,
//!    so `505` still wins, and before every other envelope check: a flood
//!    of headers is refused as a flood, whatever names it uses;
//! 3. the envelope (`400`), in a fixed order rather than document order, so
//!    that the answer does not depend on how a client orders its keys:
//!    `type`, `resource`, `method` (requests) or `status` (responses),
//!    `headers` (entries in document order), `body`, then unknown
//!    top-level fields (the first in document order);
//! 4. in D5's own order: `expect` (`501`, D10: after every envelope error
//!    and the version), `body.encoding` (`412`), `content` that does not
//!    decode (`400`) or decodes past the limit (`413`), `content` missing
//!    on `POST`/`PUT` (`400`).
//!
//! Levels 5 and 6 belong to the application ([`crate::message::negotiate`]); the
//! first request of a 100-continue handshake reaches them too (D10).

pub(crate) mod decoder;
pub(crate) mod envelope;
pub mod framing;
pub(crate) mod header_values;
pub(crate) mod quick;
pub(crate) mod reader;
pub(crate) mod syntax;

use std::borrow::Cow;

use crate::message::codec::{self, DecodeError};
use crate::message::framing::{Fault, Frame, Scan, Scanner, leading_whitespace};
use crate::message::leniency::{Forgiven, Validation};
use crate::message::read::envelope::{Envelope, RawBody, RawStatus};
use crate::message::read::header_values::{quoted, request_headers, response_headers};
use crate::message::{
    Body, Encoding, Headers, MessageLimits, Method, Rejection, RejectionKind, Request, Resource, Response,
    Status, StatusCode, Version,
};
use syntax::{Kind, Loose, Note, Notes, Number};

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
/// The bytes are one message: a JSON object, with only whitespace (space,
/// tab, CR, LF) around it. On failure the [`Rejection`] carries the status
/// of the first D5 level that applies, its [`kind`](Rejection::kind), a
/// message naming the field, and the `resource` to echo (D12).
pub fn parse_request(
    bytes: &[u8],
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<Request, Rejection> {
    if bytes.len() <= limits.max_message_bytes {
        let mut env = Envelope::default();
        if let Some(end) = quick::read(bytes, leading_whitespace(bytes), limits, false, &mut env)
            && only_whitespace(&bytes[end..])
        {
            return validate_request(&env, context, limits);
        }
    }
    let frame = frame_whole(bytes, limits)?;
    parse_request_framed(&bytes[frame.range()], &frame, context, limits)
}

/// The request at the start of `bytes` (after any whitespace), if the
/// one-pass reader of `quick.rs` takes it: its length and what
/// [`parse_request`] answers. `None`: frame it with the lexer and parse it
/// the general way. `streams_content`: see [`quick::read`]. `R`: the
/// request as it is handed on; a connection asks for a `Box<Request>`, so
/// that the few hundred bytes are written once and only a pointer moves.
#[inline]
pub(crate) fn parse_request_quick<R: From<Request>>(
    bytes: &[u8],
    context: RequestContext,
    limits: &MessageLimits,
    streams_content: bool,
) -> Option<(usize, Result<R, Rejection>)> {
    read_quick(bytes, limits, streams_content, |env| {
        judge_request(env, context, limits)
    })
}

/// The one-pass reader, then `validate` on what it read, the refusal
/// echoing the envelope's resource as the general path's does.
#[inline]
fn read_quick<T>(
    bytes: &[u8],
    limits: &MessageLimits,
    streams_content: bool,
    validate: impl FnOnce(&Envelope<'_>) -> Result<T, Problem>,
) -> Option<(usize, Result<T, Rejection>)> {
    let mut env = Envelope::default();
    let end = quick::read(
        bytes,
        leading_whitespace(bytes),
        limits,
        streams_content,
        &mut env,
    )?;
    let parsed = validate(&env).map_err(|(kind, message)| Rejection::of(kind, message, env.resource_echo()));
    Some((end, parsed))
}

/// [`parse_request`] for the bytes of a message the lexer has framed
/// already (the connection's [`Scanner`]): `bytes` are exactly the
/// message, `frame` what the scanner found in them, so no byte is lexed
/// twice. `R`: as for [`parse_request_quick`].
#[inline]
pub(crate) fn parse_request_framed<R: From<Request>>(
    bytes: &[u8],
    frame: &Frame,
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<R, Rejection> {
    let mut env = Envelope::default();
    read(bytes, frame, limits, &mut env)?;
    validate_request(&env, context, limits)
}

/// The encoding a framed message's `body.encoding` names, if the message
/// reads and names one of the four: what a receiver that streamed content
/// written before its encoding needs at the message's end (D19). The
/// message is read as [`parse_request_framed`] reads it; whether it is
/// valid is that function's to say.
pub(crate) fn named_encoding(bytes: &[u8], frame: &Frame, limits: &MessageLimits) -> Option<Encoding> {
    let mut env = Envelope::default();
    read(bytes, frame, limits, &mut env).ok()?;
    match env.body {
        Some(Ok(RawBody {
            encoding: Some(Loose::Str(ref name)),
            ..
        })) => name.parse().ok(),
        _ => None,
    }
}

/// Parses and validates the bytes of one response message (client side,
/// D13). The echoed `resource` is returned as written; comparing it with
/// the request's is the caller's job.
pub fn parse_response(
    bytes: &[u8],
    validation: Validation,
    limits: &MessageLimits,
) -> Result<Parsed<Response>, Rejection> {
    if bytes.len() <= limits.max_message_bytes
        && let Some((end, parsed)) = parse_response_quick(bytes, validation, limits, false)
        && only_whitespace(&bytes[end..])
    {
        return parsed;
    }
    let frame = frame_whole(bytes, limits)?;
    parse_response_framed(&bytes[frame.range()], &frame, validation, limits)
}

/// [`parse_request_quick`] for a response.
#[inline]
pub(crate) fn parse_response_quick(
    bytes: &[u8],
    validation: Validation,
    limits: &MessageLimits,
    streams_content: bool,
) -> Option<(usize, Result<Parsed<Response>, Rejection>)> {
    read_quick(bytes, limits, streams_content, |env| {
        validate_response(env, validation, limits)
    })
}

/// JSON's whitespace only: what may follow the one message of a buffer.
fn only_whitespace(bytes: &[u8]) -> bool {
    leading_whitespace(bytes) == bytes.len()
}

/// [`parse_response`] for a message the lexer has framed already; see
/// [`parse_request_framed`].
pub(crate) fn parse_response_framed(
    bytes: &[u8],
    frame: &Frame,
    validation: Validation,
    limits: &MessageLimits,
) -> Result<Parsed<Response>, Rejection> {
    let mut env = Envelope::default();
    read(bytes, frame, limits, &mut env)?;
    validate_response(&env, validation, limits)
        .map_err(|(kind, message)| Rejection::of(kind, message, env.resource_echo()))
}

/// A problem found past level 1: what kind, and the message. The caller
/// adds the echo.
type Problem = (RejectionKind, String);

fn bad(message: String) -> Problem {
    (RejectionKind::Envelope, message)
}

/// A level-1 refusal: the message could not be read, so the echo is `""`.
fn unread(kind: RejectionKind, message: String) -> Rejection {
    Rejection::of(kind, message, "")
}

/// D5 level 1 for a whole buffer: the size, then the lexer. The buffer
/// must hold one message and nothing but whitespace around it.
fn frame_whole(bytes: &[u8], limits: &MessageLimits) -> Result<Frame, Rejection> {
    if bytes.len() > limits.max_message_bytes {
        return Err(unread(
            RejectionKind::TooLarge,
            format!(
                "message is {} bytes, more than the limit of {} (D3)",
                bytes.len(),
                limits.max_message_bytes
            ),
        ));
    }
    let syntax = |why: String| {
        unread(
            RejectionKind::Syntax,
            format!("message is not valid JSON or JSON5: {why}"),
        )
    };
    match Scanner::new().scan(bytes) {
        Scan::Complete(frame) => match leading_whitespace(&bytes[frame.end()..]) {
            blank if frame.end() + blank == bytes.len() => Ok(frame),
            blank => Err(syntax(format!(
                "more follows the object's end, at byte {} (D1)",
                frame.end() + blank
            ))),
        },
        Scan::Partial if only_whitespace(bytes) => Err(syntax("the message is empty".to_owned())),
        // A scanner without content runs reports none: Partial is the rest.
        Scan::Partial | Scan::Content(_) | Scan::TooDeep { .. } => Err(unread(
            RejectionKind::Incomplete,
            "message is not valid JSON or JSON5: it ends before its object does (D1)".to_owned(),
        )),
        Scan::Error {
            at,
            fault: Fault::NotAMessageStart,
        } => Err(not_an_object(bytes, at)),
        Scan::Error { at, fault } => Err(unread(
            RejectionKind::Framing,
            format!("message holds {fault} at byte {at}, which leaves its end in doubt (D1)"),
        )),
        Scan::TooLarge { .. } => Err(unread(
            RejectionKind::TooLarge,
            format!(
                "message is more than the limit of {} bytes (D3)",
                limits.max_message_bytes
            ),
        )),
    }
}

/// The refusal of a buffer whose first byte past whitespace, at `at`, is
/// not `{`: another JSON value, or no JSON at all. The reader stops at
/// its own nesting limit, so no text can drive it deep.
fn not_an_object(bytes: &[u8], at: usize) -> Rejection {
    let whole = std::str::from_utf8(bytes).is_ok_and(reader::is_one_value);
    let kind = match (bytes.get(at), whole) {
        (Some(b'['), _) => Some(Kind::Array),
        (Some(b'"' | b'\''), _) => Some(Kind::String),
        (Some(b't' | b'f'), true) => Some(Kind::Boolean),
        (Some(b'n'), true) => Some(Kind::Null),
        (Some(_), true) => Some(Kind::Number),
        _ => None,
    };
    match kind {
        Some(kind) => unread(
            RejectionKind::NotAnObject,
            format!("message is {}, not a JSON object", kind.described()),
        ),
        None => unread(
            RejectionKind::Syntax,
            format!(
                "message is not valid JSON or JSON5: a message is a JSON object, and byte {at} cannot start one (D1)"
            ),
        ),
    }
}

/// The rest of level 1, on the bytes of one framed message: UTF-8, depth,
/// lone surrogates (as the lexer found them), syntax, then what the parser
/// noted. A failure before the notes echoes `""`: the message could not be
/// read.
fn read<'a>(
    bytes: &'a [u8],
    frame: &Frame,
    limits: &MessageLimits,
    env: &mut Envelope<'a>,
) -> Result<(), Rejection> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        unread(
            RejectionKind::Syntax,
            format!("message is not valid UTF-8 (byte {}) (D4)", e.valid_up_to()),
        )
    })?;
    if frame.max_depth() > limits.max_depth {
        return Err(unread(
            RejectionKind::TooDeep,
            format!(
                "message nests objects and arrays {} levels deep, deeper than the limit of {} levels",
                frame.max_depth(),
                limits.max_depth
            ),
        ));
    }
    if let Some(at) = frame.lone_surrogate() {
        return Err(unread(
            RejectionKind::Syntax,
            format!(
                "message holds a lone surrogate escape at byte {}, which is not a character",
                at.saturating_sub(frame.start())
            ),
        ));
    }
    let mut notes = Notes::default();
    syntax::parse(text, env, &mut notes).map_err(|m| unread(RejectionKind::Syntax, m))?;
    if let Some(note) = notes.into_first() {
        // Still level 1 (D4, D9), but the message was read: echo it.
        let kind = match note {
            Note::Duplicate { .. } => RejectionKind::DuplicateKey,
            Note::NotJsonNumber { .. } => RejectionKind::NotJsonNumber,
        };
        return Err(Rejection::of(kind, note.to_string(), env.resource_echo()));
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
    // D6: missing and not a string are version errors too (level 2).
    let text =
        string_field("jsontp", &env.jsontp).map_err(|(_, message)| (RejectionKind::Version, message))?;
    let version: Version = text.parse().map_err(|e| {
        (
            RejectionKind::Version,
            format!("field \"jsontp\": {} {e}", quoted(text)),
        )
    })?;
    if !version.is_supported() {
        return Err((
            RejectionKind::UnsupportedVersion,
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
    if let Some(Ok(headers)) = &env.headers
        && headers.entries.len() > limits.max_headers
    {
        return Err((
            RejectionKind::TooManyHeaders,
            format!(
                "headers: {} headers, more than the limit of {} (D3)",
                headers.entries.len(),
                limits.max_headers
            ),
        ));
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

// Inlined, as `body_fields` is.
#[inline(always)]
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
// Inlined into the judges, each called once a message: a call that
// hands its result back through memory costs more than the check.
#[inline(always)]
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
// Inlined, as `body_fields` is.
#[inline(always)]
fn encoding(text: &str) -> Result<Encoding, Problem> {
    text.parse().map_err(|e| {
        (
            RejectionKind::Encoding,
            format!("field \"body.encoding\": {} {e} (D9)", quoted(text)),
        )
    })
}

/// Level 4: the content decodes (`400`) within the limit (`413`, D3).
// Inlined, as `body_fields` is.
#[inline(always)]
pub(super) fn decode_content(
    content: &str,
    encoding: Encoding,
    limits: &MessageLimits,
) -> Result<Vec<u8>, Problem> {
    let too_large = |limit| {
        (
            RejectionKind::ContentTooLarge,
            format!("field \"body.content\" decodes to more than the limit of {limit} bytes (D3)"),
        )
    };
    match encoding {
        // The text itself: no decoder needed, only the limit.
        Encoding::Identity if content.len() > limits.max_decoded_body => {
            Err(too_large(limits.max_decoded_body))
        }
        // Most requests carry none: no call to set up an empty vector.
        Encoding::Identity if content.is_empty() => Ok(Vec::new()),
        Encoding::Identity => Ok(content.as_bytes().to_vec()),
        _ => codec::decode(content, encoding, limits.max_decoded_body).map_err(|e| match e {
            DecodeError::Corrupt(why) => (
                RejectionKind::Content,
                format!("field \"body.content\" does not decode as {encoding}: it {why}"),
            ),
            DecodeError::TooLarge { limit } => too_large(limit),
        }),
    }
}

/// Levels 2 to 4 of a request read into `env`, the refusal echoing its
/// resource.
#[inline]
fn validate_request<R: From<Request>>(
    env: &Envelope<'_>,
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<R, Rejection> {
    match judge_request(env, context, limits) {
        Ok(request) => Ok(request),
        Err((kind, message)) => Err(Rejection::of(kind, message, env.resource_echo())),
    }
}

#[inline(always)]
fn judge_request<R: From<Request>>(
    env: &Envelope<'_>,
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<R, Problem> {
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
    let mut headers = Headers::new();
    let expect = request_headers(raw_headers, &mut headers).map_err(bad)?;
    // D10: after the acknowledgement, `expect` is ignored altogether.
    let expect = match context {
        RequestContext::Fresh => expect,
        RequestContext::AfterContinue => None,
    };
    let handshake = expect == Some("100-continue");
    // The first request of a handshake: its body may be absent, and any
    // object is ignored (D10); another type is still `400`.
    let fields = match (&env.body, handshake) {
        (None, true) => None,
        (_, true) => {
            object_field("body", &env.body)?;
            None
        }
        (_, false) => {
            let raw_body = object_field("body", &env.body)?;
            Some((raw_body, body_fields(raw_body)?))
        }
    };
    unknown_field(env, "status")?;

    // Level 4.
    if let Some(other) = expect.filter(|e| *e != "100-continue") {
        return Err((
            RejectionKind::Expectation,
            format!(
                "header \"expect\": {} is not supported; the only expectation is \"100-continue\" (D10)",
                quoted(other)
            ),
        ));
    }
    headers.expect_continue = handshake;
    let body = match fields {
        None => Body::empty(),
        Some((
            raw_body,
            BodyFields {
                content,
                encoding: name,
            },
        )) => {
            let encoding = encoding(name)?;
            let bytes = match content {
                Some(content) => decode_content(content, encoding, limits)?,
                None if method.requires_content() => {
                    return Err((
                        RejectionKind::Content,
                        format!(
                            "field \"body.content\" is missing, which a {method} request without \"expect\": \"100-continue\" must carry (D9)"
                        ),
                    ));
                }
                // D9: on other methods a missing `content` means "".
                None => Vec::new(),
            };
            Body::from_parts(bytes, encoding, raw_body.extra.as_deref())
        }
    };
    // Built where it is handed on (a box, for a connection): the request
    // is a few hundred bytes.
    Ok(R::from(Request {
        version,
        resource,
        method,
        headers,
        body,
    }))
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
    let body = Body::from_parts(bytes, encoding, raw_body.extra.as_deref());
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
fn status(raw: &RawStatus<'_>) -> Result<Status, Problem> {
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
    Ok(Status::new(code, human.to_owned()))
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

    fn framed(text: &str) -> Frame {
        match Scanner::new().scan(text.as_bytes()) {
            Scan::Complete(frame) => frame,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_framed_entry_takes_the_lexers_word_for_depth_and_surrogates() {
        let limits = MessageLimits::default();
        let deep = format!("{}{}", "[".repeat(64), "]".repeat(64));
        let text = format!(r#"{{"x":{deep}}}"#);
        let e =
            parse_request_framed::<Request>(text.as_bytes(), &framed(&text), RequestContext::Fresh, &limits)
                .unwrap_err();
        assert_eq!(e.kind(), RejectionKind::TooDeep);
        assert!(
            e.message.contains("65 levels deep, deeper than the limit of 64"),
            "{e}"
        );
        let text = r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","x":"\ud800"}}"#;
        let frame = framed(text);
        let e = parse_request_framed::<Request>(text.as_bytes(), &frame, RequestContext::Fresh, &limits)
            .unwrap_err();
        assert_eq!(e.kind(), RejectionKind::Syntax);
        let at = text.find("\\ud800").unwrap();
        assert!(
            e.message
                .contains(&format!("lone surrogate escape at byte {at},")),
            "{e}"
        );
        let e = parse_response_framed(text.as_bytes(), &frame, Validation::Lenient, &limits).unwrap_err();
        assert!(e.message.contains("lone surrogate"), "{e}");
    }
}
