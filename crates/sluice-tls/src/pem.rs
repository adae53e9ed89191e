//! PEM files read into rustls' types, every failure naming the config field and the file.
//!
//! The error says what is wrong with the file (missing, unreadable, not PEM, no certificate,
//! no key) and never quotes its content: a key file's bytes must not reach a log, an error or
//! `--check-config`'s output.

use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A PEM file that cannot be used, naming the field that names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {}: {why}", path.display())]
pub struct PemError {
    /// The config field naming the file, e.g. `listen.tls.cert_file`.
    pub field: String,
    pub path: PathBuf,
    pub why: String,
}

impl PemError {
    pub fn new(field: &str, path: &Path, why: impl Into<String>) -> PemError {
        PemError {
            field: field.to_owned(),
            path: path.to_path_buf(),
            why: why.into(),
        }
    }
}

/// The file's bytes, or why it cannot be read (missing, a directory, no permission).
fn read(field: &str, path: &Path) -> Result<Vec<u8>, PemError> {
    std::fs::read(path).map_err(|err| PemError::new(field, path, format!("cannot read: {err}")))
}

/// Why pki-types refused the PEM, in words that quote none of it.
fn malformed(err: &rustls_pki_types::pem::Error) -> String {
    use rustls_pki_types::pem::Error;
    match err {
        Error::MissingSectionEnd { .. } => "not valid PEM: a section has no END line".to_owned(),
        Error::IllegalSectionStart { .. } => "not valid PEM: a malformed BEGIN line".to_owned(),
        Error::Base64Decode(_) => "not valid PEM: a section is not valid base64".to_owned(),
        Error::NoItemsFound => "no PEM section of the expected kind".to_owned(),
        _ => "not valid PEM".to_owned(),
    }
}

/// Every certificate of a PEM chain (leaf first), at least one.
pub fn certificates(field: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let bytes = read(field, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| PemError::new(field, path, malformed(&err)))?;
    if certs.is_empty() {
        return Err(PemError::new(
            field,
            path,
            "no CERTIFICATE section: expected a PEM certificate chain",
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
pub fn private_key(field: &str, path: &Path) -> Result<PrivateKeyDer<'static>, PemError> {
    let bytes = read(field, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|err| match err {
        rustls_pki_types::pem::Error::NoItemsFound => PemError::new(
            field,
            path,
            "no PRIVATE KEY section: expected a PEM private key (PKCS#8, RSA or EC)",
        ),
        other => PemError::new(field, path, malformed(&other)),
    })
}

/// The CA certificates of a PEM bundle as a root store, at least one usable.
pub fn roots(field: &str, path: &Path) -> Result<RootCertStore, PemError> {
    let mut store = RootCertStore::empty();
    for cert in certificates(field, path)? {
        store.add(cert).map_err(|err| {
            PemError::new(field, path, format!("not a usable CA certificate: {err}"))
        })?;
    }
    Ok(store)
}

/// The system's root store (as `openssl` and `curl` find it: `SSL_CERT_FILE`, the
/// distribution's bundle), for a `ca_file` left empty.
pub fn system_roots(field: &str) -> Result<RootCertStore, PemError> {
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found.errors.first().map_or_else(
            || "the system has no CA certificates (install ca-certificates, or set it)".to_owned(),
            |err| format!("the system's CA certificates cannot be read: {err}"),
        );
        return Err(PemError::new(field, Path::new("<system roots>"), why));
    }
    Ok(store)
}
