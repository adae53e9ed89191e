//! What a check answers, and why a check can be refused outright.

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed (for leaky_bucket: after `delay_ms`).
    pub allowed: bool,
    /// The policy's `limit`.
    pub limit: u64,
    /// Requests of cost 1 that would still pass now, after this check.
    pub remaining: u64,
    /// What the key owes beyond its limit after a charge took more than it had (usage
    /// policies), in units of cost; 0 otherwise. While it is above 0 `remaining` is 0.
    pub debt: u64,
    /// Unix milliseconds at which the key is back to full.
    pub reset_ms: u64,
    /// Milliseconds until a request of this cost could pass; 0 when allowed.
    pub retry_after_ms: u64,
    /// leaky_bucket: milliseconds the caller should wait before proceeding, so the outflow stays
    /// uniform; 0 for every other algorithm.
    pub delay_ms: u64,
}

impl Decision {
    /// `reset` in unix seconds, rounded up so a client waiting until then finds the key full.
    pub fn reset_secs(&self) -> u64 {
        self.reset_ms.div_ceil(1000)
    }

    /// Whole seconds (rounded up, at least 1) until a request of this cost could pass, when
    /// denied; `None` when allowed.
    pub fn retry_after_secs(&self) -> Option<u64> {
        (!self.allowed).then(|| self.retry_after_ms.div_ceil(1000).max(1))
    }

    /// Seconds from `now_ms` until the key is back to full (rounded up).
    pub fn secs_until_reset(&self, now_ms: u64) -> u64 {
        self.reset_ms.saturating_sub(now_ms).div_ceil(1000)
    }
}

/// A check that cannot be decided at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// A request costing more than the bucket or window can ever hold would wait forever.
    #[error("cost {cost} exceeds the policy's capacity {capacity}")]
    CostExceedsCapacity { cost: u64, capacity: u64 },
    /// A charge or refund on an algorithm that cannot carry a debt.
    #[error(
        "{algorithm} cannot carry a debt, so it takes no charge (usage = true needs fixed_window, sliding_window_counter, token_bucket or gcra)"
    )]
    NoDebt { algorithm: crate::params::Algorithm },
}
