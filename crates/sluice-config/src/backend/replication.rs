//! The overshoot budget of a replicated policy in numbers: how much unacknowledged
//! consumption a region may hold ([`unacked_cap`], [`partition_cap`]), whether a policy's
//! budget can be kept at its rate ([`check_budget`]), and which algorithms replicate at all
//! ([`unreplicable`]). Pure arithmetic, apart from the store that applies it, so the config
//! compile and the tests read it without a backend.

use std::time::Duration;

use sluice_core::Algorithm;

/// Default `max_pending` (`region.max_pending`): most buffered (limit, window) entries per peer.
pub const DEFAULT_MAX_PENDING: usize = 100_000;

/// Replication settings of one policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replication {
    /// Consumption is shipped to every peer at most this long after it happened.
    pub sync_interval: Duration,
    /// Admitted may exceed the limit by at most this fraction (0 < budget <= 1).
    pub overshoot_budget: f64,
}

/// Why an algorithm cannot be replicated, or `None` when it can.
pub fn unreplicable(algorithm: Algorithm) -> Option<&'static str> {
    match algorithm {
        Algorithm::FixedWindow | Algorithm::SlidingWindowCounter => None,
        Algorithm::SlidingWindowLog => Some(
            "sliding_window_log keeps one entry per admitted request: replicating it ships \
             every request, not a bounded set of counters; use sliding_window_counter, or \
             scope = \"global\"",
        ),
        Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket => Some(
            "a bucket's state (tokens left, or the theoretical arrival time) is rewritten from \
             itself at every check with a time-dependent refill capped at the burst; updates \
             from two regions do not commute, so they cannot be merged without coordination; \
             use fixed_window or sliding_window_counter, or scope = \"global\"",
        ),
    }
}

/// Most unacknowledged consumption one region may hold per window:
/// `floor(budget · limit / peers)`, at least 1.
pub fn unacked_cap(limit: u64, budget: f64, peers: usize) -> u64 {
    let peers = peers.max(1) as f64;
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let cap = (budget * limit as f64 / peers).floor() as u64;
    cap.max(1)
}

/// The cap while some peer is unreachable: the region's fair share `floor(limit / regions)`
/// if that is more than the budget's cap.
pub fn partition_cap(limit: u64, budget: f64, peers: usize) -> u64 {
    let regions = u64::try_from(peers).unwrap_or(u64::MAX).saturating_add(1);
    unacked_cap(limit, budget, peers).max(limit / regions)
}

/// Whether `budget` can be kept at the policy's rate with `peers` peer regions, and why not.
///
/// Two conditions:
/// - at least one request may be unacknowledged: `budget · limit / peers >= 1`, else the
///   region could never admit anything before a peer acknowledged it;
/// - the cap covers the policy's rate over one acknowledgement round trip, taken as two sync
///   intervals (one to ship, one for the link round trip, assumed no longer than
///   `sync_interval`): `cap >= rate · 2 · sync_interval` with `rate = limit / window`, i.e.
///   `budget >= peers · 2 · sync_interval / window`. Otherwise a region that receives all
///   the traffic could not reach the limit within a window (it would be throttled below it).
pub fn check_budget(
    limit: u64,
    window_ms: u64,
    replication: &Replication,
    peers: usize,
) -> Result<(), String> {
    let budget = replication.overshoot_budget;
    let peers_f = peers.max(1) as f64;
    #[allow(clippy::cast_precision_loss)]
    let exact_cap = budget * limit as f64 / peers_f;
    if exact_cap < 1.0 {
        return Err(format!(
            "overshoot_budget {budget} of limit {limit} over {peers} peer region(s) allows \
             {exact_cap:.2} unacknowledged requests per region (cap = budget · limit / peers); \
             at least 1 is needed: raise the budget or the limit, or use scope = \"global\""
        ));
    }
    let interval_ms = replication.sync_interval.as_millis() as f64;
    #[allow(clippy::cast_precision_loss)]
    let needed = peers_f * 2.0 * interval_ms / window_ms as f64;
    if budget < needed {
        return Err(format!(
            "overshoot_budget {budget} cannot be kept at sync_interval {}ms: a region may hold \
             budget · limit / peers unacknowledged requests, and an acknowledgement takes about \
             two sync intervals, so reaching the limit within the {window_ms}ms window needs a \
             budget of at least peers · 2 · sync_interval / window = {needed:.4}; shorten \
             sync_interval, lengthen the window or raise the budget",
            replication.sync_interval.as_millis()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replication(ms: u64, budget: f64) -> Replication {
        Replication {
            sync_interval: Duration::from_millis(ms),
            overshoot_budget: budget,
        }
    }

    #[test]
    fn the_cap_is_the_budget_shared_by_the_peers() {
        assert_eq!(unacked_cap(1000, 0.05, 1), 50);
        assert_eq!(unacked_cap(1000, 0.05, 2), 25);
        assert_eq!(unacked_cap(10, 0.05, 1), 1);
        assert_eq!(partition_cap(1000, 0.05, 1), 500);
        assert_eq!(partition_cap(1000, 0.05, 2), 333);
    }

    #[test]
    fn a_budget_the_interval_cannot_keep_is_refused() {
        assert!(check_budget(1000, 5_000, &replication(100, 0.05), 1).is_ok());
        let slow = check_budget(1000, 1_000, &replication(100, 0.05), 1).unwrap_err();
        assert!(
            slow.contains("cannot be kept at sync_interval 100ms"),
            "{slow}"
        );
        let tiny = check_budget(10, 60_000, &replication(100, 0.05), 1).unwrap_err();
        assert!(tiny.contains("at least 1 is needed"), "{tiny}");
    }

    #[test]
    fn only_window_counters_replicate() {
        assert!(unreplicable(Algorithm::FixedWindow).is_none());
        assert!(unreplicable(Algorithm::SlidingWindowCounter).is_none());
        for a in [
            Algorithm::TokenBucket,
            Algorithm::Gcra,
            Algorithm::LeakyBucket,
            Algorithm::SlidingWindowLog,
        ] {
            assert!(unreplicable(a).is_some(), "{a:?}");
        }
    }
}
