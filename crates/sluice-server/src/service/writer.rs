//! The one writer of the run-time settings: a task that owns the configuration's sources
//! and the settings stored in the backend (limit overrides and candidates). A reload (SIGHUP,
//! a changed file), the poll of the backend's settings version, and the re-read after an
//! admin change are messages to it, handled one at a time: each compiles once and publishes
//! one [`Snapshot`] through the limiter's one swap. Nothing else writes the settings, so no
//! compile can be swapped in after a newer one, and there is no lock to hold across a read of
//! the backend. An admin change is answered after the re-read it asked for has published the
//! snapshot with it, so its answer, and every check after it, sees the change.
//!
//! Every daemon polls every [`SYNC_EVERY`]: a change made on one daemon is in force on every
//! other within a second, and a daemon that was down or partitioned catches up on its next
//! poll (the version is durable: no message can be missed).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_config::{ConfigSource, RegionSettings};
use sluice_store::{OverrideStore, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::service::limiter::Limiter;
use crate::service::snapshot::Snapshot;

/// How often a daemon asks the backend whether the settings changed.
pub const SYNC_EVERY: Duration = Duration::from_millis(250);

/// What the writer is asked.
enum Message {
    /// Compile `source` with the stored settings and publish it.
    Reload(ConfigSource, oneshot::Sender<()>),
    /// Read the backend's settings if their version moved and publish what they compile to.
    Sync(oneshot::Sender<Result<(), StoreError>>),
    Stop,
}

/// The handle to the writer: cheap to clone, shared by every transport.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::UnboundedSender<Message>,
    /// The task, until it is started (the first message, or the daemon's start).
    idle: Arc<Mutex<Option<Task>>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

/// The writer's own state: only this task touches it.
struct Task {
    rx: mpsc::UnboundedReceiver<Message>,
    limiter: Arc<Limiter>,
    overrides: Arc<dyn OverrideStore>,
    /// `[region]` as started: a reload cannot change it.
    region: Arc<RegionSettings>,
}

impl Writer {
    /// The writer of `limiter`'s snapshots, the stored settings read from `overrides`. Not
    /// started: it runs from [`Writer::start`] or the first message (a Tokio runtime is
    /// needed then, not now).
    pub fn new(
        limiter: Arc<Limiter>,
        overrides: Arc<dyn OverrideStore>,
        region: Arc<RegionSettings>,
    ) -> Writer {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = Task {
            rx,
            limiter,
            overrides,
            region,
        };
        Writer {
            tx,
            idle: Arc::new(Mutex::new(Some(task))),
        }
    }

    /// Starts the task (and with it the poll) if it is not running yet.
    pub fn start(&self) {
        if let Some(task) = self.idle.lock().take() {
            tokio::spawn(task.run());
        }
    }

    /// Stops the task (the daemon's shutdown); later messages are answered by nothing.
    pub fn stop(&self) {
        let _ = self.tx.send(Message::Stop);
    }

    /// Applies the configuration `source` holds now, once published (see [`Task::reload`]).
    pub async fn reload(&self, source: &ConfigSource) {
        let (done, published) = oneshot::channel();
        if self.send(Message::Reload(source.clone(), done)) {
            let _ = published.await;
        }
    }

    /// Re-reads the backend's settings (after an admin change), answering once the snapshot
    /// with them is published.
    pub async fn sync(&self) -> Result<(), StoreError> {
        let (done, published) = oneshot::channel();
        if !self.send(Message::Sync(done)) {
            return Err(StoreError::Unavailable("the daemon is stopping".into()));
        }
        published
            .await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("the daemon is stopping".into())))
    }

    fn send(&self, message: Message) -> bool {
        self.start();
        self.tx.send(message).is_ok()
    }
}

impl Task {
    /// Handles messages one at a time, and polls every [`SYNC_EVERY`], until stopped.
    async fn run(mut self) {
        let mut ticks = tokio::time::interval(SYNC_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = self.rx.recv() => match message {
                    None | Some(Message::Stop) => return,
                    Some(Message::Reload(source, done)) => {
                        self.reload(&source);
                        let _ = done.send(());
                    }
                    Some(Message::Sync(done)) => {
                        let _ = done.send(self.sync().await);
                    }
                },
                _ = ticks.tick() => {
                    if let Err(err) = self.sync().await {
                        tracing::debug!(error = %err, "could not read the run-time settings");
                    }
                }
            }
        }
    }

    /// Compiles `source` with the stored settings in force and publishes the policies, the
    /// RLS rules and the forward-auth rules as one snapshot; a configuration that does not
    /// compile, or that changes `[region]` (read at start), keeps the running one. Counted in
    /// `rate_limit_config_reloads_total`.
    fn reload(&self, source: &ConfigSource) {
        let current = self.limiter.snapshot();
        let compiled = super::compiled::load(source)
            .map_err(|err| err.to_string())
            .and_then(|compiled| {
                let settings = compiled.settings;
                if settings.region != *self.region {
                    return Err("[region] changed: it is read at start, restart to apply it".into());
                }
                let (limits, policies) = current
                    .limits
                    .with_file(settings.policy_configs)
                    .map_err(|errors| {
                        errors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("\n")
                    })?;
                Ok(Snapshot {
                    policies,
                    rls: Arc::new(compiled.rls),
                    forward_auth: Arc::new(settings.forward_auth),
                    limits,
                })
            });
        let metrics = self.limiter.metrics();
        match compiled {
            Ok(snapshot) => {
                let count = snapshot.policies.len();
                self.limiter.publish(snapshot);
                metrics.reloaded(true);
                tracing::info!(policies = count, "config reloaded");
            }
            Err(why) => {
                metrics.reloaded(false);
                tracing::error!("config reload failed, keeping the running config:\n{why}");
            }
        }
    }

    /// Brings the snapshot up to the backend's settings when their version moved.
    async fn sync(&self) -> Result<(), StoreError> {
        let version = self.overrides.version().await?;
        let current = self.limiter.snapshot();
        if current.limits.version() == Some(version) {
            return Ok(());
        }
        let settings = self.overrides.settings().await?;
        let version = settings.version;
        let (limits, policies) = current.limits.adopt(settings);
        let policies = match policies {
            Some(policies) => {
                tracing::info!(version, "run-time limits and candidates applied");
                policies
            }
            // Only the version moved: the same policies, the version taken.
            None => current.policies.clone(),
        };
        self.limiter.publish(Snapshot {
            policies,
            rls: current.rls.clone(),
            forward_auth: current.forward_auth.clone(),
            limits,
        });
        Ok(())
    }
}
