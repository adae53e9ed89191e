//! Following the master across failovers, without a restart: one task asks the sentinels
//! again whenever there is a reason to, and swaps the connection the checks use when they
//! name another master.
//!
//! Reasons to ask, fastest first:
//! - a `+switch-master` event for this master, published by any sentinel (every sentinel is
//!   subscribed to, each by a task that subscribes again when its connection ends);
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

use super::locate::{Located, Locator};
use crate::redis::single::Single;

/// Between two lookups with no event and no failed call.
pub(crate) const REFRESH: Duration = Duration::from_secs(1);
/// Least time between two lookups.
const MIN_GAP: Duration = Duration::from_millis(50);
/// Before subscribing again to a sentinel whose subscription ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(250);

/// The master in use, as the runner and the follower share it.
pub(crate) struct Shared {
    pub locator: Locator,
    /// The master's `host:port` and the connection to it; `None` until one was found.
    pub current: RwLock<Option<(String, Arc<Single>)>>,
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
            last_failure: Mutex::new(None),
            ask: Notify::new(),
        }
    }

    /// One lookup; the connection swapped when the sentinels name another master. A failed
    /// lookup keeps the connection there is (it may still be the master).
    async fn relocate(&self) {
        let current = self.current.read().as_ref().map(|(at, _)| at.clone());
        match self.locator.locate(current.as_deref()).await {
            Ok(Located::Same) => *self.last_failure.lock() = None,
            Ok(Located::Moved { at, single }) => {
                *self.current.write() = Some((at, Arc::new(single)));
                *self.last_failure.lock() = None;
            }
            Err(why) => *self.last_failure.lock() = Some(why),
        }
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
                // A lookup with no current master is tried again soon: the daemon waits on it.
                let next = if lookups.current.read().is_some() {
                    REFRESH
                } else {
                    MIN_GAP * 4
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

/// Subscribes to `+switch-master` on sentinel `index` and rings [`Shared::ask`] for each
/// event about this master; returns when the subscription cannot be made or ends.
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
        tokio::time::timeout(limit, pubsub.subscribe("+switch-master")).await,
        Ok(Ok(()))
    ) {
        return;
    }
    // An event may have gone by while this sentinel was not listened to.
    shared.ask.notify_one();
    let mut events = pubsub.into_on_message();
    while let Some(event) = events.next().await {
        // `<master name> <old ip> <old port> <new ip> <new port>`
        let payload: String = event.get_payload().unwrap_or_default();
        if payload.split(' ').next() == Some(shared.locator.master.as_str()) {
            shared.ask.notify_one();
        }
    }
}
