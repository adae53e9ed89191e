//! Leases of window units (fixed_window, sliding_window_counter): when a key is hot on this
//! daemon (at least [`HOT`] checks of it in a row, each within [`IDLE_MS`] of the one before),
//! one backend call takes a
//! block of `g` units from the window's shared counter (a check of cost `g`, through the
//! group-commit path: it passes only if the window still has them, so every unit is counted
//! there), and the daemon admits from the block until it is spent or the window ends. No
//! window admits more than its limit across daemons. For sliding_window_counter this holds
//! at every instant too: a unit admitted later in the window than it was counted meets a
//! previous window weighted less, so the sliding sum it was checked under only falls.
//!
//! The rule for `g` ([`grant_size`]), with `F` = [`FLEET`] the daemons a limit is sized
//! for, `R` the backend's remaining as this daemon last saw it:
//! `g = min(limit / (10·F), R / (2·F), demand)`, `demand` = max(2, this window's checks of
//! the key so far, twice the last grant); a block is taken only when `g ≥ 2` and exceeds the
//! check's cost. So a daemon holds at most `limit / (10·F)` unspent units of a key, a fleet of
//! up to `F` daemons at most 10 % of the limit, and as the window's remainder runs low the
//! blocks shrink to nothing (every check goes to the backend, as without leases).
//! Unspent units are given back (a refund in the same window only) when the key has been idle
//! for [`IDLE_MS`], and on shutdown; what is left when the window ends is lost to it
//! (under-admission at most the fleet's held units).
//!
//! Why hot means checks close together, not checks in the window: a block outlives the key's
//! next idle period only as a refund, so a key checked again only after [`IDLE_MS`] would pay
//! two calls (the block, then its return) where one does. Over millions of keys each checked
//! now and then, a window of an hour sees most keys twice, none of them hot. A key idle that
//! long that never took a block is forgotten (and is among the first to go when the table is
//! full), so such keys keep the table small instead of cycling through its bound; a key that
//! took one keeps its window's demand, and after an idle period its first check goes to the
//! backend (which refreshes the remaining its next block is sized from).

use std::sync::Arc;

use sluice_core::{Algorithm, Decision, Params};

use super::slots::{Slot, Slots};

/// The daemons sharing a backend a grant is sized for (see the module doc).
pub const FLEET: u64 = 8;
/// Checks of a key in a row, each within [`IDLE_MS`] of the one before, before it is leased.
pub const HOT: u64 = 2;
/// Unspent units of a key idle this long go back to the backend.
pub const IDLE_MS: u64 = 500;
/// How long an acquisition in flight keeps other checks of its key off the lease path (a
/// call cancelled midway no longer holds it after this).
const ACQUIRING_MS: u64 = 1_000;
const MAX_ENTRIES: usize = 100_000;
const MAX_BYTES: usize = 32 << 20;

/// What this daemon knows of one hot key.
#[derive(Debug, Clone, Copy)]
struct Hold {
    params: Params,
    /// Unspent units of the block, valid while `now < window_end`.
    units: u64,
    /// The window index of the block (the refund's token) and its end.
    token: u64,
    window_end: u64,
    /// The `reset` of the answers given from the block: the backend's, at the grant.
    reset_ms: u64,
    /// The backend's remaining as last seen.
    backend_remaining: u64,
    /// The window `hits` counts in (`now / window_ms`), and this daemon's checks in it.
    seen_window: u64,
    hits: u64,
    /// Checks in a row, each within [`IDLE_MS`] of the one before (see the module doc).
    streak: u64,
    /// The last block taken.
    grant: u64,
    acquiring_until: u64,
    last_used: u64,
}

/// What a check does with the lease of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Take {
    /// Admitted from the block: the answer's remaining and reset.
    Local { remaining: u64, reset_ms: u64 },
    /// Take a block of this many units (the check's cost among them).
    Acquire(u64),
    /// Ask the backend, as without leases.
    Backend,
}

/// Units to give back: the key, its parameters, the window and how many.
#[derive(Debug)]
pub(super) struct Unspent {
    pub slot: Slot,
    pub params: Params,
    pub token: u64,
    pub units: u64,
}

#[derive(Debug)]
pub(super) struct Leases {
    slots: Slots<Hold>,
}

impl Default for Leases {
    fn default() -> Self {
        Leases {
            slots: Slots::new(MAX_ENTRIES, MAX_BYTES),
        }
    }
}

/// The window a block granted by `decision` at `now_ms` was counted in (its index, the
/// refund's token) and the end of its use. fixed_window answers the window's end as its reset;
/// sliding_window_counter does not, and the window is read from the daemon's `now` (the
/// backend counts in that window or, its stored window ahead, a later one: the block then
/// ends early, never late).
fn block_window(params: &Params, decision: &Decision, now_ms: u64) -> (u64, u64) {
    let w = params.window_ms.max(1);
    match params.algorithm {
        Algorithm::FixedWindow => ((decision.reset_ms / w).saturating_sub(1), decision.reset_ms),
        _ => {
            let index = now_ms / w;
            (index, index.saturating_add(1).saturating_mul(w))
        }
    }
}

/// Whether checks under `params` are leased: the window algorithms, where a unit counted in
/// a window may be admitted at any time before it ends without the window ever exceeding its
/// limit, with a limit that allows blocks of at least 2 units (so the many small per-user
/// limits keep no lease state at all).
pub fn leased(params: &Params) -> bool {
    // A calendar window's edges are not the uniform ones a block's expiry is computed from.
    matches!(
        params.algorithm,
        Algorithm::FixedWindow | Algorithm::SlidingWindowCounter
    ) && params.calendar.is_none()
        && params.limit / (10 * FLEET) >= 2
}

/// The block to take: see the module doc.
pub fn grant_size(limit: u64, backend_remaining: u64, hits: u64, last_grant: u64) -> u64 {
    let cap = limit / (10 * FLEET);
    let low = backend_remaining / (2 * FLEET);
    let demand = hits.max(last_grant.saturating_mul(2)).max(2);
    cap.min(low).min(demand)
}

impl Leases {
    /// A check of `cost` on `slot` at `now_ms`: from the block, a block to take, or the
    /// backend; and the units that expired with their window (for the metrics).
    pub(super) fn take(&self, slot: &Slot, params: Params, cost: u64, now_ms: u64) -> (Take, u64) {
        let window = now_ms / params.window_ms.max(1);
        let mut forgotten = 0;
        let make = || Hold {
            params,
            units: 0,
            token: 0,
            window_end: 0,
            reset_ms: 0,
            backend_remaining: 0,
            seen_window: window,
            hits: 0,
            streak: 0,
            grant: 0,
            acquiring_until: 0,
            last_used: now_ms,
        };
        let stale = |h: &Hold| h.units == 0 && forgettable(h, window, now_ms, IDLE_MS);
        let (take, expired) = self.slots.upsert(
            slot,
            make,
            stale,
            |_, h| forgotten += h.units,
            |h| {
                let mut expired = 0;
                if h.units > 0 && now_ms >= h.window_end {
                    expired = std::mem::take(&mut h.units);
                }
                h.params = params;
                if h.seen_window != window {
                    h.seen_window = window;
                    h.hits = 0;
                }
                h.hits += 1;
                if now_ms.saturating_sub(h.last_used) >= IDLE_MS {
                    h.streak = 0;
                }
                h.streak += 1;
                h.last_used = now_ms;
                if h.units > 0 && h.units >= cost {
                    h.units -= cost;
                    let local = Take::Local {
                        remaining: h.backend_remaining.saturating_add(h.units),
                        reset_ms: h.reset_ms,
                    };
                    return (local, expired);
                }
                if h.units > 0 || h.streak < HOT || h.acquiring_until > now_ms {
                    return (Take::Backend, expired);
                }
                let g = grant_size(params.limit, h.backend_remaining, h.hits, h.grant);
                if g < 2 || g <= cost {
                    return (Take::Backend, expired);
                }
                h.acquiring_until = now_ms + ACQUIRING_MS;
                (Take::Acquire(g), expired)
            },
        );
        (take, expired + forgotten)
    }

    /// The backend granted `g` units (`decision`, a check of cost `g` at `now_ms`), `cost` of
    /// them spent by the check that asked: the answer's remaining, and the units of an older
    /// window still held (an acquisition that outlived [`ACQUIRING_MS`]), which end here.
    pub(super) fn granted(
        &self,
        slot: &Slot,
        g: u64,
        cost: u64,
        decision: &Decision,
        now_ms: u64,
    ) -> (u64, u64) {
        self.slots
            .with(slot, |h| {
                let (token, window_end) = block_window(&h.params, decision, now_ms);
                let mut expired = 0;
                if h.units > 0 && h.token != token {
                    // Units are spent only in the window that counted them.
                    expired = std::mem::take(&mut h.units);
                }
                h.units += g - cost;
                h.token = token;
                h.window_end = window_end;
                h.reset_ms = decision.reset_ms;
                h.backend_remaining = decision.remaining;
                h.grant = g;
                h.acquiring_until = 0;
                (decision.remaining.saturating_add(h.units), expired)
            })
            .unwrap_or((decision.remaining + (g - cost), g - cost))
    }

    /// A check of `slot` asked the backend: what it answered of the window's remaining, if it
    /// answered. `acquired`: the check was the one taking a block (refused, or failed), whose
    /// acquisition is over.
    pub(super) fn observe(&self, slot: &Slot, remaining: Option<u64>, acquired: bool) {
        self.slots.with(slot, |h| {
            if acquired {
                h.acquiring_until = 0;
            }
            if let Some(remaining) = remaining {
                h.backend_remaining = remaining;
            }
        });
    }

    /// Takes the unspent units of keys idle for `idle_ms` at `now_ms` (every key with 0: a
    /// shutdown) to give back, and answers the units whose window ended meanwhile. Forgets
    /// the keys holding nothing that are idle or were last seen in an earlier window.
    pub(super) fn idle(&self, now_ms: u64, idle_ms: u64) -> (Vec<Unspent>, Vec<(Arc<str>, u64)>) {
        let mut back = Vec::new();
        let mut expired = Vec::new();
        self.slots.retain(|slot, h| {
            if h.units > 0 && now_ms >= h.window_end {
                expired.push((slot.policy.clone(), std::mem::take(&mut h.units)));
            }
            if h.units > 0 && now_ms.saturating_sub(h.last_used) >= idle_ms {
                back.push(Unspent {
                    slot: slot.clone(),
                    params: h.params,
                    token: h.token,
                    units: std::mem::take(&mut h.units),
                });
            }
            let window = now_ms / h.params.window_ms.max(1);
            h.units > 0 || !forgettable(h, window, now_ms, idle_ms)
        });
        (back, expired)
    }
}

/// Whether `h`, holding no units, is of no more use at `now_ms` in `window`: last seen in an
/// earlier window, or idle for `idle_ms` (its next check starts a new streak), never leased
/// (a key that was keeps its window's demand for its next streak) and no block being taken.
fn forgettable(h: &Hold, window: u64, now_ms: u64, idle_ms: u64) -> bool {
    h.seen_window != window
        || (h.grant == 0
            && h.acquiring_until <= now_ms
            && now_ms.saturating_sub(h.last_used) >= idle_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(limit: u64) -> Params {
        Params {
            algorithm: Algorithm::FixedWindow,
            limit,
            window_ms: 1_000,
            burst: limit,
            counting: sluice_core::Counting::Admitted,
            calendar: None,
        }
    }

    fn allowed(remaining: u64, reset_ms: u64) -> Decision {
        Decision {
            allowed: true,
            limit: 0,
            remaining,
            reset_ms,
            retry_after_ms: 0,
            delay_ms: 0,
            debt: 0,
        }
    }

    #[test]
    fn the_grant_stays_within_a_tenth_of_the_limit_over_the_fleet_and_shrinks_with_the_window() {
        for limit in [1, 79, 80, 100, 1_000, 10_000, 1_000_000] {
            let g = grant_size(limit, limit, u64::MAX, u64::MAX);
            assert!(g * FLEET <= limit / 10 + FLEET, "{limit}: {g}");
        }
        assert_eq!(grant_size(10_000, 10_000, 1_000, 0), 125);
        assert_eq!(grant_size(10_000, 32, 1_000, 0), 2);
        assert_eq!(grant_size(10_000, 31, 1_000, 0), 1);
        assert_eq!(grant_size(10_000, 10_000, 3, 4), 8, "twice the last grant");
    }

    #[test]
    fn a_hot_key_takes_a_block_spends_it_locally_and_gives_back_when_idle() {
        let leases = Leases::default();
        let slot = Slot::new(&Arc::from("p"), 0, "k");
        let p = params(10_000);
        assert_eq!(leases.take(&slot, p, 1, 100).0, Take::Backend, "cold");
        leases.observe(&slot, Some(9_999), false);
        let Take::Acquire(g) = leases.take(&slot, p, 1, 110).0 else {
            panic!("hot");
        };
        assert_eq!(
            leases.take(&slot, p, 1, 111).0,
            Take::Backend,
            "one at a time"
        );
        assert_eq!(g, 2);
        assert_eq!(
            leases.granted(&slot, g, 1, &allowed(9_997, 1_000), 110),
            (9_998, 0)
        );
        let (take, _) = leases.take(&slot, p, 1, 120);
        assert_eq!(
            take,
            Take::Local {
                remaining: 9_997,
                reset_ms: 1_000
            }
        );
        // Five checks this window, twice the last grant 4: the demand is 5.
        assert_eq!(leases.take(&slot, p, 1, 130).0, Take::Acquire(5), "grows");
        assert_eq!(
            leases.granted(&slot, 5, 1, &allowed(9_992, 1_000), 130),
            (9_996, 0)
        );
        assert!(leases.idle(200, IDLE_MS).0.is_empty(), "not idle yet");
        let (back, expired) = leases.idle(630, IDLE_MS);
        assert_eq!((back.len(), back[0].units, back[0].token), (1, 4, 0));
        assert!(expired.is_empty());
        // Idle since 130: a new streak, whose second check takes twice the last block.
        assert_eq!(leases.take(&slot, p, 1, 700).0, Take::Backend, "idle");
        leases.observe(&slot, Some(9_000), false);
        assert_eq!(leases.take(&slot, p, 1, 710).0, Take::Acquire(10));
    }

    #[test]
    fn a_key_checked_again_only_after_an_idle_period_is_never_leased_nor_kept() {
        let leases = Leases::default();
        let slot = Slot::new(&Arc::from("p"), 0, "k");
        let p = params(10_000);
        for at in [100, 600, 1_100, 5_000] {
            assert_eq!(leases.take(&slot, p, 1, at).0, Take::Backend, "{at}");
            leases.observe(&slot, Some(9_000), false);
        }
        assert_eq!(leases.slots.len(), 1);
        let (back, expired) = leases.idle(5_499, IDLE_MS);
        assert!(back.is_empty() && expired.is_empty());
        assert_eq!(leases.slots.len(), 1, "not idle yet");
        leases.idle(5_500, IDLE_MS);
        assert_eq!(leases.slots.len(), 0, "forgotten");
    }

    #[test]
    fn small_limits_and_other_algorithms_are_not_leased() {
        assert!(leased(&params(160)) && !leased(&params(159)));
        let bucket = Params {
            algorithm: Algorithm::TokenBucket,
            ..params(10_000)
        };
        assert!(!leased(&bucket));
    }

    #[test]
    fn a_peek_is_answered_from_a_block_only_when_there_is_one() {
        let leases = Leases::default();
        let slot = Slot::new(&Arc::from("p"), 0, "k");
        assert_eq!(leases.take(&slot, params(10_000), 0, 100).0, Take::Backend);
    }

    #[test]
    fn a_block_ends_with_its_window() {
        let leases = Leases::default();
        let slot = Slot::new(&Arc::from("p"), 0, "k");
        let p = params(10_000);
        leases.take(&slot, p, 1, 100);
        leases.observe(&slot, Some(9_999), false);
        let Take::Acquire(g) = leases.take(&slot, p, 1, 110).0 else {
            panic!("hot");
        };
        leases.granted(&slot, g, 1, &allowed(9_000, 1_000), 110);
        let (take, expired) = leases.take(&slot, p, 1, 1_000);
        assert_eq!((take, expired), (Take::Backend, g - 1));
    }
}
