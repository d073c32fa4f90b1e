//! `body.content` piece by piece (D19): a [`ContentDecoder`] turns the text
//! of a `content` string, as it arrives, into the decoded bytes, and a
//! [`ContentEncoder`] turns bytes into that text, without ever holding the
//! whole content in either form.
//!
//! The text is the string's JSON form between its quotes, escapes as
//! written; pieces may split it anywhere, inside an escape, a UTF-8
//! sequence or a base64 quantum. Decoding is the same as
//! [`codec::decode`](super::codec::decode) of the whole string, and encoding
//! the same as [`codec::encode`](super::codec::encode) plus JSON escaping:
//! the same bytes, the same errors, whatever the split.

use std::fmt;

use super::codec::{DecodeError, Encoding};

/// Decodes the text of one `content` string as it arrives (D19).
pub struct ContentDecoder {
    encoding: Encoding,
    limit: usize,
}

impl fmt::Debug for ContentDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentDecoder")
            .field("encoding", &self.encoding)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl ContentDecoder {
    /// A decoder for content in `encoding` that refuses to produce more
    /// than `limit` decoded bytes (D19: `413`, decoding stops there).
    pub fn new(encoding: Encoding, limit: usize) -> ContentDecoder {
        let _ = (encoding, limit);
        todo!("content decoder")
    }

    /// The encoding being decoded.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Takes the next piece of the string's text (all of it: what cannot
    /// be decoded yet is kept) and appends at most `max_out` decoded bytes
    /// to `out`. While [`has_pending`](Self::has_pending), call again with
    /// an empty `text` for the rest before giving more.
    pub fn decode(&mut self, text: &[u8], out: &mut Vec<u8>, max_out: usize) -> Result<(), DecodeError> {
        let _ = (text, out, max_out);
        todo!("content decoder")
    }

    /// Whether text taken is not yet wholly decoded (the last call stopped
    /// at `max_out`).
    pub fn has_pending(&self) -> bool {
        todo!("content decoder")
    }

    /// The string ended. Appends at most `max_out` more decoded bytes to
    /// `out`; `Ok(true)` once every byte is out and the content is complete
    /// (a whole base64 text, a finished compressed stream), `Ok(false)`
    /// when more remains: call again.
    pub fn finish(&mut self, out: &mut Vec<u8>, max_out: usize) -> Result<bool, DecodeError> {
        let _ = (out, max_out);
        todo!("content decoder")
    }

    /// Decoded bytes produced so far.
    pub fn decoded_bytes(&self) -> u64 {
        todo!("content decoder")
    }
}

/// Content that cannot be written in the encoding asked for: `identity`
/// content that is not UTF-8 text (D9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    /// Content bytes taken before the first one that is not UTF-8.
    pub valid_up_to: u64,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the content is not UTF-8 text after byte {}, so it cannot be sent as identity",
            self.valid_up_to
        )
    }
}

impl std::error::Error for EncodeError {}

/// Encodes content as the text of a `content` string, piece by piece (D19).
pub struct ContentEncoder {
    encoding: Encoding,
}

impl fmt::Debug for ContentEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentEncoder")
            .field("encoding", &self.encoding)
            .finish_non_exhaustive()
    }
}

impl ContentEncoder {
    /// An encoder for `encoding`.
    pub fn new(encoding: Encoding) -> ContentEncoder {
        let _ = encoding;
        todo!("content encoder")
    }

    /// The encoding written.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Encodes the next piece of content and appends the string text it
    /// makes (JSON-escaped, without quotes) to `out`.
    pub fn encode(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let _ = (bytes, out);
        todo!("content encoder")
    }

    /// The content ended: appends the rest of the text to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let _ = out;
        todo!("content encoder")
    }
}
