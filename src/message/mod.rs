//! The message layer: jsontp messages as types, and the pure functions that
//! parse, validate and serialize them.
//!
//! Nothing here touches sockets, threads, files or the clock: where a `date`
//! is written, the current time is an argument.
//!
//! - [`parse_request`] / [`parse_response`] turn the bytes of one message into
//!   a validated [`Request`] or [`Response`], or a [`Rejection`] that carries
//!   the status code D5 gives and a `human-message` naming the field.
//! - [`Request::to_bytes`] / [`Response::to_bytes`] write compact JSON plus
//!   `\n` (D1).
//! - [`framing`] is the one lexer every parser runs behind: it finds where
//!   each message ends on a stream (D1), how deep it nests (D3) and whether
//!   it escapes a lone surrogate (D4). The common message, strict JSON
//!   without escapes in the usual shape, is framed and read in one pass
//!   instead (`quick.rs`), which gives up on anything else.
//! - [`negotiate`] holds the helpers an application uses to answer
//!   `accept-*` and conditional headers; [`codec`] the body encodings (D9).

pub mod codec;
pub mod content_stream;
pub mod cookies;
pub mod date;
mod envelope;
pub mod form;
pub mod framing;
mod header_values;
mod headers;
mod iso_codes;
mod json_text;
pub mod language;
mod leniency;
pub mod media;
mod method;
pub mod negotiate;
#[cfg(any(test, debug_assertions, fuzzing))]
#[doc(hidden)]
pub mod oracles;
mod parse;
mod quick;
mod reader;
mod rejection;
pub mod resource;
mod serialize;
pub(crate) use serialize::STREAMED_TAIL;
mod shortcuts;
mod status;
mod string;
mod syntax;
mod types;
mod version;
mod weight;
mod words;

pub use codec::Encoding;
pub use content_stream::{ContentDecoder, ContentEncoder, EncodeError};
pub use cookies::Cookies;
pub use date::Date;
pub use headers::{EncodingRange, HeaderName, Headers};
pub use language::{LanguageRange, LanguageTag};
pub use leniency::{Forgiven, Validation};
pub use media::{MediaRange, MediaType};
pub use method::Method;
pub use parse::{Parsed, RequestContext, parse_request, parse_response};
/// For the connection machine, whose scanner has framed each message
/// already: no byte is lexed twice (see [`parse::parse_request_framed`]).
#[allow(unused_imports)]
pub(crate) use parse::{
    named_encoding, parse_request_framed, parse_request_quick, parse_response_framed, parse_response_quick,
};
pub use rejection::{Rejection, RejectionKind, ValueError};
pub use resource::Resource;
pub use status::{Status, StatusCode};
pub(crate) use types::Content;
pub use types::{Body, MessageLimits, Request, Response};
pub use version::Version;
pub use weight::{Weight, Weighted};
