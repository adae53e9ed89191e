//! Log timestamps to unix milliseconds and back, by hand: a replay parses one timestamp per
//! line, so these avoid allocation and general-purpose date parsing. Only the forms access
//! logs write are read: nginx's `$time_local` (`06/Dec/2026:10:00:00 +0000`), RFC 3339
//! (`$time_iso8601`, Envoy's `START_TIME`, JSON and CSV) and unix seconds with an optional
//! fraction (`$msec`, JSON, CSV). Times before 1970 are refused (replay time is unsigned).

/// Days from 1970-01-01 to the proleptic Gregorian date `year-month-day`.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `(year, month, day)` of a day count from 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// The value of `digits` as a number, `None` unless every byte is an ASCII digit.
fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 9 {
        return None;
    }
    digits.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// Unix seconds of a civil date and time minus a zone offset, `None` when out of range or
/// before 1970.
fn unix_secs(
    (year, month, day): (u32, u32, u32),
    (hour, minute, second): (u32, u32, u32),
    offset_secs: i64,
) -> Option<u64> {
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // 60 is a leap second: read as the next second's start, as most systems do.
    if second > 60 {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_secs;
    u64::try_from(secs).ok()
}

/// A `+hhmm` / `-hhmm` / `+hh:mm` zone offset in seconds east of UTC.
fn zone_offset(zone: &[u8]) -> Option<i64> {
    let (sign, rest) = match zone.split_first()? {
        (b'+', rest) => (1, rest),
        (b'-', rest) => (-1, rest),
        _ => return None,
    };
    let (hours, minutes) = match rest.len() {
        4 => (number(&rest[..2])?, number(&rest[2..])?),
        5 if rest[2] == b':' => (number(&rest[..2])?, number(&rest[3..])?),
        _ => return None,
    };
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some(sign * i64::from(hours * 3600 + minutes * 60))
}

/// Unix seconds of nginx's `$time_local`: `06/Dec/2026:10:00:00 +0000`.
pub(crate) fn nginx_local_secs(value: &[u8]) -> Option<u64> {
    if value.len() != 26 || value[2] != b'/' || value[6] != b'/' || value[11] != b':' {
        return None;
    }
    if value[14] != b':' || value[17] != b':' || value[20] != b' ' {
        return None;
    }
    let month = MONTHS.iter().position(|m| m[..] == value[3..6])? as u32 + 1;
    unix_secs(
        (number(&value[7..11])?, month, number(&value[..2])?),
        (
            number(&value[12..14])?,
            number(&value[15..17])?,
            number(&value[18..20])?,
        ),
        zone_offset(&value[21..])?,
    )
}

/// nginx's `$time_local` with the last value remembered: a busy log repeats each second for
/// many lines, so most lines cost one 26-byte comparison.
#[derive(Debug, Clone, Default)]
pub(crate) struct NginxTimeCache {
    last: Option<([u8; 26], u64)>,
}

impl NginxTimeCache {
    /// Unix milliseconds of a `$time_local` value.
    pub(crate) fn millis(&mut self, value: &[u8]) -> Option<u64> {
        // A fixed-size array compares inline, where a slice comparison calls memcmp.
        let text: [u8; 26] = value.try_into().ok()?;
        if let Some((last, secs)) = &self.last
            && *last == text
        {
            return Some(secs * 1000);
        }
        let secs = nginx_local_secs(value)?;
        self.last = Some((text, secs));
        Some(secs * 1000)
    }
}

/// Milliseconds of a fraction of a second written after the `.`: `5` → 500, `123456` → 123.
fn fraction_millis(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut millis = 0u64;
    for i in 0..3 {
        millis = millis * 10 + digits.get(i).map_or(0, |d| u64::from(d - b'0'));
    }
    Some(millis)
}

/// Unix milliseconds of an RFC 3339 time: `2026-12-06T10:00:00.123Z`,
/// `2026-12-06T10:00:00+01:00` (a space for the `T` and a lower-case `z` are read too, and a
/// missing zone is UTC).
pub(crate) fn rfc3339_millis(value: &[u8]) -> Option<u64> {
    if value.len() < 19 || value[4] != b'-' || value[7] != b'-' {
        return None;
    }
    if !matches!(value[10], b'T' | b't' | b' ') || value[13] != b':' || value[16] != b':' {
        return None;
    }
    let mut rest = &value[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let end = fraction
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(fraction.len());
        millis = fraction_millis(&fraction[..end])?;
        rest = &fraction[end..];
    }
    let offset = match rest {
        [] | [b'Z'] | [b'z'] => 0,
        zone => zone_offset(zone)?,
    };
    let secs = unix_secs(
        (
            number(&value[..4])?,
            number(&value[5..7])?,
            number(&value[8..10])?,
        ),
        (
            number(&value[11..13])?,
            number(&value[14..16])?,
            number(&value[17..19])?,
        ),
        offset,
    )?;
    Some(secs * 1000 + millis)
}

/// Unix milliseconds of unix seconds written as text, with an optional fraction:
/// `1796551200`, `1796551200.123`.
pub(crate) fn unix_seconds_millis(value: &[u8]) -> Option<u64> {
    let (whole, fraction) = match memchr::memchr(b'.', value) {
        Some(dot) => (&value[..dot], Some(&value[dot + 1..])),
        None => (value, None),
    };
    if whole.is_empty() || whole.len() > 12 || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let secs = whole
        .iter()
        .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
    let millis = match fraction {
        Some(digits) => fraction_millis(digits)?,
        None => 0,
    };
    Some(secs * 1000 + millis)
}

/// Unix milliseconds of unix seconds given as a JSON number.
pub(crate) fn unix_seconds_f64_millis(secs: f64) -> Option<u64> {
    (0.0..1e12)
        .contains(&secs)
        .then(|| (secs * 1000.0).round() as u64)
}

/// Unix milliseconds of an RFC 3339 time or of unix seconds, whichever `value` is.
pub(crate) fn any_millis(value: &[u8]) -> Option<u64> {
    if value.len() >= 19 && value[4] == b'-' {
        rfc3339_millis(value)
    } else {
        unix_seconds_millis(value)
    }
}

/// The civil date and time of unix milliseconds: `((year, month, day), (h, m, s), ms)`.
fn civil(millis: u64) -> ((i64, u32, u32), (u64, u64, u64), u64) {
    let secs = millis / 1000;
    let date = civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    (
        date,
        (of_day / 3600, of_day / 60 % 60, of_day % 60),
        millis % 1000,
    )
}

/// `06/Dec/2026:10:00:00 +0000`, as nginx's `$time_local` writes UTC.
pub fn format_nginx_time(millis: u64) -> String {
    let ((year, month, day), (h, m, s), _) = civil(millis);
    let name = MONTHS[(month - 1) as usize];
    let name = std::str::from_utf8(name).unwrap_or("Jan");
    format!("{day:02}/{name}/{year}:{h:02}:{m:02}:{s:02} +0000")
}

/// `2026-12-06T10:00:00.123Z`, as Envoy's `START_TIME` writes.
pub fn format_rfc3339_millis(millis: u64) -> String {
    let ((year, month, day), (h, m, s), ms) = civil(millis);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

/// `2026-12-06 10:00:00` UTC, for reports.
pub fn format_utc_seconds(millis: u64) -> String {
    let ((year, month, day), (h, m, s), _) = civil(millis);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}")
}

/// `10:00:00`, for chart axes.
pub(crate) fn format_clock(millis: u64) -> String {
    let (_, (h, m, s), _) = civil(millis);
    format!("{h:02}:{m:02}:{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-06T10:00:00Z in unix ms, as Python's `datetime` computes it.
    const DEC_6_2026_10H: u64 = 1_796_551_200_000;

    #[test]
    fn the_four_forms_agree() {
        assert_eq!(
            nginx_local_secs(b"06/Dec/2026:10:00:00 +0000").map(|s| s * 1000),
            Some(DEC_6_2026_10H)
        );
        assert_eq!(
            nginx_local_secs(b"06/Dec/2026:11:00:00 +0100").map(|s| s * 1000),
            Some(DEC_6_2026_10H)
        );
        assert_eq!(
            rfc3339_millis(b"2026-12-06T10:00:00.123Z"),
            Some(DEC_6_2026_10H + 123)
        );
        assert_eq!(
            rfc3339_millis(b"2026-12-06T05:00:00-05:00"),
            Some(DEC_6_2026_10H)
        );
        assert_eq!(
            unix_seconds_millis(b"1796551200.5"),
            Some(DEC_6_2026_10H + 500)
        );
        assert_eq!(any_millis(b"1796551200"), Some(DEC_6_2026_10H));
        assert_eq!(any_millis(b"2026-12-06 10:00:00"), Some(DEC_6_2026_10H));
    }

    #[test]
    fn bad_times_are_refused() {
        for bad in [
            &b"06/Foo/2026:10:00:00 +0000"[..],
            b"06/Dec/2026:25:00:00 +0000",
            b"6/Dec/2026:10:00:00 +0000",
        ] {
            assert_eq!(nginx_local_secs(bad), None, "{bad:?}");
        }
        for bad in [&b"2026-13-06T10:00:00Z"[..], b"2026-12-06T10:00:00+2", b"x"] {
            assert_eq!(rfc3339_millis(bad), None, "{bad:?}");
        }
        assert_eq!(unix_seconds_millis(b"12a"), None);
        assert_eq!(unix_seconds_millis(b"-5"), None);
        assert_eq!(unix_seconds_millis(b""), None);
    }

    #[test]
    fn formatting_round_trips() {
        for millis in [
            0,
            DEC_6_2026_10H + 123,
            951_782_400_000, /* 2000-02-29 */
        ] {
            let text = format_rfc3339_millis(millis);
            assert_eq!(rfc3339_millis(text.as_bytes()), Some(millis), "{text}");
            let local = format_nginx_time(millis);
            assert_eq!(
                nginx_local_secs(local.as_bytes()),
                Some(millis / 1000),
                "{local}"
            );
        }
        assert_eq!(format_utc_seconds(DEC_6_2026_10H), "2026-12-06 10:00:00");
    }

    #[test]
    fn the_cache_answers_a_repeated_second_and_a_new_one() {
        let mut cache = NginxTimeCache::default();
        let first = b"06/Dec/2026:10:00:00 +0000";
        assert_eq!(cache.millis(first), Some(DEC_6_2026_10H));
        assert_eq!(cache.millis(first), Some(DEC_6_2026_10H));
        assert_eq!(
            cache.millis(b"06/Dec/2026:10:00:01 +0000"),
            Some(DEC_6_2026_10H + 1000)
        );
        assert_eq!(cache.millis(b"bad"), None);
    }
}
