//! The figures a replay reports, each in memory bounded by keys or by a constant, never by
//! lines: the 429 rate over time in at most [`MAX_BUCKETS`] buckets, the distribution of
//! per-key counts per window as a histogram (filled as each key's window closes), and the
//! arithmetic of the suggested limit and of the peak-rate percentiles.

use hdrhistogram::Histogram;

/// Buckets a timeline keeps at most: past it, buckets double in width and merge pairwise.
pub const MAX_BUCKETS: usize = 500;
/// Width of a timeline's buckets before any doubling.
const FIRST_BUCKET_MS: u64 = 1000;

/// What one time bucket counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeBucket {
    pub requests: u64,
    pub rejected: u64,
    /// Requests the candidate limit would have rejected (0 without a candidate).
    pub candidate_rejected: u64,
}

impl TimeBucket {
    fn add(&mut self, other: TimeBucket) {
        self.requests += other.requests;
        self.rejected += other.rejected;
        self.candidate_rejected += other.candidate_rejected;
    }
}

/// Requests and rejections over time, bucket `i` covering
/// `start_ms + i * width_ms .. start_ms + (i + 1) * width_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    pub start_ms: u64,
    pub width_ms: u64,
    pub buckets: Vec<TimeBucket>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            start_ms: 0,
            width_ms: FIRST_BUCKET_MS,
            buckets: Vec::new(),
        }
    }
}

impl Timeline {
    /// Counts one request at `at_ms` (a time before the first one counts in the first bucket).
    pub(crate) fn record(&mut self, at_ms: u64, rejected: bool, candidate_rejected: bool) {
        if self.buckets.is_empty() {
            self.start_ms = at_ms - at_ms % self.width_ms;
        }
        let mut index = at_ms.saturating_sub(self.start_ms) / self.width_ms;
        while index >= MAX_BUCKETS as u64 {
            self.double();
            index = at_ms.saturating_sub(self.start_ms) / self.width_ms;
        }
        let index = index as usize;
        if index >= self.buckets.len() {
            self.buckets.resize(index + 1, TimeBucket::default());
        }
        let bucket = &mut self.buckets[index];
        bucket.requests += 1;
        bucket.rejected += u64::from(rejected);
        bucket.candidate_rejected += u64::from(candidate_rejected);
    }

    /// Buckets twice as wide: each new bucket is two old ones.
    fn double(&mut self) {
        let merged = self
            .buckets
            .chunks(2)
            .map(|pair| {
                let mut bucket = pair[0];
                if let Some(second) = pair.get(1) {
                    bucket.add(*second);
                }
                bucket
            })
            .collect();
        self.buckets = merged;
        self.width_ms *= 2;
    }
}

/// Every closed (key, window) count of one (policy, tier): how much each key asked for in
/// each aligned window in which it asked for anything. Exact below 2 048, within 0.1 % above
/// (three significant digits), in a few KiB whatever the number of windows.
#[derive(Debug, Clone)]
pub(crate) struct WindowCounts {
    histogram: Histogram<u64>,
}

impl Default for WindowCounts {
    fn default() -> Self {
        WindowCounts {
            // Three significant digits is always a valid precision: the constructor cannot fail.
            histogram: Histogram::new(3).expect("3 significant digits is a valid precision"),
        }
    }
}

impl WindowCounts {
    pub(crate) fn record(&mut self, count: u64) {
        // `record` grows the histogram to fit (saturating_record would clamp instead); it
        // fails only past the largest trackable value, which is then recorded as that.
        if self.histogram.record(count).is_err() {
            self.histogram.saturating_record(count);
        }
    }

    /// `(count, windows with that count)`, ascending; a count stands for its histogram bucket's
    /// highest value, so the suggestion errs toward a higher limit.
    pub(crate) fn distribution(&self) -> Vec<(u64, u64)> {
        self.histogram
            .iter_recorded()
            .map(|step| (step.value_iterated_to(), step.count_at_value()))
            .collect()
    }
}

/// Lr: the smallest `L` with `Σ windows × max(0, count − L) ≤ budget`, over `distribution`
/// (`(count, windows)` ascending).
pub fn smallest_limit_within(distribution: &[(u64, u64)], budget: u64) -> u64 {
    let budget = u128::from(budget);
    // Windows whose count is at least the current value, and the sum of their counts.
    let mut windows_above = 0u128;
    let mut sum_above = 0u128;
    for (i, &(count, windows)) in distribution.iter().enumerate().rev() {
        windows_above += u128::from(windows);
        sum_above += u128::from(windows) * u128::from(count);
        // Between the next lower count and this one, the excess is linear in L:
        // sum_above − windows_above × L.
        let lower = if i == 0 { 0 } else { distribution[i - 1].0 };
        let excess_at_lower = sum_above - windows_above * u128::from(lower);
        if excess_at_lower > budget {
            let limit = (sum_above - budget).div_ceil(windows_above);
            return u64::try_from(limit).unwrap_or(u64::MAX);
        }
    }
    0
}

/// Lk: the smallest `L` with at most `floor(1 % of keys)` keys whose peak exceeds `L`;
/// `peaks` ascending, one per key.
pub fn smallest_limit_for_keys(peaks: &[u64]) -> u64 {
    if peaks.is_empty() {
        return 0;
    }
    let allowed_over = peaks.len() / 100;
    peaks[peaks.len() - 1 - allowed_over]
}

/// The suggested limit: `Lk` (the keys rule), or with a `max_reject` share given `max(Lk,
/// Lr)`, `Lr`'s budget `floor(max_reject × requests)` (requests counted in cost units, as the
/// windows are); `None` without traffic. The keys rule alone by default, so a handful of
/// abusive keys never raise the suggestion: keeping their 429s under a share of all requests
/// would mean letting them through.
pub fn suggested_limit(
    peaks: &[u64],
    distribution: &[(u64, u64)],
    max_reject: Option<f64>,
    requests: u64,
) -> Option<u64> {
    if peaks.is_empty() {
        return None;
    }
    let keys_rule = smallest_limit_for_keys(peaks);
    Some(match max_reject {
        None => keys_rule,
        Some(share) => {
            let budget = (share * requests as f64).floor() as u64;
            keys_rule.max(smallest_limit_within(distribution, budget))
        }
    })
}

/// The nearest-rank percentile `p` (0..=100) of `sorted` (ascending); 0 when empty.
pub fn percentile(sorted: &[u64], p: u32) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (u64::from(p) * sorted.len() as u64).div_ceil(100).max(1);
    sorted[(rank as usize - 1).min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_stays_bounded_and_keeps_every_request() {
        let mut timeline = Timeline::default();
        let start = 1_796_551_200_000;
        for second in 0..10_000u64 {
            timeline.record(start + second * 1000, second % 2 == 0, false);
        }
        assert!(timeline.buckets.len() <= MAX_BUCKETS);
        assert_eq!(timeline.width_ms, 32_000);
        let total: u64 = timeline.buckets.iter().map(|b| b.requests).sum();
        let rejected: u64 = timeline.buckets.iter().map(|b| b.rejected).sum();
        assert_eq!((total, rejected), (10_000, 5_000));
        assert_eq!(timeline.buckets[0].requests, 32);
    }

    #[test]
    fn lr_by_hand() {
        // Windows: 10 ×1, 20 ×1, 30 ×1. Excess over L = 15: 5 + 15 = 20; over 20: 10.
        let distribution = [(10, 1), (20, 1), (30, 1)];
        assert_eq!(smallest_limit_within(&distribution, 10), 20);
        assert_eq!(smallest_limit_within(&distribution, 20), 15);
        assert_eq!(smallest_limit_within(&distribution, 0), 30);
        assert_eq!(smallest_limit_within(&distribution, 60), 0);
        // 59 ≥ excess at L: 60 − 3L ≤ 59 → L = 1.
        assert_eq!(smallest_limit_within(&distribution, 59), 1);
    }

    #[test]
    fn lk_by_hand() {
        let mut peaks: Vec<u64> = (1..=200).collect();
        // 200 keys: 2 may exceed L, so L is the third highest peak.
        assert_eq!(smallest_limit_for_keys(&peaks), 198);
        peaks.truncate(99);
        assert_eq!(smallest_limit_for_keys(&peaks), 99);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let sorted: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile(&sorted, 50), 5);
        assert_eq!(percentile(&sorted, 90), 9);
        assert_eq!(percentile(&sorted, 99), 10);
        assert_eq!(percentile(&sorted, 100), 10);
        assert_eq!(percentile(&[], 50), 0);
    }

    #[test]
    fn window_counts_are_exact_for_small_counts() {
        let mut counts = WindowCounts::default();
        for count in [3, 3, 7, 2047, 2048] {
            counts.record(count);
        }
        // From 2 048 on, buckets are two wide and a count reads as its bucket's top.
        assert_eq!(
            counts.distribution(),
            vec![(3, 2), (7, 1), (2047, 1), (2049, 1)]
        );
    }
}
