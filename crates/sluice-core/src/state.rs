//! Per-key state of every algorithm, kept small: a store holds one per tracked key.

use std::collections::VecDeque;

use crate::params::Algorithm;

/// One admitted request in a sliding log: when, and how much it cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    pub at_ms: u64,
    pub cost: u64,
}

/// The state of one key under one algorithm. `State::Fresh` (the default) is a key never seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum State {
    /// fixed_window: the aligned window index and what it has admitted.
    FixedWindow { window: u64, count: u64 },
    /// sliding_window_counter: the current aligned window, its count and the previous one's.
    SlidingWindowCounter {
        window: u64,
        current: u64,
        previous: u64,
    },
    /// sliding_window_log: admitted requests of the last window, oldest first, and their sum.
    /// Boxed so every other algorithm's state stays at 32 bytes: a store keeps one per key.
    SlidingWindowLog {
        log: Box<VecDeque<LogEntry>>,
        used: u64,
    },
    /// token_bucket: what has been taken out of the bucket as of `last_ms`, in units of
    /// 1/window_ms of a token (a token is `window_ms` units; each millisecond refills `limit`).
    TokenBucket { used: u64, last_ms: u64 },
    /// gcra and leaky_bucket: the theoretical arrival time `tat_ms + tat_rem / limit`.
    Gcra { tat_ms: u64, tat_rem: u64 },
    /// Never checked.
    #[default]
    Fresh,
}

impl State {
    /// Whether this state belongs to `algorithm` (a fresh state belongs to every one).
    pub fn fits(&self, algorithm: Algorithm) -> bool {
        match self {
            State::Fresh => true,
            State::FixedWindow { .. } => algorithm == Algorithm::FixedWindow,
            State::SlidingWindowCounter { .. } => algorithm == Algorithm::SlidingWindowCounter,
            State::SlidingWindowLog { .. } => algorithm == Algorithm::SlidingWindowLog,
            State::TokenBucket { .. } => algorithm == Algorithm::TokenBucket,
            State::Gcra { .. } => {
                matches!(algorithm, Algorithm::Gcra | Algorithm::LeakyBucket)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::State;

    #[test]
    fn a_state_stays_small() {
        // A store keeps one per tracked key (the target is at most 128 bytes of RSS per key).
        assert!(std::mem::size_of::<State>() <= 32);
    }
}
