//! Sockets and lifecycle: binding the Unix socket safely, serving the one router on every
//! listener, housekeeping the store, and a graceful stop that removes the socket file.

use std::future::Future;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;

use crate::App;
use crate::http;
use crate::overrides;

/// How often the store forgets expired keys.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(1);

/// A bound Unix socket, and what identifies the file as ours when it is time to remove it.
#[derive(Debug)]
pub struct BoundUnix {
    pub listener: UnixListener,
    pub path: PathBuf,
    inode: u64,
}

/// Every listener the daemon serves, bound by the caller.
#[derive(Debug, Default)]
pub struct Listeners {
    pub unix: Option<BoundUnix>,
    pub http: Option<TcpListener>,
    /// Serves `/metrics` only.
    pub metrics: Option<TcpListener>,
    /// The Envoy RLS (gRPC), `listen.grpc`.
    pub grpc: Option<TcpListener>,
    /// The Envoy RLS on a Unix socket, `listen.grpc = "unix:PATH"`.
    pub grpc_unix: Option<BoundUnix>,
}

/// Binds the Unix socket at `path` with file mode `mode`. A stale socket file (nobody
/// listening) is replaced; a live daemon on it, or a file that is not a socket, is an error.
pub fn bind_unix(path: &Path, mode: u32) -> io::Result<BoundUnix> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a socket; not replacing it",
                        path.display()
                    ),
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("a daemon is already listening on {}", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    let inode = std::fs::metadata(path)?.ino();
    Ok(BoundUnix {
        listener,
        path: path.to_owned(),
        inode,
    })
}

/// Serves `app` on every listener until `shutdown` completes, then lets in-flight requests
/// finish and removes the socket file.
pub async fn serve(
    app: App,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_until(app, listeners, shutdown, std::future::pending()).await
}

/// As [`serve`], but once `drop_all` completes (after `shutdown`: a deadline, or a second
/// signal) the connections still open are dropped instead of waited for: a client that sent
/// half a request must not keep the daemon alive. The socket files are removed either way.
pub async fn serve_until(
    app: App,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drop_all: impl Future<Output = ()>,
) -> io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move |mut rx: watch::Receiver<bool>| async move {
        // An error means the sender is gone, which also means stop.
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let router = http::router(app.clone());
    let mut tasks = tokio::task::JoinSet::new();
    let mut sockets = Vec::new();
    if let Some(unix) = listeners.unix {
        sockets.push((unix.path, unix.inode));
        let server = axum::serve(unix.listener, router.clone())
            .with_graceful_shutdown(stopped(stop_rx.clone()));
        tasks.spawn(async move { server.await });
    }
    if let Some(tcp) = listeners.http {
        let server =
            axum::serve(tcp, router.clone()).with_graceful_shutdown(stopped(stop_rx.clone()));
        tasks.spawn(async move { server.await });
    }
    if let Some(tcp) = listeners.metrics {
        let server = axum::serve(tcp, http::metrics_router(app.clone()))
            .with_graceful_shutdown(stopped(stop_rx.clone()));
        tasks.spawn(async move { server.await });
    }
    if let Some(tcp) = listeners.grpc {
        let server = crate::rls::serve(app.clone(), tcp, stopped(stop_rx.clone()));
        tasks.spawn(async move { server.await.map_err(io::Error::other) });
    }
    if let Some(unix) = listeners.grpc_unix {
        sockets.push((unix.path, unix.inode));
        let server = crate::rls::serve_unix(app.clone(), unix.listener, stopped(stop_rx.clone()));
        tasks.spawn(async move { server.await.map_err(io::Error::other) });
    }
    let sync = tokio::spawn(overrides::sync_loop(
        app.limits.clone(),
        app.overrides.clone(),
        app.limiter.clone(),
        stopped(stop_rx.clone()),
    ));
    let housekeeping = tokio::spawn(housekeep(app, stopped(stop_rx.clone())));
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let mut result = Ok(());
    tokio::pin!(drop_all);
    loop {
        tokio::select! {
            joined = tasks.join_next() => {
                let Some(joined) = joined else { break };
                if let Err(err) = joined.unwrap_or_else(|err| Err(io::Error::other(err)))
                    && result.is_ok()
                {
                    result = Err(err);
                }
            }
            () = &mut drop_all => {
                tracing::warn!(
                    listeners = tasks.len(),
                    "dropping the connections still open"
                );
                tasks.abort_all();
                break;
            }
        }
    }
    housekeeping.abort();
    sync.abort();
    for (path, inode) in sockets {
        remove_socket(&path, inode);
    }
    result
}

/// Removes the socket file unless another daemon has replaced it since.
fn remove_socket(path: &Path, inode: u64) {
    if std::fs::metadata(path).is_ok_and(|meta| meta.ino() == inode)
        && let Err(err) = std::fs::remove_file(path)
    {
        tracing::warn!(path = %path.display(), error = %err, "could not remove the socket");
    }
}

async fn housekeep(app: App, stop: impl Future<Output = ()>) {
    let mut tick = tokio::time::interval(HOUSEKEEPING_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {
                let limiter = &app.limiter;
                limiter.store().housekeep(app.clock.now_ms());
                limiter
                    .metrics()
                    .record_store(limiter.store().as_ref(), limiter.policies().names());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_api::CheckRequest;
    use sluice_client::Client;

    use super::*;
    use crate::clock::ManualClock;
    use crate::stores::Stores;
    use crate::testing::{self, Gate};

    #[tokio::test]
    async fn a_stop_finishes_the_request_in_flight_then_removes_the_socket() {
        let settings =
            testing::settings("[policies.p]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\n");
        let gate = Arc::new(Gate::default());
        let app = App::new(
            settings,
            Stores::local(gate.clone()),
            Arc::new(ManualClock::new(1)),
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listeners = Listeners {
            unix: Some(bind_unix(&path, 0o600).unwrap()),
            ..Listeners::default()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(app, listeners, async move {
            let _ = stopped.await;
        }));
        let client = Client::unix(&path);
        let request = tokio::spawn(async move { client.check(&CheckRequest::new("p", "k")).await });
        gate.entered.notified().await;
        stop.send(()).unwrap();
        gate.release.notify_one();
        let answer = request.await.unwrap().unwrap();
        assert_eq!((answer.status, answer.body.remaining), (200, 9));
        server.await.unwrap().unwrap();
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn bind_refuses_a_file_that_is_not_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain");
        std::fs::write(&path, "data").unwrap();
        let err = bind_unix(&path, 0o600).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "data");
    }
}
