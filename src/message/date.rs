//! Dates (D16): written `YYYY-MM-DDTHH:MM:SSZ+0000`; read with any offset,
//! `+hhmm` or `+hh:mm`, converted to UTC; whole seconds.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use super::ValueError;

/// An instant in UTC with whole-second precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Date(i64);

impl Date {
    /// From seconds since the Unix epoch.
    pub const fn from_unix_seconds(secs: i64) -> Date {
        Date(secs)
    }

    /// Seconds since the Unix epoch.
    pub const fn unix_seconds(self) -> i64 {
        self.0
    }

    /// From a `SystemTime` (the caller's clock), truncated to whole seconds.
    pub fn from_system_time(t: std::time::SystemTime) -> Date {
        Date::from(DateTime::<Utc>::from(t))
    }
}

impl From<DateTime<Utc>> for Date {
    fn from(t: DateTime<Utc>) -> Self {
        Date(t.timestamp())
    }
}

impl FromStr for Date {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let _ = s;
        todo!("issue 2: D16 dates")
    }
}

impl fmt::Display for Date {
    /// The written form, `YYYY-MM-DDTHH:MM:SSZ+0000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = f;
        todo!("issue 2: D16 dates")
    }
}
