//! Language tags (D18): `ll-CC`, an ISO 639-1 language code and an ISO 3166-1
//! alpha-2 country code, both checked against the real code lists.

use std::fmt;
use std::str::FromStr;

use super::ValueError;

/// A language tag `ll-CC` whose codes both exist, stored normalised
/// (`en-US`): lower-case language, upper-case country.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LanguageTag {
    language: [u8; 2],
    country: [u8; 2],
}

impl LanguageTag {
    /// `en-US`, the default language of a server (D18).
    pub const EN_US: LanguageTag = LanguageTag {
        language: *b"en",
        country: *b"US",
    };

    /// The normalised text, e.g. `en-US`.
    pub fn as_str(&self) -> &str {
        let _ = self;
        todo!("issue 2: language tags")
    }
}

impl FromStr for LanguageTag {
    type Err = ValueError;

    /// Case-insensitive; refuses codes that are not in ISO 639-1 / 3166-1.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let _ = s;
        todo!("issue 2: language tags")
    }
}

impl fmt::Display for LanguageTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `accept-language`: a tag, or `*` for any language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LanguageRange {
    /// `*`.
    Any,
    /// A specific language.
    Tag(LanguageTag),
}

impl FromStr for LanguageRange {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "*" {
            Ok(LanguageRange::Any)
        } else {
            s.parse().map(LanguageRange::Tag)
        }
    }
}

impl fmt::Display for LanguageRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LanguageRange::Any => f.write_str("*"),
            LanguageRange::Tag(t) => t.fmt(f),
        }
    }
}
