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
use sluice_core::{Decision, Params};
use tokio::sync::oneshot;

use super::runner::ScriptRunner;
use super::scripts::{ScriptId, algorithm_code};
use crate::{BatchObserver, StoreError};

/// Most checks in one group call.
pub(crate) const MAX_GROUP: usize = 64;
/// Most bytes of keys and arguments in one group call.
pub(crate) const MAX_GROUP_BYTES: usize = 16 * 1024;

/// Fields the group script answers per check: allowed, remaining, reset and the wait
/// (retry_after when denied, delay when allowed).
const GROUP_FIELDS: usize = 4;

/// The decision of one check of a group call, from its [`GROUP_FIELDS`] fields.
fn decision(limit: u64, fields: &[i64]) -> Result<Decision, StoreError> {
    let [allowed, remaining, reset, wait] = fields else {
        return Err(StoreError::Backend(format!(
            "group script answered {} fields for a check, expected {GROUP_FIELDS}",
            fields.len()
        )));
    };
    let n = |v: &i64| u64::try_from(*v).unwrap_or(0);
    let allowed = *allowed == 1;
    Ok(Decision {
        allowed,
        limit,
        remaining: n(remaining),
        reset_ms: n(reset),
        retry_after_ms: if allowed { 0 } else { n(wait) },
        delay_ms: if allowed { n(wait) } else { 0 },
    })
}

/// The integers of a group reply (one string of space-separated integers), checked to be
/// [`GROUP_FIELDS`] per check of a group of `checks`.
fn fields(reply: &[String], checks: usize) -> Result<Vec<i64>, StoreError> {
    let [text] = reply else {
        return Err(StoreError::Backend(format!(
            "group script answered {} values, expected one string",
            reply.len()
        )));
    };
    let fields = text
        .split(' ')
        .map(|field| {
            field.parse::<i64>().map_err(|_| {
                StoreError::Backend(format!("group script answered {field:?} for an integer"))
            })
        })
        .collect::<Result<Vec<i64>, _>>()?;
    if fields.len() != GROUP_FIELDS * checks {
        return Err(StoreError::Backend(format!(
            "group script answered {} fields for {checks} checks",
            fields.len()
        )));
    }
    Ok(fields)
}

/// A check on its way to Redis: its keys, its parameters and its time.
#[derive(Debug)]
pub(crate) struct Pending {
    pub keys: Vec<String>,
    pub params: Params,
    pub cost: u64,
    pub now_ms: u64,
}

impl Pending {
    /// Its part of the group script's ARGV: code, now, limit, window, burst, cost.
    fn args(&self) -> [String; 6] {
        let p = &self.params;
        [
            algorithm_code(p.algorithm).to_string(),
            self.now_ms.to_string(),
            p.limit.to_string(),
            p.window_ms.to_string(),
            p.burst.to_string(),
            self.cost.to_string(),
        ]
    }

    /// What it adds to a group call: its keys, and at most 20 digits per argument.
    fn bytes(&self) -> usize {
        self.keys.iter().map(String::len).sum::<usize>() + 6 * 20
    }
}

/// A check waiting for the call in flight on its slot.
#[derive(Debug)]
struct Queued {
    pending: Pending,
    answer: oneshot::Sender<Result<Decision, StoreError>>,
}

/// A [`ScriptRunner`] that groups checks: it keeps the queues of its slots.
pub(crate) trait Grouped: ScriptRunner {
    /// The checks queued behind calls in flight.
    fn groups(&self) -> &Groups;
}

/// The slots with a call in flight, each with the checks queued behind it.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    /// A slot is present while a call to it is in flight.
    lanes: Mutex<HashMap<u16, VecDeque<Queued>>>,
    observer: RwLock<Option<Arc<dyn BatchObserver>>>,
}

/// What [`Groups::join`] made of a check.
pub(crate) enum Joined {
    /// Nothing in flight on the slot: the caller sends its check now, holding the [`Lead`]
    /// until the call returns.
    Lead(Lead, Pending),
    /// Queued behind the call in flight: the answer comes on this channel.
    Queued(oneshot::Receiver<Result<Decision, StoreError>>),
}

/// The right to the one call in flight on a slot. Dropped (the call returned, or its caller
/// gave up), it sends what queued meanwhile, in a task of its own.
pub(crate) struct Lead {
    runner: Arc<dyn Grouped>,
    slot: u16,
}

impl Drop for Lead {
    fn drop(&mut self) {
        let groups = self.runner.groups();
        let mut lanes = groups.lanes.lock();
        if lanes.get(&self.slot).is_some_and(VecDeque::is_empty) {
            lanes.remove(&self.slot);
            return;
        }
        drop(lanes);
        let (runner, slot) = (Arc::clone(&self.runner), self.slot);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(drain(runner, slot));
        } else {
            // No runtime left (shutting down): nobody will wait for these answers.
            groups.lanes.lock().remove(&slot);
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

    /// Leads the slot of `pending` when it is free, else queues it.
    pub(crate) fn join(runner: &Arc<dyn Grouped>, slot: u16, pending: Pending) -> Joined {
        let mut lanes = runner.groups().lanes.lock();
        match lanes.get_mut(&slot) {
            None => {
                lanes.insert(slot, VecDeque::new());
                let lead = Lead {
                    runner: Arc::clone(runner),
                    slot,
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

/// Sends the checks queued on `slot`, a group per call, until none is left.
async fn drain(runner: Arc<dyn Grouped>, slot: u16) {
    loop {
        let group = {
            let mut lanes = runner.groups().lanes.lock();
            let Some(queue) = lanes.get_mut(&slot) else {
                return;
            };
            // A check whose caller gave up is not sent: nobody would read its answer.
            queue.retain(|q| !q.answer.is_closed());
            if queue.is_empty() {
                lanes.remove(&slot);
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
        send(&*runner, group).await;
    }
}

/// One `group` call for `group`, each check answered on its channel.
async fn send(runner: &dyn Grouped, mut group: Vec<Queued>) {
    let mut keys = Vec::with_capacity(group.len());
    let mut args = Vec::with_capacity(2 + 6 * group.len());
    args.push(group.len().to_string());
    args.push(runner.layout().ttl_grace_ms.to_string());
    for queued in &mut group {
        keys.append(&mut queued.pending.keys);
        args.extend(queued.pending.args());
    }
    runner.groups().observe(runner, group.len());
    let answer = runner.eval_text(ScriptId::Group, keys, args).await;
    let answer = answer.and_then(|reply| fields(&reply, group.len()));
    match answer {
        Ok(fields) => {
            for (queued, fields) in group.into_iter().zip(fields.chunks(GROUP_FIELDS)) {
                let limit = queued.pending.params.limit;
                let _ = queued.answer.send(decision(limit, fields));
            }
        }
        Err(e) => {
            for queued in group {
                let _ = queued.answer.send(Err(e.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_reply_is_four_integers_per_check() {
        let reply = vec!["1 9 1000 0 0 0 2000 1500".to_owned()];
        assert_eq!(
            fields(&reply, 2).ok(),
            Some(vec![1, 9, 1000, 0, 0, 0, 2000, 1500])
        );
        let allowed = decision(10, &[1, 9, 1000, 25]).ok();
        assert_eq!(
            allowed.map(|d| (d.delay_ms, d.retry_after_ms)),
            Some((25, 0))
        );
        let denied = decision(10, &[0, 0, 1000, 1500]).ok();
        assert_eq!(
            denied.map(|d| (d.delay_ms, d.retry_after_ms)),
            Some((0, 1500))
        );
    }

    #[test]
    fn a_malformed_group_reply_is_an_error() {
        for reply in [
            vec![],
            vec!["1 2 3 4".to_owned(), "5".to_owned()],
            vec!["1 2 3".to_owned()],
            vec!["1 2 x 4".to_owned()],
            vec!["".to_owned()],
            vec!["1  2 3 4".to_owned()],
        ] {
            assert!(fields(&reply, 1).is_err(), "{reply:?}");
        }
    }
}
