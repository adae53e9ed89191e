//! Who is being limited: per policy, the heaviest keys by checks and by rejections over the
//! last 5 and 60 minutes, and the share of distinct keys denied at least once, in fixed memory
//! whatever the number of keys (so user keys never become metric labels).
//!
//! Each policy keeps one slot per minute for the last 5 minutes and one per 5 minutes for the
//! last hour. A slot holds count-min sketches of checks and rejections (counts of any key,
//! overestimated by at most `e / 1024` of the slot's total) and the 100 keys with the highest
//! estimates seen in it; the minute slots also hold HyperLogLogs of distinct checked and denied
//! keys. A query merges the slots of its period and re-estimates every candidate from the
//! merged sketches. Memory per policy: about 600 KiB plus the candidate keys (at most
//! 17 x 200 keys of at most 512 bytes).

mod count_min;
mod distinct;

use std::collections::HashMap;
use std::sync::Arc;

use ahash::RandomState;
use parking_lot::{Mutex, RwLock};

use count_min::CountMin;
use distinct::Distinct;

/// Candidate keys kept per slot and metric; also the most a query returns.
pub const MAX_TOP: usize = 100;

const MINUTE_MS: u64 = 60_000;
const FIVE_MINUTES_MS: u64 = 5 * MINUTE_MS;
const MINUTE_SLOTS: usize = 5;
const FIVE_MINUTE_SLOTS: usize = 12;

/// The period a query covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    FiveMinutes,
    Hour,
}

impl Period {
    pub fn parse(text: &str) -> Option<Period> {
        match text {
            "5m" => Some(Period::FiveMinutes),
            "60m" | "1h" => Some(Period::Hour),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Period::FiveMinutes => "5m",
            Period::Hour => "60m",
        }
    }
}

/// What a query ranks by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Rejected,
    Checked,
}

impl By {
    pub fn parse(text: &str) -> Option<By> {
        match text {
            "rejected" => Some(By::Rejected),
            "checked" => Some(By::Checked),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            By::Rejected => "rejected",
            By::Checked => "checked",
        }
    }
}

/// One key of a top list; counts are estimates (never below the truth).
#[derive(Debug, Clone, PartialEq)]
pub struct TopEntry {
    pub key: String,
    pub rejected: u64,
    pub checked: u64,
    pub ratio: f64,
}

/// The answer to a query.
#[derive(Debug, Clone, PartialEq)]
pub struct TopReport {
    pub entries: Vec<TopEntry>,
    /// Checks and rejections counted in the period.
    pub total_checked: u64,
    pub total_rejected: u64,
    /// Each count may exceed the truth by at most this much (with probability 98%).
    pub error_checked: u64,
    pub error_rejected: u64,
}

/// The keys with the highest estimates seen in a slot; their counts are read from the
/// sketches at query time, so the scores here only decide who stays.
#[derive(Debug, Default)]
struct Candidates {
    entries: Vec<(u64, Box<str>, u32)>,
    min_score: u32,
}

impl Candidates {
    fn offer(&mut self, hash: u64, key: &str, estimate: u32) {
        let full = self.entries.len() >= MAX_TOP;
        // The common case on a wide key space: nothing to do, no scan, no allocation.
        if full && estimate <= self.min_score {
            return;
        }
        if let Some(entry) = self
            .entries
            .iter_mut()
            .find(|e| e.0 == hash && &*e.1 == key)
        {
            entry.2 = estimate;
        } else if !full {
            self.entries.push((hash, key.into(), estimate));
        } else if let Some(lowest) = self.entries.iter_mut().min_by_key(|e| e.2) {
            *lowest = (hash, key.into(), estimate);
        }
        if self.entries.len() >= MAX_TOP {
            self.min_score = self.entries.iter().map(|e| e.2).min().unwrap_or(0);
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.min_score = 0;
    }

    fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(u64, Box<str>, u32)>()
            + self.entries.iter().map(|e| e.1.len()).sum::<usize>()
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// Which minute (or 5-minute span) since the epoch this slot holds.
    id: u64,
    checked: CountMin,
    rejected: CountMin,
    top_checked: Candidates,
    top_rejected: Candidates,
}

impl Slot {
    /// Makes the slot hold span `id`, forgetting an older one. False for a span older than
    /// the one held (a clock behind): such events are not counted.
    fn roll(&mut self, id: u64) -> bool {
        if id > self.id {
            self.id = id;
            self.checked.clear();
            self.rejected.clear();
            self.top_checked.clear();
            self.top_rejected.clear();
        }
        id == self.id
    }

    fn record(&mut self, hash: u64, key: &str, denied: bool) {
        let checked = self.checked.add(hash, 1);
        self.top_checked.offer(hash, key, checked);
        if denied {
            let rejected = self.rejected.add(hash, 1);
            self.top_rejected.offer(hash, key, rejected);
        }
    }
}

#[derive(Debug, Default)]
struct DistinctSlot {
    id: u64,
    checked: Distinct,
    denied: Distinct,
}

/// The recent history of one policy.
#[derive(Debug)]
struct PolicyHistory {
    minutes: Vec<Slot>,
    five_minutes: Vec<Slot>,
    distinct: Vec<DistinctSlot>,
}

impl Default for PolicyHistory {
    fn default() -> Self {
        PolicyHistory {
            minutes: (0..MINUTE_SLOTS).map(|_| Slot::default()).collect(),
            five_minutes: (0..FIVE_MINUTE_SLOTS).map(|_| Slot::default()).collect(),
            distinct: (0..MINUTE_SLOTS).map(|_| DistinctSlot::default()).collect(),
        }
    }
}

impl PolicyHistory {
    fn record(&mut self, hash: u64, key: &str, denied: bool, now_ms: u64) {
        let minute = now_ms / MINUTE_MS;
        let five = now_ms / FIVE_MINUTES_MS;
        let slot = &mut self.minutes[(minute % MINUTE_SLOTS as u64) as usize];
        if slot.roll(minute) {
            slot.record(hash, key, denied);
        }
        let slot = &mut self.five_minutes[(five % FIVE_MINUTE_SLOTS as u64) as usize];
        if slot.roll(five) {
            slot.record(hash, key, denied);
        }
        let slot = &mut self.distinct[(minute % MINUTE_SLOTS as u64) as usize];
        if minute > slot.id {
            *slot = DistinctSlot {
                id: minute,
                ..DistinctSlot::default()
            };
        }
        if minute == slot.id {
            slot.checked.insert(hash);
            if denied {
                slot.denied.insert(hash);
            }
        }
    }

    fn slots(&self, period: Period, now_ms: u64) -> impl Iterator<Item = &Slot> {
        let (slots, span, count) = match period {
            Period::FiveMinutes => (&self.minutes, MINUTE_MS, MINUTE_SLOTS as u64),
            Period::Hour => (
                &self.five_minutes,
                FIVE_MINUTES_MS,
                FIVE_MINUTE_SLOTS as u64,
            ),
        };
        let current = now_ms / span;
        slots
            .iter()
            .filter(move |s| s.id <= current && s.id + count > current && s.checked.total() > 0)
    }

    fn top(&self, period: Period, by: By, n: usize, now_ms: u64) -> TopReport {
        let mut checked = CountMin::default();
        let mut rejected = CountMin::default();
        let mut candidates: HashMap<u64, &str> = HashMap::new();
        for slot in self.slots(period, now_ms) {
            checked.merge(&slot.checked);
            rejected.merge(&slot.rejected);
            let list = match by {
                By::Checked => &slot.top_checked,
                By::Rejected => &slot.top_rejected,
            };
            for (hash, key, _) in &list.entries {
                candidates.insert(*hash, key);
            }
        }
        let mut entries: Vec<TopEntry> = candidates
            .into_iter()
            .map(|(hash, key)| {
                let c = u64::from(checked.estimate(hash));
                // Both are overestimates; the truth never has more rejections than checks.
                let r = u64::from(rejected.estimate(hash)).min(c);
                TopEntry {
                    key: key.to_owned(),
                    rejected: r,
                    checked: c,
                    ratio: if c == 0 { 0.0 } else { r as f64 / c as f64 },
                }
            })
            .collect();
        entries.sort_by(|a, b| {
            let (x, y) = match by {
                By::Checked => (a.checked, b.checked),
                By::Rejected => (a.rejected, b.rejected),
            };
            y.cmp(&x).then_with(|| a.key.cmp(&b.key))
        });
        entries.truncate(n.min(MAX_TOP));
        TopReport {
            entries,
            total_checked: checked.total(),
            total_rejected: rejected.total(),
            error_checked: checked.error_bound(),
            error_rejected: rejected.error_bound(),
        }
    }

    fn denied_keys_ratio(&self, now_ms: u64) -> f64 {
        let minute = now_ms / MINUTE_MS;
        let mut checked = Distinct::default();
        let mut denied = Distinct::default();
        for slot in &self.distinct {
            if slot.id <= minute && slot.id + MINUTE_SLOTS as u64 > minute {
                checked.merge(&slot.checked);
                denied.merge(&slot.denied);
            }
        }
        let all = checked.count();
        if all < 0.5 {
            0.0
        } else {
            (denied.count() / all).clamp(0.0, 1.0)
        }
    }

    fn heap_bytes(&self) -> usize {
        let sketches = (self.minutes.len() + self.five_minutes.len())
            * 2
            * count_min::WIDTH
            * count_min::DEPTH
            * 4;
        let distinct = self.distinct.len() * 2 * 1024;
        let keys: usize = self
            .minutes
            .iter()
            .chain(&self.five_minutes)
            .map(|s| s.top_checked.heap_bytes() + s.top_rejected.heap_bytes())
            .sum();
        sketches + distinct + keys
    }
}

/// The recent history of every policy. One lock per policy, held for a few counter updates.
#[derive(Debug, Default)]
pub struct TopKeys {
    hasher: RandomState,
    /// aHash: this map is looked up on every check.
    policies: RwLock<HashMap<Arc<str>, Arc<Mutex<PolicyHistory>>, RandomState>>,
}

impl TopKeys {
    pub fn new() -> Self {
        TopKeys::default()
    }

    /// A tracker whose key hashing is fixed, so a test's sketch collisions are reproducible.
    #[cfg(test)]
    fn seeded(seed: u64) -> Self {
        TopKeys {
            hasher: RandomState::with_seeds(seed, seed ^ 1, seed ^ 2, seed ^ 3),
            policies: RwLock::default(),
        }
    }

    fn history(&self, policy: &str) -> Option<Arc<Mutex<PolicyHistory>>> {
        self.policies.read().get(policy).cloned()
    }

    /// Keeps a history for exactly `names` (the policies in force).
    pub fn retain_policies<S: AsRef<str>>(&self, names: impl IntoIterator<Item = S>) {
        let names: Vec<S> = names.into_iter().collect();
        let mut policies = self.policies.write();
        policies.retain(|name, _| names.iter().any(|n| n.as_ref() == &**name));
        for name in &names {
            policies.entry(name.as_ref().into()).or_default();
        }
    }

    /// Counts one decided check.
    pub fn record(&self, policy: &str, key: &str, denied: bool, now_ms: u64) {
        if let Some(history) = self.history(policy) {
            let hash = self.hasher.hash_one(key);
            history.lock().record(hash, key, denied, now_ms);
        }
    }

    /// The `n` heaviest keys of `policy` in `period`, or `None` for an unknown policy.
    pub fn top(
        &self,
        policy: &str,
        period: Period,
        by: By,
        n: usize,
        now_ms: u64,
    ) -> Option<TopReport> {
        let history = self.history(policy)?;
        let report = history.lock().top(period, by, n, now_ms);
        Some(report)
    }

    /// Share of distinct keys of `policy` denied at least once in the last 5 minutes.
    pub fn denied_keys_ratio(&self, policy: &str, now_ms: u64) -> Option<f64> {
        let history = self.history(policy)?;
        let ratio = history.lock().denied_keys_ratio(now_ms);
        Some(ratio)
    }

    /// Memory held for `policy` (sketches and candidate keys), for the memory-bound test.
    pub fn heap_bytes(&self, policy: &str) -> Option<usize> {
        Some(self.history(policy)?.lock().heap_bytes())
    }
}

#[cfg(test)]
mod tests;
