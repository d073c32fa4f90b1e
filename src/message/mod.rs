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
//! - [`framing`] is the one lexer: it finds where each message ends on a
//!   stream (D1), how deep it nests (D3) and whether it escapes a lone
//!   surrogate (D4). One reader then reads the text, JSON and JSON5 alike,
//!   and one judge answers in D5's order. The common message, strict JSON
//!   without escapes in the usual shape, is framed and read in one pass
//!   instead (`read/quick.rs`, the one shortcut): it fills the same
//!   envelope for the same judge, or gives up.
//! - [`negotiate`] holds the helpers an application uses to answer
//!   `accept-*` and conditional headers; [`codec`] the body encodings (D9).

// The layers: header values and their tokens; reading (lexer, shortcut,
// text reader, envelope, judge); writing; the content codecs, whole and
// streamed. Below them all, the text of a JSON string both ways
// (`string.rs` reads it, `json_text.rs` writes it) and the word-wide byte
// searches. What is public is re-exported here, at one path.
pub(crate) mod buffer;
mod content;
mod headers;
mod read;
mod write;

pub use content::codec;
pub(crate) use read::decoder;
pub use read::framing;

pub mod form;
mod json_text;
mod leniency;
mod method;
pub mod negotiate;
#[cfg(any(test, debug_assertions, fuzzing))]
#[doc(hidden)]
pub mod oracles;
mod rejection;
mod resource;
mod shortcuts;
mod status;
mod string;
mod types;
mod version;
mod words;

pub(crate) use write::{STREAMED_TAIL, WholeMessage};

pub use content::content_stream::{ContentDecoder, ContentEncoder, EncodeError};
pub use content::encoding::Encoding;
pub use content::pace::Drain;
pub use headers::cookies::Cookies;
pub use headers::date::Date;
pub use headers::language::{LanguageRange, LanguageTag};
pub use headers::media::{MediaRange, MediaType};
pub use headers::weight::{Weight, Weighted};
pub use headers::{EncodingRange, HeaderName, Headers};
pub use leniency::{Forgiven, Validation};
pub use method::Method;
pub use read::{Parsed, RequestContext, parse_request, parse_response};
pub use rejection::{Rejection, RejectionKind, ValueError};
pub use resource::Resource;
pub use status::{Status, StatusCode};
pub use types::{Body, MessageLimits, Request, Response};
pub(crate) use types::{TransportCopy, Written, WrittenText};
pub use version::Version;
