//! The value syntaxes of the config file (names, durations, file modes), each a pure function
//! from text to a value or the reason it is not one, shared by the compile step and the admin
//! API (which takes names at run time).

use std::time::Duration;

/// Whether `name` may name a policy, a tier or a region: `[A-Za-z0-9_.-]{1,64}`, so it is
/// safe in a header's quoted string, a metrics label and a Redis key.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `"<integer><unit>"` with unit ms, s, m, h or d, in milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let bad = || {
        format!("{text:?} is not a duration such as \"50ms\", \"60s\", \"5m\", \"1h\" or \"1d\"")
    };
    if number.is_empty() {
        return Err(bad());
    }
    let factor: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("{text:?} is too long a duration"))
}

/// `ms` as [`parse_duration_ms`] reads it back: in hours when whole, else in seconds when
/// whole, else in ms (`60000` is `"60s"`, as windows are usually written; `1500` is
/// `"1500ms"`).
pub fn format_duration_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 2] = [(3_600_000, "h"), (1_000, "s")];
    UNITS
        .iter()
        .find(|(factor, _)| ms > 0 && ms.is_multiple_of(*factor))
        .map_or_else(
            || format!("{ms}ms"),
            |(factor, unit)| format!("{}{unit}", ms / factor),
        )
}

/// A duration of at least 1 ms, as every timeout and interval of the config is.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration_ms(text)? {
        0 => Err("must be at least 1ms".to_owned()),
        ms => Ok(Duration::from_millis(ms)),
    }
}

/// An octal file mode such as `"0660"` (or `"0o660"`).
pub fn parse_mode(text: &str) -> Option<u32> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|mode| *mode <= 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_every_unit() {
        assert_eq!(parse_duration_ms("50ms"), Ok(50));
        assert_eq!(parse_duration_ms("60s"), Ok(60_000));
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        for bad in [
            "",
            "s",
            "1",
            "1.5s",
            "-1s",
            "1 s",
            "1sec",
            "99999999999999999999d",
        ] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
        assert!(parse_positive_duration("0ms").is_err());
    }

    #[test]
    fn a_formatted_duration_reads_back_the_same() {
        for (ms, text) in [
            (60_000, "60s"),
            (1_500, "1500ms"),
            (3_600_000, "1h"),
            (300_000, "300s"),
            (0, "0ms"),
        ] {
            assert_eq!(format_duration_ms(ms), text);
            assert_eq!(parse_duration_ms(text), Ok(ms));
        }
    }

    #[test]
    fn modes_are_octal() {
        assert_eq!(parse_mode("0660"), Some(0o660));
        assert_eq!(parse_mode("0o600"), Some(0o600));
        for bad in ["", "8", "06600", "rw"] {
            assert_eq!(parse_mode(bad), None, "{bad}");
        }
    }
}
