//! Group commit of single checks: while a script call to a slot (a cluster slot, or the one
//! slot of a single server) is in flight, further checks bound for that slot queue; when the
//! call returns, the queued checks go as ONE EVALSHA of the `group` script, which decides
//! each of them on its own, in order, and answers every decision. There is no timer: a lone
//! check goes at once as its algorithm's own script, so grouping only ever happens when
//! checks would otherwise wait behind each other, and Redis runs one script per round trip
//! instead of one per check.
//!
//! Bounds: a group holds at most [`MAX_GROUP`] checks or [`MAX_GROUP_BYTES`] of keys and
//! arguments (the rest waits for the next call). Every queued check holds its in-flight
//! permit, so a queue never exceeds `max_in_flight`. Each check keeps its own timeout: a
//! caller that gives up is answered by its fail mode, and its check is dropped from the
//! queue if it was not sent yet; a group call that fails or times out fails each check in it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sluice_core::{Algorithm, Decision, Params};
use tokio::sync::oneshot;

use super::answers::{GroupAnswer, group_answers, outcome};
use super::runner::{Lane, ScriptRunner};
use super::scripts::{ScriptId, algorithm_code};
use crate::{BatchObserver, StoreError};

/// Most checks in one group call.
pub(crate) const MAX_GROUP: usize = 64;
/// Most bytes of keys and arguments in one group call.
pub(crate) const MAX_GROUP_BYTES: usize = 16 * 1024;

/// A check on its way to Redis: its keys, its parameters and its time.
#[derive(Debug)]
pub(crate) struct Pending {
    pub keys: Vec<String>,
    pub params: Params,
    pub cost: u64,
    pub now_ms: u64,
}

impl Pending {
    /// Its part of the group script's parameters: code, now, limit, window, burst, cost, as
    /// little-endian doubles (exact: every value is an integer below 2^53, as the scripts'
    /// Lua numbers require anyway). Redis parses no digits for them: one argument per group
    /// instead of six per check, each a `strtod` in Lua, was a fifth of Redis's work.
    fn put_params(&self, blob: &mut Vec<u8>) {
        let p = &self.params;
        for value in [
            algorithm_code(p.algorithm),
            self.now_ms,
            p.limit,
            p.window_ms,
            p.burst,
            self.cost,
        ] {
            // u64 → f64 rounds only above 2^53, where no limit, time or window lies.
            #[allow(clippy::cast_precision_loss)]
            blob.extend_from_slice(&(value as f64).to_le_bytes());
        }
    }

    /// What it adds to a group call: its key (twice on a master lane), its parameters.
    fn bytes(&self) -> usize {
        2 * self.keys.iter().map(String::len).sum::<usize>() + PARAM_BYTES
    }
}

/// Bytes of one check's parameters in a group call.
const PARAM_BYTES: usize = 6 * 8;

/// A check waiting for the call in flight on its lane.
#[derive(Debug)]
struct Queued {
    pending: Pending,
    answer: oneshot::Sender<Result<Decision, StoreError>>,
}

impl Queued {
    /// Its (first) key: a check on a master lane has one.
    fn key(&self) -> Option<&str> {
        self.pending.keys.first().map(String::as_str)
    }
}

/// A [`ScriptRunner`] that groups checks: it keeps the queues of its lanes.
pub(crate) trait Grouped: ScriptRunner {
    /// The checks queued behind calls in flight.
    fn groups(&self) -> &Groups;
}

/// The lanes with a call in flight, each with the checks queued behind it.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    /// A lane is present while a call on it is in flight.
    lanes: Mutex<HashMap<Lane, VecDeque<Queued>>>,
    observer: RwLock<Option<Arc<dyn BatchObserver>>>,
}

/// What [`Groups::join`] made of a check.
pub(crate) enum Joined {
    /// Nothing in flight on the lane: the caller sends its check now, holding the [`Lead`]
    /// until the call returns.
    Lead(Lead, Pending),
    /// Queued behind the call in flight: the answer comes on this channel.
    Queued(oneshot::Receiver<Result<Decision, StoreError>>),
}

/// The right to the one call in flight on a lane. Dropped (the call returned, or its caller
/// gave up), it sends what queued meanwhile, in a task of its own.
pub(crate) struct Lead {
    runner: Arc<dyn Grouped>,
    lane: Lane,
}

impl Drop for Lead {
    fn drop(&mut self) {
        let groups = self.runner.groups();
        let mut lanes = groups.lanes.lock();
        if lanes.get(&self.lane).is_some_and(VecDeque::is_empty) {
            lanes.remove(&self.lane);
            return;
        }
        drop(lanes);
        let (runner, lane) = (Arc::clone(&self.runner), self.lane);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(drain(runner, lane));
        } else {
            // No runtime left (shutting down): nobody will wait for these answers.
            groups.lanes.lock().remove(&lane);
        }
    }
}

impl Groups {
    /// Sets who hears how many checks each script call carried.
    pub(crate) fn set_observer(&self, observer: Arc<dyn BatchObserver>) {
        *self.observer.write() = Some(observer);
    }

    /// Reports a script call of `checks` checks.
    pub(crate) fn observe(&self, runner: &dyn ScriptRunner, checks: usize) {
        if let Some(observer) = &*self.observer.read() {
            observer.batch(runner.kind(), checks);
        }
    }

    /// Reports checks a group call did not run, sent again alone.
    pub(crate) fn observe_sent_again(&self, runner: &dyn ScriptRunner, checks: usize) {
        if let Some(observer) = &*self.observer.read() {
            observer.sent_again(runner.kind(), checks);
        }
    }

    /// Leads `lane` when it is free, else queues `pending` on it.
    pub(crate) fn join(runner: &Arc<dyn Grouped>, lane: Lane, pending: Pending) -> Joined {
        let mut lanes = runner.groups().lanes.lock();
        match lanes.get_mut(&lane) {
            None => {
                lanes.insert(lane, VecDeque::new());
                let lead = Lead {
                    runner: Arc::clone(runner),
                    lane,
                };
                Joined::Lead(lead, pending)
            }
            Some(queue) => {
                let (answer, rx) = oneshot::channel();
                queue.push_back(Queued { pending, answer });
                Joined::Queued(rx)
            }
        }
    }
}

/// Sends the checks queued on `lane`, a group per call, until none is left.
async fn drain(runner: Arc<dyn Grouped>, lane: Lane) {
    loop {
        let group = {
            let mut lanes = runner.groups().lanes.lock();
            let Some(queue) = lanes.get_mut(&lane) else {
                return;
            };
            // A check whose caller gave up is not sent: nobody would read its answer.
            queue.retain(|q| !q.answer.is_closed());
            if queue.is_empty() {
                lanes.remove(&lane);
                return;
            }
            let mut group = Vec::new();
            let mut bytes = 0;
            while let Some(next) = queue.front() {
                let size = next.pending.bytes();
                if !group.is_empty() && (group.len() == MAX_GROUP || bytes + size > MAX_GROUP_BYTES)
                {
                    break;
                }
                bytes += size;
                group.extend(queue.pop_front());
            }
            group
        };
        send(&*runner, lane, group).await;
    }
}

/// One `group` call for `group` on `lane`, each check answered on its channel; the checks
/// the call did not run (a master lane whose slots moved) go again each alone.
async fn send(runner: &dyn Grouped, lane: Lane, group: Vec<Queued>) {
    let master = matches!(lane, Lane::Master(_));
    let mut params = Vec::with_capacity(PARAM_BYTES * group.len());
    for queued in &group {
        queued.pending.put_params(&mut params);
    }
    // Borrowed from the checks, which keep them: a check the call did not run goes again.
    let keys: Vec<&str> = if master {
        // The first check's key only: it routes the call.
        group.first().and_then(Queued::key).into_iter().collect()
    } else {
        group
            .iter()
            .flat_map(|q| q.pending.keys.iter().map(String::as_str))
            .collect()
    };
    let (count, grace) = (
        group.len().to_string(),
        runner.layout().ttl_grace_ms.to_string(),
    );
    let lane_code: &[u8] = if master { b"1" } else { b"0" };
    let mut args: Vec<&[u8]> = vec![count.as_bytes(), grace.as_bytes(), lane_code, &params];
    if master {
        // Every check's key, the first one included.
        args.extend(group.iter().filter_map(Queued::key).map(str::as_bytes));
    }
    runner.groups().observe(runner, group.len());
    let answers = match runner.eval_group(lane, &keys, &args).await {
        Ok(Some(reply)) => group_answers(&reply, group.iter().map(|q| q.pending.params.limit)),
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
        runner.groups().observe_sent_again(runner, unrun.len());
        runner.lanes_moved(first.pending.now_ms);
        let again = unrun.into_iter().map(|queued| async move {
            let decision = alone(runner, queued.pending).await;
            let _ = queued.answer.send(decision);
        });
        futures::future::join_all(again).await;
    }
}

/// One check through its algorithm's script (a check alone on its lane, or one a group call
/// did not run), following redirections.
pub(crate) async fn alone(runner: &dyn Grouped, pending: Pending) -> Result<Decision, StoreError> {
    let params = &pending.params;
    let algorithm = params.algorithm;
    let args = vec![
        pending.now_ms.to_string(),
        params.limit.to_string(),
        params.window_ms.to_string(),
        params.burst.to_string(),
        pending.cost.to_string(),
        u64::from(algorithm == Algorithm::LeakyBucket).to_string(),
        runner.layout().ttl_grace_ms.to_string(),
    ];
    runner.groups().observe(runner, 1);
    let answer = runner
        .eval(ScriptId::check(algorithm), pending.keys, args)
        .await?;
    Ok(outcome(params.limit, &answer)?.decision)
}
