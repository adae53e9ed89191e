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

use sluice_core::{Algorithm, Decision};

use super::answers::{GroupAnswer, group_answers, outcome};
use super::lanes::{CheckCall, Joined, PARAM_BYTES, Queued};
use super::runner::{Lane, ScriptRunner};
use super::script_store::ScriptStore;
use super::scripts::ScriptId;
use crate::StoreError;

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

/// One check on `lane`: at once through its algorithm's script when nothing is in flight on
/// the lane, else in the next group call behind it.
pub(crate) async fn decide<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    lane: Lane,
    call: CheckCall,
) -> Result<Decision, StoreError> {
    match store.groups().join(lane, call) {
        Joined::Lead(call) => {
            let lead = Lead {
                store: store.clone(),
                lane,
            };
            let decision = alone(store, call).await;
            drop(lead);
            decision
        }
        Joined::Queued(answer) => answer
            .await
            .map_err(|_| StoreError::Backend("group call dropped its checks".into()))?,
    }
}

/// Sends the checks queued on `lane`, a group per call, until none is left.
async fn drain<C: ScriptRunner + ?Sized>(store: ScriptStore<C>, lane: Lane) {
    while let Some(group) = store.groups().next_group(lane) {
        send(&store, lane, group).await;
    }
}

/// One `group` call for `group` on `lane`, each check answered on its channel; the checks
/// the call did not run (a master lane whose slots moved) go again each alone.
async fn send<C: ScriptRunner + ?Sized>(store: &ScriptStore<C>, lane: Lane, group: Vec<Queued>) {
    let client = store.client();
    let master = matches!(lane, Lane::Master(_));
    let mut params = Vec::with_capacity(PARAM_BYTES * group.len());
    for queued in &group {
        queued.call.put_params(&mut params);
    }
    // Borrowed from the checks, which keep them: a check the call did not run goes again.
    let keys: Vec<&str> = if master {
        // The first check's key only: it routes the call.
        group
            .first()
            .and_then(|q| q.call.key())
            .into_iter()
            .collect()
    } else {
        group
            .iter()
            .flat_map(|q| q.call.keys.iter().map(String::as_str))
            .collect()
    };
    let (count, grace) = (
        group.len().to_string(),
        store.layout().ttl_grace_ms.to_string(),
    );
    let lane_code: &[u8] = if master { b"1" } else { b"0" };
    let mut args: Vec<&[u8]> = vec![count.as_bytes(), grace.as_bytes(), lane_code, &params];
    if master {
        // Every check's key, the first one included.
        args.extend(group.iter().filter_map(|q| q.call.key()).map(str::as_bytes));
    }
    store.groups().observe(client.kind(), group.len());
    let script = store.script(ScriptId::Group);
    let answers = match client.eval_group(script, lane, &keys, &args).await {
        Ok(Some(reply)) => group_answers(&reply, group.iter().map(|q| q.call.params.limit)),
        Ok(None) => Ok(vec![GroupAnswer::NotRun; group.len()]),
        Err(e) => Err(e),
    };
    let answers = match answers {
        Ok(answers) => answers,
        Err(e) => {
            for queued in group {
                let _ = queued.answer.send(Err(e.clone()));
            }
            return;
        }
    };
    let mut unrun = Vec::new();
    for (queued, answer) in group.into_iter().zip(answers) {
        match answer {
            GroupAnswer::Decided(decision) => {
                let _ = queued.answer.send(Ok(decision));
            }
            GroupAnswer::NotRun => unrun.push(queued),
        }
    }
    if let Some(first) = unrun.first() {
        store
            .groups()
            .observe_sent_again(client.kind(), unrun.len());
        client.lanes_moved(first.call.now_ms);
        let again = unrun.into_iter().map(|queued| async move {
            let decision = alone(store, queued.call).await;
            let _ = queued.answer.send(decision);
        });
        futures::future::join_all(again).await;
    }
}

/// One check through its algorithm's script (a check alone on its lane, or one a group call
/// did not run), following redirections.
async fn alone<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    call: CheckCall,
) -> Result<Decision, StoreError> {
    let params = &call.params;
    let algorithm = params.algorithm;
    let args = vec![
        call.now_ms.to_string(),
        params.limit.to_string(),
        params.window_ms.to_string(),
        params.burst.to_string(),
        call.cost.to_string(),
        u64::from(algorithm == Algorithm::LeakyBucket).to_string(),
        store.layout().ttl_grace_ms.to_string(),
    ];
    store.groups().observe(store.client().kind(), 1);
    let answer = store
        .eval(ScriptId::check(algorithm), call.keys, args)
        .await?;
    Ok(outcome(params.limit, &answer)?.decision)
}
