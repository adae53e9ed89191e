//! `[listen.tls]` and `[backend.tls]` (the `tls` table of a `[region]` backend too),
//! compiled: which files the TCP listeners serve TLS with, and which a Redis client verifies
//! and presents. The files are read here too, so a missing, unreadable or malformed PEM file (or a key that does not fit its
//! certificate) is a config error naming the field and the file, at start, on reload and in
//! `--check-config` alike; the error never quotes the file.

use std::path::PathBuf;

use sluice_tls::{ClientFiles, ServerFiles};

use super::backend::stores::RedisTls;
use super::error::FieldError;
use super::schema::{BackendTlsConfig, ListenTlsConfig};

/// `[listen.tls]` of a config that sets a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenTls {
    pub files: ServerFiles,
    /// `listen.metrics` serves HTTPS too.
    pub metrics: bool,
}

fn path(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

/// `None` when no certificate is set (plain TCP), or on errors (pushed to `errors`).
pub(crate) fn compile_listen_tls(
    config: &ListenTlsConfig,
    errors: &mut Vec<FieldError>,
) -> Option<ListenTls> {
    let client_ca_file = path(&config.client_ca_file);
    let (cert_file, key_file) = match (path(&config.cert_file), path(&config.key_file)) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => {
            let without = |field: &str| {
                FieldError::new(field, "needs listen.tls.cert_file and listen.tls.key_file")
            };
            if client_ca_file.is_some() {
                errors.push(without("listen.tls.client_ca_file"));
            }
            if config.metrics {
                errors.push(without("listen.tls.metrics"));
            }
            return None;
        }
        (Some(_), None) => {
            errors.push(FieldError::new(
                "listen.tls.key_file",
                "empty, but listen.tls.cert_file is set: both or neither",
            ));
            return None;
        }
        (None, Some(_)) => {
            errors.push(FieldError::new(
                "listen.tls.cert_file",
                "empty, but listen.tls.key_file is set: both or neither",
            ));
            return None;
        }
    };
    let files = ServerFiles {
        cert_file,
        key_file,
        client_ca_file,
    };
    // Read now: what cannot serve is refused before the daemon binds anything.
    if let Err(err) = sluice_tls::server_config(&files, &[]) {
        errors.push(pem_error(err));
        return None;
    }
    Some(ListenTls {
        files,
        metrics: config.metrics,
    })
}

/// A PEM file's error as a config error of its field.
pub(crate) fn pem_error(err: sluice_tls::PemError) -> FieldError {
    FieldError::new(err.field, format!("{}: {}", err.path.display(), err.why))
}

/// The TLS of a Redis backend (`section` = `backend.tls`, `region.peers[0].tls`, …): `None`
/// when off, that is without `enabled` and without a `rediss://` address (`any_rediss`). Files
/// set while TLS is off are an error: they would silently not be used.
pub(crate) fn compile_backend_tls(
    section: &str,
    config: &BackendTlsConfig,
    any_rediss: bool,
    errors: &mut Vec<FieldError>,
) -> Option<RedisTls> {
    let files = ClientFiles {
        ca_file: path(&config.ca_file),
        cert_file: path(&config.cert_file),
        key_file: path(&config.key_file),
    };
    let server_name = (!config.server_name.is_empty()).then(|| config.server_name.clone());
    if !config.enabled && !any_rediss {
        let set = [
            ("ca_file", files.ca_file.is_some()),
            ("cert_file", files.cert_file.is_some()),
            ("key_file", files.key_file.is_some()),
            ("server_name", server_name.is_some()),
        ];
        for (name, _) in set.iter().filter(|(_, set)| *set) {
            errors.push(FieldError::new(
                format!("{section}.{name}"),
                format!("set, but TLS is off: use a rediss:// URL or {section}.enabled = true"),
            ));
        }
        return None;
    }
    if let Err(err) = sluice_tls::client_config(section, &files) {
        errors.push(pem_error(err));
        return None;
    }
    Some(RedisTls { files, server_name })
}
