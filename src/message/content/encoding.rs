//! The four content encodings (D9).

use std::fmt;
use std::str::FromStr;

use crate::message::ValueError;

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

/// The three encodings that carry compressed bytes (D9): a compressor
/// is only ever made for one of these, never for identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compressed {
    Gzip,
    Deflate,
    Br,
}

impl Compressed {
    /// The compression `encoding` names; `None` for identity, whose
    /// content is the text itself.
    pub(crate) fn of(encoding: Encoding) -> Option<Compressed> {
        match encoding {
            Encoding::Identity => None,
            Encoding::Gzip => Some(Compressed::Gzip),
            Encoding::Deflate => Some(Compressed::Deflate),
            Encoding::Br => Some(Compressed::Br),
        }
    }
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

    /// The wire name, compared exactly (D9). A `match`: the lengths tell
    /// the four apart before any comparison.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "identity" => Ok(Encoding::Identity),
            "gzip" => Ok(Encoding::Gzip),
            "deflate" => Ok(Encoding::Deflate),
            "br" => Ok(Encoding::Br),
            _ => Err(ValueError::new("is not one of gzip, deflate, br, identity")),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
