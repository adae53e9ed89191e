//! What the memory store's tests share: a time, the grace, checks and limits.

use sluice_core::{Algorithm, Params};

use crate::store::Check;

pub(super) const T0: u64 = 1_700_000_000_000;
/// The default grace, in ms: keys are forgotten only this long after their expiry.
pub(super) const GRACE_MS: u64 = sluice_config::backend::CLOCK_MARGIN.as_millis() as u64;

pub(super) fn check<'a>(key: &'a str, params: Params, cost: u64) -> Check<'a> {
    Check::new("p", key, params, cost)
}

/// A check of cost 1 of `key` under `policy`.
pub(super) fn one<'a>(policy: &'a str, key: &'a str, params: Params) -> Check<'a> {
    Check::new(policy, key, params, 1)
}

pub(super) fn fixed(limit: u64, window_ms: u64) -> Params {
    Params::new(Algorithm::FixedWindow, limit, window_ms, limit).unwrap()
}
