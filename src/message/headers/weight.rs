//! The tokens every weighted header value is made of (D8): HTTP's
//! optional whitespace, and the weight (`;q=`) that `accept`,
//! `accept-encoding` and `accept-language` entries carry.

use std::fmt;
use std::str::FromStr;

use crate::message::ValueError;

/// `s` without HTTP's optional whitespace (spaces and tabs) at either
/// end: a byte loop, several times cheaper than `trim_matches` with a set
/// of characters, which decodes each one.
#[inline]
pub(crate) fn trim_ows(s: &str) -> &str {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let bytes = s.as_bytes();
    // Most values have nothing to trim.
    if !bytes.first().is_some_and(is_ows) && !bytes.last().is_some_and(is_ows) {
        return s;
    }
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !is_ows(b)).map_or(start, |i| i + 1);
    // Space and tab are ASCII: both ends are character boundaries.
    s.get(start..end).unwrap_or_default()
}

/// HTTP's weight, the `;q=` of an `accept`, `accept-encoding` or
/// `accept-language` entry (D8, RFC 9110 §12.4.2): from 0 to 1 with at
/// most three decimals, held in thousandths. `0` means "not acceptable";
/// an entry without `q` weighs 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Weight(u16);

impl Weight {
    /// `q=1`, the weight of an entry that gives none.
    pub const ONE: Weight = Weight(1000);
    /// `q=0`: not acceptable.
    pub const ZERO: Weight = Weight(0);

    /// The weight of `n` thousandths; `None` past 1000.
    pub const fn from_thousandths(n: u16) -> Option<Weight> {
        if n <= 1000 { Some(Weight(n)) } else { None }
    }

    /// The weight in thousandths, 0 to 1000.
    pub const fn thousandths(self) -> u16 {
        self.0
    }

    /// Whether an entry of this weight is acceptable at all (`q` above 0).
    pub const fn is_acceptable(self) -> bool {
        self.0 > 0
    }
}

impl Default for Weight {
    fn default() -> Self {
        Weight::ONE
    }
}

impl FromStr for Weight {
    type Err = ValueError;

    /// RFC 9110's `qvalue`: `0` or `1`, then optionally `.` and up to three
    /// digits (only zeros after a `1`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ValueError::new("is not a weight from 0 to 1 with at most three decimals");
        let (whole, decimals) = match s.split_once('.') {
            Some((whole, decimals)) => (whole, decimals),
            None => (s, ""),
        };
        if decimals.len() > 3 || !decimals.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let fraction = decimals
            .bytes()
            .chain(std::iter::repeat(b'0'))
            .take(3)
            .fold(0u16, |n, digit| n * 10 + u16::from(digit - b'0'));
        match whole {
            "0" => Ok(Weight(fraction)),
            "1" if fraction == 0 => Ok(Weight::ONE),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Weight {
    /// The shortest form: `1`, `0`, `0.5`, `0.25`, `0.125`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1000 => f.write_str("1"),
            0 => f.write_str("0"),
            n => {
                let digits = format!("{n:03}");
                write!(f, "0.{}", digits.trim_end_matches('0'))
            }
        }
    }
}

/// An entry of `accept`, `accept-encoding` or `accept-language` with its
/// weight (D8). Entries are preferred by weight, then by their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Weighted<T> {
    /// The media range, encoding range or language range.
    pub value: T,
    /// Its weight; [`Weight::ONE`] when the entry gives none.
    pub weight: Weight,
}

impl<T> Weighted<T> {
    /// `value` with weight 1.
    pub const fn new(value: T) -> Weighted<T> {
        Weighted {
            value,
            weight: Weight::ONE,
        }
    }

    /// The same entry with another weight (builder style).
    pub fn with_weight(mut self, weight: Weight) -> Weighted<T> {
        self.weight = weight;
        self
    }
}

impl<T> From<T> for Weighted<T> {
    fn from(value: T) -> Self {
        Weighted::new(value)
    }
}

impl<T: fmt::Display> fmt::Display for Weighted<T> {
    /// The entry as HTTP writes it: `gzip`, or `gzip;q=0.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)?;
        if self.weight != Weight::ONE {
            write!(f, ";q={}", self.weight)?;
        }
        Ok(())
    }
}

/// The refusal for a weight that is not `;q=` and a `qvalue`.
pub(crate) const BAD_WEIGHT: &str =
    "has a weight that is not ;q= and a number from 0 to 1 with at most three decimals";

/// Splits `entry;q=weight` (RFC 9110 §12.4.2: optional whitespace around
/// the `;`, `q` in either case, none around the `=`) into the entry,
/// trimmed, and its weight. Without a `;` the weight is 1; anything else
/// after the `;` is refused.
pub(crate) fn split_weight(s: &str) -> Result<(&str, Weight), ValueError> {
    // A byte search: `split_once`'s searcher costs more to set up than
    // these few bytes take to read.
    let Some(at) = s.bytes().position(|b| b == b';') else {
        return Ok((trim_ows(s), Weight::ONE));
    };
    let (value, parameter) = (&s[..at], &s[at + 1..]);
    let parameter = trim_ows(parameter);
    let weight = parameter
        .strip_prefix("q=")
        .or_else(|| parameter.strip_prefix("Q="))
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| ValueError::new(BAD_WEIGHT))?;
    Ok((trim_ows(value), weight))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d8_weights_are_http_qvalues() {
        let w = |s: &str| s.parse::<Weight>().map(Weight::thousandths);
        for (text, thousandths) in [
            ("0", 0),
            ("0.", 0),
            ("0.0", 0),
            ("0.5", 500),
            ("0.25", 250),
            ("0.125", 125),
            ("0.001", 1),
            ("0.999", 999),
            ("1", 1000),
            ("1.", 1000),
            ("1.000", 1000),
        ] {
            assert_eq!(w(text), Ok(thousandths), "{text}");
        }
        for bad in [
            "", "2", "1.001", "1.5", "0.1234", ".5", "-0", "+1", "0,5", "00.5", "0.5 ", "1e0", "0.a",
        ] {
            assert_eq!(
                w(bad).unwrap_err().reason(),
                "is not a weight from 0 to 1 with at most three decimals",
                "{bad:?}"
            );
        }
        for text in ["0", "0.5", "0.25", "0.125", "1", "0.001"] {
            assert_eq!(text.parse::<Weight>().unwrap().to_string(), text);
        }
        assert_eq!(Weight::from_thousandths(1001), None);
        assert!(!Weight::ZERO.is_acceptable() && Weight::ONE.is_acceptable());
        assert_eq!(Weight::default(), Weight::ONE);
    }
}
