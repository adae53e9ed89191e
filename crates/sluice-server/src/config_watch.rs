//! Notices when the config file changes on disk, so a running daemon picks up an edit without
//! a signal.
//!
//! In a Kubernetes pod nobody can send SIGHUP by hand, and a ConfigMap reaches the pod as a
//! mounted file that kubelet replaces: it writes the new content into a fresh timestamped
//! directory beside the old one and renames a `..data` symlink over the old link, so
//! `sluice.toml` (itself a link to `..data/sluice.toml`) keeps its path while everything behind
//! it changes. A watch on the file would follow the old inode and never fire again; this module
//! watches the file's *directory*, waits until it has been quiet for a short while (kubelet, an
//! editor and `cp` all write in several steps), and reports a change only when the bytes the
//! path now leads to differ from the last ones it saw, so a `touch` or a change to another file
//! of the directory reloads nothing.
//!
//! What a change leads to is the caller's: `sluiced` runs the very reload SIGHUP runs (the same
//! validation, the same metric, the running config kept on error). The same watch, over a set
//! of files, notices a rotated TLS certificate, key or CA bundle ([`ConfigWatch::files`]):
//! cert-manager and kubelet replace Secret mounts the way they replace ConfigMaps. A path of
//! the set may be a directory (envoyproxy/ratelimit's YAML directory, `rls.envoy_config`): it
//! is watched itself, and its content is its YAML files.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use sluice_config::{ConfigSource, envoy_yaml};

/// How long the directory must stay quiet before the file is read: long enough to cover the
/// steps of one kubelet update or editor save, short against kubelet's own sync period (about a
/// minute), so the delay an operator sees is kubelet's.
pub const DEBOUNCE: Duration = Duration::from_millis(300);

/// Why the watch could not start (the daemon runs on without it; SIGHUP still reloads).
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {dir} for changes: {source}")]
pub struct WatchError {
    dir: String,
    #[source]
    source: notify::Error,
}

/// A watch of one config file (or of a set of files). Without a file (built-in config) or when the watch could not
/// start, [`changed`](ConfigWatch::changed) never completes.
#[derive(Debug)]
pub struct ConfigWatch {
    changes: Option<mpsc::Receiver<()>>,
    /// The file as last seen or loaded, shared with the debounce task.
    seen: Seen,
}

/// The fingerprint of the file's content as last seen (by the watch) or loaded (by a reload
/// that came from elsewhere: SIGHUP), `None` when it could not be read.
#[derive(Debug, Clone, Default)]
struct Seen {
    paths: Vec<PathBuf>,
    /// What the change is logged as ("config file", "TLS certificate files").
    what: &'static str,
    fingerprint: Arc<Mutex<Option<u64>>>,
}

impl ConfigWatch {
    /// Watches the file of `source` (nothing for the built-in or an in-memory config). A watch
    /// that cannot start is logged as a warning: reloading on SIGHUP is unaffected.
    /// Must be called inside a tokio runtime.
    pub fn for_source(source: &ConfigSource) -> ConfigWatch {
        let ConfigSource::File(path) = source else {
            return ConfigWatch::inert();
        };
        match ConfigWatch::start(path, DEBOUNCE) {
            Ok(watch) => watch,
            Err(err) => {
                tracing::warn!("{err}; the file is reloaded on SIGHUP only");
                ConfigWatch::inert()
            }
        }
    }

    fn inert() -> ConfigWatch {
        ConfigWatch {
            changes: None,
            seen: Seen::default(),
        }
    }

    /// Watches `path`'s directory; a change is reported once the directory has been quiet for
    /// `debounce` and the file's content differs from the last seen. Must be called inside a
    /// tokio runtime: the debounce runs as a task, which ends when this value is dropped.
    pub fn start(path: &Path, debounce: Duration) -> Result<ConfigWatch, WatchError> {
        ConfigWatch::start_files(&[path.to_path_buf()], "config file", debounce)
    }

    /// Watches the directories of `paths` (TLS files: a certificate, its key, a CA bundle);
    /// a change is reported once they have been quiet for [`DEBOUNCE`] and the content of any
    /// file differs from the last seen. A watch that cannot start is logged as a warning.
    /// Must be called inside a tokio runtime.
    pub fn files(paths: &[PathBuf], what: &'static str) -> ConfigWatch {
        match ConfigWatch::start_files(paths, what, DEBOUNCE) {
            Ok(watch) => watch,
            Err(err) => {
                tracing::warn!("{err}; the {what} are read again on SIGHUP only");
                ConfigWatch::inert()
            }
        }
    }

    fn start_files(
        paths: &[PathBuf],
        what: &'static str,
        debounce: Duration,
    ) -> Result<ConfigWatch, WatchError> {
        let mut dirs: Vec<PathBuf> = paths
            .iter()
            .map(|path| match path.parent() {
                _ if path.is_dir() => path.clone(),
                Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
                _ => PathBuf::from("."),
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        // One slot: an event that finds it full is covered by the one already waiting, so a
        // burst of events costs nothing and the queue is bounded.
        let (events_tx, events) = mpsc::channel::<()>(1);
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            match event {
                // Reading the file (ours included, on reload) is no change.
                Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
                Ok(_) => {
                    let _ = events_tx.try_send(());
                }
                Err(err) => tracing::warn!("config watch: {err}"),
            }
        })
        .map_err(|source| WatchError {
            dir: dirs
                .iter()
                .map(|dir| dir.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            source,
        })?;
        for dir in &dirs {
            watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(|source| WatchError {
                    dir: dir.display().to_string(),
                    source,
                })?;
        }
        let (changes_tx, changes) = mpsc::channel::<()>(1);
        let seen = Seen {
            paths: paths.to_vec(),
            what,
            fingerprint: Arc::new(Mutex::new(fingerprint(paths))),
        };
        tokio::spawn(debounced(
            seen.clone(),
            watcher,
            events,
            changes_tx,
            debounce,
        ));
        Ok(ConfigWatch {
            changes: Some(changes),
            seen,
        })
    }

    /// The file was just reloaded by other means (SIGHUP): its content now counts as seen, so
    /// the edit that preceded the signal does not reload a second time once the watch notices
    /// it. (An edit landing between that reload's read and this one is then missed until the
    /// next change or signal: a window of microseconds.)
    pub fn reloaded(&self) {
        if self.changes.is_some() {
            *self.seen.fingerprint.lock() = fingerprint(&self.seen.paths);
        }
    }

    /// Completes when the file has changed since the last time it did (or since the start).
    /// Cancel-safe: a change not yet taken stays queued.
    pub async fn changed(&mut self) {
        match &mut self.changes {
            Some(changes) => {
                if changes.recv().await.is_none() {
                    // The watch task is gone; behave as if there were no watch.
                    self.changes = None;
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}

/// Turns bursts of directory events into one change each, once the directory is quiet and the
/// file's content differs from `seen`. Holds the watcher, so the watch lives as long as this.
async fn debounced(
    seen: Seen,
    _watcher: RecommendedWatcher,
    mut events: mpsc::Receiver<()>,
    changes: mpsc::Sender<()>,
    debounce: Duration,
) {
    let paths = seen.paths.clone();
    while events.recv().await.is_some() {
        loop {
            match tokio::time::timeout(debounce, events.recv()).await {
                Ok(Some(())) => continue,
                Ok(None) => return,
                Err(_quiet) => break,
            }
        }
        let now = {
            let paths = paths.clone();
            tokio::task::spawn_blocking(move || fingerprint(&paths))
                .await
                .unwrap_or(None)
        };
        {
            let mut last = seen.fingerprint.lock();
            if *last == now {
                continue;
            }
            *last = now;
        }
        // A file that cannot be read is reported too: the reload then says why, and keeps the
        // running config.
        let files: Vec<_> = paths.iter().map(|p| p.display().to_string()).collect();
        tracing::info!(files = %files.join(" "), "{} changed: reloading", seen.what);
        if changes.send(()).await.is_err() {
            return;
        }
    }
}

/// A hash of the bytes `paths` lead to now (following symlinks), `None` when one is unreadable.
fn fingerprint(paths: &[PathBuf]) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    for path in paths {
        if path.is_dir() {
            // A directory: the names and bytes of the YAML files the config load reads.
            for file in envoy_yaml::yaml_files(path).ok()? {
                file.hash(&mut hasher);
                std::fs::read(&file).ok()?.hash(&mut hasher);
            }
            continue;
        }
        std::fs::read(path).ok()?.hash(&mut hasher);
    }
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` as an editor does: a temp file renamed over the path.
    fn replace(path: &Path, text: &str) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    /// Longer than the tests' debounce several times over: it only separates bursts, and a
    /// slow machine makes the test weaker, never wrong.
    const APART: Duration = Duration::from_millis(600);

    /// A directory holding `sluice.toml` with `text`, and a watch of that file.
    fn watched(text: &str) -> (tempfile::TempDir, PathBuf, ConfigWatch) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.toml");
        std::fs::write(&path, text).unwrap();
        let watch = ConfigWatch::start(&path, Duration::from_millis(100)).unwrap();
        (dir, path, watch)
    }

    /// Fails with `why` when `watch` has a change still to report.
    fn assert_no_more_changes(watch: &mut ConfigWatch, why: &str) {
        let Some(changes) = &mut watch.changes else {
            panic!("the watch stopped");
        };
        assert!(changes.try_recv().is_err(), "{why}");
    }

    #[tokio::test]
    async fn a_burst_of_writes_is_one_change_and_the_same_bytes_none() {
        let (dir, path, mut watch) = watched("a");

        // The same bytes again, and another file of the directory: no change.
        replace(&path, "a");
        std::fs::write(dir.path().join("other"), "x").unwrap();
        tokio::time::sleep(APART).await;
        // A burst of edits: exactly one change.
        for text in ["b", "c", "d"] {
            replace(&path, text);
        }
        watch.changed().await;
        tokio::time::sleep(APART).await;
        assert_no_more_changes(&mut watch, "more than one change was reported");

        // And the watch goes on.
        replace(&path, "e");
        watch.changed().await;
    }

    #[tokio::test]
    async fn an_edit_reloaded_by_a_signal_is_not_reported_again() {
        let (_dir, path, mut watch) = watched("a");

        replace(&path, "b");
        watch.reloaded();
        tokio::time::sleep(APART).await;
        replace(&path, "c");
        watch.changed().await;
        tokio::time::sleep(APART).await;
        assert_no_more_changes(&mut watch, "the reloaded edit was reported");
    }

    #[tokio::test]
    async fn no_file_source_never_changes() {
        let mut watch = ConfigWatch::for_source(&ConfigSource::Builtin);
        assert!(watch.changes.is_none());
        tokio::select! {
            () = watch.changed() => panic!("a built-in config changed"),
            () = tokio::task::yield_now() => {}
        }
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let _guard = runtime.enter();
        let err =
            ConfigWatch::start(Path::new("/nonexistent-sluice/sluice.toml"), DEBOUNCE).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-sluice"), "{err}");
    }
}
