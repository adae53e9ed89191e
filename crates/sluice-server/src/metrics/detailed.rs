//! `detailed_metric` of envoyproxy/ratelimit YAML limits: a limit's series labelled by the
//! values of the descriptors it counted, as envoyproxy/ratelimit's detailed stats key names
//! them (`policy="<domain>.<key>_<value>.<key>_<value>"`), for at most [`MAX_VALUES`]
//! distinct labels per limit; every further one is counted as `<policy>.other`.
//!
//! Bounded and cheap on the check path: a limit's table is one fixed array of slots (open
//! addressing), allocated the first time the limit counts a detailed check. A check hashes the
//! pieces of its label and compares them in place against the slot's label, so a label is
//! formatted once, when its value takes a slot, never per check; finding a value takes no
//! lock, and only a value not yet seen (while slots are left) takes the table's mutex.

use std::fmt;
use std::hash::{DefaultHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use prometheus_client::metrics::counter::Counter;

use super::{Metrics, RequestLabels};

/// Most distinct labels a limit's detailed series carry; the rest are `<policy>.other`.
pub const MAX_VALUES: usize = 100;

/// Slots of a table: a power of two well above [`MAX_VALUES`], so probes stay short (at most
/// 100 of 256 taken).
const SLOTS: usize = 256;

/// The label of a detailed check, written as pieces whose concatenation is the label (the
/// RLS writes a descriptor's domain, keys and values without joining them first).
pub trait DetailKey: Sync {
    fn pieces(&self, each: &mut dyn FnMut(&str));
}

/// A check's detailed label as the limiter carries it: `Some` only for a limit with
/// `detailed_metric`.
#[derive(Clone, Copy)]
pub struct Detail<'a>(pub &'a dyn DetailKey);

impl Detail<'_> {
    /// The label, formatted.
    pub fn label(&self) -> String {
        let mut label = String::new();
        self.0.pieces(&mut |piece| label.push_str(piece));
        label
    }
}

impl fmt::Debug for Detail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Detail").field(&self.label()).finish()
    }
}

/// Two details are the same when they write the same label.
impl PartialEq for Detail<'_> {
    fn eq(&self, other: &Self) -> bool {
        same(self.0, &other.label())
    }
}

impl Eq for Detail<'_> {}

/// The series of one detailed label, each created on first use (as the plain series are).
#[derive(Debug)]
pub struct DetailedSeries {
    label: Arc<str>,
    /// `rate_limit_requests_total` by `allowed`.
    requests: [OnceLock<Counter>; 2],
}

impl DetailedSeries {
    fn new(label: Arc<str>) -> DetailedSeries {
        DetailedSeries {
            label,
            requests: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// The `policy` label of these series.
    pub fn label(&self) -> &Arc<str> {
        &self.label
    }

    /// Counts one decision in `rate_limit_requests_total`; `labels` names the series the
    /// first time (its `policy` is [`label`](Self::label)).
    pub fn count_request(
        &self,
        metrics: &Metrics,
        allowed: bool,
        labels: impl FnOnce() -> RequestLabels,
    ) {
        self.requests[usize::from(allowed)]
            .get_or_init(|| metrics.requests.get_or_create(&labels()).clone())
            .inc();
    }
}

/// One taken slot.
#[derive(Debug)]
struct Slot {
    hash: u64,
    series: DetailedSeries,
}

/// What probing the table for a label found.
enum Probe<'a> {
    Found(&'a DetailedSeries),
    /// Not there; this empty slot is where it would go.
    Empty(usize),
    /// Not there, and no slot is empty.
    Full,
}

/// The detailed series of one limit.
#[derive(Debug)]
pub struct DetailedTable {
    slots: Box<[OnceLock<Slot>]>,
    /// Serialises insertions; how many slots are taken.
    taken: Mutex<usize>,
    /// Set once [`MAX_VALUES`] are taken: an unseen value goes to `other` without the lock.
    full: AtomicBool,
    other: DetailedSeries,
}

impl DetailedTable {
    /// The table of the limit whose plain `policy` label is `policy`.
    pub fn new(policy: &str) -> DetailedTable {
        DetailedTable {
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
            taken: Mutex::new(0),
            full: AtomicBool::new(false),
            other: DetailedSeries::new(format!("{policy}.other").into()),
        }
    }

    /// The series of `key`'s label: its own while fewer than [`MAX_VALUES`] labels were
    /// seen before it, else `other`.
    pub fn series(&self, key: &dyn DetailKey) -> &DetailedSeries {
        let hash = hash_of(key);
        if let Probe::Found(series) = self.probe(hash, key) {
            return series;
        }
        if self.full.load(Ordering::Acquire) {
            return &self.other;
        }
        // Nothing inside panics; a poisoned count is still the count.
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        // Probed again under the lock: another check may have just inserted it.
        match self.probe(hash, key) {
            Probe::Found(series) => series,
            Probe::Empty(at) if *taken < MAX_VALUES => {
                let label = Detail(key).label().into();
                let slot = self.slots[at].get_or_init(|| Slot {
                    hash,
                    series: DetailedSeries::new(label),
                });
                *taken += 1;
                if *taken == MAX_VALUES {
                    self.full.store(true, Ordering::Release);
                }
                &slot.series
            }
            Probe::Empty(_) | Probe::Full => &self.other,
        }
    }

    /// Linear probing from `hash`: the slot holding `key`'s label, or the first empty one.
    fn probe(&self, hash: u64, key: &dyn DetailKey) -> Probe<'_> {
        let mask = SLOTS - 1;
        // The low bits pick the first slot; truncation is the point.
        #[allow(clippy::cast_possible_truncation)]
        let start = hash as usize & mask;
        for i in 0..SLOTS {
            let at = (start + i) & mask;
            match self.slots[at].get() {
                None => return Probe::Empty(at),
                Some(slot) if slot.hash == hash && same(key, &slot.series.label) => {
                    return Probe::Found(&slot.series);
                }
                Some(_) => {}
            }
        }
        Probe::Full
    }
}

/// The hash of the label `key` writes (of its bytes, however they are split in pieces).
fn hash_of(key: &dyn DetailKey) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.pieces(&mut |piece| hasher.write(piece.as_bytes()));
    hasher.finish()
}

/// Whether `key` writes exactly `label`, compared piece by piece without formatting it.
fn same(key: &dyn DetailKey, label: &str) -> bool {
    let mut rest = Some(label.as_bytes());
    key.pieces(&mut |piece| {
        rest = rest.and_then(|r| r.strip_prefix(piece.as_bytes()));
    });
    rest.is_some_and(<[u8]>::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label in two pieces, split at `at`.
    struct Split(String, usize);

    impl DetailKey for Split {
        fn pieces(&self, each: &mut dyn FnMut(&str)) {
            each(&self.0[..self.1]);
            each(&self.0[self.1..]);
        }
    }

    #[test]
    fn a_label_is_the_same_however_it_is_split() {
        let a = Split("edge.user_ann".to_owned(), 4);
        let b = Split("edge.user_ann".to_owned(), 9);
        assert_eq!(hash_of(&a), hash_of(&b));
        assert!(same(&a, "edge.user_ann"));
        assert!(!same(&a, "edge.user_an"));
        assert!(!same(&a, "edge.user_anna"));
        assert_eq!(Detail(&a), Detail(&b));
    }

    #[test]
    fn the_first_hundred_labels_have_their_own_series_then_other() {
        let table = DetailedTable::new("edge.user");
        let key = |i: usize| Split(format!("edge.user_{i}"), 5);
        for i in 0..MAX_VALUES {
            assert_eq!(&**table.series(&key(i)).label(), format!("edge.user_{i}"));
        }
        assert_eq!(&**table.series(&key(MAX_VALUES)).label(), "edge.user.other");
        assert_eq!(&**table.series(&key(7)).label(), "edge.user_7");
        assert!(std::ptr::eq(table.series(&key(7)), table.series(&key(7))));
        assert_eq!(*table.taken.lock().unwrap(), MAX_VALUES);
    }
}
