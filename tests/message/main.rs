//! The message layer's tests, one binary: the lexer (D1), the syntax layer
//! (D4, D9), parsing and validation of single messages in D5's order,
//! rejections and serialization as snapshots, round trips, and body
//! decoding bombs.

mod codec_bombs;
mod framing;
mod parse;
mod reject_snapshots;
mod roundtrip;
mod serialize_snapshots;
mod support;
mod syntax;
