//! Language tags (D18): `ll-CC`, an ISO 639-1 language code and an ISO 3166-1
//! alpha-2 country code, both checked against the real code lists.

use std::fmt;
use std::str::FromStr;

use crate::message::ValueError;
use crate::message::headers::iso_codes;

/// A language tag `ll-CC` whose codes both exist, stored normalised
/// (`en-US`): lower-case language, upper-case country.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LanguageTag {
    /// The five ASCII bytes `ll-CC`, normalised, so that [`Self::as_str`]
    /// needs no allocation.
    text: [u8; 5],
}

/// The refusal for anything not shaped `ll-CC`.
const NOT_A_TAG: &str = "is not a language tag like en-US";

impl LanguageTag {
    /// `en-US`, the default language of a server (D18).
    pub const EN_US: LanguageTag = LanguageTag { text: *b"en-US" };

    /// The normalised text, e.g. `en-US`.
    pub fn as_str(&self) -> &str {
        // `text` only ever holds ASCII letters and `-` (see `from_str`).
        std::str::from_utf8(&self.text).unwrap_or("en-US")
    }

    /// [`as_str`](Self::as_str)'s bytes, without the check that they are
    /// UTF-8 (they are ASCII).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.text
    }

    /// The ISO 639-1 language code, lower-case, e.g. `en`.
    pub fn language(&self) -> &str {
        &self.as_str()[..2]
    }

    /// The ISO 3166-1 alpha-2 country code, upper-case, e.g. `US`.
    pub fn country(&self) -> &str {
        &self.as_str()[3..]
    }
}

impl FromStr for LanguageTag {
    type Err = ValueError;

    /// Case-insensitive; refuses codes that are not in ISO 639-1 / 3166-1
    /// (D18).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let &[l0, l1, b'-', c0, c1] = s.as_bytes() else {
            return Err(ValueError::new(NOT_A_TAG));
        };
        if ![l0, l1, c0, c1].iter().all(u8::is_ascii_alphabetic) {
            return Err(ValueError::new(NOT_A_TAG));
        }
        let language = [l0.to_ascii_lowercase(), l1.to_ascii_lowercase()];
        let country = [c0.to_ascii_uppercase(), c1.to_ascii_uppercase()];
        if !iso_codes::is_language(language) {
            return Err(ValueError::new(format!(
                "is not a language tag like en-US: \"{}{}\" is not an ISO 639-1 language code",
                char::from(language[0]),
                char::from(language[1])
            )));
        }
        if !iso_codes::is_country(country) {
            return Err(ValueError::new(format!(
                "is not a language tag like en-US: \"{}{}\" is not an ISO 3166-1 country code",
                char::from(country[0]),
                char::from(country[1])
            )));
        }
        Ok(LanguageTag {
            text: [language[0], language[1], b'-', country[0], country[1]],
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(s: &str) -> Result<LanguageTag, String> {
        s.parse::<LanguageTag>().map_err(|e| e.reason().to_owned())
    }

    #[test]
    fn d18_valid_tags_are_normalised() {
        assert_eq!(tag("en-US").unwrap().as_str(), "en-US");
        assert_eq!(tag("fr-FR").unwrap().as_str(), "fr-FR");
        assert_eq!(tag("EN-us").unwrap(), LanguageTag::EN_US);
        assert_eq!(tag("pt-br").unwrap().to_string(), "pt-BR");
        assert_eq!(LanguageTag::EN_US.language(), "en");
        assert_eq!(LanguageTag::EN_US.country(), "US");
    }

    #[test]
    fn d18_malformed_tags_are_refused() {
        for bad in [
            "english", "en", "en-USA", "en_US", "", "e1-US", "en-U1", "-en-US", "en-US ", "é-US",
        ] {
            assert_eq!(
                tag(bad).unwrap_err(),
                "is not a language tag like en-US",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn d18_unknown_codes_are_named() {
        assert_eq!(
            tag("xx-US").unwrap_err(),
            "is not a language tag like en-US: \"xx\" is not an ISO 639-1 language code"
        );
        assert_eq!(
            tag("en-XX").unwrap_err(),
            "is not a language tag like en-US: \"XX\" is not an ISO 3166-1 country code"
        );
        // `UK` is reserved in ISO 3166-1, not assigned: Britain is `GB`.
        assert!(tag("en-UK").is_err());
        assert!(tag("en-GB").is_ok());
    }

    #[test]
    fn d18_ranges() {
        assert_eq!("*".parse::<LanguageRange>().unwrap(), LanguageRange::Any);
        assert_eq!(
            "en-us".parse::<LanguageRange>().unwrap(),
            LanguageRange::Tag(LanguageTag::EN_US)
        );
        assert_eq!(LanguageRange::Any.to_string(), "*");
        assert!("**".parse::<LanguageRange>().is_err());
    }
}
