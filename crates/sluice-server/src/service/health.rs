//! Backend health: whether the recent checks got answers, in one place.
//!
//! [`Watched`] wraps a Redis or Cluster store and sees the outcome of every check it runs.
//! From that it
//! - logs outages, one line per transition: WARN when the backend starts failing (after
//!   [`DOWN_AFTER`] failed checks in a row; the address redacted, the reason), INFO when it
//!   answers again (how long it was down);
//! - answers `/readyz` for the checks, not only for PING: while the backend is down and its
//!   last failure is recent ([`RECENT`]), `ping` fails with the reason, so a Redis that
//!   answers PING but refuses every write (maxmemory with `noeviction`) is not ready;
//! - rebuilds the client from its settings when every check failed for [`REBUILD_AFTER`]
//!   (at least [`REBUILD_MIN_CALLS`] of them), whatever the cause, so no Redis event ever
//!   needs a daemon restart. At most one rebuild per [`REBUILD_AFTER`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use parking_lot::Mutex;
use sluice_store::{
    BatchObserver, Capabilities, Check, Decided, GroupCommit, OverrideStore, SettingKey,
    SettingKind, Store, StoreError, StoreExt, StoreKind, StoredSetting, TlsFiles, Unspent,
};

use crate::service::clients::WithOverrides;
use sluice_config::BackendSettings;

/// Failed checks in a row before the backend counts as down (one timeout is no outage).
pub const DOWN_AFTER: u64 = 3;
/// How long every check must have failed before the client is rebuilt.
pub const REBUILD_AFTER: Duration = Duration::from_secs(5);
/// And how many checks at least.
pub const REBUILD_MIN_CALLS: u64 = 10;
/// A down backend without checks since this long is judged by PING again (an idle daemon
/// taken out of rotation must be able to come back).
pub const RECENT: Duration = Duration::from_secs(10);

/// Outcome bookkeeping of one backend.
#[derive(Debug)]
struct Tracker {
    /// Failed checks in a row, and since when.
    failed: u64,
    failing_since: Option<Instant>,
    last_failure: Option<Instant>,
    last_error: String,
    /// Announced as down (the WARN line was written).
    down: bool,
    /// Start of the span the watchdog measures (reset at each rebuild).
    rebuild_clock: Option<Instant>,
    rebuild_calls: u64,
}

/// What one outcome asks of the caller.
#[derive(Debug, PartialEq, Eq)]
enum Transition {
    None,
    Down,
    Up(Duration),
    Rebuild,
}

impl Tracker {
    fn new() -> Tracker {
        Tracker {
            failed: 0,
            failing_since: None,
            last_failure: None,
            last_error: String::new(),
            down: false,
            rebuild_clock: None,
            rebuild_calls: 0,
        }
    }

    fn success(&mut self) -> Transition {
        let was = self.failing_since.take();
        self.failed = 0;
        self.rebuild_clock = None;
        self.rebuild_calls = 0;
        if std::mem::take(&mut self.down) {
            Transition::Up(was.map_or(Duration::ZERO, |since| since.elapsed()))
        } else {
            Transition::None
        }
    }

    fn failure(&mut self, error: &StoreError, now: Instant) -> Transition {
        self.failed += 1;
        self.rebuild_calls += 1;
        self.failing_since.get_or_insert(now);
        self.last_failure = Some(now);
        let clock = *self.rebuild_clock.get_or_insert(now);
        self.last_error = error.to_string();
        if !self.down && self.failed >= DOWN_AFTER {
            self.down = true;
            return Transition::Down;
        }
        if now.duration_since(clock) >= REBUILD_AFTER && self.rebuild_calls >= REBUILD_MIN_CALLS {
            self.rebuild_clock = Some(now);
            self.rebuild_calls = 0;
            return Transition::Rebuild;
        }
        Transition::None
    }

    /// Why the backend is not ready, if its recent checks failed.
    fn not_ready(&self, now: Instant) -> Option<String> {
        let last = self.last_failure?;
        (self.down && now.duration_since(last) < RECENT).then(|| {
            format!(
                "the last {} checks failed: {}",
                self.failed, self.last_error
            )
        })
    }
}

/// A Redis or Cluster store whose health is tracked and whose client is rebuilt when it
/// fails every call for too long. It is also the keeper of the overrides on that backend, so
/// a rebuild gives the admin API and the overrides poll the new client too.
pub struct Watched {
    current: ArcSwap<WithOverrides>,
    /// Given to every client built, the rebuilt ones included.
    observer: Mutex<Option<Arc<dyn BatchObserver>>>,
    settings: BackendSettings,
    /// For logs: the address, credentials redacted.
    address: String,
    kind: StoreKind,
    tracker: Mutex<Tracker>,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("backend", &self.address)
            .finish_non_exhaustive()
    }
}

impl Watched {
    /// Watches `client` (its store and its keeper of the overrides), built from `settings`
    /// (and rebuilt from them).
    pub fn new(client: WithOverrides, settings: BackendSettings) -> Watched {
        debug_assert!(
            client.store.capabilities().keys.is_none(),
            "a watched store is a Redis client, with no key table to pass on"
        );
        Watched {
            kind: client.store.kind(),
            current: ArcSwap::from_pointee(client),
            observer: Mutex::new(None),
            address: settings.address(),
            settings,
            tracker: Mutex::new(Tracker::new()),
        }
    }

    fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.current.load().store)
    }

    fn overrides(&self) -> Arc<dyn OverrideStore> {
        Arc::clone(&self.current.load().overrides)
    }

    /// Records one check's outcome and acts on the transition it makes.
    fn record<T>(&self, result: &Result<T, StoreError>) {
        let transition = match result {
            Ok(_) => self.tracker.lock().success(),
            Err(err) if err.is_backend_failure() => {
                self.tracker.lock().failure(err, Instant::now())
            }
            Err(_) => Transition::None,
        };
        match transition {
            Transition::None => {}
            Transition::Down => {
                let reason = result.as_ref().err().map(ToString::to_string);
                tracing::warn!(
                    backend = %self.kind,
                    address = %self.address,
                    reason = reason.as_deref().unwrap_or(""),
                    "backend failing: {DOWN_AFTER} checks in a row failed"
                );
            }
            Transition::Up(down_for) => {
                tracing::info!(
                    backend = %self.kind,
                    address = %self.address,
                    down_ms = u64::try_from(down_for.as_millis()).unwrap_or(u64::MAX),
                    "backend answers again after {down_for:.1?}"
                );
            }
            Transition::Rebuild => self.rebuild(),
        }
    }

    /// A new client from the settings in place of the current one; calls in flight finish
    /// on the old one, which closes once the last of them is done.
    fn rebuild(&self) {
        self.rebuild_because(&format!("every check failed for {REBUILD_AFTER:?}"));
    }

    fn rebuild_because(&self, why: &str) {
        match crate::service::clients::with_overrides(&self.settings) {
            Ok(client) => {
                if let Some(observer) = &*self.observer.lock() {
                    client.store.set_batch_observer(Arc::clone(observer));
                }
                self.current.store(Arc::new(client));
                tracing::warn!(
                    backend = %self.kind,
                    address = %self.address,
                    "backend client rebuilt: {why}"
                );
            }
            Err(err) => tracing::error!(
                backend = %self.kind,
                address = %self.address,
                "rebuilding the backend client failed: {err}"
            ),
        }
    }
}

/// Records a check's outcome also when the caller stops waiting (its timeout drops the
/// call): a call that never finished counts as a timeout.
struct UnfinishedCall<'a> {
    watched: &'a Watched,
    done: bool,
}

impl Drop for UnfinishedCall<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.watched.record::<()>(&Err(StoreError::Timeout));
        }
    }
}

#[async_trait]
impl Store for Watched {
    fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The current client's bounds, and its group commit through this watch (so a rebuilt
    /// client gets the observer too). A watched store is a Redis client: it keeps no key table.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            bounds_its_calls: self.current.load().store.capabilities().bounds_its_calls,
            keys: None,
            groups: Some(self),
            tls: Some(self),
        }
    }

    async fn decide(&self, checks: &[Check<'_>], now_ms: u64) -> Result<Vec<Decided>, StoreError> {
        let mut pending = UnfinishedCall {
            watched: self,
            done: false,
        };
        let result = self.store().decide(checks, now_ms).await;
        pending.done = true;
        self.record(&result);
        result
    }

    /// A Redis client never answers at once.
    fn decide_now(&self, _: &Check<'_>, _: u64) -> Option<Result<Decided, StoreError>> {
        None
    }

    /// Ready means checks get answers: not while the recent ones failed, then PING.
    async fn ping(&self) -> Result<(), StoreError> {
        if let Some(why) = self.tracker.lock().not_ready(Instant::now()) {
            return Err(StoreError::Unavailable(why));
        }
        self.store().ping().await
    }

    /// Untracked, as the overrides: a lease returned says nothing about checks answered.
    async fn give_back(&self, unspent: &Unspent<'_>, now_ms: u64) -> Result<(), StoreError> {
        self.store().give_back(unspent, now_ms).await
    }
}

impl GroupCommit for Watched {
    fn set_observer(&self, observer: Arc<dyn BatchObserver>) {
        *self.observer.lock() = Some(Arc::clone(&observer));
        self.store().set_batch_observer(observer);
    }
}

impl TlsFiles for Watched {
    /// A new client reads the TLS files again (the `redis` client keeps what it read).
    fn reload_tls(&self) {
        if self.settings.tls().is_some() {
            self.rebuild_because("its TLS files are read again (SIGHUP)");
        }
    }
}

/// The overrides go to the current client, untracked: an admin call or the version poll says
/// nothing about whether checks are answered.
#[async_trait]
impl OverrideStore for Watched {
    async fn put_setting(&self, setting: &StoredSetting) -> Result<(), StoreError> {
        self.overrides().put_setting(setting).await
    }

    async fn delete_setting(&self, key: SettingKey<'_>) -> Result<bool, StoreError> {
        self.overrides().delete_setting(key).await
    }

    async fn list_settings(&self, kind: SettingKind) -> Result<Vec<StoredSetting>, StoreError> {
        self.overrides().list_settings(kind).await
    }

    async fn version(&self) -> Result<u64, StoreError> {
        self.overrides().version().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_transition_and_a_bounded_rebuild() {
        let mut t = Tracker::new();
        let start = Instant::now();
        let err = StoreError::Timeout;
        assert_eq!(t.failure(&err, start), Transition::None);
        assert_eq!(t.failure(&err, start), Transition::None);
        assert_eq!(t.failure(&err, start), Transition::Down);
        assert!(t.not_ready(start).is_some());
        // Failing on: no more lines, and no rebuild before REBUILD_AFTER.
        for _ in 0..20 {
            assert_eq!(t.failure(&err, start), Transition::None);
        }
        let later = start + REBUILD_AFTER;
        assert_eq!(t.failure(&err, later), Transition::Rebuild);
        // The next rebuild waits REBUILD_AFTER and REBUILD_MIN_CALLS again.
        assert_eq!(t.failure(&err, later + REBUILD_AFTER), Transition::None);
        // Idle long enough: judged by PING again.
        assert!(t.not_ready(later + RECENT + REBUILD_AFTER).is_none());
        assert!(matches!(t.success(), Transition::Up(_)));
        assert_eq!(t.success(), Transition::None);
        assert!(t.not_ready(later).is_none());
    }

    #[test]
    fn a_blip_is_no_outage() {
        let mut t = Tracker::new();
        let now = Instant::now();
        assert_eq!(t.failure(&StoreError::Timeout, now), Transition::None);
        assert_eq!(t.success(), Transition::None);
        assert!(t.not_ready(now).is_none());
    }
}
