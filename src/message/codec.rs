//! Body encodings (D9): `identity` text, or base64 of gzip (RFC 1952),
//! deflate (zlib, RFC 1950) or br (RFC 7932). Decoding stops at the decoded
//! size limit (D3) and never allocates past it.

use std::fmt;
use std::str::FromStr;

use super::ValueError;

/// The value of `body.encoding` (D9), compared exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `content` is the text itself.
    Identity,
    /// Base64 of a gzip stream (RFC 1952).
    Gzip,
    /// Base64 of a zlib stream (RFC 1950), as HTTP's `deflate`.
    Deflate,
    /// Base64 of a Brotli stream (RFC 7932).
    Br,
}

impl Encoding {
    /// All four, identity first.
    pub const ALL: [Encoding; 4] = [
        Encoding::Identity,
        Encoding::Gzip,
        Encoding::Deflate,
        Encoding::Br,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
            Encoding::Br => "br",
        }
    }
}

impl FromStr for Encoding {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| ValueError::new("is not one of gzip, deflate, br, identity"))
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why `content` could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not valid base64, or not a valid compressed stream (`400`, D5 level 4).
    Corrupt(ValueError),
    /// The decoded bytes would pass the limit (`413`, D3).
    TooLarge {
        /// The limit that was reached, in bytes.
        limit: usize,
    },
}

/// Decodes a `content` string written in `encoding` into bytes, refusing to
/// produce more than `limit` bytes.
pub fn decode(content: &str, encoding: Encoding, limit: usize) -> Result<Vec<u8>, DecodeError> {
    let _ = (content, encoding, limit);
    todo!("issue 2: codec")
}

/// Encodes `bytes` as the `content` string of `encoding`. `Identity`
/// requires UTF-8 (the caller checks; invalid bytes are replaced here).
pub fn encode(bytes: &[u8], encoding: Encoding) -> String {
    let _ = (bytes, encoding);
    todo!("issue 2: codec")
}
