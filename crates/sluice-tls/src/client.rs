//! The rustls config of a client sluice opens: to Redis (`[backend.tls]`, the `[region]`
//! backends) and to a daemon (`sluice --ca-file`, the Rust client). The server's certificate
//! is always verified, against the given CA bundle or the system's roots.

use std::path::PathBuf;

use rustls::ClientConfig;

use crate::pem::{self, PemError};

/// The files of a client's TLS settings, and the config section naming them (errors name
/// `<section>.ca_file`, `<section>.cert_file`, `<section>.key_file`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientFiles {
    /// `None`: the system's root store.
    pub ca_file: Option<PathBuf>,
    /// A client certificate chain and its key, both or neither.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl ClientFiles {
    /// Whether this reads any file (a reload has something to read again).
    pub fn has_files(&self) -> bool {
        self.ca_file.is_some() || self.cert_file.is_some() || self.key_file.is_some()
    }
}

/// Reads `files` (fields named under `section`, e.g. `backend.tls`) into a client config.
pub fn client_config(section: &str, files: &ClientFiles) -> Result<ClientConfig, PemError> {
    let field = |name: &str| format!("{section}.{name}");
    let roots = match &files.ca_file {
        Some(path) => pem::roots(&field("ca_file"), path)?,
        None => pem::system_roots(&field("ca_file"))?,
    };
    let builder = ClientConfig::builder_with_provider(crate::crypto::provider())
        .with_safe_default_protocol_versions()
        .map_err(|err| PemError::new(section, std::path::Path::new("<tls>"), err.to_string()))?
        .with_root_certificates(roots);
    match (&files.cert_file, &files.key_file) {
        (Some(cert), Some(key)) => {
            let chain = pem::certificates(&field("cert_file"), cert)?;
            let key_der = pem::private_key(&field("key_file"), key)?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|err| {
                    PemError::new(
                        &field("key_file"),
                        key,
                        format!("does not fit {}: {err}", field("cert_file")),
                    )
                })
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), None) => Err(PemError::new(
            &field("key_file"),
            cert,
            format!("empty, but {} is set: both or neither", field("cert_file")),
        )),
        (None, Some(key)) => Err(PemError::new(
            &field("cert_file"),
            key,
            format!("empty, but {} is set: both or neither", field("key_file")),
        )),
    }
}
