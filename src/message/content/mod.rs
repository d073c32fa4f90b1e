//! The content codecs (D9, D19): whole ([`codec`]) and streamed
//! ([`content_stream`]).

pub mod codec;
pub mod content_stream;
