//! Following the master across failovers, without a restart: one task asks the sentinels
//! again whenever there is a reason to, and swaps the connection the checks use when they
//! name another master.
//!
//! Reasons to ask, fastest first:
//! - an event from any sentinel (every sentinel is subscribed to, each by a task that
//!   subscribes again when its connection ends; see [`events`](super::events)):
//!   `+selected-slave` starts a failover: the old master is fenced (calls to it answer
//!   `Unavailable` at once, so it takes nothing the failover would lose) and the chosen
//!   replica is polled until it answers `ROLE` as a master, then used; `+switch-master` ends
//!   one; an abort lifts the fence;
//! - a call that met a `READONLY` answer (the master was demoted) or a lost connection (the
//!   runner rings [`Shared::ask`]);
//! - every [`REFRESH`], in case an event was missed while a subscription was down, or a call
//!   was cut by the store's timeout before it could say why (a hung master).
//!
//! Asking is cheap (one command to one sentinel) but never more often than every
//! [`MIN_GAP`], so a burst of failed calls asks once.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::events::{self, Event};
use super::locate::{Located, Locator};
use crate::redis::single::Single;

/// Between two lookups with no event and no failed call.
pub(crate) const REFRESH: Duration = Duration::from_secs(1);
/// Least time between two lookups.
const MIN_GAP: Duration = Duration::from_millis(50);
/// Before subscribing again to a sentinel whose subscription ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(250);
/// The longest a failover in progress fences the old master (a promotion takes milliseconds;
/// past this the sentinels' word decides again).
const FENCE_AT_MOST: Duration = Duration::from_secs(3);

/// A failover in progress: `to` is being promoted in place of `from` (`host:port` each).
#[derive(Debug, Clone)]
pub(crate) struct Failover {
    pub from: String,
    pub to: String,
    until: Instant,
}

/// The master in use, as the runner and the follower share it.
pub(crate) struct Shared {
    pub locator: Locator,
    /// The master's `host:port` and the connection to it; `None` until one was found.
    pub current: RwLock<Option<(String, Arc<Single>)>>,
    /// A failover seen begin and not yet seen end by every sentinel.
    failover: Mutex<Option<Failover>>,
    /// Why the last lookup found no master (shown by a call while there is none).
    pub last_failure: Mutex<Option<String>>,
    /// Rung for a lookup now.
    pub ask: Notify,
}

impl Shared {
    pub(crate) fn new(locator: Locator) -> Shared {
        Shared {
            locator,
            current: RwLock::new(None),
            failover: Mutex::new(None),
            last_failure: Mutex::new(None),
            ask: Notify::new(),
        }
    }

    /// The failover in progress, if any (one past its bound is forgotten).
    fn failover(&self) -> Option<Failover> {
        let mut failover = self.failover.lock();
        if failover.as_ref().is_some_and(|f| f.until <= Instant::now()) {
            *failover = None;
        }
        failover.clone()
    }

    /// The failover that fences `at` now, if any: calls to it must not be made.
    pub(crate) fn fenced(&self, at: &str) -> Option<Failover> {
        self.failover().filter(|f| f.from == at)
    }

    fn swap(&self, at: String, single: Single) {
        let before = self.current.write().replace((at.clone(), Arc::new(single)));
        *self.last_failure.lock() = None;
        let master = &self.locator.master;
        match before {
            Some((was, _)) => {
                tracing::info!(%master, %at, %was, "sentinel: the master moved, checks follow it");
            }
            None => tracing::info!(%master, %at, "sentinel: master found"),
        }
    }

    /// One lookup; the connection swapped when the sentinels name another master. A failed
    /// lookup keeps the connection there is (it may still be the master).
    async fn relocate(&self) {
        let current = self.current.read().as_ref().map(|(at, _)| at.clone());
        let failover = self.failover();
        if let Some(failover) = &failover
            && current.as_deref() == Some(failover.from.as_str())
        {
            // Fenced: the replica being promoted is used as soon as it is a master.
            if let Ok(single) = self.locator.connect(&failover.to).await {
                self.swap(failover.to.clone(), single);
            }
            return;
        }
        // On the promoted replica already, a sentinel still naming the old master has not
        // seen the failover end.
        let stale = failover.as_ref().map(|f| f.from.as_str());
        match self.locator.locate(current.as_deref(), stale).await {
            Ok(Located::Same) => {
                *self.last_failure.lock() = None;
                if failover.is_some_and(|f| current.as_deref() == Some(f.to.as_str())) {
                    *self.failover.lock() = None;
                }
            }
            Ok(Located::Moved { at, single }) => {
                *self.failover.lock() = None;
                self.swap(at, single);
            }
            Err(why) => *self.last_failure.lock() = Some(why),
        }
    }

    /// What a sentinel's event means to the follower.
    fn on(&self, event: Event) {
        match event {
            Event::Selected { from, to } => {
                if self
                    .current
                    .read()
                    .as_ref()
                    .is_some_and(|(at, _)| *at == from)
                {
                    let master = &self.locator.master;
                    tracing::info!(%master, %from, %to, "sentinel: failover began, the old master takes no more checks");
                }
                *self.failover.lock() = Some(Failover {
                    from,
                    to,
                    until: Instant::now() + FENCE_AT_MOST,
                });
            }
            Event::Aborted => *self.failover.lock() = None,
            Event::Switched => {}
        }
        self.ask.notify_one();
    }
}

/// The follower's tasks: the lookups, and one subscription per sentinel. Aborted on drop.
pub(crate) struct Follower {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Follower {
    /// Starts following on `runtime`: the first lookup at once.
    pub(crate) fn start(shared: &Arc<Shared>, runtime: &tokio::runtime::Handle) -> Follower {
        let mut tasks = Vec::with_capacity(1 + shared.locator.links.len());
        let lookups = Arc::clone(shared);
        tasks.push(runtime.spawn(async move {
            loop {
                lookups.relocate().await;
                tokio::time::sleep(MIN_GAP).await;
                // Soon again while no master is known (the daemon waits on it) or a failover
                // is in progress (its replica is polled until promoted).
                let next = if lookups.failover().is_some() {
                    Duration::ZERO
                } else if lookups.current.read().is_none() {
                    MIN_GAP * 3
                } else {
                    REFRESH
                };
                let _ = tokio::time::timeout(next, lookups.ask.notified()).await;
            }
        }));
        for index in 0..shared.locator.links.len() {
            let shared = Arc::clone(shared);
            tasks.push(runtime.spawn(async move {
                loop {
                    listen(&shared, index).await;
                    tokio::time::sleep(RESUBSCRIBE_AFTER).await;
                }
            }));
        }
        Follower { tasks }
    }
}

/// Subscribes to the [`events::CHANNELS`] of sentinel `index` and hands each event about this
/// master to [`Shared::on`]; returns when the subscription cannot be made or ends.
async fn listen(shared: &Shared, index: usize) {
    let Some(link) = shared.locator.links.get(index) else {
        return;
    };
    let limit = shared.locator.connect_timeout();
    let Ok(Ok(mut pubsub)) = tokio::time::timeout(limit, link.client.get_async_pubsub()).await
    else {
        return;
    };
    if !matches!(
        tokio::time::timeout(limit, pubsub.subscribe(&events::CHANNELS[..])).await,
        Ok(Ok(()))
    ) {
        return;
    }
    // An event may have gone by while this sentinel was not listened to.
    shared.ask.notify_one();
    let mut messages = pubsub.into_on_message();
    while let Some(message) = messages.next().await {
        let payload: String = message.get_payload().unwrap_or_default();
        if let Some(event) =
            events::parse(message.get_channel_name(), &payload, &shared.locator.master)
        {
            shared.on(event);
        }
    }
}
