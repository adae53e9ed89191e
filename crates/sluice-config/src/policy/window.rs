//! A policy's window: a duration aligned to unix time, or a calendar window (a day, week or
//! month of `calendar`'s time zone, fixed_window only), compiled into the window length and
//! the [`Calendar`] the core maps it through.

use sluice_core::{Algorithm, Calendar, CalendarUnit};

use super::fields::{self, field};
use crate::error::FieldError;
use crate::schema::PolicyConfig;

/// The window of policy `name` in ms (for a calendar window, the longest one) and its
/// calendar, or the errors.
pub(super) fn compile_window(
    name: &str,
    config: &PolicyConfig,
    algorithm: Option<Algorithm>,
    errors: &mut Vec<FieldError>,
) -> (Option<u64>, Option<Calendar>) {
    let Some(text) = config.window.as_deref() else {
        errors.push(FieldError::new(field(name, "window"), "is required"));
        return (None, None);
    };
    window_of(
        name,
        &field(name, "window"),
        text,
        config,
        algorithm,
        errors,
    )
}

/// The window `text` (field `at`) of a limit of policy `name`: [`compile_window`] for a
/// policy's own window and each of its stacked `limits`.
pub(super) fn window_of(
    name: &str,
    at: &str,
    text: &str,
    config: &PolicyConfig,
    algorithm: Option<Algorithm>,
    errors: &mut Vec<FieldError>,
) -> (Option<u64>, Option<Calendar>) {
    let unit = match (text, config.calendar.is_some()) {
        ("1w", _) => Some(CalendarUnit::Week),
        ("1mo", _) => Some(CalendarUnit::Month),
        ("1d", true) => Some(CalendarUnit::Day),
        (_, true) => {
            errors.push(FieldError::new(
                field(name, "calendar"),
                format!("a calendar window is 1d, 1w or 1mo; window is {text:?}"),
            ));
            return (fields::window(at, text, errors), None);
        }
        (_, false) => None,
    };
    let Some(unit) = unit else {
        return (fields::window(at, text, errors), None);
    };
    if algorithm.is_some_and(|a| a != Algorithm::FixedWindow) {
        errors.push(FieldError::new(
            at,
            format!(
                "calendar windows (1d with calendar, 1w, 1mo) are only for fixed_window; use a duration such as \"7d\" or \"30d\" with {}",
                config.algorithm.as_deref().unwrap_or("this algorithm")
            ),
        ));
        return (None, None);
    }
    let zone_name = config.calendar.as_deref().unwrap_or("UTC");
    match zone_name.parse() {
        Ok(zone) => (Some(unit.longest_ms()), Some(Calendar { unit, zone })),
        Err(_) => {
            errors.push(FieldError::new(
                field(name, "calendar"),
                format!(
                    "unknown time zone {zone_name:?}; expected an IANA name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\""
                ),
            ));
            (None, None)
        }
    }
}
