//! Parsing and validating one message from bytes (D4, D5, D6, D8, D9).

use super::{MessageLimits, Rejection, Request, Response};

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
    /// published reference crate sends both) and reported.
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
pub fn parse_request(
    bytes: &[u8],
    context: RequestContext,
    limits: &MessageLimits,
) -> Result<Request, Rejection> {
    let _ = (bytes, context, limits);
    todo!("issue 2: parse requests")
}

/// Parses and validates the bytes of one response message (client side).
pub fn parse_response(
    bytes: &[u8],
    validation: Validation,
    limits: &MessageLimits,
) -> Result<Parsed<Response>, Rejection> {
    let _ = (bytes, validation, limits);
    todo!("issue 2: parse responses")
}
