//! Unix time to a UTC calendar date and time, without a date crate.

/// Seconds in a day; UTC has no leap seconds in Unix time.
const DAY: i64 = 86_400;

/// `2026-12-01 05:30 UTC` for `secs` seconds since 1970-01-01 00:00 UTC.
pub fn format_utc(secs: i64) -> String {
    let (year, month, day) = civil_from_days(secs.div_euclid(DAY));
    let minutes = secs.rem_euclid(DAY) / 60;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        minutes / 60,
        minutes % 60
    )
}

/// The proleptic Gregorian date `(year, month, day)` of `days` days since
/// 1970-01-01 (negative before it). Howard Hinnant's `civil_from_days`
/// (<https://howardhinnant.github.io/date_algorithms.html>): it counts in
/// 400-year eras of 146 097 days, and in years that start on March 1st, so
/// that the leap day falls at the end of a year.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st, [0, 365]
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2); // January and February belong to the next year
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inverse of `civil_from_days` (Hinnant's `days_from_civil`), to
    /// check it on every day of a long range.
    fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let m = i64::from(m);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(10_957), (2000, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29)); // a leap day of a /400 year
        assert_eq!(civil_from_days(47_541), (2100, 3, 1)); // 2100 is not a leap year
        assert_eq!(civil_from_days(20_788), (2026, 12, 1));
    }

    #[test]
    fn round_trips_over_centuries() {
        let mut expected = (1600, 1, 1);
        let first = days_from_civil(1600, 1, 1);
        for days in first..first + 400 * 366 {
            let got = civil_from_days(days);
            assert_eq!(days_from_civil(got.0, got.1, got.2), days);
            if days > first {
                // Consecutive days differ by one day of the calendar.
                assert!(got > expected, "{got:?} after {expected:?}");
            }
            expected = got;
        }
    }

    #[test]
    fn formats_minutes_in_utc() {
        // 2026-12-01 05:30:59 UTC
        assert_eq!(format_utc(1_796_103_059), "2026-12-01 05:30 UTC");
        assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_utc(-60), "1969-12-31 23:59 UTC");
        assert_eq!(format_utc(951_782_399), "2000-02-28 23:59 UTC");
    }
}
