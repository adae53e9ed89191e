//! redis-cell's `CL.THROTTLE key max_burst count period [quantity]`, so code written for the
//! Redis module can point at sluiced unchanged.
//!
//! redis-cell is GCRA: one request every `period / count` seconds, `max_burst + 1` at once.
//! That is sluice-core's `gcra` with `limit = count`, `window = period` and `burst =
//! max_burst + 1`, whose arithmetic is exact (redis-cell truncates the emission interval to
//! nanoseconds; the answers agree to the millisecond). The reply is redis-cell's:
//! `[limited, max_burst + 1, remaining, retry_after, reset_after]`, the two times in seconds
//! rounded up, `retry_after` -1 when allowed, and a quantity above `max_burst + 1` limited
//! without consuming (`retry_after` -1: it could never pass).
//!
//! The state lives in the configured backend like a policy's, under the namespace
//! [`NAMESPACE`], which no policy can take (policy names never hold `@`). Callers choose the
//! parameters, so they are bounded: a key of at most 512 bytes, and a limit that refills
//! within [`MAX_REFILL_SECS`], so no key outlives that; the memory store's `max_keys` bounds
//! their number as for policies.

use sluice_api::MAX_KEY_BYTES;
use sluice_core::{Algorithm, Decision, Params};
use sluice_store::Check;

use super::error::{CommandError, integer, text};
use super::reply::int;
use crate::service::app::App;
use crate::service::limiter::LimitError;

/// The namespace of `CL.THROTTLE` state in the store: not a valid policy name.
pub const NAMESPACE: &str = "@cl.throttle";

/// Largest `max_burst`.
pub const MAX_BURST: i64 = 1_000_000;

/// Largest `count`.
pub const MAX_COUNT: i64 = 1_000_000_000;

/// Longest `period`, and longest time an empty limit takes to refill: a year.
pub const MAX_REFILL_SECS: i64 = 365 * 24 * 3600;

/// One `CL.THROTTLE`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle<'a> {
    pub key: &'a str,
    pub params: Params,
    pub quantity: u64,
}

/// The reply: `[limited, limit, remaining, retry_after, reset_after]`.
pub type ThrottleReply = [i64; 5];

impl<'a> Throttle<'a> {
    /// Reads the arguments after the command name.
    pub fn parse(args: &[&'a [u8]]) -> Result<Throttle<'a>, CommandError> {
        let (key, max_burst, count, period, quantity) = match *args {
            [key, max_burst, count, period] => (key, max_burst, count, period, None),
            [key, max_burst, count, period, quantity] => {
                (key, max_burst, count, period, Some(quantity))
            }
            _ => return Err(CommandError::Arity("cl.throttle")),
        };
        let key = text("key", key)?;
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(CommandError::Invalid(format!(
                "key must be 1 to {MAX_KEY_BYTES} bytes, this one is {}",
                key.len()
            )));
        }
        let max_burst = integer("max_burst", max_burst, 0, MAX_BURST)?;
        let count = integer("count", count, 1, MAX_COUNT)?;
        let period = integer("period", period, 1, MAX_REFILL_SECS)?;
        let quantity = match quantity {
            Some(quantity) => integer("quantity", quantity, 0, i64::MAX)?,
            None => 1,
        };
        // Time for an empty limit to refill: (max_burst + 1) emission intervals.
        let refill = i128::from(max_burst + 1) * i128::from(period) / i128::from(count);
        if refill > i128::from(MAX_REFILL_SECS) {
            return Err(CommandError::Invalid(format!(
                "(max_burst + 1) * period / count is {refill}s to refill; at most \
                 {MAX_REFILL_SECS}s (a year) is kept"
            )));
        }
        let unsigned = |n: i64| u64::try_from(n).unwrap_or_default();
        let params = Params::new(
            Algorithm::Gcra,
            unsigned(count),
            unsigned(period) * 1000,
            unsigned(max_burst) + 1,
        )
        .map_err(|err| CommandError::Invalid(err.to_string()))?;
        Ok(Throttle {
            key,
            params,
            quantity: unsigned(quantity),
        })
    }

    /// Whether the quantity can ever pass: above `max_burst + 1` it is refused outright.
    fn fits(&self) -> bool {
        self.quantity <= self.params.burst
    }

    /// The store check: a peek (cost 0) when the quantity could never pass.
    pub fn check(&self) -> Check<'a> {
        Check::new(
            NAMESPACE,
            self.key,
            self.params,
            if self.fits() { self.quantity } else { 0 },
        )
    }

    /// redis-cell's reply to `decision`, decided at `now_ms`.
    pub fn reply(&self, decision: &Decision, now_ms: u64) -> ThrottleReply {
        let limited = !decision.allowed || !self.fits();
        let retry_after = if decision.allowed || !self.fits() {
            -1
        } else {
            int(decision.retry_after_ms.div_ceil(1000))
        };
        let reset_after = decision.reset_ms.saturating_sub(now_ms).div_ceil(1000);
        [
            i64::from(limited),
            int(self.params.burst),
            int(decision.remaining),
            retry_after,
            int(reset_after),
        ]
    }
}

/// Decides `throttle` on the daemon's store.
pub async fn run(app: &App, throttle: &Throttle<'_>) -> Result<ThrottleReply, LimitError> {
    let now_ms = app.clock.now_ms();
    let decision = app
        .limiter
        .check_unlisted(&throttle.check(), now_ms)
        .await?;
    Ok(throttle.reply(&decision, now_ms))
}

#[cfg(test)]
mod tests {
    //! redis-cell's own cases, replayed on sluice-core's GCRA through the memory store.

    use std::sync::Arc;

    use sluice_store::{MemoryStore, MemoryStoreConfig, Store, StoreExt};

    use super::*;

    fn parse(line: &str) -> Result<Throttle<'_>, CommandError> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        Throttle::parse(&args)
    }

    async fn throttle(store: &dyn Store, line: &str, now_ms: u64) -> ThrottleReply {
        let throttle = parse(line).unwrap();
        let decision = store.check(&throttle.check(), now_ms).await.unwrap();
        throttle.reply(&decision, now_ms)
    }

    #[tokio::test]
    async fn the_readme_example_answers_as_redis_cell() {
        let store = MemoryStore::new(MemoryStoreConfig::default());
        assert_eq!(
            throttle(&store, "user123 15 30 60 1", 1_000).await,
            [0, 16, 15, -1, 2]
        );
    }

    /// redis-cell's `it_rate_limits`: max_burst 4, one per second, times after a start.
    #[tokio::test]
    async fn redis_cells_rate_limit_cases_give_its_answers() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(MemoryStoreConfig::default()));
        let start = 1_800_000_000_000;
        // (ms after start, quantity, limited, remaining, retry_after s, reset_after s)
        let cases: [(u64, u64, i64, i64, i64, i64); 15] = [
            (0, 6, 1, 5, -1, 0),
            (0, 1, 0, 4, -1, 1),
            (0, 1, 0, 3, -1, 2),
            (0, 1, 0, 2, -1, 3),
            (0, 1, 0, 1, -1, 4),
            (0, 1, 0, 0, -1, 5),
            (0, 1, 1, 0, 1, 5),
            (3000, 1, 0, 2, -1, 3),
            (3100, 1, 0, 1, -1, 4), // reset_after 3.9 s
            (4000, 1, 0, 1, -1, 4),
            (8000, 1, 0, 4, -1, 1),
            (9500, 1, 0, 4, -1, 1),
            (9500, 0, 0, 4, -1, 1),
            (9500, 2, 0, 2, -1, 3),
            (9500, 5, 1, 2, 3, 3),
        ];
        for (i, (after, quantity, limited, remaining, retry, reset)) in
            cases.into_iter().enumerate()
        {
            let line = format!("foo 4 1 1 {quantity}");
            let answer = throttle(&*store, &line, start + after).await;
            assert_eq!(
                answer,
                [limited, 5, remaining, retry, reset],
                "case {i}: {line} at +{after}ms"
            );
        }
    }

    #[test]
    fn arguments_are_bounded_and_named() {
        for (line, named) in [
            ("k 15 30", "wrong number of arguments"),
            ("k 15 30 60 1 2", "wrong number of arguments"),
            ("k x 30 60", "max_burst"),
            ("k -1 30 60", "max_burst"),
            ("k 15 0 60", "count"),
            ("k 15 30 0", "period"),
            ("k 15 30 60 -1", "quantity"),
            ("k 1000000 1 31536000", "to refill"),
        ] {
            let err = parse(line).unwrap_err().to_string();
            assert!(
                err.starts_with("ERR ") && err.contains(named),
                "{line}: {err}"
            );
        }
        let long = format!("{} 1 1 1", "k".repeat(MAX_KEY_BYTES + 1));
        assert!(
            parse(&long)
                .unwrap_err()
                .to_string()
                .contains("key must be")
        );
        assert!(parse("k 15 30 60").is_ok());
    }
}
