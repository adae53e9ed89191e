//! Who is being limited: per policy, the heaviest keys by checks and by rejections over the
//! last 5 and 60 minutes, and the share of distinct keys denied at least once, in fixed memory
//! whatever the number of keys (so user keys never become metric labels).
//!
//! Each policy keeps one slot per minute for the last 5 minutes and one per 5 minutes for the
//! last hour. A slot holds count-min sketches of checks and rejections (counts of any key,
//! overestimated by at most `e / width` of the slot's total) and the keys with the highest
//! estimates seen in it; the minute slots also hold HyperLogLogs of distinct checked and denied
//! keys. A query merges the slots of its period and re-estimates every candidate from the
//! merged sketches.
//!
//! Every check records here, so a policy's history is split by key hash into [`STRIPES`]
//! stripes, each behind its own lock: two checks meet only when their keys share a stripe,
//! instead of every check of a policy taking one lock and writing the same cache lines from
//! every core. A stripe sees its own keys only, so its sketches are `1 / STRIPES` as wide
//! (the memory of one unstriped sketch; with keys spread evenly, its error bound too), and a
//! query combines the stripes' answers. Memory per policy: about 620 KiB plus the candidate
//! keys (at most 17 x 2 x 256 keys of at most 512 bytes).
//!
//! A policy with a candidate limit also counts the checks its candidate would have rejected
//! (`by=candidate_rejected`): a third sketch and list per slot, made the first time a slot
//! meets such a check, so a policy without a candidate holds no more than before (with one:
//! about 270 KiB more, and at most 17 x 256 more keys).

mod count_min;
mod distinct;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use ahash::RandomState;
use arc_swap::ArcSwap;
use parking_lot::Mutex;

use count_min::{Cells, CountMin};
use distinct::Distinct;

/// The most a query returns.
pub const MAX_TOP: usize = 100;

/// Stripes of a policy's history (a power of two; the top bits of a key's hash pick one).
const STRIPES: usize = 8;
const STRIPE_BITS: u32 = STRIPES.trailing_zeros();

/// Candidate keys kept per slot, metric and stripe. The top 100 of a period spread over the
/// stripes by hash (12.5 per stripe on average); 32 leaves room for an uneven spread (more
/// than 32 in one stripe is six standard deviations out) and for the churn of the candidates.
const CANDIDATES: usize = 32;

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
    /// The checks the (policy, tier)'s candidate limit would have rejected.
    CandidateRejected,
}

impl By {
    pub fn parse(text: &str) -> Option<By> {
        match text {
            "rejected" => Some(By::Rejected),
            "checked" => Some(By::Checked),
            "candidate_rejected" => Some(By::CandidateRejected),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            By::Rejected => "rejected",
            By::Checked => "checked",
            By::CandidateRejected => "candidate_rejected",
        }
    }
}

/// One key of a top list; counts are estimates (never below the truth).
#[derive(Debug, Clone, PartialEq)]
pub struct TopEntry {
    pub key: String,
    /// Rejections; by [`By::CandidateRejected`], the candidate's would-be rejections.
    pub rejected: u64,
    pub checked: u64,
    pub ratio: f64,
}

/// The answer to a query.
#[derive(Debug, Clone, PartialEq)]
pub struct TopReport {
    pub entries: Vec<TopEntry>,
    /// Checks and rejections (by [`By::CandidateRejected`], the candidate's) counted in the
    /// period.
    pub total_checked: u64,
    pub total_rejected: u64,
    /// Each count may exceed the truth by at most this much (with probability 98%).
    pub error_checked: u64,
    pub error_rejected: u64,
}

/// The keys with the highest estimates seen in a slot; their counts are read from the
/// sketches at query time, so the scores here only decide who stays.
///
/// Kept as three parallel lists: the search of a key on every check reads the hashes alone
/// (32 of them in four cache lines) and compares a key's text only on a hash match.
#[derive(Debug, Default)]
struct Candidates {
    hashes: Vec<u64>,
    keys: Vec<Box<str>>,
    scores: Vec<u32>,
    /// The least score once the list is full (0 before): an estimate at most this enters not.
    min_score: u32,
}

impl Candidates {
    fn offer(&mut self, hash: u64, key: &str, estimate: u32) {
        let full = self.hashes.len() >= CANDIDATES;
        // The common case on a wide key space: nothing to do, no scan, no allocation.
        if full && estimate <= self.min_score {
            return;
        }
        if let Some(at) = self
            .hashes
            .iter()
            .enumerate()
            .position(|(i, &h)| h == hash && &*self.keys[i] == key)
        {
            let before = std::mem::replace(&mut self.scores[at], estimate);
            // A key's estimate never falls within a slot: the least score moves only when
            // its holder's rose.
            if full && before == self.min_score {
                self.min_score = self.least();
            }
            return;
        }
        if !full {
            self.hashes.push(hash);
            self.keys.push(key.into());
            self.scores.push(estimate);
        } else {
            let lowest = self
                .scores
                .iter()
                .enumerate()
                .min_by_key(|&(_, &score)| score)
                .map_or(0, |(i, _)| i);
            self.hashes[lowest] = hash;
            self.keys[lowest] = key.into();
            self.scores[lowest] = estimate;
        }
        if self.hashes.len() >= CANDIDATES {
            self.min_score = self.least();
        }
    }

    fn least(&self) -> u32 {
        self.scores.iter().copied().min().unwrap_or(0)
    }

    /// The kept keys and their hashes.
    fn entries(&self) -> impl Iterator<Item = (u64, &str)> {
        self.hashes
            .iter()
            .copied()
            .zip(self.keys.iter().map(|k| &**k))
    }

    fn clear(&mut self) {
        self.hashes.clear();
        self.keys.clear();
        self.scores.clear();
        self.min_score = 0;
    }

    fn heap_bytes(&self) -> usize {
        self.hashes.capacity() * std::mem::size_of::<u64>()
            + self.keys.capacity() * std::mem::size_of::<Box<str>>()
            + self.scores.capacity() * std::mem::size_of::<u32>()
            + self.keys.iter().map(|k| k.len()).sum::<usize>()
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
    /// The candidate limit's would-be rejections: made when the slot first meets one, kept
    /// (cleared) across spans after that.
    judged: Option<Box<Judged>>,
}

/// A slot's count of the checks a candidate limit would have rejected.
#[derive(Debug, Default)]
struct Judged {
    rejected: CountMin,
    top_rejected: Candidates,
}

/// Whether a check was judged against a candidate limit, and what it would have answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judgement {
    /// No candidate, or one that would have allowed.
    None,
    /// A candidate that would have rejected.
    Rejected,
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
            if let Some(judged) = &mut self.judged {
                judged.rejected.clear();
                judged.top_rejected.clear();
            }
        }
        id == self.id
    }

    fn record(&mut self, hash: u64, cells: &Cells, key: &str, denied: bool, judged: Judgement) {
        let checked = self.checked.add(cells, 1);
        self.top_checked.offer(hash, key, checked);
        if denied {
            let rejected = self.rejected.add(cells, 1);
            self.top_rejected.offer(hash, key, rejected);
        }
        if judged == Judgement::Rejected {
            let judged = self.judged.get_or_insert_default();
            let rejected = judged.rejected.add(cells, 1);
            judged.top_rejected.offer(hash, key, rejected);
        }
    }

    /// The sketch and the keys of the rejections `by` ranks (`None`: none counted here).
    fn rejections(&self, by: By) -> Option<(&CountMin, &Candidates)> {
        match by {
            By::CandidateRejected => self
                .judged
                .as_deref()
                .map(|j| (&j.rejected, &j.top_rejected)),
            By::Rejected | By::Checked => Some((&self.rejected, &self.top_rejected)),
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
    /// Inlined into each caller, so a check without a candidate pays no test of `judged`.
    #[inline(always)]
    fn record(&mut self, hash: u64, key: &str, denied: bool, judged: Judgement, now_ms: u64) {
        let minute = now_ms / MINUTE_MS;
        let five = now_ms / FIVE_MINUTES_MS;
        let cells = Cells::of(hash);
        let slot = &mut self.minutes[(minute % MINUTE_SLOTS as u64) as usize];
        if slot.roll(minute) {
            slot.record(hash, &cells, key, denied, judged);
        }
        let slot = &mut self.five_minutes[(five % FIVE_MINUTE_SLOTS as u64) as usize];
        if slot.roll(five) {
            slot.record(hash, &cells, key, denied, judged);
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

    /// This stripe's candidates of `period` with their estimates, unsorted.
    fn top(&self, period: Period, by: By, now_ms: u64) -> TopReport {
        let mut checked = CountMin::default();
        let mut rejected = CountMin::default();
        let mut candidates: HashMap<u64, &str> = HashMap::new();
        for slot in self.slots(period, now_ms) {
            checked.merge(&slot.checked);
            let rejections = slot.rejections(by);
            if let Some((sketch, _)) = rejections {
                rejected.merge(sketch);
            }
            let list = match (by, rejections) {
                (By::Checked, _) => &slot.top_checked,
                (_, Some((_, list))) => list,
                (_, None) => continue,
            };
            for (hash, key) in list.entries() {
                candidates.insert(hash, key);
            }
        }
        let entries: Vec<TopEntry> = candidates
            .into_iter()
            .map(|(hash, key)| {
                let cells = Cells::of(hash);
                let c = u64::from(checked.estimate(&cells));
                // Both are overestimates; the truth never has more rejections than checks.
                let r = u64::from(rejected.estimate(&cells)).min(c);
                TopEntry {
                    key: key.to_owned(),
                    rejected: r,
                    checked: c,
                    ratio: if c == 0 { 0.0 } else { r as f64 / c as f64 },
                }
            })
            .collect();
        TopReport {
            entries,
            total_checked: checked.total(),
            total_rejected: rejected.total(),
            error_checked: checked.error_bound(),
            error_rejected: rejected.error_bound(),
        }
    }

    /// Adds the distinct keys checked and denied in the last 5 minutes to `checked`, `denied`.
    fn distinct(&self, now_ms: u64, checked: &mut Distinct, denied: &mut Distinct) {
        let minute = now_ms / MINUTE_MS;
        for slot in &self.distinct {
            if slot.id <= minute && slot.id + MINUTE_SLOTS as u64 > minute {
                checked.merge(&slot.checked);
                denied.merge(&slot.denied);
            }
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
        let judged: usize = self
            .minutes
            .iter()
            .chain(&self.five_minutes)
            .filter_map(|s| s.judged.as_deref())
            .map(|j| {
                std::mem::size_of::<Judged>()
                    + count_min::WIDTH * count_min::DEPTH * 4
                    + j.top_rejected.heap_bytes()
            })
            .sum();
        sketches + distinct + keys + judged
    }
}

/// The recent history of one policy, in stripes by key hash.
#[derive(Debug)]
struct PolicyTop {
    stripes: Box<[Stripe]>,
}

/// One stripe on cache lines of its own: neighbours' locks in one line would make two cores
/// contend for it even when their keys are in different stripes.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(Mutex<PolicyHistory>);

impl Default for PolicyTop {
    fn default() -> Self {
        PolicyTop {
            stripes: (0..STRIPES).map(|_| Stripe::default()).collect(),
        }
    }
}

impl PolicyTop {
    fn stripe(&self, hash: u64) -> &Mutex<PolicyHistory> {
        &self.stripes[(hash >> (u64::BITS - STRIPE_BITS)) as usize % STRIPES].0
    }

    /// Every stripe's answer combined: keys ranked, totals summed, and the largest of the
    /// stripes' error bounds (each count comes from its own stripe's sketches).
    fn top(&self, period: Period, by: By, n: usize, now_ms: u64) -> TopReport {
        let mut report = TopReport {
            entries: Vec::new(),
            total_checked: 0,
            total_rejected: 0,
            error_checked: 0,
            error_rejected: 0,
        };
        for stripe in &self.stripes {
            let part = stripe.0.lock().top(period, by, now_ms);
            report.entries.extend(part.entries);
            report.total_checked += part.total_checked;
            report.total_rejected += part.total_rejected;
            report.error_checked = report.error_checked.max(part.error_checked);
            report.error_rejected = report.error_rejected.max(part.error_rejected);
        }
        report.entries.sort_by(|a, b| {
            let (x, y) = match by {
                By::Checked => (a.checked, b.checked),
                By::Rejected | By::CandidateRejected => (a.rejected, b.rejected),
            };
            y.cmp(&x).then_with(|| a.key.cmp(&b.key))
        });
        report.entries.truncate(n.min(MAX_TOP));
        report
    }

    fn denied_keys_ratio(&self, now_ms: u64) -> f64 {
        // The stripes hold disjoint keys, so the union of their HyperLogLogs counts them all.
        let mut checked = Distinct::default();
        let mut denied = Distinct::default();
        for stripe in &self.stripes {
            stripe.0.lock().distinct(now_ms, &mut checked, &mut denied);
        }
        let all = checked.count();
        if all < 0.5 {
            0.0
        } else {
            (denied.count() / all).clamp(0.0, 1.0)
        }
    }

    fn heap_bytes(&self) -> usize {
        self.stripes.iter().map(|s| s.0.lock().heap_bytes()).sum()
    }
}

/// Trackers made, so that a [`HistoryCache`] knows whose history it holds.
static NEXT_TRACKER: AtomicU64 = AtomicU64::new(1);

/// A compiled policy's history, found by name on its first check and kept beside the policy
/// (in its meters), so that its later checks record without the look-up: the swap's load,
/// the policy name's hash and its comparison, about a quarter of what recording cost.
#[derive(Debug, Default)]
pub struct HistoryCache(OnceLock<Found>);

#[derive(Debug)]
struct Found {
    /// The tracker that found it (tests run several limiters over one set of policies).
    tracker: u64,
    /// Its count of policies removed then: a policy object kept across the removal of its
    /// name might see the name come back with a new history, so it looks up by name again.
    removals: u64,
    /// `None`: the tracker keeps no history of the policy.
    history: Option<Arc<PolicyTop>>,
}

/// The recent history of every policy.
#[derive(Debug)]
pub struct TopKeys {
    hasher: RandomState,
    /// Read on every check without a lock (and without touching a shared reference count);
    /// replaced whole when the policies change. aHash: it is looked up on every check.
    policies: ArcSwap<HashMap<Arc<str>, Arc<PolicyTop>, RandomState>>,
    /// This tracker among others ([`HistoryCache`]).
    id: u64,
    /// How many times a policy's history was dropped ([`Found::removals`]).
    removals: AtomicU64,
}

impl Default for TopKeys {
    fn default() -> Self {
        TopKeys::with_hasher(RandomState::new())
    }
}

impl TopKeys {
    pub fn new() -> Self {
        TopKeys::default()
    }

    fn with_hasher(hasher: RandomState) -> Self {
        TopKeys {
            hasher,
            policies: ArcSwap::default(),
            id: NEXT_TRACKER.fetch_add(1, Ordering::Relaxed),
            removals: AtomicU64::new(0),
        }
    }

    /// A tracker whose key hashing is fixed, so a test's sketch collisions are reproducible.
    #[cfg(test)]
    fn seeded(seed: u64) -> Self {
        TopKeys::with_hasher(RandomState::with_seeds(seed, seed ^ 1, seed ^ 2, seed ^ 3))
    }

    fn history(&self, policy: &str) -> Option<Arc<PolicyTop>> {
        self.policies.load().get(policy).cloned()
    }

    /// Keeps a history for exactly `names` (the policies in force): the histories of
    /// policies that stay are kept, new ones start empty.
    pub fn retain_policies<S: AsRef<str>>(&self, names: impl IntoIterator<Item = S>) {
        let names: Vec<S> = names.into_iter().collect();
        let before = self.policies.rcu(|current| {
            let mut next = HashMap::with_capacity_and_hasher(names.len(), RandomState::new());
            for name in &names {
                let name = name.as_ref();
                let history = current.get(name).cloned().unwrap_or_default();
                next.insert(Arc::from(name), history);
            }
            next
        });
        if before.keys().any(|kept| self.history(kept).is_none()) {
            self.removals.fetch_add(1, Ordering::Release);
        }
    }

    /// Counts one decided check.
    pub fn record(&self, policy: &str, key: &str, denied: bool, now_ms: u64) {
        self.record_judged(policy, key, denied, Judgement::None, now_ms);
    }

    /// Counts one decided check of `policy`, whose history `cache` keeps once found.
    pub fn record_cached(
        &self,
        cache: &HistoryCache,
        policy: &str,
        key: &str,
        denied: bool,
        now_ms: u64,
    ) {
        let found = cache.0.get_or_init(|| Found {
            tracker: self.id,
            removals: self.removals.load(Ordering::Acquire),
            history: self.history(policy),
        });
        if found.tracker != self.id || found.removals != self.removals.load(Ordering::Acquire) {
            return self.record(policy, key, denied, now_ms);
        }
        if let Some(history) = &found.history {
            self.record_in(history, key, denied, Judgement::None, now_ms);
        }
    }

    /// Counts one decided check that was also judged against a candidate limit, which would
    /// have rejected it when `candidate_denied`.
    pub fn record_with_candidate(
        &self,
        policy: &str,
        key: &str,
        denied: bool,
        candidate_denied: bool,
        now_ms: u64,
    ) {
        let judged = if candidate_denied {
            Judgement::Rejected
        } else {
            Judgement::None
        };
        self.record_judged(policy, key, denied, judged, now_ms);
    }

    #[inline(always)]
    fn record_judged(&self, policy: &str, key: &str, denied: bool, judged: Judgement, now_ms: u64) {
        if let Some(history) = self.policies.load().get(policy) {
            self.record_in(history, key, denied, judged, now_ms);
        }
    }

    #[inline(always)]
    fn record_in(
        &self,
        history: &PolicyTop,
        key: &str,
        denied: bool,
        judged: Judgement,
        now_ms: u64,
    ) {
        let hash = self.hasher.hash_one(key);
        history
            .stripe(hash)
            .lock()
            .record(hash, key, denied, judged, now_ms);
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
        Some(self.history(policy)?.top(period, by, n, now_ms))
    }

    /// Share of distinct keys of `policy` denied at least once in the last 5 minutes.
    pub fn denied_keys_ratio(&self, policy: &str, now_ms: u64) -> Option<f64> {
        Some(self.history(policy)?.denied_keys_ratio(now_ms))
    }

    /// Memory held for `policy` (sketches and candidate keys), for the memory-bound test.
    pub fn heap_bytes(&self, policy: &str) -> Option<usize> {
        Some(self.history(policy)?.heap_bytes())
    }
}

#[cfg(test)]
mod tests;
