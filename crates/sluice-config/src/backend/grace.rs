//! How long a key outlives the moment its state stops mattering.
//!
//! A check is stamped with the daemon's `now` before it reaches the store, and on Redis it may
//! wait behind a call in flight (group commit) and then in its own call, each up to
//! `backend.timeout`. A key that expired exactly when its state stopped mattering would be gone
//! when such a check, stamped just before the edge, arrives: it would find no state, start its
//! window (or log, or bucket) again from nothing and admit past the limit. So every store keeps
//! every key this much longer. Keeping a key longer never changes a decision (an expired state
//! decides as a fresh one); it only costs memory for that long.

use std::time::Duration;

/// What the grace covers beyond the store's own bound: clock skew between the daemons sharing
/// a backend, and the daemon's own scheduling between stamping a check and handing it over.
pub const CLOCK_MARGIN: Duration = Duration::from_secs(1);

/// The expiry grace of a store whose checks are answered within `timeout`: at most `timeout`
/// queued behind the call in flight on its lane, at most `timeout` in its own call (a check
/// answered later is answered by its fail mode, never admitted by the backend), plus
/// [`CLOCK_MARGIN`].
pub fn expiry_grace(timeout: Duration) -> Duration {
    timeout.saturating_mul(2).saturating_add(CLOCK_MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_covers_queueing_and_the_call_and_the_margin() {
        assert_eq!(
            expiry_grace(Duration::from_millis(50)),
            Duration::from_millis(1100)
        );
        assert_eq!(expiry_grace(Duration::MAX), Duration::MAX);
    }
}
