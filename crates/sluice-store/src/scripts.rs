//! The Lua scripts and the logic both Redis backends share: how a check becomes an EVALSHA,
//! how its answer becomes a [`Decision`], and how an all-or-nothing batch is run.
//!
//! Scripts (under `src/lua/`, mirroring `sluice-core`'s arithmetic exactly):
//! - one check script per algorithm (`fixed_window`, `sliding_window_counter`,
//!   `sliding_window_log`, `token_bucket`, and `gcra`, which also serves leaky_bucket);
//! - `batch`: several checks whose keys share one slot, decided in order and committed only
//!   if every one is allowed (on a single Redis every batch is one `batch` call);
//! - `refund`: gives back what checks consumed, for cross-slot batches on a cluster
//!   (consume-then-refund).
//!
//! `now` always comes from the daemon as ARGV, so Redis and the core decide on the same time.

use std::sync::LazyLock;

use async_trait::async_trait;
use sluice_core::{Algorithm, CheckError, Decision};

use crate::keys;
use crate::{Check, StoreError};

const COMMON: &str = include_str!("lua/common.lua");
const FIXED_WINDOW: &str = include_str!("lua/fixed_window.lua");
const SLIDING_WINDOW_COUNTER: &str = include_str!("lua/sliding_window_counter.lua");
const SLIDING_WINDOW_LOG: &str = include_str!("lua/sliding_window_log.lua");
const TOKEN_BUCKET: &str = include_str!("lua/token_bucket.lua");
const GCRA: &str = include_str!("lua/gcra.lua");
const CHECK_MAIN: &str = include_str!("lua/check.lua");
const BATCH_MAIN: &str = include_str!("lua/batch.lua");
const REFUND_MAIN: &str = include_str!("lua/refund.lua");
const REPLICATED_MAIN: &str = include_str!("lua/replicated.lua");
const MERGE_MAIN: &str = include_str!("lua/merge.lua");

/// Which script to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScriptId {
    /// The check script of one algorithm family (index into [`CHECK_FUNCTIONS`]).
    Check(usize),
    Batch,
    Refund,
    /// Replicated window counters (scope = "replicated"), see `replicated.rs`.
    Replicated,
    /// max()-merge of per-region totals and acknowledgements.
    Merge,
}

impl ScriptId {
    /// Position in [`sources`].
    pub(crate) fn index(self) -> usize {
        match self {
            ScriptId::Check(i) => i,
            ScriptId::Batch => CHECK_FUNCTIONS.len(),
            ScriptId::Refund => CHECK_FUNCTIONS.len() + 1,
            ScriptId::Replicated => CHECK_FUNCTIONS.len() + 2,
            ScriptId::Merge => CHECK_FUNCTIONS.len() + 3,
        }
    }
}

/// The Lua function (and source file) of each check script.
const CHECK_FUNCTIONS: [(&str, &str); 5] = [
    ("fixed_window", FIXED_WINDOW),
    ("sliding_window_counter", SLIDING_WINDOW_COUNTER),
    ("sliding_window_log", SLIDING_WINDOW_LOG),
    ("token_bucket", TOKEN_BUCKET),
    ("gcra", GCRA),
];

/// Script sources, indexed by [`ScriptId::index`]: five check scripts, batch, refund,
/// replicated, merge.
pub(crate) fn sources() -> &'static [String] {
    static SOURCES: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut all: Vec<String> = CHECK_FUNCTIONS
            .iter()
            .map(|(name, body)| format!("{COMMON}{body}local ALGORITHM = {name}\n{CHECK_MAIN}"))
            .collect();
        let library: String = CHECK_FUNCTIONS.iter().map(|(_, body)| *body).collect();
        all.push(format!("{COMMON}{library}{BATCH_MAIN}"));
        all.push(format!("{COMMON}{library}{REFUND_MAIN}"));
        all.push(format!("{COMMON}{SLIDING_WINDOW_COUNTER}{REPLICATED_MAIN}"));
        all.push(MERGE_MAIN.to_owned());
        all
    });
    &SOURCES
}

/// The algorithm code the batch and refund scripts dispatch on.
fn code(algorithm: Algorithm) -> u64 {
    match algorithm {
        Algorithm::FixedWindow => 0,
        Algorithm::SlidingWindowCounter => 1,
        Algorithm::SlidingWindowLog => 2,
        Algorithm::TokenBucket => 3,
        Algorithm::Gcra => 4,
        Algorithm::LeakyBucket => 5,
    }
}

fn check_script(algorithm: Algorithm) -> ScriptId {
    ScriptId::Check(match algorithm {
        Algorithm::FixedWindow => 0,
        Algorithm::SlidingWindowCounter => 1,
        Algorithm::SlidingWindowLog => 2,
        Algorithm::TokenBucket => 3,
        Algorithm::Gcra | Algorithm::LeakyBucket => 4,
    })
}

/// What every script call of one store shares.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// `backend.prefix`.
    pub prefix: String,
    /// Milliseconds added to every TTL.
    pub ttl_grace_ms: u64,
}

impl Layout {
    pub(crate) fn new(prefix: String, ttl_grace: std::time::Duration) -> Self {
        Layout {
            prefix,
            // Far beyond any window; keeps TTL arithmetic from overflowing.
            ttl_grace_ms: ttl_grace.as_millis().min(1 << 40) as u64,
        }
    }
}

/// Runs one script by EVALSHA (loading it on NOSCRIPT and retrying once) and returns its
/// integer array answer. Implemented by each backend over its client.
#[async_trait]
pub(crate) trait Runner: Send + Sync {
    async fn run(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError>;
}

/// What one script answers for one check.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    decision: Decision,
    /// `remaining` and `reset_ms` of the state before this check (a cost-0 peek).
    before_remaining: u64,
    before_reset_ms: u64,
    /// What the refund script needs to find this consumption again.
    token: u64,
}

const FIELDS: usize = 8;

fn outcome(limit: u64, fields: &[i64]) -> Result<Outcome, StoreError> {
    let [
        allowed,
        remaining,
        reset,
        retry,
        delay,
        before_remaining,
        before_reset,
        token,
    ] = fields
    else {
        return Err(StoreError::Backend(format!(
            "script answered {} fields, expected {FIELDS}",
            fields.len()
        )));
    };
    let n = |v: &i64| u64::try_from(*v).unwrap_or(0);
    Ok(Outcome {
        decision: Decision {
            allowed: *allowed == 1,
            limit,
            remaining: n(remaining),
            reset_ms: n(reset),
            retry_after_ms: n(retry),
            delay_ms: n(delay),
        },
        before_remaining: n(before_remaining),
        before_reset_ms: n(before_reset),
        token: n(token),
    })
}

/// Refuses what the core would refuse, before anything is sent.
pub(crate) fn validate(check: &Check<'_>) -> Result<(), StoreError> {
    check.params.validate().map_err(|e| {
        StoreError::Backend(format!("invalid parameters for {}: {e}", check.policy))
    })?;
    let capacity = check.params.capacity();
    if check.cost > capacity {
        return Err(CheckError::CostExceedsCapacity {
            cost: check.cost,
            capacity,
        }
        .into());
    }
    Ok(())
}

fn push_params(args: &mut Vec<String>, check: &Check<'_>) {
    let p = &check.params;
    args.push(p.limit.to_string());
    args.push(p.window_ms.to_string());
    args.push(p.burst.to_string());
    args.push(check.cost.to_string());
}

/// One check through its algorithm's script.
pub(crate) async fn check(
    runner: &dyn Runner,
    layout: &Layout,
    check: &Check<'_>,
    now_ms: u64,
) -> Result<Decision, StoreError> {
    validate(check)?;
    let algorithm = check.params.algorithm;
    let keys = keys::limit_keys(&layout.prefix, check.policy, check.key, algorithm);
    let mut args = Vec::with_capacity(7);
    args.push(now_ms.to_string());
    push_params(&mut args, check);
    args.push(u64::from(algorithm == Algorithm::LeakyBucket).to_string());
    args.push(layout.ttl_grace_ms.to_string());
    let answer = runner.run(check_script(algorithm), keys, args).await?;
    Ok(outcome(check.params.limit, &answer)?.decision)
}

/// Checks of one slot in one `batch` call: `(committed, outcomes in order)`.
async fn batch(
    runner: &dyn Runner,
    layout: &Layout,
    checks: &[&Check<'_>],
    now_ms: u64,
) -> Result<(bool, Vec<Outcome>), StoreError> {
    let mut keys = Vec::with_capacity(checks.len());
    let mut args = Vec::with_capacity(2 + 5 * checks.len());
    args.push(now_ms.to_string());
    args.push(checks.len().to_string());
    args.push(layout.ttl_grace_ms.to_string());
    for check in checks {
        let algorithm = check.params.algorithm;
        keys.extend(keys::limit_keys(
            &layout.prefix,
            check.policy,
            check.key,
            algorithm,
        ));
        args.push(code(algorithm).to_string());
        push_params(&mut args, check);
    }
    let answer = runner.run(ScriptId::Batch, keys, args).await?;
    let Some((committed, rest)) = answer.split_first() else {
        return Err(StoreError::Backend("batch script answered nothing".into()));
    };
    if rest.len() != FIELDS * checks.len() {
        return Err(StoreError::Backend(format!(
            "batch script answered {} fields for {} checks",
            rest.len(),
            checks.len()
        )));
    }
    let outcomes = rest
        .chunks(FIELDS)
        .zip(checks)
        .map(|(fields, check)| outcome(check.params.limit, fields))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((*committed == 1, outcomes))
}

/// Gives back what `checks` consumed (each allowed, with the token its check answered).
async fn refund(
    runner: &dyn Runner,
    layout: &Layout,
    checks: &[(&Check<'_>, u64)],
    now_ms: u64,
) -> Result<(), StoreError> {
    let mut keys = Vec::with_capacity(checks.len());
    let mut args = Vec::with_capacity(2 + 6 * checks.len());
    args.push(now_ms.to_string());
    args.push(checks.len().to_string());
    args.push(layout.ttl_grace_ms.to_string());
    for (check, token) in checks {
        let algorithm = check.params.algorithm;
        keys.extend(keys::limit_keys(
            &layout.prefix,
            check.policy,
            check.key,
            algorithm,
        ));
        args.push(code(algorithm).to_string());
        push_params(&mut args, check);
        args.push(token.to_string());
    }
    runner.run(ScriptId::Refund, keys, args).await.map(|_| ())
}

/// All-or-nothing checks. With `by_slot` (a cluster) the checks are grouped by slot, each
/// group is one `batch` call (all groups concurrently), and if any group was denied the groups
/// that committed are refunded. Without it (one Redis) the whole batch is one `batch` call.
///
/// Results follow [`Store::check_all`](crate::Store::check_all): when the batch is denied,
/// `remaining` and `reset` describe the state before it and `delay_ms` is 0.
pub(crate) async fn check_all(
    runner: &dyn Runner,
    layout: &Layout,
    checks: &[Check<'_>],
    now_ms: u64,
    by_slot: bool,
) -> Result<Vec<Decision>, StoreError> {
    if checks.is_empty() {
        return Ok(Vec::new());
    }
    for check in checks {
        validate(check)?;
    }
    // Groups of indices into `checks`, each group on one slot, in first-seen order.
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, check) in checks.iter().enumerate() {
        let slot = if by_slot {
            keys::slot(check.policy, check.key)
        } else {
            0
        };
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, members)) => members.push(i),
            None => groups.push((slot, vec![i])),
        }
    }
    let results = futures::future::join_all(groups.iter().map(|(_, members)| {
        let group: Vec<&Check<'_>> = members.iter().map(|&i| &checks[i]).collect();
        async move { batch(runner, layout, &group, now_ms).await }
    }))
    .await;

    let mut outcomes: Vec<Option<Outcome>> = vec![None; checks.len()];
    let mut committed_groups = Vec::new();
    let mut failure = None;
    let mut all_committed = true;
    for ((_, members), result) in groups.iter().zip(results) {
        match result {
            Ok((committed, group_outcomes)) => {
                all_committed &= committed;
                if committed {
                    committed_groups.push(members);
                }
                for (&i, o) in members.iter().zip(group_outcomes) {
                    outcomes[i] = Some(o);
                }
            }
            Err(e) => {
                all_committed = false;
                failure.get_or_insert(e);
            }
        }
    }
    if !all_committed {
        // Consume-then-refund: give back what the committed groups took.
        let refunds = committed_groups.iter().map(|members| {
            let consumed: Vec<(&Check<'_>, u64)> = members
                .iter()
                .filter(|&&i| checks[i].cost > 0)
                .filter_map(|&i| outcomes[i].map(|o| (&checks[i], o.token)))
                .collect();
            async move {
                if consumed.is_empty() {
                    Ok(())
                } else {
                    refund(runner, layout, &consumed, now_ms).await
                }
            }
        });
        let refunded = futures::future::join_all(refunds).await;
        if let Some(e) = failure {
            return Err(e);
        }
        // A refund that failed leaves its consumption until the key's TTL: the batch was
        // denied all the same, and a lost refund can only deny more, never admit more.
        drop(refunded);
    }
    outcomes
        .into_iter()
        .map(|o| {
            let o = o.ok_or_else(|| StoreError::Backend("batch lost a check".into()))?;
            let mut d = o.decision;
            if !all_committed {
                d.remaining = o.before_remaining;
                d.reset_ms = o.before_reset_ms;
                d.delay_ms = 0;
            }
            Ok(d)
        })
        .collect()
}
