//! The parameters of one limit, validated so that every algorithm's arithmetic is exact.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::calendar::Calendar;

/// The largest integer every backend represents exactly (a Lua number is an IEEE double).
pub const MAX_EXACT: u64 = 1 << 53;

/// sliding_window_log keeps one entry per admitted request, so its limit is bounded to keep a
/// key's memory bounded.
pub const MAX_LOG_LIMIT: u64 = 100_000;

/// The six algorithms, named as in the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    FixedWindow,
    SlidingWindowLog,
    SlidingWindowCounter,
    TokenBucket,
    LeakyBucket,
    Gcra,
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::Gcra,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindowLog => "sliding_window_log",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::Gcra => "gcra",
        }
    }

    /// Whether a key under this algorithm can owe more than its limit (a usage policy's
    /// charge): a sliding log keeps one entry per request, with no room for what a request
    /// used after the fact, and a leaky bucket's queue delays requests rather than owing.
    pub fn carries_debt(self) -> bool {
        !matches!(self, Algorithm::SlidingWindowLog | Algorithm::LeakyBucket)
    }

    /// Whether `burst` means anything to this algorithm (window algorithms ignore it).
    pub fn uses_burst(self) -> bool {
        matches!(
            self,
            Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra
        )
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a check counts: sluice's own rule, or envoyproxy/ratelimit's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Counting {
    /// A check consumes only when allowed (every sluice policy).
    #[default]
    Admitted,
    /// fixed_window only: every hit is counted, denied ones too, and a check is denied when
    /// the count after it exceeds the limit (a cost of 0 asks: denied once nothing is left).
    /// This is how envoyproxy/ratelimit counts, so its YAML limits behave as there. A check
    /// counted this way never cancels a batch: its hits count whatever the others answer.
    EveryHit,
}

/// The largest cost one check counting [`Counting::EveryHit`] may carry: Envoy sends
/// `hits_addend` as a u32, and counts are kept below [`MAX_EXACT`].
pub const MAX_EVERY_HIT_COST: u64 = u32::MAX as u64;

/// One limit: `limit` requests per `window_ms`, with `burst` as the bucket capacity (token
/// bucket, GCRA) or the queue length (leaky bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Params {
    pub algorithm: Algorithm,
    pub limit: u64,
    pub window_ms: u64,
    pub burst: u64,
    pub counting: Counting,
    /// fixed_window only: windows of a calendar (a day, week or month of a time zone) rather
    /// than `window_ms` aligned to unix time; `window_ms` is then the longest such window.
    pub calendar: Option<Calendar>,
}

/// Why a set of parameters is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    #[error("limit must be at least 1")]
    ZeroLimit,
    #[error("window must be at least 1ms")]
    WindowTooShort,
    #[error("burst must be at least 1")]
    ZeroBurst,
    #[error(
        "limit/burst ({value}) times window in ms ({window_ms}) must stay below 2^53 for exact arithmetic; use a shorter window or a smaller limit"
    )]
    TooLarge { value: u64, window_ms: u64 },
    #[error("only fixed_window can count every hit")]
    EveryHitNeedsFixedWindow,
    #[error("calendar windows (1d, 1w, 1mo in a time zone) are only for fixed_window")]
    CalendarNeedsFixedWindow,
    #[error(
        "sliding_window_log keeps one entry per request, so its limit is at most {MAX_LOG_LIMIT}; use sliding_window_counter for larger limits"
    )]
    LogTooLong,
}

impl Params {
    /// Validated parameters.
    pub fn new(
        algorithm: Algorithm,
        limit: u64,
        window_ms: u64,
        burst: u64,
    ) -> Result<Self, ParamsError> {
        let params = Params {
            algorithm,
            limit,
            window_ms,
            burst,
            counting: Counting::Admitted,
            calendar: None,
        };
        params.validate()?;
        Ok(params)
    }

    /// Checks the invariants every algorithm relies on.
    pub fn validate(&self) -> Result<(), ParamsError> {
        if self.limit == 0 {
            return Err(ParamsError::ZeroLimit);
        }
        if self.window_ms == 0 {
            return Err(ParamsError::WindowTooShort);
        }
        if self.burst == 0 {
            return Err(ParamsError::ZeroBurst);
        }
        let value = self.limit.max(self.burst);
        // A fixed window multiplies no count by a window: its count and window edges stay
        // exact as long as each is (tens of millions a month, billions a year are valid).
        let exact = if self.algorithm == Algorithm::FixedWindow {
            value < MAX_EXACT && self.window_ms < MAX_EXACT
        } else {
            value
                .checked_mul(self.window_ms)
                .is_some_and(|product| product < MAX_EXACT)
        };
        if !exact {
            return Err(ParamsError::TooLarge {
                value,
                window_ms: self.window_ms,
            });
        }
        if self.algorithm == Algorithm::SlidingWindowLog && self.limit > MAX_LOG_LIMIT {
            return Err(ParamsError::LogTooLong);
        }
        if self.counting == Counting::EveryHit && self.algorithm != Algorithm::FixedWindow {
            return Err(ParamsError::EveryHitNeedsFixedWindow);
        }
        if self.calendar.is_some() && self.algorithm != Algorithm::FixedWindow {
            return Err(ParamsError::CalendarNeedsFixedWindow);
        }
        Ok(())
    }

    /// The largest cost a single check may carry: [`capacity`](Self::capacity), except
    /// when every hit is counted, where any hit count Envoy can send is counted (and denied
    /// when above the limit).
    pub fn max_cost(&self) -> u64 {
        match self.counting {
            Counting::Admitted => self.capacity(),
            Counting::EveryHit => MAX_EVERY_HIT_COST,
        }
    }

    /// The largest cost a single check may ask for: the bucket size for bucket algorithms,
    /// the limit for window algorithms.
    pub fn capacity(&self) -> u64 {
        if self.algorithm.uses_burst() {
            self.burst
        } else {
            self.limit
        }
    }
}
