//! The queues of group commit: per lane with a call in flight, the checks waiting for it
//! ([`Groups`]), and what one queued check carries ([`CheckCall`]: its [`Entry`], and its
//! candidate's). Only the bookkeeping:
//! the calls that send the queues are in `group.rs`. Apart so the store can own its queues
//! without owning the calls, which need the store.
//!
//! Bounds: a group holds at most [`MAX_GROUP`] entries (checks, and the candidate limits
//! judged beside some of them) or [`MAX_GROUP_BYTES`] of keys and arguments (the rest waits
//! for the next call; a check and its candidate are one item of the queue, never split). Every queued check holds its in-flight
//! permit, so a queue never exceeds `max_in_flight`. A check whose caller gave up is dropped
//! from its queue before it is sent.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sluice_core::{Mode, Params};
use tokio::sync::oneshot;

use super::runner::Lane;
use super::scripts::Wire;
use crate::error::StoreError;
use crate::store::{BatchObserver, Decided, GroupCommit, StoreKind};

/// Most states decided in one group call: checks, and the candidates beside some of them.
pub(crate) const MAX_GROUP: usize = 64;
/// Most bytes of keys and arguments in one group call.
pub(crate) const MAX_GROUP_BYTES: usize = 16 * 1024;

/// Bytes of one entry's parameters in a group call.
pub(crate) const PARAM_BYTES: usize = 7 * 8;

/// One state a script call decides: its keys, its parameters and the cost asked of it (a
/// check's own, or a candidate limit's judging of that check).
#[derive(Debug)]
pub(crate) struct Entry {
    pub keys: Vec<String>,
    pub params: Params,
    pub cost: u64,
    pub mode: Mode,
}

impl Entry {
    /// Its part of the group script's parameters: code, now, limit, window, burst, cost, mode, as
    /// little-endian doubles (exact: every value is an integer below 2^53, as the scripts'
    /// Lua numbers require anyway). Redis parses no digits for them: one argument per group
    /// instead of six per check, each a `strtod` in Lua, was a fifth of Redis's work.
    fn put_params(&self, now_ms: u64, blob: &mut Vec<u8>) {
        let wire = Wire::of(&self.params, now_ms);
        // u64 → f64 rounds only above 2^53, where no limit, time, window or origin lies.
        #[allow(clippy::cast_precision_loss)]
        for value in [
            wire.code as f64,
            now_ms as f64,
            wire.limit as f64,
            wire.window_ms as f64,
            wire.burst as f64,
            self.cost as f64,
            f64::from(self.mode.code()),
        ] {
            blob.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// Its (first) key: an entry on a master lane has one.
    pub(crate) fn key(&self) -> Option<&str> {
        self.keys.first().map(String::as_str)
    }
}

/// One check as a script call carries it: the check's entry, the candidate limit judged
/// beside it (in the same call, never apart: a group takes or leaves them together), and
/// the time both are decided at.
#[derive(Debug)]
pub(crate) struct CheckCall {
    pub check: Entry,
    pub candidate: Option<Entry>,
    pub now_ms: u64,
}

impl CheckCall {
    /// Its entries in call order: the check, then its candidate.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        std::iter::once(&self.check).chain(&self.candidate)
    }

    /// How many states it decides (1, or 2 with a candidate).
    pub(crate) fn width(&self) -> usize {
        1 + usize::from(self.candidate.is_some())
    }

    /// Appends every entry's part of the group script's parameters.
    pub(crate) fn put_params(&self, blob: &mut Vec<u8>) {
        for entry in self.entries() {
            entry.put_params(self.now_ms, blob);
        }
    }

    /// What it adds to a group call: its keys (twice on a master lane), its parameters.
    fn bytes(&self) -> usize {
        self.entries()
            .map(|e| 2 * e.keys.iter().map(String::len).sum::<usize>() + PARAM_BYTES)
            .sum()
    }

    /// The check's (first) key, which routes its call.
    pub(crate) fn key(&self) -> Option<&str> {
        self.check.key()
    }

    /// The same check without its candidate (to decide again what a call did not run).
    pub(crate) fn check_only(self) -> CheckCall {
        CheckCall {
            candidate: None,
            ..self
        }
    }

    /// Its candidate as a call of its own, if it has one.
    pub(crate) fn candidate_only(self) -> Option<CheckCall> {
        Some(CheckCall {
            check: self.candidate?,
            candidate: None,
            now_ms: self.now_ms,
        })
    }
}

/// The answer a queued check waits for.
pub(crate) type Answer = Result<Decided, StoreError>;

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
    /// Hashed by ahash: a lane is looked up twice per check (SipHash, the default, cost ~200
    /// instructions a check).
    lanes: Mutex<HashMap<Lane, VecDeque<Queued>, ahash::RandomState>>,
    observer: RwLock<Option<Arc<dyn BatchObserver>>>,
}

impl GroupCommit for Groups {
    fn set_observer(&self, observer: Arc<dyn BatchObserver>) {
        *self.observer.write() = Some(observer);
    }
}

impl Groups {
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
        let (mut entries, mut bytes) = (0, 0);
        while let Some(next) = queue.front() {
            // A check and its candidate count together: they go in one call or wait together.
            let (width, size) = (next.call.width(), next.call.bytes());
            if !group.is_empty() && (entries + width > MAX_GROUP || bytes + size > MAX_GROUP_BYTES)
            {
                break;
            }
            entries += width;
            bytes += size;
            group.extend(queue.pop_front());
        }
        Some(group)
    }
}
