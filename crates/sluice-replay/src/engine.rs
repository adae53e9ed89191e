//! The replay proper: each line, at its own time, through every policy it goes to, decided
//! exactly as the daemon decides a check ([`crate::decide`]: one limit, stacked limits all or
//! nothing, a usage policy's ask and charge). State is kept per (policy, key) and stacked
//! limit (the daemon keys its state by policy and key, whatever the tier), and the candidate's on a
//! state of its own per (policy, key), consumed whenever the candidate alone would allow, as
//! the stores' `check_with_candidate` does. Per (policy, tier, key) a few counters feed the
//! report; every structure grows with keys, never with lines.

use sluice_core::{State, judge};

use crate::batch::{Batch, Line, PolicyPick};
use crate::decide::decide_line;
use crate::input::{LimitSpec, NO_TIER, OTHER_TIER, ReplayPolicy, StackedLimit};
use crate::keys::KeyTable;
use crate::report::model::{
    CandidateReport, PeakRate, PolicyReport, StackedReport, TOP_KEYS, TopKey,
};
use crate::stats::{self, Timeline, WindowCounts};

/// Tier slot of a line naming no tier.
const NONE_SLOT: usize = 0;
/// Tier slot of a line naming a tier its policy does not have.
const OTHER_SLOT: usize = 1;
/// Slot of the policy's first configured tier.
const FIRST_TIER_SLOT: usize = 2;

/// A line the engine could not take: its key is new and the key table is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyTableFull;

/// The replay state of every policy.
#[derive(Debug)]
pub(crate) struct Engine {
    keys: KeyTable,
    policies: Vec<PolicyRun>,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

impl Engine {
    /// `candidate`: judge the candidates of `policies` too.
    pub(crate) fn new(policies: &[ReplayPolicy], candidate: bool, max_keys: usize) -> Self {
        Engine {
            keys: KeyTable::new(max_keys),
            policies: policies
                .iter()
                .map(|policy| PolicyRun::new(policy, candidate))
                .collect(),
            first_ms: None,
            last_ms: None,
        }
    }

    /// Replays `line` (of `batch`).
    pub(crate) fn replay(&mut self, batch: &Batch, line: &Line) -> Result<(), KeyTableFull> {
        let id = self
            .keys
            .intern(batch.bytes(line.key))
            .ok_or(KeyTableFull)?;
        let at_ms = self.keys.advance(id, line.at_ms);
        self.first_ms = Some(self.first_ms.map_or(at_ms, |first| first.min(at_ms)));
        self.last_ms = Some(self.last_ms.map_or(at_ms, |last| last.max(at_ms)));
        let tier = batch.bytes(line.tier);
        match line.policy {
            PolicyPick::All => {
                for policy in &mut self.policies {
                    policy.replay(id, at_ms, tier, line.cost);
                }
            }
            PolicyPick::One(index) => {
                if let Some(policy) = self.policies.get_mut(index as usize) {
                    policy.replay(id, at_ms, tier, line.cost);
                }
            }
        }
        Ok(())
    }

    /// Distinct keys seen.
    pub(crate) fn keys(&self) -> usize {
        self.keys.len()
    }

    /// The earliest and the latest time replayed.
    pub(crate) fn span(&self) -> (Option<u64>, Option<u64>) {
        (self.first_ms, self.last_ms)
    }

    /// One report per (policy, tier) with traffic, and a `none` one for a policy without.
    pub(crate) fn finish(self, max_reject: Option<f64>) -> Vec<PolicyReport> {
        let keys = &self.keys;
        self.policies
            .into_iter()
            .flat_map(|policy| policy.finish(keys, max_reject))
            .collect()
    }
}

/// One policy: its limits by tier slot and the state of every key it has seen.
#[derive(Debug)]
struct PolicyRun {
    name: String,
    /// `usage = true`: lines ask, then charge (see [`crate::decide`]).
    usage: bool,
    /// Copies of a key's stacked states while a line is decided.
    scratch: Vec<State>,
    /// Configured tier names; tier `i` is slot `FIRST_TIER_SLOT + i`.
    tier_names: Vec<Box<[u8]>>,
    /// Per slot.
    slots: Vec<Slot>,
    /// Per key id (grown as ids appear).
    keys: Vec<PolicyKey>,
}

/// One (policy, tier): its limits and totals.
#[derive(Debug)]
struct Slot {
    label: String,
    /// The limit the peak rates and the suggestion are counted in windows of: the first.
    limit: LimitSpec,
    /// Every limit, the first being `limit`: one, or the stacked ones.
    limits: Vec<LimitSpec>,
    /// Of stacked limits, one per limit; empty for one limit.
    stack: Vec<StackSlot>,
    candidate: Option<LimitSpec>,
    requests: u64,
    rejected: u64,
    candidate_rejected: u64,
    /// Requests in cost units.
    units: u64,
    timeline: Timeline,
    windows: WindowCounts,
}

/// One stacked limit of a (policy, tier): its label, the rejections it caused, and (for the
/// second limit on; the first's are the slot's) every closed (key, window) count.
#[derive(Debug)]
struct StackSlot {
    label: String,
    limit: LimitSpec,
    rejected: u64,
    windows: WindowCounts,
}

/// One key of one policy.
#[derive(Debug, Default)]
struct PolicyKey {
    limit: State,
    /// The states of stacked limits 2 and on (empty until a stacked tier sees the key).
    stack: Vec<State>,
    candidate: State,
    /// Counters per tier slot the key was seen under: nearly always one, kept inline.
    tiers: KeyTiers,
}

/// A key's counters per tier slot: the first inline (one memory access less per line), any
/// others beside it.
#[derive(Debug, Default)]
struct KeyTiers {
    first: Option<KeyTier>,
    others: Vec<KeyTier>,
}

impl KeyTiers {
    /// The counters of `slot`, created at `window` when the key is new to it.
    fn get_or_insert(&mut self, slot: usize, window: u64) -> &mut KeyTier {
        let fresh = KeyTier {
            slot,
            first: WindowPeak {
                window,
                count: 0,
                peak: 0,
            },
            stacked: Vec::new(),
            rejected: 0,
            candidate_rejected: 0,
        };
        if self.first.as_ref().is_none_or(|first| first.slot == slot) {
            return self.first.get_or_insert(fresh);
        }
        let index = match self.others.iter().position(|t| t.slot == slot) {
            Some(index) => index,
            None => {
                self.others.push(fresh);
                self.others.len() - 1
            }
        };
        &mut self.others[index]
    }

    fn iter(&self) -> impl Iterator<Item = &KeyTier> {
        self.first.iter().chain(&self.others)
    }
}

/// One key under one (policy, tier).
#[derive(Debug, Clone)]
struct KeyTier {
    slot: usize,
    /// Counted in the windows of the (first) limit.
    first: WindowPeak,
    /// Of stacked limits, the second's on, each in its own windows (empty for one limit).
    stacked: Vec<WindowPeak>,
    rejected: u64,
    candidate_rejected: u64,
}

/// A key's count in the aligned window being counted (cost units), and the highest count of
/// any of its windows.
#[derive(Debug, Clone, Copy, Default)]
struct WindowPeak {
    window: u64,
    count: u64,
    peak: u64,
}

impl WindowPeak {
    /// Counts `cost` in `window`; a later window (times only grow per key) closes the one
    /// being counted into `closed`.
    fn add(&mut self, window: u64, cost: u64, closed: &mut WindowCounts) {
        if window != self.window {
            closed.record(self.count);
            self.window = window;
            self.count = 0;
        }
        self.count += cost;
        self.peak = self.peak.max(self.count);
    }
}

impl PolicyRun {
    fn new(policy: &ReplayPolicy, candidate: bool) -> Self {
        let candidate_of = |tier: &str| {
            candidate
                .then(|| policy.candidates.get(tier).copied())
                .flatten()
        };
        let stack_of = |tier: &str| policy.stacks.get(tier).map_or(&[][..], Vec::as_slice);
        let base_candidate = candidate_of(NO_TIER);
        let base_stack = stack_of(NO_TIER);
        let mut slots = vec![
            Slot::new(NO_TIER, policy.base, base_stack, base_candidate),
            Slot::new(OTHER_TIER, policy.base, base_stack, base_candidate),
        ];
        for (name, limit) in &policy.tiers {
            slots.push(Slot::new(name, *limit, stack_of(name), candidate_of(name)));
        }
        PolicyRun {
            name: policy.name.clone(),
            usage: policy.usage,
            scratch: Vec::new(),
            tier_names: policy.tiers.keys().map(|n| n.as_bytes().into()).collect(),
            slots,
            keys: Vec::new(),
        }
    }

    fn slot(&self, tier: &[u8]) -> usize {
        if tier.is_empty() {
            return NONE_SLOT;
        }
        self.tier_names
            .iter()
            .position(|name| **name == *tier)
            .map_or(OTHER_SLOT, |i| FIRST_TIER_SLOT + i)
    }

    fn replay(&mut self, id: u32, at_ms: u64, tier: &[u8], cost: u64) {
        let slot_index = self.slot(tier);
        let slot = &mut self.slots[slot_index];
        let id = id as usize;
        if id >= self.keys.len() {
            self.keys.resize_with(id + 1, PolicyKey::default);
        }
        let key = &mut self.keys[id];
        // A cost above a limit's capacity is refused by the core: a rejection.
        let outcome = decide_line(
            &slot.limits,
            self.usage,
            (&mut key.limit, &mut key.stack),
            &mut self.scratch,
            at_ms,
            cost,
        );
        let allowed = outcome.allowed;
        for (i, limit) in slot.stack.iter_mut().enumerate() {
            limit.rejected += u64::from(outcome.denied >> i & 1);
        }
        // The candidate as every store judges it: a cost beyond its capacity would reject.
        let candidate_rejected = slot
            .candidate
            .is_some_and(|candidate| !judge(&candidate, &mut key.candidate, at_ms, cost).allowed);
        let window = window_index(&slot.limit, at_ms);
        let counters = key.tiers.get_or_insert(slot_index, window);
        counters.first.add(window, cost, &mut slot.windows);
        for (i, limit) in slot.stack.iter_mut().enumerate().skip(1) {
            let window = window_index(&limit.limit, at_ms);
            if counters.stacked.len() < i {
                counters.stacked.resize(
                    i,
                    WindowPeak {
                        window,
                        ..WindowPeak::default()
                    },
                );
            }
            counters.stacked[i - 1].add(window, cost, &mut limit.windows);
        }
        counters.rejected += u64::from(!allowed);
        counters.candidate_rejected += u64::from(candidate_rejected);

        slot.requests += 1;
        slot.units += cost;
        slot.rejected += u64::from(!allowed);
        slot.candidate_rejected += u64::from(candidate_rejected);
        slot.timeline.record(at_ms, !allowed, candidate_rejected);
    }

    fn finish(mut self, keys: &KeyTable, max_reject: Option<f64>) -> Vec<PolicyReport> {
        let mut per_slot: Vec<SlotKeys> =
            (0..self.slots.len()).map(|_| SlotKeys::default()).collect();
        for (id, key) in self.keys.iter().enumerate() {
            for counters in key.tiers.iter() {
                let slot = &mut self.slots[counters.slot];
                // The windows still open at the end are closed now.
                slot.windows.record(counters.first.count);
                for (limit, counted) in slot.stack.iter_mut().skip(1).zip(&counters.stacked) {
                    limit.windows.record(counted.count);
                }
                per_slot[counters.slot].add(id as u32, counters);
            }
        }
        // Order: none, the configured tiers, other; only tiers with traffic, but at least
        // the policy's own limit, so every policy shows.
        let order = std::iter::once(NONE_SLOT)
            .chain(FIRST_TIER_SLOT..self.slots.len())
            .chain(std::iter::once(OTHER_SLOT));
        let mut reports: Vec<PolicyReport> = order
            .filter(|&index| self.slots[index].requests > 0)
            .map(|index| {
                std::mem::take(&mut per_slot[index]).report(
                    &self.name,
                    &self.slots[index],
                    keys,
                    max_reject,
                )
            })
            .collect();
        if reports.is_empty() {
            reports.push(SlotKeys::default().report(
                &self.name,
                &self.slots[NONE_SLOT],
                keys,
                max_reject,
            ));
        }
        reports
    }
}

/// The aligned window of `limit` holding `at_ms`: its calendar window (days, weeks or
/// months in its zone) for a calendar limit, else `at_ms / window`.
fn window_index(limit: &LimitSpec, at_ms: u64) -> u64 {
    match &limit.calendar {
        Some(calendar) => calendar.frame(at_ms).index,
        None => at_ms / limit.window_ms,
    }
}

impl Slot {
    fn new(
        label: &str,
        limit: LimitSpec,
        stack: &[StackedLimit],
        candidate: Option<LimitSpec>,
    ) -> Self {
        let limits = if stack.is_empty() {
            vec![limit]
        } else {
            stack.iter().map(|s| s.params).collect()
        };
        Slot {
            label: label.to_owned(),
            limit: limits[0],
            limits,
            stack: stack
                .iter()
                .map(|s| StackSlot {
                    label: s.label.clone(),
                    limit: s.params,
                    rejected: 0,
                    windows: WindowCounts::default(),
                })
                .collect(),
            candidate,
            requests: 0,
            rejected: 0,
            candidate_rejected: 0,
            units: 0,
            timeline: Timeline::default(),
            windows: WindowCounts::default(),
        }
    }
}

/// The keys of one (policy, tier), gathered at the end.
#[derive(Debug, Default)]
struct SlotKeys {
    peaks: Vec<u64>,
    /// Of stacked limits, the second's on: every key's peak in its windows.
    stacked_peaks: Vec<Vec<u64>>,
    keys_limited: u64,
    candidate_keys_limited: u64,
    /// (rejected, key id) of keys rejected at least once; likewise for the candidate.
    rejecting: Vec<(u64, u32)>,
    candidate_rejecting: Vec<(u64, u32)>,
}

impl SlotKeys {
    fn add(&mut self, id: u32, counters: &KeyTier) {
        self.peaks.push(counters.first.peak);
        if self.stacked_peaks.len() < counters.stacked.len() {
            self.stacked_peaks
                .resize_with(counters.stacked.len(), Vec::new);
        }
        for (peaks, counted) in self.stacked_peaks.iter_mut().zip(&counters.stacked) {
            peaks.push(counted.peak);
        }
        if counters.rejected > 0 {
            self.keys_limited += 1;
            self.rejecting.push((counters.rejected, id));
        }
        if counters.candidate_rejected > 0 {
            self.candidate_keys_limited += 1;
            self.candidate_rejecting
                .push((counters.candidate_rejected, id));
        }
    }

    fn report(
        mut self,
        policy: &str,
        slot: &Slot,
        keys: &KeyTable,
        max_reject: Option<f64>,
    ) -> PolicyReport {
        self.peaks.sort_unstable();
        let peaks = self.peaks;
        let key_count = peaks.len() as u64;
        let suggested_limit =
            stats::suggested_limit(&peaks, &slot.windows.distribution(), max_reject, slot.units);
        let peak_rate = peak_rate(&peaks);
        let limits = slot
            .stack
            .iter()
            .enumerate()
            .map(|(i, limit)| {
                let (peak_rate, suggested_limit) = match i.checked_sub(1) {
                    None => (peak_rate, suggested_limit),
                    Some(j) => {
                        let mut peaks = self.stacked_peaks.get(j).cloned().unwrap_or_default();
                        peaks.sort_unstable();
                        let distribution = limit.windows.distribution();
                        (
                            self::peak_rate(&peaks),
                            stats::suggested_limit(&peaks, &distribution, max_reject, slot.units),
                        )
                    }
                };
                StackedReport {
                    limit: limit.label.clone(),
                    rejected: limit.rejected,
                    peak_rate,
                    suggested_limit,
                    params: limit.limit,
                }
            })
            .collect();
        let candidate = slot.candidate.map(|limit| CandidateReport {
            requests: slot.requests,
            rejected: slot.candidate_rejected,
            keys: key_count,
            keys_limited: self.candidate_keys_limited,
            top: top(self.candidate_rejecting, keys),
            limit,
        });
        PolicyReport {
            policy: policy.to_owned(),
            tier: slot.label.clone(),
            requests: slot.requests,
            rejected: slot.rejected,
            keys: key_count,
            keys_limited: self.keys_limited,
            peak_rate,
            suggested_limit,
            top: top(self.rejecting, keys),
            candidate,
            limits,
            limit: slot.limit,
            timeline: slot.timeline.clone(),
            peaks,
        }
    }
}

/// p50/p90/p99/max of `peaks` (ascending).
fn peak_rate(peaks: &[u64]) -> PeakRate {
    PeakRate {
        p50: stats::percentile(peaks, 50),
        p90: stats::percentile(peaks, 90),
        p99: stats::percentile(peaks, 99),
        max: peaks.last().copied().unwrap_or(0),
    }
}

/// The [`TOP_KEYS`] keys with most rejections, most first, ties by key.
fn top(mut rejecting: Vec<(u64, u32)>, keys: &KeyTable) -> Vec<TopKey> {
    let order = |a: &(u64, u32), b: &(u64, u32)| {
        b.0.cmp(&a.0)
            .then_with(|| keys.name(a.1).cmp(keys.name(b.1)))
    };
    if rejecting.len() > TOP_KEYS {
        rejecting.select_nth_unstable_by(TOP_KEYS - 1, order);
        rejecting.truncate(TOP_KEYS);
    }
    rejecting.sort_unstable_by(order);
    rejecting
        .into_iter()
        .map(|(rejected, id)| TopKey {
            key: String::from_utf8_lossy(keys.name(id)).into_owned(),
            rejected,
        })
        .collect()
}
