//! The TLS of a client of a daemon whose listener speaks TLS (`[listen.tls]`): the daemon's
//! certificate verified against a CA file (or the system's roots) for the host of the
//! address, and a client certificate presented when the daemon asks for one (mTLS).

use std::sync::Arc;

use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A connector and the name it verifies.
#[derive(Clone)]
pub(crate) struct Tls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// For the daemon at `addr` (`host:port`), with `files`.
    pub(crate) fn new(
        addr: &str,
        files: &sluice_tls::ClientFiles,
    ) -> Result<Tls, sluice_tls::PemError> {
        let mut config = sluice_tls::client_config("tls", files)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned()).map_err(|_| {
            sluice_tls::PemError::new(
                "address",
                std::path::Path::new(addr),
                "its host is neither a DNS name nor an IP address",
            )
        })?;
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            name,
        })
    }

    pub(crate) async fn connect(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.connector.connect(self.name.clone(), stream).await
    }
}
