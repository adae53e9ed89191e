//! Group commit of single checks: while a script call to a lane (a cluster slot or master,
//! or the one slot of a single server) is in flight, further checks bound for that lane
//! queue ([`lanes`](super::lanes)); when the call returns, the queued checks go as ONE
//! EVALSHA of the `group` script, which decides each of them on its own, in order, and
//! answers every decision. There is no timer: a lone check goes at once as its algorithm's
//! own script, so grouping only ever happens when checks would otherwise wait behind each
//! other, and Redis runs one script per round trip instead of one per check.
//!
//! Each check keeps its own timeout: a caller that gives up is answered by its fail mode, and
//! its check is dropped from the queue if it was not sent yet; a group call that fails or
//! times out fails each check in it.
//!
//! A check carrying a candidate limit is two entries of one call, side by side (the group
//! script decides every entry on its own, so the candidate never changes the check's
//! answer); alone on its lane, it goes as a group call of those two entries on its slot.

use sluice_core::Mode;

use super::answers::{GroupAnswer, group_answers, outcome};
use super::lanes::{Answer, CheckCall, Entry, Joined, PARAM_BYTES, Queued};
use super::runner::{GroupCall, Lane, ScriptRunner};
use super::script_store::ScriptStore;
use super::scripts::{ScriptId, mode_flag};
use crate::error::StoreError;
use crate::store::Decided;

/// The right to the one call in flight on a lane. Dropped (the call returned, or its caller
/// gave up), it sends what queued meanwhile, in a task of its own.
pub(crate) struct Lead<C: ScriptRunner + ?Sized> {
    store: ScriptStore<C>,
    lane: Lane,
}

impl<C: ScriptRunner + ?Sized> Drop for Lead<C> {
    fn drop(&mut self) {
        let groups = self.store.groups();
        if !groups.release(self.lane) {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(drain(self.store.clone(), self.lane));
        } else {
            groups.abandon(self.lane);
        }
    }
}

/// One check (and its candidate, if any) on `lane`: at once through its algorithm's script
/// (the group script with a candidate) when nothing is in flight on the lane, else in the
/// next group call behind it.
pub(crate) async fn decide<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    lane: Lane,
    call: CheckCall,
) -> Answer {
    match store.groups().join(lane, call) {
        Joined::Lead(call) => {
            let lead = Lead {
                store: store.clone(),
                lane,
            };
            // Boxed: a lone call's future is larger than the wait of a queued check, and
            // held inline it would size (and be copied with) every check's future.
            let decision = Box::pin(alone(store, call)).await;
            drop(lead);
            decision
        }
        Joined::Queued(answer) => answer
            .await
            .map_err(|_| StoreError::Backend("group call dropped its checks".into()))?,
    }
}

/// Sends the checks queued on `lane`, a group per call, until none is left. Before each call
/// it yields once: the tasks already woken (the answers just given, requests already read)
/// run first and queue their checks, so a group takes every check on its way instead of the
/// few that queued while the last call was in flight. No timer: the wait is one turn of the
/// scheduler, and a lane with nothing else to run sends at once.
async fn drain<C: ScriptRunner + ?Sized>(store: ScriptStore<C>, lane: Lane) {
    loop {
        tokio::task::yield_now().await;
        let Some(group) = store.groups().next_group(lane) else {
            return;
        };
        send(&store, lane, group).await;
    }
}

/// One `group` call for `group` on `lane`, each check answered on its channel; the checks
/// the call did not run (a master lane whose slots moved) go again alone.
async fn send<C: ScriptRunner + ?Sized>(store: &ScriptStore<C>, lane: Lane, group: Vec<Queued>) {
    store.groups().observe(store.client().kind(), group.len());
    let answers = match group_call(store, lane, group.iter().map(|q| &q.call)).await {
        Ok(answers) => answers,
        Err(e) => {
            for queued in group {
                let _ = queued.answer.send(Err(e.clone()));
            }
            return;
        }
    };
    let mut answers = answers.into_iter();
    let mut unrun = Vec::new();
    for queued in group {
        let check = answers.next().unwrap_or(GroupAnswer::NotRun);
        let candidate = queued
            .call
            .candidate
            .as_ref()
            .map(|_| answers.next().unwrap_or(GroupAnswer::NotRun));
        match (check, candidate) {
            (GroupAnswer::Decided(decision), None) => {
                let _ = queued.answer.send(Ok(Decided::of(decision, None)));
            }
            (GroupAnswer::Decided(decision), Some(GroupAnswer::Decided(candidate))) => {
                let _ = queued
                    .answer
                    .send(Ok(Decided::of(decision, Some(candidate))));
            }
            (check, candidate) => unrun.push((queued, check, candidate)),
        }
    }
    if let Some((first, _, _)) = unrun.first() {
        let client = store.client();
        store
            .groups()
            .observe_sent_again(client.kind(), unrun.len());
        client.lanes_moved(first.call.now_ms);
        let again = unrun
            .into_iter()
            .map(|(queued, check, candidate)| async move {
                let decided = again(store, queued.call, check, candidate).await;
                let _ = queued.answer.send(decided);
            });
        futures::future::join_all(again).await;
    }
}

/// Decides again, alone and following redirections, what a group call on a master lane did
/// not run of `call`: the whole of it (its check and candidate together, as one call), or
/// only the part that did not run when the other did (a slot migrating between the two reads:
/// what ran is never run twice).
async fn again<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    call: CheckCall,
    check: GroupAnswer,
    candidate: Option<GroupAnswer>,
) -> Answer {
    match (check, candidate) {
        (GroupAnswer::NotRun, Some(GroupAnswer::Decided(candidate))) => {
            let decision = alone(store, call.check_only()).await?.decision;
            Ok(Decided::of(decision, Some(candidate)))
        }
        (GroupAnswer::Decided(decision), Some(GroupAnswer::NotRun)) => {
            let candidate = match call.candidate_only() {
                Some(call) => Some(alone(store, call).await?.decision),
                None => None,
            };
            Ok(Decided::of(decision, candidate))
        }
        _ => alone(store, call).await,
    }
}

/// The `group` call of `calls` on `lane`: every call's entries (its check, then its
/// candidate) in order, each decided on its own; answers every entry in that order (all
/// [`NotRun`](GroupAnswer::NotRun) when a master lane's node redirected the call).
async fn group_call<'c, C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    lane: Lane,
    calls: impl Iterator<Item = &'c CheckCall> + Clone,
) -> Result<Vec<GroupAnswer>, StoreError> {
    let master = matches!(lane, Lane::Master(_));
    let entries = || calls.clone().flat_map(CheckCall::entries);
    let count = entries().count();
    let mut params = Vec::with_capacity(PARAM_BYTES * count);
    for call in calls.clone() {
        call.put_params(&mut params);
    }
    // Borrowed from the checks, which keep them: a check the call did not run goes again.
    let keys: Vec<&str> = if master {
        // The first check's key only: it routes the call.
        entries().next().and_then(Entry::key).into_iter().collect()
    } else {
        entries()
            .flat_map(|e| e.keys.iter().map(String::as_str))
            .collect()
    };
    let (count_arg, grace) = (count.to_string(), store.layout().ttl_grace_ms.to_string());
    let lane_code: &[u8] = if master { b"1" } else { b"0" };
    let mut args: Vec<&[u8]> = vec![count_arg.as_bytes(), grace.as_bytes(), lane_code, &params];
    if master {
        // Every entry's key, the first one included (pushed one by one: each borrow is
        // shortened to the call's, as `extend` would not).
        for key in entries().filter_map(Entry::key) {
            args.push(key.as_bytes());
        }
    }
    let script = store.script(ScriptId::Group);
    match store
        .client()
        .eval_group(GroupCall {
            script,
            lane,
            keys: &keys,
            args: &args,
        })
        .await?
    {
        Some(reply) => group_answers(&reply, count, entries().map(|e| e.params.limit)),
        None => Ok(vec![GroupAnswer::NotRun; count]),
    }
}

/// One check through its algorithm's script (a check alone on its lane, or one a group call
/// did not run), following redirections; with a candidate, both in one `group` call on their
/// slot.
async fn alone<C: ScriptRunner + ?Sized>(store: &ScriptStore<C>, call: CheckCall) -> Answer {
    store.groups().observe(store.client().kind(), 1);
    // A candidate goes with its check in one call, and a calendar window needs the frame the
    // group script takes: both through the group script on the check's slot.
    if call.candidate.is_some() || call.check.params.calendar.is_some() {
        let slot = call.key().map_or(0, |key| store.client().slot(key));
        let answers = group_call(store, Lane::Slot(slot), std::iter::once(&call)).await?;
        return match answers[..] {
            [GroupAnswer::Decided(decision)] => Ok(Decided::of(decision, None)),
            [
                GroupAnswer::Decided(decision),
                GroupAnswer::Decided(candidate),
            ] => Ok(Decided::of(decision, Some(candidate))),
            _ => Err(StoreError::Backend(
                "group script left a check on its own slot not run".into(),
            )),
        };
    }
    let params = &call.check.params;
    let algorithm = params.algorithm;
    let mut args = vec![
        call.now_ms.to_string(),
        params.limit.to_string(),
        params.window_ms.to_string(),
        params.burst.to_string(),
        call.check.cost.to_string(),
        mode_flag(params).to_string(),
        store.layout().ttl_grace_ms.to_string(),
    ];
    // The mode only when it is not the default consume: the hot path sends what it did.
    if call.check.mode != Mode::Consume {
        args.push(call.check.mode.code().to_string());
    }
    let answer = store
        .eval(ScriptId::check(algorithm), call.check.keys, args)
        .await?;
    Ok(Decided::of(outcome(params.limit, &answer)?.decision, None))
}
