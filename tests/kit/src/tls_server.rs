//! A `redis-server` that speaks TLS only (`--port 0 --tls-port P`), requiring a client
//! certificate (`--tls-auth-clients yes`), as a managed Redis does.

use crate::certs::{Certs, Pair};
use crate::{Node, RedisServer, free_port, require_tools};

/// The `redis-cli` arguments of a TLS client with the test's CA and client certificate.
pub(crate) fn tls_cli_args(certs: &Certs) -> Vec<String> {
    let path = |p: &std::path::Path| p.display().to_string();
    vec![
        "--tls".into(),
        "--cacert".into(),
        path(&certs.ca_file),
        "--cert".into(),
        path(&certs.client.cert),
        "--key".into(),
        path(&certs.client.key),
    ]
}

/// The `redis-server` arguments of a TLS-only server on `port` serving `server`, trusting
/// the test's CA for client certificates.
pub(crate) fn tls_server_args(certs: &Certs, server: &Pair, port: u16) -> Vec<String> {
    let path = |p: &std::path::Path| p.display().to_string();
    vec![
        "--port".into(),
        "0".into(),
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        path(&server.cert),
        "--tls-key-file".into(),
        path(&server.key),
        "--tls-ca-cert-file".into(),
        path(&certs.ca_file),
        "--tls-auth-clients".into(),
        "yes".into(),
    ]
}

/// The arguments of a TLS-only node on `port` that also connects to its peers over TLS
/// (replication, a cluster's bus, a sentinel's connections), presenting the client
/// certificate.
pub(crate) fn tls_node_args(certs: &Certs, port: u16) -> Vec<String> {
    let path = |p: &std::path::Path| p.display().to_string();
    let mut args = tls_server_args(certs, &certs.server, port);
    args.extend([
        "--tls-client-cert-file".into(),
        path(&certs.client.cert),
        "--tls-client-key-file".into(),
        path(&certs.client.key),
        "--tls-replication".into(),
        "yes".into(),
    ]);
    args
}

impl RedisServer {
    /// Starts a TLS-only server with `certs.server`, trusting client certificates of
    /// `certs.ca_file` and requiring one; waits until it answers `PING` over TLS.
    pub fn start_tls(certs: &Certs) -> RedisServer {
        RedisServer::start_tls_serving(certs, &certs.server)
    }

    /// As [`start_tls`](Self::start_tls), serving `server` (an expired certificate, one for
    /// another name). It still answers `redis-cli`, which is told not to verify the name.
    pub fn start_tls_serving(certs: &Certs, server: &Pair) -> RedisServer {
        require_tools();
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => panic!("cannot create a temporary directory: {e}"),
        };
        let port = free_port();
        let mut node = Node::new(
            port,
            dir.path().to_owned(),
            tls_server_args(certs, server, port),
        );
        node.cli_args = tls_cli_args(certs);
        if server != &certs.server {
            // The readiness probe only: what sluice's client makes of the certificate is the
            // test's question.
            node.cli_args.push("--insecure".into());
        }
        node.spawn();
        RedisServer { node, _dir: dir }
    }

    /// `rediss://localhost:PORT` (the name the test's server certificate is for).
    pub fn tls_url(&self) -> String {
        format!("rediss://localhost:{}", self.node.port)
    }
}
