//! Values a policy and its candidates spell the same way: an algorithm's name and a window.

use sluice_core::Algorithm;

use crate::error::FieldError;
use crate::parse::parse_duration_ms;

/// The name of field `key` of policy `name` in errors (`policies.public.limit`).
pub(super) fn field(name: &str, key: &str) -> String {
    format!("policies.{name}.{key}")
}

/// The algorithm named `text`, or the error at field `at`.
pub(super) fn algorithm(at: &str, text: &str, errors: &mut Vec<FieldError>) -> Option<Algorithm> {
    let found = Algorithm::ALL.into_iter().find(|a| a.as_str() == text);
    if found.is_none() {
        errors.push(FieldError::new(
            at,
            format!(
                "unknown algorithm {text:?}; expected one of fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket, gcra"
            ),
        ));
    }
    found
}

/// The window `text` in ms (at least 1 ms), or the error at field `at`.
pub(super) fn window(at: &str, text: &str, errors: &mut Vec<FieldError>) -> Option<u64> {
    match parse_duration_ms(text) {
        Ok(0) => {
            errors.push(FieldError::new(at, "window must be at least 1ms"));
            None
        }
        Ok(ms) => Some(ms),
        Err(why) => {
            errors.push(FieldError::new(at, why));
            None
        }
    }
}
