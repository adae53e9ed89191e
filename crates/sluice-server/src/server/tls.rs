//! TLS on the TCP listeners (`[listen.tls]`): the handshake of each accepted connection, in
//! the connection's own task (a slow or silent client never holds up the accept loop), bounded
//! by `listen.header_timeout`, before the protocol serves the encrypted stream.
//!
//! The server configs sit behind one swap: [`ListenerTls::reload`] reads the files again (on
//! SIGHUP, or when one of them changes on disk) and the next handshake uses the new
//! certificate, while connections already open keep the one they shook hands with. A file
//! that cannot be read keeps the running certificate. A failed handshake is counted in
//! `rate_limit_tls_handshake_errors_total{listener,reason}`, never logged per connection: a
//! scanner or a misconfigured client must not flood the log.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rustls::ServerConfig;
use sluice_tls::{PemError, ServerFiles};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::accept::ServeConnection;
use super::stop::Stop;
use crate::metrics::TlsLabels;

/// The protocols a listener offers by ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// HTTP/1.1 and HTTP/2: the HTTP API and `/metrics`.
    Http,
    /// HTTP/2 only: gRPC.
    Grpc,
    /// None: RESP has no ALPN name clients send.
    None,
}

/// The server config of each ALPN set, built from one read of the files.
#[derive(Debug)]
struct Configs {
    http: Arc<ServerConfig>,
    grpc: Arc<ServerConfig>,
    resp: Arc<ServerConfig>,
}

impl Configs {
    fn read(files: &ServerFiles) -> Result<Configs, PemError> {
        let config = |alpn: &[&[u8]]| sluice_tls::server_config(files, alpn).map(Arc::new);
        Ok(Configs {
            http: config(&[b"h2", b"http/1.1"])?,
            grpc: config(&[b"h2"])?,
            resp: config(&[])?,
        })
    }

    fn for_alpn(&self, alpn: Alpn) -> &Arc<ServerConfig> {
        match alpn {
            Alpn::Http => &self.http,
            Alpn::Grpc => &self.grpc,
            Alpn::None => &self.resp,
        }
    }
}

/// The TLS of every TCP listener: the files, the configs read from them, the failure count.
#[derive(Debug, Clone)]
pub struct ListenerTls {
    files: ServerFiles,
    configs: Arc<ArcSwap<Configs>>,
    errors: Family<TlsLabels, Counter>,
    handshake_timeout: Duration,
}

impl ListenerTls {
    /// Reads `files`; handshakes that take longer than `handshake_timeout` fail (`timeout`).
    pub fn new(
        files: ServerFiles,
        handshake_timeout: Duration,
        errors: Family<TlsLabels, Counter>,
    ) -> Result<ListenerTls, PemError> {
        let configs = Configs::read(&files)?;
        Ok(ListenerTls {
            files,
            configs: Arc::new(ArcSwap::from_pointee(configs)),
            errors,
            handshake_timeout,
        })
    }

    /// Reads the files again: the next handshakes use what they hold now. On error the
    /// running certificate stays.
    pub fn reload(&self) -> Result<(), PemError> {
        let configs = Configs::read(&self.files)?;
        self.configs.store(Arc::new(configs));
        Ok(())
    }

    /// [`reload`](Self::reload), its outcome logged (the file and why, never its content).
    pub fn reload_logged(&self) {
        match self.reload() {
            Ok(()) => tracing::info!(
                cert_file = %self.files.cert_file.display(),
                "listen.tls: certificate files read again; new connections use them"
            ),
            Err(err) => tracing::warn!("listen.tls: keeping the running certificate: {err}"),
        }
    }

    /// Every file the TLS reads (for the watch).
    pub fn paths(&self) -> Vec<std::path::PathBuf> {
        let files = &self.files;
        let mut paths = vec![files.cert_file.clone(), files.key_file.clone()];
        paths.extend(files.client_ca_file.clone());
        paths
    }

    /// The handshake of one accepted connection of `listener`, offering `alpn`; `None`
    /// (counted) when it fails.
    pub async fn accept<S>(
        &self,
        stream: S,
        listener: &'static str,
        alpn: Alpn,
    ) -> Option<TlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let acceptor = TlsAcceptor::from(self.configs.load().for_alpn(alpn).clone());
        let reason =
            match tokio::time::timeout(self.handshake_timeout, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => return Some(stream),
                Ok(Err(err)) => sluice_tls::reason_of(&err),
                Err(_elapsed) => sluice_tls::Reason::Timeout,
            };
        self.count_failure(listener, reason);
        None
    }

    fn count_failure(&self, listener: &'static str, reason: sluice_tls::Reason) {
        self.errors
            .get_or_create(&TlsLabels {
                listener,
                reason: reason.label(),
            })
            .inc();
    }

    /// Wraps a protocol's connection handler: the handshake first, then `inner` on the
    /// encrypted stream.
    pub fn serving<S>(&self, listener: &'static str, alpn: Alpn, inner: S) -> Handshake<S> {
        Handshake {
            tls: self.clone(),
            listener,
            alpn,
            inner,
        }
    }
}

/// A connection handler behind a TLS handshake ([`ListenerTls::serving`]).
#[derive(Debug, Clone)]
pub struct Handshake<S> {
    tls: ListenerTls,
    listener: &'static str,
    alpn: Alpn,
    inner: S,
}

impl<Io, S> ServeConnection<Io> for Handshake<S>
where
    Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: ServeConnection<TlsStream<Io>> + Clone + Send + Sync + 'static,
{
    fn serve(&self, stream: Io, stop: Stop) -> impl Future<Output = ()> + Send + 'static {
        let tls = self.tls.clone();
        let inner = self.inner.clone();
        let (listener, alpn) = (self.listener, self.alpn);
        async move {
            if let Some(stream) = tls.accept(stream, listener, alpn).await {
                inner.serve(stream, stop).await;
            }
        }
    }
}
