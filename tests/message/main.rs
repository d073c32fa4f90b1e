//! The message layer's tests, one binary: the lexer (D1), the syntax layer
//! (D4, D9), parsing and validation of single messages in D5's order, the
//! fields and values of one message (D6-D8, D15), the helpers an
//! application answers with (D11, D17, D18), rejections and serialization
//! as snapshots, round trips, and body decoding bombs.

mod codec_bombs;
mod content_stream;
mod cookies;
mod framing;
mod headers;
mod negotiation;
mod parse;
mod quick;
mod reject_snapshots;
mod resources;
mod roundtrip;
mod sample_request;
mod serialize_snapshots;
mod status;
mod support;
mod syntax;
mod versions;
