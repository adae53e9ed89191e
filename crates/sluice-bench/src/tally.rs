//! What a load run counts and how it becomes the JSON [`Report`]: shared by the HTTP driver
//! ([`run`](crate::run)) and the gRPC one (`rls-load`), so both report the same way.

use std::time::Duration;

use hdrhistogram::Histogram;

use serde::Serialize;

/// What one request ended as, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Rejected,
    Error,
}

/// The final JSON line. `requests = allowed + rejected + errors`, all counted in the measured
/// window only (warm-up excluded); latency percentiles over the answered requests.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Report {
    pub requests: u64,
    pub seconds: f64,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub allowed: u64,
    pub rejected: u64,
    pub errors: u64,
}

/// The counters of one run.
#[derive(Debug)]
pub struct Tally {
    /// Latency of answered requests in the measured window, in nanoseconds.
    pub histogram: Histogram<u64>,
    pub allowed: u64,
    pub rejected: u64,
    pub errors: u64,
    /// Every completion, warm-up included, for a progress line.
    pub completed: u64,
    /// Every connection failure, warm-up included.
    pub failed: u64,
}

impl Tally {
    pub fn new() -> Result<Self, hdrhistogram::CreationError> {
        // 1 ns .. 60 s at 3 significant digits.
        let histogram = Histogram::new_with_bounds(1, 60_000_000_000, 3)?;
        Ok(Tally {
            histogram,
            allowed: 0,
            rejected: 0,
            errors: 0,
            completed: 0,
            failed: 0,
        })
    }

    /// A request of the measured window answered as `outcome` after `latency` (an error's
    /// latency is not recorded).
    pub fn measured(&mut self, outcome: Outcome, latency: Duration) {
        match outcome {
            Outcome::Allowed => self.allowed += 1,
            Outcome::Rejected => self.rejected += 1,
            Outcome::Error => {
                self.errors += 1;
                return;
            }
        }
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        // Beyond the histogram's 60 s bound only by a stalled server: clamp rather than lose it.
        self.histogram.saturating_record(nanos.max(1));
    }

    /// The latency at quantile `q` in µs, 0 before any answer.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.histogram.is_empty() {
            0.0
        } else {
            #[allow(clippy::cast_precision_loss)]
            let us = self.histogram.value_at_quantile(q) as f64 / 1000.0;
            round1(us)
        }
    }

    /// The report of a measured window of `seconds`.
    pub fn report(&self, seconds: f64) -> Report {
        let requests = self.allowed + self.rejected + self.errors;
        #[allow(clippy::cast_precision_loss)]
        let rps = round1(requests as f64 / seconds);
        Report {
            requests,
            seconds: round1(seconds * 1000.0) / 1000.0,
            rps,
            p50_us: self.quantile_us(0.5),
            p99_us: self.quantile_us(0.99),
            p999_us: self.quantile_us(0.999),
            allowed: self.allowed,
            rejected: self.rejected,
            errors: self.errors,
        }
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
