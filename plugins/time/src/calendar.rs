//! Proleptic Gregorian calendar math by hand: days since the Unix epoch to
//! and from civil dates (Howard Hinnant's algorithms), RFC 3339 parsing and
//! formatting with fixed UTC offsets, durations, and differences.
//!
//! Years are limited to 0000..=9999, the range RFC 3339 can write.

/// Seconds in a day. Fixed UTC offsets have no daylight saving time, so a
/// day is always this long here.
pub const DAY: i64 = 86_400;

/// Unix seconds of 0000-01-01T00:00:00Z and of 10000-01-01T00:00:00Z.
const MIN_SECS: i64 = -62_167_219_200;
const MAX_SECS: i64 = 253_402_300_800;

pub const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Days since 1970-01-01 of the civil date `y-m-d` (`m` 1..=12, `d` 1..=31).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400); // [0, 399]
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 }; // March is month 0
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of `z` days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

pub fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// 0 = Monday .. 6 = Sunday. 1970-01-01 was a Thursday.
pub fn weekday(days: i64) -> usize {
    (days + 3).rem_euclid(7) as usize
}

/// The ISO 8601 week `(week-based year, week 1..=53)` containing `days`.
pub fn iso_week(days: i64) -> (i64, u32) {
    let thursday = days - weekday(days) as i64 + 3;
    let (year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(year, 1, 1)) / 7 + 1;
    (year, week as u32)
}

/// A point in time together with the fixed UTC offset it is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateTime {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub secs: i64,
    /// Nanoseconds past `secs`, 0..1e9.
    pub nanos: u32,
    /// Offset from UTC in seconds, east positive.
    pub offset: i32,
    /// Whether it was written as a bare date (`YYYY-MM-DD`).
    pub date_only: bool,
}

/// Local civil fields of a `DateTime` in its own offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    /// Seconds since local midnight.
    pub time: i64,
    /// Days since 1970-01-01 of the local date.
    pub days: i64,
}

impl DateTime {
    pub fn civil(&self) -> Civil {
        let local = self.secs + i64::from(self.offset);
        let days = local.div_euclid(DAY);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            time: local.rem_euclid(DAY),
            days,
        }
    }

    /// `YYYY-MM-DD` in the local offset.
    pub fn date_string(&self) -> String {
        let c = self.civil();
        format!("{:04}-{:02}-{:02}", c.year, c.month, c.day)
    }

    /// RFC 3339, e.g. `2024-02-29T13:05:00+05:30` or `...Z` for UTC.
    pub fn rfc3339(&self) -> String {
        let c = self.civil();
        let mut s = format!(
            "{}T{:02}:{:02}:{:02}",
            self.date_string(),
            c.time / 3600,
            c.time / 60 % 60,
            c.time % 60
        );
        if self.nanos != 0 {
            let frac = format!("{:09}", self.nanos);
            s.push('.');
            s.push_str(frac.trim_end_matches('0'));
        }
        s.push_str(&format_offset(self.offset, true));
        s
    }

    /// The same instant shown in another offset.
    pub fn with_offset(self, offset: i32) -> DateTime {
        DateTime {
            offset,
            date_only: false,
            ..self
        }
    }

    fn nanos_total(&self) -> i128 {
        i128::from(self.secs) * 1_000_000_000 + i128::from(self.nanos)
    }
}

/// `+05:30`, `-08:00`, and `Z` (or `+00:00` when `z` is false) for UTC.
pub fn format_offset(offset: i32, z: bool) -> String {
    if offset == 0 && z {
        return "Z".to_string();
    }
    let sign = if offset < 0 { '-' } else { '+' };
    let a = offset.unsigned_abs();
    format!("{sign}{:02}:{:02}", a / 3600, a / 60 % 60)
}

/// Parses a UTC offset: `Z`, `UTC`, `+05:30`, `+0530`, `+05`, `-08:00`.
/// Returns seconds east of UTC.
pub fn parse_offset(s: &str) -> Result<i32, String> {
    let bad =
        || format!("invalid UTC offset '{s}': use Z or +HH:MM / -HH:MM, e.g. +05:30 or -08:00");
    let t = s.trim();
    if t.eq_ignore_ascii_case("z") || t.eq_ignore_ascii_case("utc") {
        return Ok(0);
    }
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'+') => (1, &t[1..]),
        Some(b'-') => (-1, &t[1..]),
        _ => return Err(bad()),
    };
    let digits: String = rest.chars().filter(|&c| c != ':').collect();
    let colons = rest.matches(':').count();
    let ok_shape = match digits.len() {
        2 => colons == 0,
        4 => colons == 0 || (colons == 1 && rest.find(':') == Some(2)),
        _ => false,
    };
    if !ok_shape || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let hours: i32 = digits[..2].parse().map_err(|_| bad())?;
    let minutes: i32 = if digits.len() == 4 {
        digits[2..].parse().map_err(|_| bad())?
    } else {
        0
    };
    if hours > 23 || minutes > 59 {
        return Err(format!("UTC offset '{s}' is out of range (at most ±23:59)"));
    }
    Ok(sign * (hours * 3600 + minutes * 60))
}

/// A tiny cursor over ASCII input for the parsers below.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<u32> {
        let end = self.i.checked_add(n)?;
        let part = self.s.get(self.i..end)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.i = end;
        Some(part.iter().fold(0, |acc, b| acc * 10 + u32::from(b - b'0')))
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn rest(&self) -> &str {
        std::str::from_utf8(&self.s[self.i.min(self.s.len())..]).unwrap_or("")
    }
}

/// Parses `YYYY-MM-DD` or an RFC 3339 date-time
/// (`YYYY-MM-DDTHH:MM[:SS[.fraction]][Z|±HH:MM]`; `t` or a space may stand
/// for `T`; without an offset the time is taken as UTC). `now` and `today`
/// (UTC) are accepted too; `now_secs` is the current Unix time for them.
pub fn parse_datetime(input: &str, now_secs: i64) -> Result<DateTime, String> {
    let s = input.trim();
    if s.eq_ignore_ascii_case("now") {
        return Ok(DateTime {
            secs: now_secs,
            nanos: 0,
            offset: 0,
            date_only: false,
        });
    }
    if s.eq_ignore_ascii_case("today") {
        return Ok(DateTime {
            secs: now_secs.div_euclid(DAY) * DAY,
            nanos: 0,
            offset: 0,
            date_only: true,
        });
    }
    let bad = || {
        format!("invalid date '{input}': use YYYY-MM-DD or RFC 3339 like 2024-05-01T13:45:00+02:00")
    };
    let mut c = Cursor {
        s: s.as_bytes(),
        i: 0,
    };
    let year = c.digits(4).ok_or_else(bad)?;
    let month = (c.eat(b'-').then(|| c.digits(2)).flatten()).ok_or_else(bad)?;
    let day = (c.eat(b'-').then(|| c.digits(2)).flatten()).ok_or_else(bad)?;
    if !(1..=12).contains(&month) {
        return Err(format!("invalid date '{input}': month {month} is not 1-12"));
    }
    let dim = days_in_month(i64::from(year), month);
    if day < 1 || day > dim {
        return Err(format!(
            "invalid date '{input}': {year:04}-{month:02} has days 1-{dim}"
        ));
    }
    let days = days_from_civil(i64::from(year), month, day);
    if c.i == c.s.len() {
        return Ok(DateTime {
            secs: days * DAY,
            nanos: 0,
            offset: 0,
            date_only: true,
        });
    }
    if !(c.eat(b'T') || c.eat(b't') || c.eat(b' ')) {
        return Err(bad());
    }
    let hour = c.digits(2).ok_or_else(bad)?;
    let minute = (c.eat(b':').then(|| c.digits(2)).flatten()).ok_or_else(bad)?;
    let second = if c.eat(b':') {
        c.digits(2).ok_or_else(bad)?
    } else {
        0
    };
    let mut nanos = 0u32;
    if c.eat(b'.') || c.eat(b',') {
        let start = c.i;
        let mut scale = 100_000_000;
        while let Some(d) = c.digits(1) {
            nanos += d * scale;
            scale /= 10;
        }
        if c.i == start {
            return Err(bad());
        }
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(format!(
            "invalid time in '{input}': {hour:02}:{minute:02}:{second:02} is out of range"
        ));
    }
    let offset = if c.i == c.s.len() {
        0
    } else {
        parse_offset(c.rest())?
    };
    let local = days * DAY + i64::from(hour * 3600 + minute * 60 + second);
    Ok(DateTime {
        secs: local - i64::from(offset),
        nanos,
        offset,
        date_only: false,
    })
}

/// A duration: calendar months (years count 12) plus exact nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Duration {
    pub months: i64,
    pub nanos: i128,
}

const NS: i128 = 1_000_000_000;

/// Parses `3d4h30m`, `1y 2mo`, `-90s`, `2 weeks, 3 days`, `1.5h`, or ISO 8601
/// `P1Y2M3W4DT5H6M7.5S` / `-P3D`. Units: y, mo, w, d, h, m, s, ms (and their
/// English names). A leading `-` negates the whole duration.
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    if s.len() > 200 {
        return Err("duration is too long (at most 200 characters)".to_string());
    }
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if body.is_empty() {
        return Err("duration is empty: use e.g. 3d4h30m or P3DT4H".to_string());
    }
    let iso = body.starts_with(['P', 'p']);
    let mut d = Duration::default();
    let mut in_time = false;
    let mut any = false;
    let mut rest = if iso { &body[1..] } else { body };
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if let Some(r) = rest.strip_prefix("and ") {
            rest = r;
            continue;
        }
        if rest.is_empty() {
            break;
        }
        if iso && !in_time && rest.starts_with(['T', 't']) {
            in_time = true;
            rest = &rest[1..];
            continue;
        }
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..num_len];
        rest = rest[num_len..].trim_start_matches(' ');
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        // ISO 8601 designators are single letters: `1DT4H` is 1 D, T, 4 H.
        let unit_len = if iso { unit_len.min(1) } else { unit_len };
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        if number.is_empty() || unit.is_empty() {
            return Err(format!(
                "invalid duration '{input}': expected a number followed by a unit \
                 (y, mo, w, d, h, m, s), e.g. 3d4h30m or ISO 8601 P3DT4H"
            ));
        }
        let value: f64 = number
            .parse()
            .map_err(|_| format!("invalid number '{number}' in duration '{input}'"))?;
        let unit = unit.to_ascii_lowercase();
        // Seconds per unit, or months per unit for calendar units.
        let (months, secs): (i64, i64) = if iso {
            match (unit.as_str(), in_time) {
                ("y", false) => (12, 0),
                ("m", false) => (1, 0),
                ("w", false) => (0, 7 * DAY),
                ("d", false) => (0, DAY),
                ("h", true) => (0, 3600),
                ("m", true) => (0, 60),
                ("s", true) => (0, 1),
                _ => return Err(format!("invalid ISO 8601 duration '{input}'")),
            }
        } else {
            match unit.as_str() {
                "y" | "yr" | "yrs" | "year" | "years" => (12, 0),
                "mo" | "mon" | "month" | "months" => (1, 0),
                "w" | "wk" | "wks" | "week" | "weeks" => (0, 7 * DAY),
                "d" | "day" | "days" => (0, DAY),
                "h" | "hr" | "hrs" | "hour" | "hours" => (0, 3600),
                "m" | "min" | "mins" | "minute" | "minutes" => (0, 60),
                "s" | "sec" | "secs" | "second" | "seconds" => (0, 1),
                "ms" | "millisecond" | "milliseconds" => (0, -1),
                _ => {
                    return Err(format!(
                        "unknown unit '{unit}' in duration '{input}': \
                         use y, mo, w, d, h, m, s or ms"
                    ));
                }
            }
        };
        if !(value.is_finite() && value < 1e12) {
            return Err(format!(
                "number '{number}' in duration '{input}' is too large"
            ));
        }
        if months != 0 {
            if value.fract() != 0.0 {
                return Err(format!(
                    "years and months must be whole numbers in duration '{input}'"
                ));
            }
            d.months += months * value as i64;
        } else {
            let unit_ns = if secs < 0 {
                1_000_000
            } else {
                i128::from(secs) * NS
            };
            d.nanos += (value * unit_ns as f64).round() as i128;
        }
        any = true;
    }
    if !any {
        return Err(format!("invalid duration '{input}': no amounts"));
    }
    if d.months.abs() > 12 * 10_000 || d.nanos.abs() > i128::from(MAX_SECS - MIN_SECS) * NS {
        return Err(format!("duration '{input}' is longer than 10000 years"));
    }
    if negative {
        d.months = -d.months;
        d.nanos = -d.nanos;
    }
    Ok(d)
}

/// Adds calendar months in local time, keeping the time of day and clamping
/// the day to the month's length (Jan 31 + 1 month = Feb 28/29).
pub fn add_months(dt: DateTime, months: i64) -> Result<DateTime, String> {
    if months == 0 {
        return Ok(dt);
    }
    let c = dt.civil();
    let total = c.year * 12 + i64::from(c.month) - 1 + months;
    let (year, month) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    if !(0..=9999).contains(&year) {
        return Err("the result is outside the years 0000-9999".to_string());
    }
    let day = c.day.min(days_in_month(year, month));
    let local = days_from_civil(year, month, day) * DAY + c.time;
    Ok(DateTime {
        secs: local - i64::from(dt.offset),
        ..dt
    })
}

/// `dt + d`: calendar months first, then exact time.
pub fn add(dt: DateTime, d: Duration) -> Result<DateTime, String> {
    let dt = add_months(dt, d.months)?;
    let total = dt.nanos_total() + d.nanos;
    let secs = total.div_euclid(NS);
    if secs < i128::from(MIN_SECS) - 86_400 || secs > i128::from(MAX_SECS) + 86_400 {
        return Err("the result is outside the years 0000-9999".to_string());
    }
    let out = DateTime {
        secs: secs as i64,
        nanos: total.rem_euclid(NS) as u32,
        ..dt
    };
    let year = out.civil().year;
    if !(0..=9999).contains(&year) {
        return Err("the result is outside the years 0000-9999".to_string());
    }
    Ok(out)
}

/// Exact difference `to - from` in nanoseconds.
pub fn diff_nanos(from: &DateTime, to: &DateTime) -> i128 {
    to.nanos_total() - from.nanos_total()
}

/// Splits non-negative nanoseconds into (days, hours, minutes, seconds),
/// the seconds possibly fractional.
pub fn split(nanos: i128) -> (i64, i64, i64, f64) {
    let whole = (nanos / NS) as i64;
    let frac = (nanos % NS) as f64 / 1e9;
    (
        whole / DAY,
        whole / 3600 % 24,
        whole / 60 % 60,
        (whole % 60) as f64 + frac,
    )
}

/// Calendar difference from `a` to a later `b`, seen in `a`'s offset:
/// whole months, then the rest as exact nanoseconds.
pub fn calendar_diff(a: &DateTime, b: &DateTime) -> (i64, i128) {
    let b_local = b.with_offset(a.offset);
    let (ca, cb) = (a.civil(), b_local.civil());
    let mut months = (cb.year - ca.year) * 12 + i64::from(cb.month) - i64::from(ca.month);
    loop {
        match add_months(*a, months) {
            Ok(m) if months > 0 && diff_nanos(&m, b) < 0 => months -= 1,
            Ok(m) => return (months, diff_nanos(&m, b)),
            Err(_) => return (0, diff_nanos(a, b)),
        }
    }
}

/// Joins amounts like "1 year, 2 months and 3 days"; zero parts are left
/// out, and nothing at all reads as "0 seconds".
pub fn human(parts: &[(f64, &str)]) -> String {
    let words: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n != 0.0)
        .map(|&(n, unit)| {
            let plural = if n == 1.0 { "" } else { "s" };
            let n = if n.fract() == 0.0 {
                format!("{}", n as i64)
            } else {
                format!("{}", (n * 1000.0).round() / 1000.0)
            };
            format!("{n} {unit}{plural}")
        })
        .collect();
    match words.len() {
        0 => "0 seconds".to_string(),
        1 => words[0].clone(),
        n => format!("{} and {}", words[..n - 1].join(", "), words[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> DateTime {
        parse_datetime(s, 0).unwrap()
    }

    #[test]
    fn civil_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(days_from_civil(0, 1, 1), MIN_SECS / DAY);
        assert_eq!(days_from_civil(10000, 1, 1), MAX_SECS / DAY);
        for z in (MIN_SECS / DAY..MAX_SECS / DAY).step_by(97) {
            let (y, m, d) = civil_from_days(z);
            assert!((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m));
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn leap_years_and_weekdays() {
        assert!(is_leap(2000) && is_leap(2024) && !is_leap(1900) && !is_leap(2023));
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(WEEKDAYS[weekday(0)], "Thursday");
        assert_eq!(WEEKDAYS[weekday(days_from_civil(2024, 2, 29))], "Thursday");
        assert_eq!(WEEKDAYS[weekday(days_from_civil(2000, 1, 1))], "Saturday");
        assert_eq!(iso_week(days_from_civil(2021, 1, 3)), (2020, 53));
        assert_eq!(iso_week(days_from_civil(2021, 1, 4)), (2021, 1));
        assert_eq!(iso_week(days_from_civil(2024, 12, 30)), (2025, 1));
        assert_eq!(iso_week(days_from_civil(2024, 6, 15)), (2024, 24));
    }

    #[test]
    fn parse_and_format() {
        let t = dt("2024-05-01T13:45:30+02:00");
        assert_eq!(t.secs, 1_714_563_930);
        assert_eq!(t.rfc3339(), "2024-05-01T13:45:30+02:00");
        assert_eq!(t.with_offset(0).rfc3339(), "2024-05-01T11:45:30Z");
        assert_eq!(dt("2024-05-01").rfc3339(), "2024-05-01T00:00:00Z");
        assert!(dt("2024-05-01").date_only);
        assert_eq!(dt("2024-05-01 08:00").rfc3339(), "2024-05-01T08:00:00Z");
        assert_eq!(
            dt("2024-05-01t08:00:00.250z").rfc3339(),
            "2024-05-01T08:00:00.25Z"
        );
        assert_eq!(dt("1969-12-31T23:59:59Z").secs, -1);
        assert_eq!(
            dt("2024-01-01T00:00:00-0530").rfc3339(),
            "2024-01-01T00:00:00-05:30"
        );
        assert_eq!(parse_datetime("now", 42).unwrap().secs, 42);
        assert_eq!(parse_datetime("today", DAY + 5).unwrap().secs, DAY);
        for bad in [
            "2024-13-01",
            "2023-02-29",
            "2024-1-1",
            "2024-01-01T25:00",
            "2024-01-01T10:00+25:00",
            "2024-01-01X",
            "yesterday",
            "",
            "2024-01-01T10:00:00.",
        ] {
            assert!(parse_datetime(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn offsets() {
        assert_eq!(parse_offset("+05:30"), Ok(19_800));
        assert_eq!(parse_offset("-08:00"), Ok(-28_800));
        assert_eq!(parse_offset("+0545"), Ok(20_700));
        assert_eq!(parse_offset("+09"), Ok(32_400));
        assert_eq!(parse_offset("Z"), Ok(0));
        assert!(parse_offset("05:30").is_err());
        assert!(parse_offset("+5:30").is_err());
        assert!(parse_offset("+24:00").is_err());
        assert_eq!(format_offset(-19_800, true), "-05:30");
        assert_eq!(format_offset(0, false), "+00:00");
    }

    #[test]
    fn durations() {
        let d = |s: &str| parse_duration(s).unwrap();
        assert_eq!(
            d("3d4h30m").nanos,
            (3 * DAY + 4 * 3600 + 30 * 60) as i128 * NS
        );
        assert_eq!(d("P3DT4H"), d("3d 4h"));
        assert_eq!(d("P1Y2M").months, 14);
        assert_eq!(d("PT2M").nanos, 120 * NS);
        assert_eq!(d("1y 2mo").months, 14);
        assert_eq!(d("-90s").nanos, -90 * NS);
        assert_eq!(d("-P1W").nanos, -(7 * DAY) as i128 * NS);
        assert_eq!(d("2 weeks, 3 days and 1 hour"), d("17d1h"));
        assert_eq!(d("1.5h").nanos, 5400 * NS);
        assert_eq!(d("250ms").nanos, NS / 4);
        for bad in [
            "",
            "3",
            "d",
            "3x",
            "P3H",
            "1.5mo",
            "1e9y",
            "99999999999999d",
            "-",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn adding() {
        let add_s = |t: &str, d: &str| add(dt(t), parse_duration(d).unwrap()).map(|r| r.rfc3339());
        assert_eq!(add_s("2024-01-31", "1mo").unwrap(), "2024-02-29T00:00:00Z");
        assert_eq!(add_s("2023-01-31", "1mo").unwrap(), "2023-02-28T00:00:00Z");
        assert_eq!(add_s("2024-02-29", "1y").unwrap(), "2025-02-28T00:00:00Z");
        assert_eq!(
            add_s("2024-12-31T22:00:00+05:30", "3h").unwrap(),
            "2025-01-01T01:00:00+05:30"
        );
        assert_eq!(add_s("2024-03-01", "-1d").unwrap(), "2024-02-29T00:00:00Z");
        assert_eq!(
            add_s("2024-01-01", "P1Y2M3DT4H5M6S").unwrap(),
            "2025-03-04T04:05:06Z"
        );
        assert!(add_s("9999-12-31", "1d").is_err());
        assert!(add_s("0000-01-01", "-1s").is_err());
    }

    #[test]
    fn differences() {
        let a = dt("2024-01-01T00:00:00Z");
        let b = dt("2024-03-04T05:06:07+00:00");
        assert_eq!(
            diff_nanos(&a, &b),
            i128::from(63 * DAY + 5 * 3600 + 6 * 60 + 7) * NS
        );
        assert_eq!(split(diff_nanos(&a, &b)), (63, 5, 6, 7.0));
        let (months, rest) = calendar_diff(&a, &b);
        assert_eq!((months, split(rest)), (2, (3, 5, 6, 7.0)));
        let (months, rest) = calendar_diff(&dt("2023-01-31"), &dt("2023-03-01"));
        assert_eq!((months, split(rest).0), (1, 1));
        let (months, rest) = calendar_diff(&dt("1990-06-15"), &dt("2024-06-14"));
        assert_eq!((months, split(rest).0), (33 * 12 + 11, 30));
        assert_eq!(
            human(&[(1.0, "year"), (0.0, "month"), (2.0, "day"), (1.5, "second")]),
            "1 year, 2 days and 1.5 seconds"
        );
        assert_eq!(human(&[(0.0, "day")]), "0 seconds");
    }
}
