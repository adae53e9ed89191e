//! The rustls config of sluiced's TCP listeners (`[listen.tls]`): the certificate chain and
//! key it serves, and, for mTLS, the CA a client's certificate must chain to.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;

use crate::pem::{self, PemError};

/// The files of `[listen.tls]`, and the config fields that name them (errors name both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Set: a client must present a certificate this CA signed.
    pub client_ca_file: Option<PathBuf>,
}

/// Reads the files of `files` into a server config offering `alpn` (e.g. `h2`, `http/1.1`;
/// empty for RESP). The key must match the certificate.
pub fn server_config(files: &ServerFiles, alpn: &[&[u8]]) -> Result<ServerConfig, PemError> {
    let chain = pem::certificates("listen.tls.cert_file", &files.cert_file)?;
    let key = pem::private_key("listen.tls.key_file", &files.key_file)?;
    let builder = ServerConfig::builder_with_provider(crate::crypto::provider())
        .with_safe_default_protocol_versions()
        .map_err(|err| PemError::new("listen.tls", &files.cert_file, err.to_string()))?;
    let builder = match &files.client_ca_file {
        Some(ca) => {
            let roots = pem::roots("listen.tls.client_ca_file", ca)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                crate::crypto::provider(),
            )
            .build()
            .map_err(|err| PemError::new("listen.tls.client_ca_file", ca, err.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|err| {
        PemError::new(
            "listen.tls.key_file",
            &files.key_file,
            format!("does not fit listen.tls.cert_file: {err}"),
        )
    })?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
