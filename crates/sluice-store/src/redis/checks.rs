//! A check or an all-or-nothing batch on Redis, written once over [`ScriptRunner`]: how a
//! check becomes the EVALSHA of its algorithm's script, how the answer becomes a
//! [`Decision`], and how a batch whose keys span slots is consume-then-refund. Here the
//! [`ScriptStore`] becomes a [`Store`].
//!
//! The cost is checked against the capacity here, once per check, before anything is sent:
//! the scripts mirror the core's arithmetic for valid checks only, and the core, which
//! checks it for the memory store, is not on this path. A candidate limit judged beside a
//! check goes in the check's own call (its keys share the check's hash tag, so its slot);
//! a cost beyond the candidate's capacity is sent as a peek and answered as a rejection.

use async_trait::async_trait;
use sluice_core::{Decision, Params, candidate_cost, candidate_decision};

use super::answers::{FIELDS, Outcome, outcome};
use super::group;
use super::keys;
use super::lanes::{CheckCall, Entry};
use super::runner::ScriptRunner;
use super::script_store::ScriptStore;
use super::scripts::{ScriptId, Wire};
use crate::error::StoreError;
use crate::store::{Capabilities, Check, Decided, Store, StoreKind, Unspent, candidate_mode};

#[async_trait]
impl<C: ScriptRunner + ?Sized> Store for ScriptStore<C> {
    fn kind(&self) -> StoreKind {
        self.client().kind()
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            bounds_its_calls: true,
            keys: None,
            groups: Some(self.groups()),
            tls: None,
        }
    }

    /// A lone check (and its candidate) in one script call, grouped with the checks queued
    /// behind a call in flight on its lane; a batch in one call per slot, its candidates in
    /// the call of their check's slot, judged after its all-or-nothing part.
    async fn decide(&self, checks: &[Check<'_>], now_ms: u64) -> Result<Vec<Decided>, StoreError> {
        // A batch's future is boxed apart: held inline, its size (kilobytes) would be the
        // size of every lone check's, which is moved (copied) several times per check.
        match checks {
            [check] => Ok(vec![one(self, check, now_ms).await?]),
            _ => Box::pin(all(self, checks, now_ms)).await,
        }
    }

    fn decide_now(&self, _: &Check<'_>, _: u64) -> Option<Result<Decided, StoreError>> {
        None
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.bounds().ping(self.client().ping()).await
    }

    async fn give_back(&self, unspent: &Unspent<'_>, now_ms: u64) -> Result<(), StoreError> {
        let Unspent { check, token } = unspent;
        validate(check)?;
        let keys = [keys::stacked_keys(
            &self.layout().prefix,
            check.policy,
            check.key,
            check.stack,
            check.params.algorithm,
        )];
        let checks = std::slice::from_ref(check);
        self.bounds()
            .call(async {
                self.client().routable().await?;
                refund(self, checks, &keys, &[(0, *token)], now_ms).await
            })
            .await
    }
}

/// Refuses what the core would refuse, before anything is sent.
pub(crate) fn validate(check: &Check<'_>) -> Result<(), StoreError> {
    check.params.validate().map_err(|e| {
        StoreError::Backend(format!("invalid parameters for {}: {e}", check.policy))
    })?;
    sluice_core::validate_check(&check.params, check.cost, check.mode)?;
    Ok(())
}

/// The entry of the candidate `params` judging `check`: its keys under the limit's hash tag
/// (`limit_key`: the first of the limit's keys, if at hand), and the cost it judges (see
/// [`candidate_cost`]: any cost is fine, one beyond the candidate's capacity is judged a
/// rejection). Refuses parameters the scripts cannot decide with (the config refuses them
/// first).
fn candidate_entry(
    prefix: &str,
    check: &Check<'_>,
    limit_key: Option<&str>,
    params: &Params,
) -> Result<Entry, StoreError> {
    params.validate().map_err(|e| {
        StoreError::Backend(format!(
            "invalid candidate parameters for {}: {e}",
            check.policy
        ))
    })?;
    let keys = match limit_key {
        Some(limit_key) => {
            keys::candidate_keys_beside(limit_key, check.params.algorithm, params.algorithm)
        }
        None => keys::candidate_keys(prefix, check.policy, check.key, params.algorithm),
    };
    Ok(Entry {
        keys,
        params: *params,
        cost: candidate_cost(check.cost, params),
        mode: candidate_mode(check.mode, params),
    })
}

/// A limit's code, parameters and `cost` as a batch or refund call's arguments at `now_ms`.
fn push_params(args: &mut Vec<String>, params: &Params, cost: u64, now_ms: u64) {
    let wire = Wire::of(params, now_ms);
    args.push(wire.code.to_string());
    args.push(wire.limit.to_string());
    args.push(wire.window_ms.to_string());
    args.push(wire.burst.to_string());
    args.push(cost.to_string());
}

/// One check, with `candidate` judged beside it in the same call: through its algorithm's
/// script when nothing is in flight on its lane (the group script with a candidate), else in
/// the next group call (see [`group`]).
async fn one<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    check: &Check<'_>,
    now_ms: u64,
) -> Result<Decided, StoreError> {
    let candidate = check.candidate.as_ref();
    validate(check)?;
    let prefix = &store.layout().prefix;
    let keys = keys::stacked_keys(
        prefix,
        check.policy,
        check.key,
        check.stack,
        check.params.algorithm,
    );
    let candidate_entry = candidate
        .map(|params| candidate_entry(prefix, check, keys.first().map(String::as_str), params))
        .transpose()?;
    let call = CheckCall {
        check: Entry {
            keys,
            params: check.params,
            cost: check.cost,
            mode: check.mode,
        },
        candidate: candidate_entry,
        now_ms,
    };
    let Decided {
        decision,
        candidate: answered,
    } = send(store, call).await?;
    let candidate = candidate
        .zip(answered)
        .map(|(params, answered)| candidate_decision(check.cost, params, answered));
    Ok(Decided {
        decision,
        candidate,
    })
}

/// The candidate `params` of `check` decided alone, on its keys under the check's hash tag:
/// for a store that decides the check itself elsewhere (the replicated store, on its window
/// counters).
pub(crate) async fn candidate_alone<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    check: &Check<'_>,
    params: &Params,
    now_ms: u64,
) -> Result<Decision, StoreError> {
    let call = CheckCall {
        check: candidate_entry(&store.layout().prefix, check, None, params)?,
        candidate: None,
        now_ms,
    };
    let answered = send(store, call).await?.decision;
    Ok(candidate_decision(check.cost, params, answered))
}

/// `call` on its lane (see [`group`]), within the in-flight bound and the timeout.
async fn send<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    call: CheckCall,
) -> Result<Decided, StoreError> {
    let one_key_each = call.entries().all(|entry| entry.keys.len() == 1);
    let lane = store
        .client()
        .lane(call.key().unwrap_or_default(), one_key_each, call.now_ms);
    store
        .bounds()
        .call(async {
            store.client().routable().await?;
            group::decide(store, lane, call).await
        })
        .await
}

/// The KEYS and ARGV of a batch or refund call: `now`, the count and the TTL grace, then per
/// check its algorithm code, parameters and cost, then the refund token (a refund call) or
/// the mode (a batch call).
fn batch_call<'c>(
    ttl_grace_ms: u64,
    items: impl ExactSizeIterator<Item = (&'c Check<'c>, &'c [String], Option<u64>)>,
    now_ms: u64,
) -> (Vec<String>, Vec<String>) {
    let mut keys = Vec::with_capacity(items.len());
    let mut args = Vec::with_capacity(3 + 6 * items.len());
    args.push(now_ms.to_string());
    args.push(items.len().to_string());
    args.push(ttl_grace_ms.to_string());
    for (check, check_keys, token) in items {
        keys.extend_from_slice(check_keys);
        push_params(&mut args, &check.params, check.cost, now_ms);
        args.push(match token {
            Some(token) => token.to_string(),
            None => check.mode.code().to_string(),
        });
    }
    (keys, args)
}

/// The checks `members` of one slot in one `batch` call, with the candidates judged beside
/// them (after the all-or-nothing part, each on its own: see `batch.lua`): `(committed,
/// outcomes in order, the candidates' decisions in members' order)`.
async fn batch<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    checks: &[Check<'_>],
    keys: &[Vec<String>],
    candidates: &[Option<Entry>],
    members: &[usize],
    now_ms: u64,
) -> Result<(bool, Vec<Outcome>, Vec<Option<Decision>>), StoreError> {
    let items = members
        .iter()
        .map(|&i| (&checks[i], keys[i].as_slice(), None));
    let (mut call_keys, mut args) = batch_call(store.layout().ttl_grace_ms, items, now_ms);
    // (position in `members`, check index, candidate entry)
    let judged: Vec<(usize, usize, &Entry)> = members
        .iter()
        .enumerate()
        .filter_map(|(at, &i)| Some((at, i, candidates.get(i)?.as_ref()?)))
        .collect();
    args.push(judged.len().to_string());
    for (_, _, entry) in &judged {
        call_keys.extend_from_slice(&entry.keys);
        push_params(&mut args, &entry.params, entry.cost, now_ms);
        args.push(entry.mode.code().to_string());
    }
    let answer = store.eval(ScriptId::Batch, call_keys, args).await?;
    let Some((committed, rest)) = answer.split_first() else {
        return Err(StoreError::Backend("batch script answered nothing".into()));
    };
    if rest.len() != FIELDS * (members.len() + judged.len()) {
        return Err(StoreError::Backend(format!(
            "batch script answered {} fields for {} checks and {} candidates",
            rest.len(),
            members.len(),
            judged.len()
        )));
    }
    let (rest, of_candidates) = rest.split_at(FIELDS * members.len());
    let outcomes = rest
        .chunks(FIELDS)
        .zip(members)
        .map(|(fields, &i)| outcome(checks[i].params.limit, fields))
        .collect::<Result<Vec<_>, _>>()?;
    let mut decided = vec![None; members.len()];
    for (fields, &(at, i, entry)) in of_candidates.chunks(FIELDS).zip(&judged) {
        let answered = outcome(entry.params.limit, fields)?.decision;
        decided[at] = Some(candidate_decision(checks[i].cost, &entry.params, answered));
    }
    Ok((*committed == 1, outcomes, decided))
}

/// Gives back what the checks `consumed` took (each allowed, with the token it answered).
async fn refund<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    checks: &[Check<'_>],
    keys: &[Vec<String>],
    consumed: &[(usize, u64)],
    now_ms: u64,
) -> Result<(), StoreError> {
    let items = consumed
        .iter()
        .map(|&(i, token)| (&checks[i], keys[i].as_slice(), Some(token)));
    let (call_keys, args) = batch_call(store.layout().ttl_grace_ms, items, now_ms);
    store
        .eval(ScriptId::Refund, call_keys, args)
        .await
        .map(|_| ())
}

/// All-or-nothing checks, grouped by slot (one group on a single server): each group is one
/// `batch` call (all groups concurrently), and if any group was denied the groups that
/// committed are refunded. A check's candidate, when it carries one, is judged beside it in
/// the call of its slot (its keys share the check's hash tag), on its own and never refunded:
/// it consumed when it alone would allow, whatever the batch's answer.
///
/// Results follow [`Store::decide`]: when the batch is denied,
/// `remaining` and `reset` describe the state before it and `delay_ms` is 0.
///
/// A batch over several slots runs in a task of its own, holding its in-flight permit: if
/// the caller stops waiting (its timeout), the task still finishes, and a batch denied on one
/// slot is still refunded on the others instead of leaving half its consumption behind. Every
/// command in it is bounded by the client's command timeout.
async fn all<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    checks: &[Check<'_>],
    now_ms: u64,
) -> Result<Vec<Decided>, StoreError> {
    if checks.is_empty() {
        return Ok(Vec::new());
    }
    for check in checks {
        validate(check)?;
    }
    let prefix = &store.layout().prefix;
    let keys: Vec<Vec<String>> = checks
        .iter()
        .map(|c| keys::stacked_keys(prefix, c.policy, c.key, c.stack, c.params.algorithm))
        .collect();
    let judged: Vec<Option<Entry>> = checks
        .iter()
        .zip(&keys)
        .map(|(check, keys)| {
            let limit_key = keys.first().map(String::as_str);
            check
                .candidate
                .as_ref()
                .map(|params| candidate_entry(prefix, check, limit_key, params))
                .transpose()
        })
        .collect::<Result<_, _>>()?;
    // Groups of indices into `checks`, each group on one slot, in first-seen order.
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, check_keys) in keys.iter().enumerate() {
        let slot = check_keys.first().map_or(0, |key| store.client().slot(key));
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, members)) => members.push(i),
            None => groups.push((slot, vec![i])),
        }
    }
    let groups: Vec<Vec<usize>> = groups.into_iter().map(|(_, members)| members).collect();
    let bounds = store.bounds();
    if groups.len() == 1 {
        return bounds
            .call(async {
                store.client().routable().await?;
                decide_groups(store, checks, &keys, &judged, &groups, now_ms).await
            })
            .await;
    }
    let permit = bounds.owned_permit()?;
    let owned: Vec<(String, String, Check<'static>)> = checks
        .iter()
        .map(|c| {
            let rest = Check {
                policy: "",
                key: "",
                ..*c
            };
            (c.policy.to_owned(), c.key.to_owned(), rest)
        })
        .collect();
    let task_store = store.clone();
    let decided = async move {
        task_store.client().routable().await?;
        let task = tokio::spawn(async move {
            let _permit = permit;
            let checks: Vec<Check<'_>> = owned
                .iter()
                .map(|(policy, key, rest)| Check {
                    policy,
                    key,
                    ..*rest
                })
                .collect();
            decide_groups(&task_store, &checks, &keys, &judged, &groups, now_ms).await
        });
        match task.await {
            Err(e) => Err(StoreError::Backend(format!("batch task failed: {e}"))),
            Ok(result) => result,
        }
    };
    bounds.timed(decided).await
}

/// One `batch` call per group, then the refund of the committed groups if any was denied.
async fn decide_groups<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    checks: &[Check<'_>],
    keys: &[Vec<String>],
    candidates: &[Option<Entry>],
    groups: &[Vec<usize>],
    now_ms: u64,
) -> Result<Vec<Decided>, StoreError> {
    let results = futures::future::join_all(
        groups
            .iter()
            .map(|members| batch(store, checks, keys, candidates, members, now_ms)),
    )
    .await;

    let mut outcomes: Vec<Option<Outcome>> = vec![None; checks.len()];
    let mut judged: Vec<Option<Decision>> = vec![None; checks.len()];
    let mut committed_groups = Vec::new();
    let mut failure = None;
    let mut all_committed = true;
    for (members, result) in groups.iter().zip(results) {
        match result {
            Ok((committed, group_outcomes, group_judged)) => {
                all_committed &= committed;
                if committed {
                    committed_groups.push(members);
                }
                for ((&i, o), j) in members.iter().zip(group_outcomes).zip(group_judged) {
                    outcomes[i] = Some(o);
                    judged[i] = j;
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
            let consumed: Vec<(usize, u64)> = members
                .iter()
                .filter(|&&i| checks[i].cost > 0)
                .filter_map(|&i| outcomes[i].map(|o| (i, o.token)))
                .collect();
            async move {
                if consumed.is_empty() {
                    Ok(())
                } else {
                    refund(store, checks, keys, &consumed, now_ms).await
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
        .zip(judged)
        .map(|(o, judged)| {
            let o = o.ok_or_else(|| StoreError::Backend("batch lost a check".into()))?;
            let mut d = o.decision;
            if !all_committed {
                d.remaining = o.before_remaining;
                d.reset_ms = o.before_reset_ms;
                d.delay_ms = 0;
            }
            Ok(Decided {
                decision: d,
                candidate: judged,
            })
        })
        .collect()
}
