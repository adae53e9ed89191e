//! Sockets and lifecycle, for any protocol: the listeners the daemon serves, one accept loop
//! for all of them behind one bound on open connections, and the stop every loop watches. It
//! knows no protocol: [`crate::daemon`] hands each accept loop its connection handler (the
//! HTTP router, the RESP connection, the RLS server).
//!
//! - [`unix`]: binding a Unix socket safely, removing only our own file.
//! - [`gate`]: the bound on open connections, shared by every listener and protocol.
//! - [`linger`]: closing a connection the daemon ends itself without resetting it.
//! - [`accept`]: the accept loop (gate, out-of-fd handling, connections owned by the loop).
//! - [`http1`]: the check route's own HTTP/1 framing; every other request goes to hyper.
//! - [`connection`]: one HTTP connection served by hyper, with the header and idle timeouts.
//! - [`fd_limit`]: the fd soft limit raised at start and the connection bound below it.
//! - [`stop`]: the stop signal every loop and connection watches.
//! - [`activation`]: sockets handed over by the service manager, and telling it we are ready.
//! - [`bind`]: the listeners of `[listen]`, bound or taken from those handed over.
//! - [`tls`]: the TLS handshake of the TCP listeners (`[listen.tls]`), its certificate reloadable.

pub(crate) mod accept;
pub mod activation;
pub mod bind;
pub(crate) mod connection;
pub mod fd_limit;
pub(crate) mod gate;
pub(crate) mod http1;
pub(crate) mod linger;
pub(crate) mod stop;
pub mod tls;
pub(crate) mod unix;

use tokio::net::TcpListener;

pub use self::gate::{ConnectionGate, ConnectionPermit, HTTP_OVERLOADED};
pub use self::stop::Stop;
pub use self::unix::{BoundUnix, bind_unix};
use sluice_config::ConnectionSettings;

/// Every listener the daemon serves, bound (or handed over) by the caller.
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
    /// The RESP (Redis protocol) listener, `listen.resp`.
    pub resp: Option<TcpListener>,
    /// The RESP listener on a Unix socket, `listen.resp = "unix:PATH"`.
    pub resp_unix: Option<BoundUnix>,
    /// Timeouts of every HTTP connection and the bound on open connections.
    pub connections: ConnectionSettings,
    /// `[listen.tls]`: the TCP listeners (http, grpc, resp; metrics when asked) speak TLS.
    pub tls: Option<tls::ListenerTls>,
    /// `listen.tls.metrics`: the metrics listener speaks TLS too.
    pub metrics_tls: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bind_refuses_a_file_that_is_not_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain");
        std::fs::write(&path, "data").unwrap();
        let err = bind_unix(&path, 0o600).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "data");
    }
}
