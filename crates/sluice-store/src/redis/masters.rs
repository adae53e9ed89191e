//! Which master serves each slot, as the cluster client last knew it: the lanes of group
//! commit on a cluster. One-key checks bound for the slots of one master queue behind one call
//! to it ([`Lane::Master`]), so a group gathers checks of a node instead of a slot (1 000 keys
//! spread over 16 384 slots rarely share one).
//!
//! The table only decides how checks are grouped, never where a check is decided: a check
//! whose slot moved reaches a node that does not serve it, is answered "not run" by the group
//! script and goes again alone, following the redirection. So a stale table costs a round
//! trip, not a wrong answer; it is looked up again when that happens (at most every
//! [`REFRESH_EVERY_MS`]).

use std::sync::atomic::{AtomicU64, Ordering};

use fred::types::cluster::ClusterRouting;
use parking_lot::RwLock;

use super::runner::Lane;

/// Slots in a Redis Cluster.
const SLOTS: usize = 16_384;

/// Least time between two look-ups of the table (a moving slot answers "not run" for every
/// check of it until its move ends).
pub(crate) const REFRESH_EVERY_MS: u64 = 100;

/// The master of each slot.
#[derive(Debug, Default)]
pub(crate) struct Masters {
    /// Per slot the index of its master, `u16::MAX` for none; empty before the first look-up.
    of_slot: RwLock<Vec<u16>>,
    /// `now_ms` of the last look-up (0: never).
    looked_up_ms: AtomicU64,
}

impl Masters {
    /// The master lane of `slot`, or `None` when the table does not know it.
    pub(crate) fn lane(&self, slot: u16) -> Option<Lane> {
        let of_slot = self.of_slot.read();
        match of_slot.get(usize::from(slot)) {
            Some(&master) if master != u16::MAX => Some(Lane::Master(master)),
            _ => None,
        }
    }

    /// Whether the table is due a look-up at `now_ms` (it did not know a slot, or was found
    /// stale), claiming it if so: one caller looks up per [`REFRESH_EVERY_MS`].
    pub(crate) fn due(&self, now_ms: u64) -> bool {
        let last = self.looked_up_ms.load(Ordering::Relaxed);
        now_ms.saturating_sub(last) >= REFRESH_EVERY_MS
            && self
                .looked_up_ms
                .compare_exchange(last, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Fills the table from the client's slot map.
    pub(crate) fn fill(&self, routing: &ClusterRouting) {
        let mut masters: Vec<String> = Vec::new();
        let mut of_slot = vec![u16::MAX; SLOTS];
        for range in routing.slots() {
            let name = format!("{}:{}", range.primary.host, range.primary.port);
            let index = match masters.iter().position(|m| *m == name) {
                Some(i) => i,
                None => {
                    masters.push(name);
                    masters.len() - 1
                }
            };
            let Ok(index) = u16::try_from(index) else {
                continue;
            };
            let (start, end) = (usize::from(range.start), usize::from(range.end));
            if let Some(slots) = of_slot.get_mut(start..=end.min(SLOTS - 1)) {
                slots.fill(index);
            }
        }
        *self.of_slot.write() = of_slot;
    }
}
