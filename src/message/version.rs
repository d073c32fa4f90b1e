//! The `jsontp` version field (D6).

use std::fmt;
use std::str::FromStr;

use super::ValueError;

/// A protocol version, `MAJOR.MINOR` or `MAJOR.MINOR-rcN` (D6).
///
/// D6 reads each number by value, whatever its length: leading zeros are
/// allowed (`01.0` is major 1) and a number too large for a machine integer
/// is still a number. Such a number is held as `u32::MAX`, the closest value
/// a `u32` has: every answer D6 asks of a version stays right (a major past
/// `u32::MAX` is not `1`, so it is unsupported; a minor past it is as
/// supported as any other), and the order of versions is kept, though two
/// such numbers compare equal and are written back as `4294967295`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// Incremented on breaking changes; we support `1`.
    pub major: u32,
    /// Incremented on compatible changes.
    pub minor: u32,
    /// The release-candidate number, if any.
    pub rc: Option<u32>,
}

impl Version {
    /// `1.0`, the version our messages carry (D6).
    pub const V1_0: Version = Version {
        major: 1,
        minor: 0,
        rc: None,
    };

    /// Whether this implementation speaks this version: every major `1` (D6).
    pub const fn is_supported(self) -> bool {
        self.major == 1
    }
}

impl Default for Version {
    fn default() -> Self {
        Version::V1_0
    }
}

/// One number of the version: decimal digits only, no sign, read by value
/// (D6). Leading zeros are skipped; a value past `u32::MAX` is held as
/// `u32::MAX` (see [`Version`]). Never overflows, whatever the length.
fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u32, |n, digit| {
        n.saturating_mul(10).saturating_add(u32::from(digit - b'0'))
    }))
}

impl FromStr for Version {
    type Err = ValueError;

    /// Only the form decides a refusal (D6): `MAJOR.MINOR` or
    /// `MAJOR.MINOR-rcN`, each number one or more ASCII digits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // What nearly every message carries, without the general reading.
        if s == "1.0" {
            return Ok(Version::V1_0);
        }
        let bad = || ValueError::new("is not a version of the form MAJOR.MINOR or MAJOR.MINOR-rcN");
        // `find(char)` rather than `split_once("-rc")`: a substring search
        // costs more to set up than the whole of a small request's parse
        // can afford.
        let (numbers, rc) = match s.find('-') {
            Some(at) => {
                let rc = s[at..].strip_prefix("-rc").ok_or_else(bad)?;
                (&s[..at], Some(number(rc).ok_or_else(bad)?))
            }
            None => (s, None),
        };
        let (major, minor) = numbers.split_once('.').ok_or_else(bad)?;
        Ok(Version {
            major: number(major).ok_or_else(bad)?,
            minor: number(minor).ok_or_else(bad)?,
            rc,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if let Some(rc) = self.rc {
            write!(f, "-rc{rc}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d6_forms() {
        for ok in ["1.0", "1.0-rc1", "1.0-rc2", "1.3", "2.3", "10.20-rc30"] {
            let v: Version = ok.parse().unwrap();
            assert_eq!(v.to_string(), ok);
        }
        for bad in [
            "1",
            "1.0.0",
            "",
            "1.",
            ".1",
            "+1.0",
            "1.-1",
            "1.0-rc",
            "1.0-rc+1",
            "1.0rc1",
            "a.b",
            " 1.0",
            "1.0-RC1",
            "１.0",
            "1.0-rc-1",
            "1.0-rc1-rc2",
        ] {
            assert!(bad.parse::<Version>().is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn d6_numbers_are_read_by_value_whatever_their_length() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert_eq!(v("01.0"), Version::V1_0);
        assert_eq!(v("0001.000-rc0002").rc, Some(2));
        assert!(v("01.0").is_supported());
        // Past u32::MAX: still a number, held as u32::MAX.
        let huge = v("99999999999999999999.0");
        assert_eq!(huge.major, u32::MAX);
        assert!(!huge.is_supported());
        let long_minor = v("1.99999999999999999999");
        assert_eq!(long_minor.minor, u32::MAX);
        assert!(long_minor.is_supported());
        assert!(v("1.99999999999999999999-rc99999999999999999999").is_supported());
        // 2^32 exactly is the first value held as u32::MAX; the order holds.
        assert_eq!(v("4294967296.0").major, u32::MAX);
        assert!(v("4294967294.0") < v("4294967296.0"));
        // A thousand digits: no overflow, no panic.
        let long = format!("1.{}", "9".repeat(1000));
        assert!(v(&long).is_supported());
    }

    #[test]
    fn d6_only_major_one_is_supported() {
        assert!("1.0-rc1".parse::<Version>().unwrap().is_supported());
        assert!("1.3".parse::<Version>().unwrap().is_supported());
        assert!(!"2.0".parse::<Version>().unwrap().is_supported());
        assert!(!"0.9".parse::<Version>().unwrap().is_supported());
    }
}
