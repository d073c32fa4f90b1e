//! The content codecs (D9, D19): whole ([`codec`]) and streamed
//! ([`content_stream`]).

pub(crate) mod base64;
pub mod codec;
pub(crate) mod content_stream;
pub(crate) mod encoding;
pub(crate) mod pace;
mod paced;
mod stored;
