//! How figures read in the text and HTML reports: thousands separated, windows as the
//! config writes them, a limit in one phrase.

use super::model::PolicyReport;
use crate::input::LimitSpec;

/// `1234567` → `1,234,567`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// What the suggested limits answer: the keys rule alone, or with `--max-reject` the requests
/// rule too.
pub fn rule_text(max_reject: Option<f64>) -> String {
    match max_reject {
        None => {
            "at most 1 % of keys exceed it (the keys rule; --max-reject adds a share of requests)"
                .to_owned()
        }
        Some(share) => format!(
            "at most 1 % of keys exceed it and it rejects at most {} % of requests (--max-reject {share})",
            share * 100.0
        ),
    }
}

/// A stacked row's limit: the first limit and how many more stack on it.
pub fn stacked_limit_text(row: &PolicyReport) -> String {
    match row.limits.len() {
        0 | 1 => limit_text(&row.limit),
        n => format!("{} +{} stacked", limit_text(&row.limit), n - 1),
    }
}

/// A window in the largest whole unit: `1h`, `1m`, `30s`, `250ms`.
pub fn window_text(window_ms: u64) -> String {
    match window_ms {
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// `token_bucket 100/1m burst 200` (the burst only for the algorithms that use it); a
/// calendar window as `fixed_window 5000/1mo Asia/Tokyo`.
pub fn limit_text(limit: &LimitSpec) -> String {
    let window = match &limit.calendar {
        Some(calendar) => format!("{} {}", calendar.unit.as_str(), calendar.zone.name()),
        None => window_text(limit.window_ms),
    };
    let mut text = format!("{} {}/{window}", limit.algorithm, limit.limit);
    if limit.algorithm.uses_burst() {
        text.push_str(&format!(" burst {}", limit.burst));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Algorithm, Params};

    #[test]
    fn figures_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(window_text(60_000), "1m");
        assert_eq!(window_text(90_000), "90s");
        assert_eq!(window_text(250), "250ms");
        let limit = Params::new(Algorithm::TokenBucket, 100, 60_000, 200).unwrap();
        assert_eq!(limit_text(&limit), "token_bucket 100/1m burst 200");
        let limit = Params::new(Algorithm::FixedWindow, 10, 3_600_000, 10).unwrap();
        assert_eq!(limit_text(&limit), "fixed_window 10/1h");
    }
}
