//! Time in UTC without a date library: the current time, civil dates to days since the Unix
//! epoch and back, and the few renderings and parsings the services and the command line use.
//!
//! Every service stores times as Unix milliseconds; this is the one place that turns them into
//! calendar dates, so two renderings of one instant can never disagree. The date conversions
//! are Howard Hinnant's published algorithms for the proleptic Gregorian calendar, exact for
//! any year an `i64` of milliseconds reaches.

/// One day in milliseconds.
pub const DAY_MS: i64 = 86_400_000;

/// The months' English names, January first: how dates are written in words for indexing and
/// read back from questions and conversations.
pub const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Milliseconds since the Unix epoch; 0 on a clock set before 1970.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Days from 1970-01-01 to a civil date (`month` 1 to 12, `day` 1 to 31; out-of-range values
/// are not checked, they count on into the next month or year).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a day counted from 1970-01-01, the inverse of
/// [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Unix milliseconds of midnight UTC on a civil date.
pub fn midnight_ms(year: i64, month: i64, day: i64) -> i64 {
    days_from_civil(year, month, day) * DAY_MS
}

/// A Unix-millisecond time as `YYYY-MM-DD`, the day it falls on in UTC.
pub fn utc_day(ms: i64) -> String {
    let (year, month, day) = civil_from_days(ms.div_euclid(DAY_MS));
    format!("{year:04}-{month:02}-{day:02}")
}

/// A Unix-millisecond time as `YYYY-MM-DD HH:MM` in UTC.
pub fn utc_minute(ms: i64) -> String {
    let minutes = ms.rem_euclid(DAY_MS) / 60_000;
    format!("{} {:02}:{:02}", utc_day(ms), minutes / 60, minutes % 60)
}

/// Milliseconds since the epoch of an RFC 3339 time such as `2026-02-18T15:09:10.006Z`: a
/// fraction of a second is optional and of any length (digits past milliseconds are dropped),
/// an explicit `+HH:MM` or `-HH:MM` offset is honoured, and `Z` or no offset is UTC. `None`
/// unless it is a real time: every field in its range (a month of 1 to 12, a day that month
/// has, an hour below 24; a leap second `:60` counts as the next second) and nothing after the
/// offset, so `2026-13-99T99:00:00Z` is no time rather than one that rolls over into another.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let digits = |at: usize, len: usize| -> Option<i64> {
        let part = bytes.get(at..at + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(at, c)| bytes.get(at) != Some(&c)) {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=month_days).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &bytes[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let len = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        // Milliseconds: the first three digits, padded with zeros when fewer.
        millis = (0..3).fold(0, |n, i| {
            n * 10
                + fraction
                    .get(i)
                    .filter(|_| i < len)
                    .map_or(0, |d| i64::from(d - b'0'))
        });
        rest = &fraction[len..];
    }
    let offset_minutes = match rest {
        [] | [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            if ![h1, h2, m1, m2].iter().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let (hours, minutes) = (
                i64::from((h1 - b'0') * 10 + (h2 - b'0')),
                i64::from((m1 - b'0') * 10 + (m2 - b'0')),
            );
            if hours > 23 || minutes > 59 {
                return None;
            }
            if *sign == b'-' {
                -(hours * 60 + minutes)
            } else {
                hours * 60 + minutes
            }
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip_through_civil_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        for days in [-719_468, -1, 0, 11_016, 19_000, 20_774, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
    }

    #[test]
    fn days_are_civil_dates() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(1_795_000_000_000), "2026-11-18");
        assert_eq!(utc_day(951_782_400_000), "2000-02-29");
        assert_eq!(utc_day(-1), "1969-12-31");
        for ms in [0, 951_782_400_000, 1_794_960_000_000] {
            let iso = utc_day(ms);
            let part = |r: std::ops::Range<usize>| iso[r].parse::<i64>().unwrap();
            assert_eq!(midnight_ms(part(0..4), part(5..7), part(8..10)), ms);
        }
    }

    #[test]
    fn minutes_are_rendered_in_utc() {
        assert_eq!(utc_minute(0), "1970-01-01 00:00");
        assert_eq!(utc_minute(1_683_554_160_000), "2023-05-08 13:56");
    }

    #[test]
    fn rfc3339_times_parse_with_fractions_and_offsets() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2026-02-18T15:09:10.006Z"),
            Some(1_771_427_350_006)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-02-18T16:09:10.006+01:00"),
            Some(1_771_427_350_006)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-02-18T15:09:10.123456789"),
            Some(1_771_427_350_123)
        );
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
        assert_eq!(parse_rfc3339_ms("2026-02-18 15:09:10Z"), None);
        // A broken offset is refused, never a panic on a cut through a character.
        assert_eq!(parse_rfc3339_ms("2026-02-18T15:09:10+0é:00"), None);
    }
}
