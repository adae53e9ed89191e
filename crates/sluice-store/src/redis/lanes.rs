//! The queues of group commit: per lane with a call in flight, the checks waiting for it
//! ([`Groups`]), and what one queued check carries ([`CheckCall`]). Only the bookkeeping:
//! the calls that send the queues are in `group.rs`. Apart so the store can own its queues
//! without owning the calls, which need the store.
//!
//! Bounds: a group holds at most [`MAX_GROUP`] checks or [`MAX_GROUP_BYTES`] of keys and
//! arguments (the rest waits for the next call). Every queued check holds its in-flight
//! permit, so a queue never exceeds `max_in_flight`. A check whose caller gave up is dropped
//! from its queue before it is sent.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sluice_core::{Decision, Params};
use tokio::sync::oneshot;

use super::runner::Lane;
use super::scripts::algorithm_code;
use crate::{BatchObserver, StoreError, StoreKind};

/// Most checks in one group call.
pub(crate) const MAX_GROUP: usize = 64;
/// Most bytes of keys and arguments in one group call.
pub(crate) const MAX_GROUP_BYTES: usize = 16 * 1024;

/// Bytes of one check's parameters in a group call.
pub(crate) const PARAM_BYTES: usize = 6 * 8;

/// One check as a script call carries it: its keys, its parameters, its cost and its time.
#[derive(Debug)]
pub(crate) struct CheckCall {
    pub keys: Vec<String>,
    pub params: Params,
    pub cost: u64,
    pub now_ms: u64,
}

impl CheckCall {
    /// Its part of the group script's parameters: code, now, limit, window, burst, cost, as
    /// little-endian doubles (exact: every value is an integer below 2^53, as the scripts'
    /// Lua numbers require anyway). Redis parses no digits for them: one argument per group
    /// instead of six per check, each a `strtod` in Lua, was a fifth of Redis's work.
    pub(crate) fn put_params(&self, blob: &mut Vec<u8>) {
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

    /// Its (first) key: a check on a master lane has one.
    pub(crate) fn key(&self) -> Option<&str> {
        self.keys.first().map(String::as_str)
    }
}

/// The answer a queued check waits for.
pub(crate) type Answer = Result<Decision, StoreError>;

/// A check waiting for the call in flight on its lane.
#[derive(Debug)]
pub(crate) struct Queued {
    pub call: CheckCall,
    pub answer: oneshot::Sender<Answer>,
}

/// What [`Groups::join`] made of a check.
pub(crate) enum Joined {
    /// Nothing was in flight on the lane: it is the caller's now, to send its check and then
    /// [`release`](Groups::release) the lane.
    Lead(CheckCall),
    /// Queued behind the call in flight: the answer comes on this channel.
    Queued(oneshot::Receiver<Answer>),
}

/// The lanes with a call in flight, each with the checks queued behind it.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    /// A lane is present while a call on it is in flight.
    lanes: Mutex<HashMap<Lane, VecDeque<Queued>>>,
    observer: RwLock<Option<Arc<dyn BatchObserver>>>,
}

impl Groups {
    /// Sets who hears how many checks each script call carried.
    pub(crate) fn set_observer(&self, observer: Arc<dyn BatchObserver>) {
        *self.observer.write() = Some(observer);
    }

    /// Reports a script call of `checks` checks to a `backend`.
    pub(crate) fn observe(&self, backend: StoreKind, checks: usize) {
        if let Some(observer) = &*self.observer.read() {
            observer.batch(backend, checks);
        }
    }

    /// Reports checks a group call did not run, sent again alone.
    pub(crate) fn observe_sent_again(&self, backend: StoreKind, checks: usize) {
        if let Some(observer) = &*self.observer.read() {
            observer.sent_again(backend, checks);
        }
    }

    /// Leads `lane` when it is free, else queues `call` on it.
    pub(crate) fn join(&self, lane: Lane, call: CheckCall) -> Joined {
        let mut lanes = self.lanes.lock();
        match lanes.get_mut(&lane) {
            None => {
                lanes.insert(lane, VecDeque::new());
                Joined::Lead(call)
            }
            Some(queue) => {
                let (answer, rx) = oneshot::channel();
                queue.push_back(Queued { call, answer });
                Joined::Queued(rx)
            }
        }
    }

    /// The lead's call on `lane` returned (or its caller gave up): frees the lane and answers
    /// false when nothing queued meanwhile; true when checks wait, and the lane stays taken
    /// for the caller to send them ([`next_group`](Self::next_group)).
    pub(crate) fn release(&self, lane: Lane) -> bool {
        let mut lanes = self.lanes.lock();
        if lanes.get(&lane).is_some_and(VecDeque::is_empty) {
            lanes.remove(&lane);
            return false;
        }
        true
    }

    /// Frees `lane` whatever waits on it (no runtime left to send it: nobody will wait for
    /// these answers).
    pub(crate) fn abandon(&self, lane: Lane) {
        self.lanes.lock().remove(&lane);
    }

    /// The next group to send on `lane`, in order and within the bounds; `None` (and the lane
    /// freed) when none is left.
    pub(crate) fn next_group(&self, lane: Lane) -> Option<Vec<Queued>> {
        let mut lanes = self.lanes.lock();
        let queue = lanes.get_mut(&lane)?;
        // A check whose caller gave up is not sent: nobody would read its answer.
        queue.retain(|q| !q.answer.is_closed());
        if queue.is_empty() {
            lanes.remove(&lane);
            return None;
        }
        let mut group = Vec::new();
        let mut bytes = 0;
        while let Some(next) = queue.front() {
            let size = next.call.bytes();
            if !group.is_empty() && (group.len() == MAX_GROUP || bytes + size > MAX_GROUP_BYTES) {
                break;
            }
            bytes += size;
            group.extend(queue.pop_front());
        }
        Some(group)
    }
}
