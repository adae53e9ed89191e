//! A real daemon in process: the library's `serve`, the real router and the stores the
//! config names, on a temp-dir Unix socket and loopback TCP ports, with a manual clock so
//! tests decide time, and `sluice-client` clients of it; stopped when the handle drops.
#![allow(clippy::unwrap_used)] // a failed set-up should panic the test that asked for it

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::clock::{Clock, ManualClock, SystemClock};
use crate::server::{self, Listeners};
use crate::service::app::App;
use crate::service::stores::Stores;
use sluice_config::ConnectionSettings;

/// A round instant (aligned to every test window) so expected values are easy to read.
pub const T0: u64 = 1_800_000_000_000;

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub tcp: SocketAddr,
    /// The separate `/metrics` listener (`listen.metrics`).
    pub metrics: SocketAddr,
    /// The Envoy RLS gRPC listener (`listen.grpc`).
    pub grpc: SocketAddr,
    /// The Envoy RLS on a Unix socket (`listen.grpc = "unix:PATH"`).
    pub grpc_socket: PathBuf,
    /// The RESP listener on a Unix socket (`listen.resp = "unix:PATH"`).
    pub resp_socket: PathBuf,
    pub clock: Arc<ManualClock>,
    pub app: App,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Daemon {
    /// A daemon serving `toml` at [`T0`] (listen settings are the harness's own).
    pub async fn start(toml: &str) -> Daemon {
        let clock = Arc::new(ManualClock::new(T0));
        Daemon::with_clocks(toml, clock.clone(), clock).await
    }

    /// A daemon serving `toml` on the wall clock, for tests whose time is real (replication
    /// between regions over real links). `clock` is then not the daemon's.
    pub async fn with_wall_clock(toml: &str) -> Daemon {
        Daemon::with_clocks(toml, Arc::new(SystemClock), Arc::new(ManualClock::new(T0))).await
    }

    async fn with_clocks(toml: &str, time: Arc<dyn Clock>, clock: Arc<ManualClock>) -> Daemon {
        let settings = super::settings::settings(toml);
        let connections = settings.settings.listen.connections;
        let stores = Stores::build(
            &settings.settings.backend,
            &settings.settings.region,
            time.clone(),
        )
        .unwrap();
        // As the binary: the backend connected before the first check.
        crate::service::connect::connect(
            &stores,
            &settings.settings.backend,
            &settings.settings.region,
        )
        .await;
        let tls = settings.settings.listen.tls.clone();
        let app = App::new(settings, stores, time);
        Daemon::serving_listen(app, clock, connections, tls).await
    }

    /// A daemon serving `app`; `clock` is the one the test moves.
    pub async fn serving(app: App, clock: Arc<ManualClock>) -> Daemon {
        Daemon::serving_with(app, clock, ConnectionSettings::default()).await
    }

    /// As [`serving`](Self::serving), with the connection timeouts and bound of `connections`
    /// (`[listen]` of the config otherwise only sets them for the binary).
    pub async fn serving_with(
        app: App,
        clock: Arc<ManualClock>,
        connections: ConnectionSettings,
    ) -> Daemon {
        Daemon::serving_listen(app, clock, connections, None).await
    }

    /// As [`serving_with`](Self::serving_with), the TCP listeners behind `tls` when set
    /// (`[listen.tls]` of the config).
    async fn serving_listen(
        app: App,
        clock: Arc<ManualClock>,
        connections: ConnectionSettings,
        tls: Option<sluice_config::ListenTls>,
    ) -> Daemon {
        let tls = tls.map(|tls| {
            let errors = app.limiter.metrics().tls_handshake_errors.clone();
            server::tls::ListenerTls::new(tls.files, connections.header_timeout, errors).unwrap()
        });
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sluiced.sock");
        let unix = server::bind_unix(&socket, 0o660).unwrap();
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = http.local_addr().unwrap();
        let metrics_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let metrics = metrics_listener.local_addr().unwrap();
        let grpc_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc = grpc_listener.local_addr().unwrap();
        let grpc_socket = dir.path().join("rls.sock");
        let grpc_unix = server::bind_unix(&grpc_socket, 0o660).unwrap();
        let resp_socket = dir.path().join("resp.sock");
        let resp_unix = server::bind_unix(&resp_socket, 0o660).unwrap();
        let (tx, rx) = oneshot::channel();
        let listeners = Listeners {
            unix: Some(unix),
            http: Some(http),
            metrics: Some(metrics_listener),
            grpc: Some(grpc_listener),
            grpc_unix: Some(grpc_unix),
            resp_unix: Some(resp_unix),
            connections,
            tls,
            ..Listeners::default()
        };
        let task = tokio::spawn(crate::daemon::serve(app.clone(), listeners, async move {
            let _ = rx.await;
        }));
        Daemon {
            dir,
            socket,
            tcp,
            metrics,
            grpc,
            grpc_socket,
            resp_socket,
            clock,
            app,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// A client over the Unix socket.
    pub fn unix(&self) -> sluice_client::Client {
        sluice_client::Client::unix(&self.socket)
    }

    /// A client over TCP.
    pub fn tcp(&self) -> sluice_client::Client {
        sluice_client::Client::tcp(self.tcp.to_string())
    }

    /// The status `GET path` answers over the socket.
    pub async fn status(&self, path: &str) -> u16 {
        self.unix()
            .send(http::Method::GET, path, &[], "")
            .await
            .unwrap()
            .status
    }

    /// Stops gracefully and waits for the server to finish.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task.await.unwrap(),
            None => Ok(()),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
