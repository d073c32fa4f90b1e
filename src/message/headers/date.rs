//! Dates (D16): written `YYYY-MM-DDTHH:MM:SSZ+0000`; read with any offset,
//! `+hhmm` or `+hh:mm`, converted to UTC; whole seconds.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use crate::message::ValueError;

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

    /// From a `SystemTime` (the caller's clock), truncated to whole seconds
    /// (towards the past, before 1970 too).
    ///
    /// Plain arithmetic on the distance from the epoch: adapters call this
    /// for every turn of a connection, and going through a calendar type
    /// cost more than the rest of taking the time.
    pub fn from_system_time(t: std::time::SystemTime) -> Date {
        match t.duration_since(std::time::UNIX_EPOCH) {
            Ok(after) => Date(i64::try_from(after.as_secs()).unwrap_or(i64::MAX)),
            Err(before) => {
                let before = before.duration();
                let whole = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
                Date(-whole - i64::from(before.subsec_nanos() > 0))
            }
        }
    }
}

impl From<DateTime<Utc>> for Date {
    fn from(t: DateTime<Utc>) -> Self {
        Date(t.timestamp())
    }
}

/// The refusal for anything not in the D16 shape.
const NOT_A_DATE: &str = "is not a date like 2024-01-31T12:00:00Z+0000";

impl FromStr for Date {
    type Err = ValueError;

    /// `YYYY-MM-DDTHH:MM:SSZ` then an offset `+hhmm`, `-hhmm`, `+hh:mm` or
    /// `-hh:mm` (D16), converted to UTC.
    ///
    /// The `Z` is required: D16 reads "the same shape with any offset", and
    /// the shape is `…SSZ+hhmm`. `2021-06-01T02:00:00+02:00` (RFC 3339,
    /// without `Z`) is therefore refused, and `2021-06-01T02:00:00Z+02:00`
    /// is read. The
    /// offset is what the sender's local time differs from UTC by, so
    /// `…02:00:00Z+02:00` is 00:00 UTC.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s.as_bytes()).ok_or_else(|| ValueError::new(NOT_A_DATE))
    }
}

/// The digits at `b[at..at + N]` as a number, or `None`.
fn digits<const N: usize>(b: &[u8], at: usize) -> Option<u32> {
    let part = b.get(at..at + N)?;
    part.iter().try_fold(0u32, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
    })
}

/// The D16 reader, without allocating.
fn parse(b: &[u8]) -> Option<Date> {
    // Fixed positions: `YYYY-MM-DDTHH:MM:SSZ` is 20 bytes.
    let punctuation = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'Z'),
    ];
    if b.len() < 20 || punctuation.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let year = digits::<4>(b, 0)?;
    let month = digits::<2>(b, 5)?;
    let day = digits::<2>(b, 8)?;
    let (hour, minute, second) = (digits::<2>(b, 11)?, digits::<2>(b, 14)?, digits::<2>(b, 17)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    // No hour 24 and no leap second 60: whole seconds of a normal day.
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let sign: i64 = match b[20..].first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (off_h, off_m) = match b.len() {
        25 => (digits::<2>(b, 21)?, digits::<2>(b, 23)?),
        26 if b[23] == b':' => (digits::<2>(b, 21)?, digits::<2>(b, 24)?),
        _ => return None,
    };
    // RFC 3339's bounds for an offset: hours 00–23, minutes 00–59.
    if off_h > 23 || off_m > 59 {
        return None;
    }
    let local = days_from_civil(year, month, day) * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    let offset = sign * i64::from(off_h * 3600 + off_m * 60);
    Some(Date(local - offset))
}

fn is_leap_year(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date of the years D16
/// writes, 0000 to 9999 (H. Hinnant's `days_from_civil`). The years are
/// counted from one era (400 years) earlier, so that none is negative and
/// each division is an unsigned one.
fn days_from_civil(year: u32, month: u32, day: u32) -> i64 {
    const ERA_DAYS: i64 = 146_097;
    let y = year + 400 - u32::from(month <= 2);
    let (era, yoe) = (y / 400, y % 400);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    i64::from(era) * ERA_DAYS + i64::from(doe) - 719_468 - ERA_DAYS
}

/// The inverse of [`days_from_civil`]: (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both in range by construction: day 1..=31, month 1..=12.
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Date {
    /// The written form, `YYYY-MM-DDTHH:MM:SSZ+0000` (D16). Years outside
    /// 0000–9999 (never a real clock's) are written with more digits or a
    /// sign and would not read back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z+0000",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(s: &str) -> Result<i64, String> {
        s.parse::<Date>()
            .map(Date::unix_seconds)
            .map_err(|e| e.reason().to_owned())
    }

    #[test]
    fn d16_utc_and_offsets() {
        assert_eq!(date("1970-01-01T00:00:00Z+0000"), Ok(0));
        assert_eq!(date("2021-06-01T00:00:00Z+0000"), Ok(1_622_505_600));
        // Local time 02:00 at +02:00 is 00:00 UTC, with or without colon.
        assert_eq!(date("2021-06-01T02:00:00Z+02:00"), Ok(1_622_505_600));
        assert_eq!(date("2021-06-01T02:00:00Z+0200"), Ok(1_622_505_600));
        assert_eq!(date("2021-05-31T22:30:00Z-01:30"), Ok(1_622_505_600));
        assert_eq!(date("2021-05-31T23:00:00Z-0100"), Ok(1_622_505_600));
        assert_eq!(date("2024-02-29T12:00:00Z+2359"), Ok(1_709_208_000 - 86_340));
        assert_eq!(date("0000-03-01T00:00:00Z+0000"), Ok(-62_162_035_200));
    }

    #[test]
    fn d16_other_shapes_are_refused() {
        for bad in [
            "",
            "yesterday",
            "2021-06-01T02:00:00+02:00", // RFC 3339 without the Z: not D16's shape
            "2021-06-01T00:00:00Z",      // no offset
            "2021-06-01T00:00:00Z+00",
            "2021-06-01T00:00:00Z+000",
            "2021-06-01T00:00:00Z+00000",
            "2021-06-01T00:00:00Z 0000",
            "2021-06-01T00:00:00Z+00:0",
            "2021-06-01T00:00:00Z+0:000",
            "2021-06-01 00:00:00Z+0000",
            "2021-6-01T00:00:00Z+0000",
            "2021-06-01t00:00:00z+0000",
            "2021-06-01T00:00:00.5Z+0000",
            "+021-06-01T00:00:00Z+0000",
            "2021-06-01T00:00:00Z+0000 ",
            "２021-06-01T00:00:00Z+0000",
        ] {
            assert_eq!(date(bad), Err(NOT_A_DATE.to_owned()), "{bad:?}");
        }
    }

    #[test]
    fn d16_impossible_dates_and_times_are_refused() {
        for bad in [
            "2023-02-29T00:00:00Z+0000", // not a leap year
            "2023-02-30T00:00:00Z+0000",
            "1900-02-29T00:00:00Z+0000", // century, not a leap year
            "2021-04-31T00:00:00Z+0000",
            "2021-13-01T00:00:00Z+0000",
            "2021-00-01T00:00:00Z+0000",
            "2021-01-00T00:00:00Z+0000",
            "2021-01-32T00:00:00Z+0000",
            "2021-06-01T24:00:00Z+0000", // hour 24
            "2021-06-01T23:60:00Z+0000",
            "2021-06-30T23:59:60Z+0000", // leap seconds are not whole-second time
            "2021-06-01T00:00:00Z+2400", // offsets out of range
            "2021-06-01T00:00:00Z-24:00",
            "2021-06-01T00:00:00Z+0060",
            "2021-06-01T00:00:00Z+01:99",
        ] {
            assert_eq!(date(bad), Err(NOT_A_DATE.to_owned()), "{bad:?}");
        }
        assert!(date("2000-02-29T00:00:00Z+0000").is_ok());
        assert!(date("2024-02-29T00:00:00Z+0000").is_ok());
    }

    #[test]
    fn d16_written_form() {
        assert_eq!(
            Date::from_unix_seconds(0).to_string(),
            "1970-01-01T00:00:00Z+0000"
        );
        assert_eq!(
            Date::from_unix_seconds(1_622_505_600 + 3_723).to_string(),
            "2021-06-01T01:02:03Z+0000"
        );
        assert_eq!(
            Date::from_unix_seconds(-1).to_string(),
            "1969-12-31T23:59:59Z+0000"
        );
        // Extreme values do not panic.
        let _ = Date::from_unix_seconds(i64::MIN).to_string();
        let _ = Date::from_unix_seconds(i64::MAX).to_string();
    }

    #[test]
    fn d16_round_trip_over_centuries() {
        // Every 7 days and 13 hours from 1600 to 2400, written and read back.
        let mut t = date("1600-01-01T00:00:00Z+0000").unwrap();
        let end = date("2400-01-01T00:00:00Z+0000").unwrap();
        while t < end {
            let d = Date::from_unix_seconds(t);
            assert_eq!(d.to_string().parse::<Date>(), Ok(d));
            t += 7 * 86_400 + 13 * 3_600 + 7;
        }
    }

    #[test]
    fn d16_every_first_and_last_of_a_month_agrees_with_chrono() {
        // The ends of the years D16 writes, both sides of 1970 and of
        // leap days, centuries and eras.
        for year in [
            0, 1, 3, 4, 99, 100, 399, 400, 401, 1600, 1900, 1969, 1970, 2000, 2024, 9998, 9999,
        ] {
            for month in 1..=12 {
                for day in [1, days_in_month(year, month)] {
                    let text = format!("{year:04}-{month:02}-{day:02}T00:00:00Z+0000");
                    let expected = chrono::NaiveDate::from_ymd_opt(year as i32, month, day)
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                        .map(|t| t.and_utc().timestamp());
                    assert_eq!(date(&text).ok(), expected, "{text}");
                }
            }
        }
    }

    #[test]
    fn from_system_time_truncates_to_whole_seconds() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_500);
        assert_eq!(Date::from_system_time(t).unix_seconds(), 1);
    }

    #[test]
    fn from_system_time_agrees_with_chrono_on_both_sides_of_the_epoch() {
        use std::time::{Duration, UNIX_EPOCH};
        for millis in [0u64, 1, 999, 1_000, 1_001, 1_500, 86_400_000, 1_700_000_000_123] {
            let d = Duration::from_millis(millis);
            for t in [UNIX_EPOCH + d, UNIX_EPOCH - d] {
                let expected = Date::from(DateTime::<Utc>::from(t));
                assert_eq!(Date::from_system_time(t), expected, "{t:?}");
            }
        }
    }
}
