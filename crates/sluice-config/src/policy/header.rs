//! `RateLimit-Policy` of a (policy, tier), computed once at compile: one item per limit, a
//! stacked policy's each named `<policy>.<window>`.

use http::HeaderValue;
use sluice_core::Params;

use super::stack::Stacked;

/// The header value: `"public";q=100;w=60`, or one item per stacked limit.
pub(super) fn policy_header(policy: &str, params: &Params, stacked: &[Stacked]) -> HeaderValue {
    let text = if stacked.is_empty() {
        item(policy, params)
    } else {
        stacked
            .iter()
            .map(|s| item(&s.label, &s.params))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Names are validated to header-safe characters, so this cannot fail.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("\"invalid\""))
}

/// One limit's item. The quota shown is what can be spent at once (the bucket for bucket
/// algorithms), and the window the time the policy takes to grant that much: `burst = 2000`
/// refilled at 1000 per 60 s is `q=2000;w=120`, the same rate, and never less than
/// `remaining`.
fn item(name: &str, params: &Params) -> String {
    let capacity = params.capacity();
    let window_ms = if let Some(calendar) = params.calendar {
        // A calendar window's length varies (DST, months): its usual length.
        calendar.unit.nominal_ms()
    } else if params.algorithm.uses_burst() && params.limit > 0 {
        u64::try_from(
            u128::from(params.window_ms) * u128::from(capacity) / u128::from(params.limit),
        )
        .unwrap_or(u64::MAX)
    } else {
        params.window_ms
    };
    format!("\"{name}\";q={capacity};w={}", window_secs(window_ms))
}

/// The window in whole seconds for `w=` (rounded up, at least 1: a header cannot say 0.5).
pub fn window_secs(window_ms: u64) -> u64 {
    window_ms.div_ceil(1000).max(1)
}
