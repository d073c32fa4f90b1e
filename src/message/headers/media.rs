//! Media types and media ranges (D8, D18), as HTTP writes them:
//! `type/subtype` with optional `; name=value` parameters.

use std::fmt;
use std::str::FromStr;

use crate::message::headers::weight::{BAD_WEIGHT, trim_ows};
use crate::message::{ValueError, Weight, Weighted};

/// A media type such as `text/plain; charset=utf-8`. Type and subtype are
/// stored lower-case; parameters keep their order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MediaType {
    essence: String,
    slash: usize,
    params: Vec<(String, String)>,
}

impl MediaType {
    /// The top-level type, e.g. `text`.
    pub fn type_(&self) -> &str {
        &self.essence[..self.slash]
    }

    /// The subtype, e.g. `plain`.
    pub fn subtype(&self) -> &str {
        &self.essence[self.slash + 1..]
    }

    /// `type/subtype` without parameters.
    pub fn essence(&self) -> &str {
        &self.essence
    }

    /// The parameters, names lower-case, in the order given.
    pub fn params(&self) -> &[(String, String)] {
        &self.params
    }
}

impl FromStr for MediaType {
    type Err = ValueError;

    /// `type/subtype` tokens and `; name=value` parameters (RFC 9110 §8.3.1),
    /// with optional whitespace around the `;` and the whole. Wildcards (`*`)
    /// belong to ranges, not to types.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
            .filter(|m| m.type_() != "*" && m.subtype() != "*")
            .ok_or_else(|| ValueError::new("is not a media type like text/plain"))
    }
}

impl fmt::Display for MediaType {
    /// Canonical: `type/subtype; name=value`, a value quoted only when it is
    /// not a token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.essence)?;
        for (name, value) in &self.params {
            write!(f, "; {name}=")?;
            if !value.is_empty() && value.bytes().all(is_tchar) {
                f.write_str(value)?;
            } else {
                f.write_str("\"")?;
                for c in value.chars() {
                    if c == '"' || c == '\\' {
                        f.write_str("\\")?;
                    }
                    write!(f, "{c}")?;
                }
                f.write_str("\"")?;
            }
        }
        Ok(())
    }
}

/// RFC 9110 `tchar`: the bytes a token is made of (one table look-up, not
/// a search through the punctuation).
#[inline]
fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

static TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// The token at the start of `s` and the rest, or `None` if empty.
fn token(s: &str) -> Option<(&str, &str)> {
    let end = s.bytes().position(|b| !is_tchar(b)).unwrap_or(s.len());
    (end > 0).then(|| s.split_at(end))
}

/// A quoted-string at the start of `s` (which begins with `"`): its
/// unescaped value and the rest after the closing quote.
fn quoted_string(s: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &s[i + 1..])),
            '\\' => {
                let (_, escaped) = chars.next()?;
                if escaped.is_ascii_control() && escaped != '\t' {
                    return None;
                }
                value.push(escaped);
            }
            // qdtext: no controls other than tab (RFC 9110 §5.6.4).
            c if c.is_ascii_control() && c != '\t' => return None,
            c => value.push(c),
        }
    }
    None
}

/// The grammar shared by types and ranges; wildcards are checked by the
/// callers.
fn parse(s: &str) -> Option<MediaType> {
    let s = trim_ows(s);
    let (type_, rest) = token(s)?;
    let rest = rest.strip_prefix('/')?;
    let (subtype, mut rest) = token(rest)?;
    let mut essence = String::with_capacity(type_.len() + 1 + subtype.len());
    essence.push_str(type_);
    essence.push('/');
    essence.push_str(subtype);
    essence.make_ascii_lowercase();
    let mut params = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            break;
        }
        rest = rest.strip_prefix(';')?.trim_start_matches([' ', '\t']);
        // An empty parameter (`text/plain;` or `;;`) is allowed by the grammar.
        if rest.is_empty() || rest.starts_with(';') {
            continue;
        }
        let (name, after_name) = token(rest)?;
        let after_eq = after_name.strip_prefix('=')?;
        let (value, after_value) = if after_eq.starts_with('"') {
            quoted_string(after_eq)?
        } else {
            let (v, r) = token(after_eq)?;
            (v.to_owned(), r)
        };
        params.push((name.to_ascii_lowercase(), value));
        rest = after_value;
    }
    Some(MediaType {
        essence,
        slash: type_.len(),
        params,
    })
}

/// A media range of `accept`: `type/subtype`, `type/*` or `*/*`, with
/// optional parameters. Its weight (`;q=`) is not part of it: an `accept`
/// entry is a [`Weighted<MediaRange>`](crate::message::Weighted).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MediaRange {
    range: MediaType,
}

impl MediaRange {
    /// Whether `media` falls in this range (parameters of the range must be
    /// present on `media` with equal values).
    ///
    /// Values of `charset` compare case-insensitively, others exactly (RFC
    /// 9110 §8.3.1).
    pub fn matches(&self, media: &MediaType) -> bool {
        let r = &self.range;
        let type_ok = r.type_() == "*" || r.type_() == media.type_();
        let subtype_ok = r.subtype() == "*" || r.subtype() == media.subtype();
        type_ok
            && subtype_ok
            && r.params.iter().all(|(name, value)| {
                media.params.iter().any(|(n, v)| {
                    n == name && (v == value || (name == "charset" && v.eq_ignore_ascii_case(value)))
                })
            })
    }

    /// How specific the range is, for HTTP's rule that the most specific
    /// matching range decides a media type's weight (RFC 9110 §12.5.1):
    /// `*/*` < `type/*` < `type/subtype` < the same with parameters, more
    /// parameters more specific.
    pub(crate) fn specificity(&self) -> (u8, usize) {
        let r = &self.range;
        let level = match (r.type_(), r.subtype()) {
            ("*", _) => 0,
            (_, "*") => 1,
            _ => 2,
        };
        (level, r.params.len())
    }

    /// The range as a media type (which may hold `*`).
    pub fn as_media_type(&self) -> &MediaType {
        &self.range
    }
}

/// `*/subtype` is not a range.
fn range(media: MediaType) -> Option<MediaRange> {
    (media.type_() != "*" || media.subtype() == "*").then_some(MediaRange { range: media })
}

const NOT_A_RANGE: &str = "is not a media range like text/*";

impl FromStr for MediaRange {
    type Err = ValueError;

    /// `type/subtype`, `type/*` or `*/*`, with parameters; `*/subtype` is
    /// not a range. A `q` parameter is a weight, which a bare range cannot
    /// hold: read such an entry as a [`Weighted<MediaRange>`](crate::message::Weighted).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let media = parse(s).ok_or_else(|| ValueError::new(NOT_A_RANGE))?;
        if media.params.iter().any(|(name, _)| name == "q") {
            return Err(ValueError::new(
                "has a weight (q=), which a media range without its weight cannot hold",
            ));
        }
        range(media).ok_or_else(|| ValueError::new(NOT_A_RANGE))
    }
}

impl FromStr for Weighted<MediaRange> {
    type Err = ValueError;

    /// An `accept` entry: a media range, then optionally its weight `q`
    /// among the parameters (D8). As in HTTP, `q` ends the media type's
    /// parameters: any after it are accept extensions, which are dropped
    /// (RFC 9110 §12.5.1).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut media = parse(s).ok_or_else(|| ValueError::new(NOT_A_RANGE))?;
        let mut weight = Weight::ONE;
        if let Some(at) = media.params.iter().position(|(name, _)| name == "q") {
            weight = media.params[at]
                .1
                .parse()
                .map_err(|_| ValueError::new(BAD_WEIGHT))?;
            media.params.truncate(at);
        }
        let value = range(media).ok_or_else(|| ValueError::new(NOT_A_RANGE))?;
        Ok(Weighted { value, weight })
    }
}

impl fmt::Display for MediaRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.range.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(s: &str) -> MediaType {
        s.parse().unwrap()
    }

    fn range(s: &str) -> MediaRange {
        s.parse().unwrap()
    }

    #[test]
    fn d8_types_are_parsed_and_lower_cased() {
        let m = media("Text/Plain; Charset=UTF-8");
        assert_eq!(
            (m.type_(), m.subtype(), m.essence()),
            ("text", "plain", "text/plain")
        );
        assert_eq!(m.params(), [("charset".to_owned(), "UTF-8".to_owned())]);
        assert_eq!(m.to_string(), "text/plain; charset=UTF-8");
        let m = media("  application/vnd.api+json ;a=1;b=\"x; \\\"y\\\"\"  ;  ");
        assert_eq!(m.essence(), "application/vnd.api+json");
        assert_eq!(m.params()[1], ("b".to_owned(), "x; \"y\"".to_owned()));
        assert_eq!(m.to_string(), "application/vnd.api+json; a=1; b=\"x; \\\"y\\\"\"");
        // The canonical form reads back as the same type.
        assert_eq!(media(&m.to_string()), m);
        assert_eq!(media("text/plain; x=\"\"").to_string(), "text/plain; x=\"\"");
    }

    #[test]
    fn the_tchar_table_is_rfc_9110s_tchar() {
        for b in 0..=255u8 {
            let expected = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(is_tchar(b), expected, "byte {b:#04x}");
        }
    }

    #[test]
    fn ows_is_trimmed_from_both_ends_only() {
        for s in ["", " ", "\t \t", " a ", "\ta b\t", "a", "  é\t", "\u{a0}a\u{a0}"] {
            assert_eq!(trim_ows(s), s.trim_matches([' ', '\t']), "{s:?}");
        }
    }

    #[test]
    fn d8_malformed_types_are_refused() {
        for bad in [
            "",
            "textplain",
            "text/",
            "/plain",
            "text/plain/x",
            "text /plain",
            "text/ plain",
            "text/plain; charset",
            "text/plain; charset=",
            "text/plain; charset = utf-8",
            "text/plain; charset=\"utf-8",
            "text/plain; a=b c",
            "text/pl@in",
            "tëxt/plain",
            "text/plain, text/html",
            "*/*",
            "text/*",
            "text/plain; a=\"\x01\"",
        ] {
            assert_eq!(
                bad.parse::<MediaType>().unwrap_err().reason(),
                "is not a media type like text/plain",
                "{bad:?}"
            );
        }
    }

    fn weighted(s: &str) -> Result<(String, u16), String> {
        s.parse::<Weighted<MediaRange>>()
            .map(|w| (w.value.to_string(), w.weight.thousandths()))
            .map_err(|e| e.reason().to_owned())
    }

    #[test]
    fn d18_ranges() {
        for ok in ["*/*", "text/*", "text/plain", "TEXT/*; a=b"] {
            assert!(ok.parse::<MediaRange>().is_ok(), "{ok:?}");
        }
        for bad in ["*/plain", "*", "text", "", "text/*; q", "*/*/*"] {
            assert_eq!(
                bad.parse::<MediaRange>().unwrap_err().reason(),
                "is not a media range like text/*",
                "{bad:?}"
            );
        }
        assert!("text/*;q=0.5".parse::<MediaRange>().is_err());
        assert_eq!(range("Text/*;A=0.5").to_string(), "text/*; a=0.5");
        // An empty parameter is allowed by the grammar (RFC 9110 §5.6.6).
        assert_eq!(range("text/*;").to_string(), "text/*");
    }

    #[test]
    fn d8_accept_entries_carry_a_weight() {
        assert_eq!(weighted("text/*"), Ok(("text/*".into(), 1000)));
        assert_eq!(weighted("TEXT/*; Q=0.5"), Ok(("text/*".into(), 500)));
        assert_eq!(weighted("*/*;q=0"), Ok(("*/*".into(), 0)));
        // `q` ends the media parameters; accept extensions after it are dropped.
        assert_eq!(
            weighted("text/html;level=1;q=0.7;ext=x"),
            Ok(("text/html; level=1".into(), 700))
        );
        for bad in ["text/*;q=2", "text/*;q=0.1234", "text/*;q=high", "text/*;q=\"\""] {
            assert_eq!(weighted(bad), Err(BAD_WEIGHT.to_owned()), "{bad:?}");
        }
        assert_eq!(weighted("*/plain;q=1"), Err(NOT_A_RANGE.to_owned()));
        let w: Weighted<MediaRange> = "text/*;q=0.25".parse().unwrap();
        assert_eq!(w.to_string(), "text/*;q=0.25");
    }

    #[test]
    fn d18_specificity() {
        let s = |r: &str| range(r).specificity();
        assert!(s("*/*") < s("text/*"));
        assert!(s("text/*") < s("text/plain"));
        assert!(s("text/plain") < s("text/plain; charset=utf-8"));
    }

    #[test]
    fn d18_matching() {
        let plain = media("text/plain; charset=utf-8");
        assert!(range("*/*").matches(&plain));
        assert!(range("text/*").matches(&plain));
        assert!(range("text/plain").matches(&plain));
        assert!(range("TEXT/PLAIN").matches(&plain));
        assert!(range("text/plain; charset=UTF-8").matches(&plain));
        assert!(!range("text/plain; charset=latin1").matches(&plain));
        assert!(!range("text/plain; format=flowed").matches(&plain));
        assert!(!range("text/html").matches(&plain));
        assert!(!range("image/*").matches(&plain));
        assert!(!range("image/png").matches(&media("image/png2")));
        // Parameters of the media beyond the range's do not matter.
        assert!(range("text/plain").matches(&media("text/plain; x=y")));
        assert_eq!(range("text/*").as_media_type().subtype(), "*");
    }
}
