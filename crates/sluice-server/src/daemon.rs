//! The daemon wired together: every listener of [`Listeners`] served with its protocol (the
//! HTTP API and `/metrics` routers of [`crate::http`], the RESP connection of [`crate::resp`],
//! the Envoy RLS of [`crate::rls`]) by the accept loops of [`crate::server`], behind one
//! connection gate, with the service's background work (the overrides sync, housekeeping the
//! store) beside them, until a graceful stop removes the socket files this daemon created.
//! The one place that knows every transport: nothing imports it but `main.rs` and the tests.

use std::future::Future;
use std::io;
use std::time::Duration;

use crate::http;
use crate::server::tls::{Alpn, ListenerTls};
use crate::server::{
    ConnectionGate, HTTP_OVERLOADED, Listeners, Stop, accept, connection, fd_limit, linger, stop,
    unix,
};
use crate::service::app::App;
use sluice_config::ConnectionSettings;

/// How often the store forgets expired keys.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(1);

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
    let (stop_tx, stop) = stop::channel();
    let limits = listeners.connections;
    let gate = ConnectionGate::with_lingering(
        limits.max_connections,
        linger::Lingering::new(fd_limit::lingering_slots(limits.max_connections)),
        Some(app.limiter.metrics().connections_refused.clone()),
    );
    let api = http::Api::new(http::router(app.clone()), app.clone());
    let mut tasks = tokio::task::JoinSet::new();
    let mut sockets = Vec::new();
    // Every HTTP listener: one accept loop each, behind the one gate.
    let tls = listeners.tls;
    let http_loop = HttpLoop {
        gate: &gate,
        stop: &stop,
        limits,
    };
    if let Some(unix) = listeners.unix {
        sockets.extend(unix.created_file());
        tasks.spawn(http_loop.serve(unix.listener, "unix", api.clone()));
    }
    if let Some(tcp) = listeners.http {
        tasks.spawn(http_loop.serve_tcp(tcp, "http", api.clone(), tls.as_ref()));
    }
    if let Some(tcp) = listeners.metrics {
        let metrics_tls = tls.as_ref().filter(|_| listeners.metrics_tls);
        let metrics = http::Api::routes(http::metrics_router(app.clone()));
        tasks.spawn(http_loop.serve_tcp(tcp, "metrics", metrics, metrics_tls));
    }
    if let Some(tcp) = listeners.grpc {
        let shutdown = stop.clone().into_wait();
        let server = match tls.clone() {
            Some(tls) => futures::future::Either::Left(crate::rls::serve_tls(
                app.clone(),
                tcp,
                tls,
                shutdown,
            )),
            None => futures::future::Either::Right(crate::rls::serve(app.clone(), tcp, shutdown)),
        };
        tasks.spawn(async move { server.await.map_err(io::Error::other) });
    }
    if let Some(unix) = listeners.grpc_unix {
        sockets.extend(unix.created_file());
        let server = crate::rls::serve_unix(app.clone(), unix.listener, stop.clone().into_wait());
        tasks.spawn(async move { server.await.map_err(io::Error::other) });
    }
    // The RESP listeners: the same accept loop and gate, the Redis protocol's connection.
    let resp = crate::resp::Resp::new(app.clone(), limits, gate.lingering().clone());
    if let Some(tcp) = listeners.resp {
        tasks.spawn(match &tls {
            Some(tls) => {
                let resp = tls.serving("resp", Alpn::None, resp.clone());
                futures::future::Either::Left(serve_resp(tcp, "resp", &gate, &stop, resp))
            }
            None => {
                futures::future::Either::Right(serve_resp(tcp, "resp", &gate, &stop, resp.clone()))
            }
        });
    }
    if let Some(unix) = listeners.resp_unix {
        sockets.extend(unix.created_file());
        tasks.spawn(serve_resp(unix.listener, "resp_unix", &gate, &stop, resp));
    }
    // The settings writer: polls the backend's settings and serves reloads and admin changes.
    app.settings.start();
    let settings = app.settings.clone();
    let leases = (app.limiter.clone(), app.clock.clone());
    let housekeeping = tokio::spawn(housekeep(app, stop.clone().into_wait()));
    tokio::spawn(async move {
        shutdown.await;
        stop_tx.stop();
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
    settings.stop();
    // Unspent leases go back to the window counters they came from (bounded by the
    // backend's timeout per key; a daemon that cannot return them loses them to the window).
    let (limiter, clock) = leases;
    let returned = limiter.return_leases(clock.now_ms(), true);
    if tokio::time::timeout(Duration::from_secs(1), returned)
        .await
        .is_err()
    {
        tracing::warn!("unspent leases not all returned within 1s of the stop");
    }
    for (path, inode) in sockets {
        unix::remove_socket(&path, inode);
    }
    result
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
                if let Some(keys) = limiter.store().capabilities().keys {
                    keys.housekeep(app.clock.now_ms());
                }
                app.status.tick(limiter, app.clock.now_ms());
                limiter.return_leases(app.clock.now_ms(), false).await;
                limiter
                    .metrics()
                    .record_store(limiter.store().as_ref(), limiter.snapshot().policies.names());
            }
        }
    }
}

/// The accept loop of a RESP listener, as a listener task.
fn serve_resp<L: accept::Accept>(
    listener: L,
    name: &'static str,
    gate: &ConnectionGate,
    stop: &Stop,
    resp: impl accept::ServeConnection<L::Io> + Send + 'static,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let serving = accept::serve_listener(
        listener,
        name,
        gate.clone(),
        crate::resp::OVERLOADED,
        stop.clone(),
        resp,
    );
    async move {
        serving.await;
        Ok(())
    }
}

/// What every HTTP listener's accept loop shares: the connection gate, the stop signal and
/// the connection limits.
#[derive(Clone, Copy)]
struct HttpLoop<'a> {
    gate: &'a ConnectionGate,
    stop: &'a Stop,
    limits: ConnectionSettings,
}

impl HttpLoop<'_> {
    /// The accept loop of `listener` (`name` in the metrics), serving `api`, as a
    /// listener task.
    fn serve<L: accept::Accept>(
        self,
        listener: L,
        name: &'static str,
        api: http::Api,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.serve_with(listener, name, self.http(api))
    }

    /// As [`serve`](Self::serve) for a TCP listener, behind TLS when `tls` is set.
    fn serve_tcp(
        self,
        listener: tokio::net::TcpListener,
        name: &'static str,
        api: http::Api,
        tls: Option<&ListenerTls>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        match tls {
            Some(tls) => futures::future::Either::Left(self.serve_with(
                listener,
                name,
                tls.serving(name, Alpn::Http, self.http(api)),
            )),
            None => futures::future::Either::Right(self.serve(listener, name, api)),
        }
    }

    fn http(self, api: http::Api) -> connection::Http {
        connection::Http::new(api, self.limits, self.gate.lingering().clone())
    }

    fn serve_with<L: accept::Accept>(
        self,
        listener: L,
        name: &'static str,
        serve: impl accept::ServeConnection<L::Io> + Send + 'static,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let serving = accept::serve_listener(
            listener,
            name,
            self.gate.clone(),
            HTTP_OVERLOADED,
            self.stop.clone(),
            serve,
        );
        async move {
            serving.await;
            Ok(())
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
    use crate::server::bind_unix;
    use crate::service::stores::Stores;
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
}
