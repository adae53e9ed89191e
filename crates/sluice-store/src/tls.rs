//! TLS to Redis (`rediss://`, `[backend.tls]`): the files and name a Redis client verifies
//! with, read for each client library in the form it takes, and a failed connection told
//! apart by what the operator fixes: the handshake's reason (unknown authority, name
//! mismatch, expired, client certificate required), a `rediss://` URL against a plain port, or
//! a plain `redis://` URL against a port that speaks TLS only.

use std::error::Error;

use sluice_tls::{PemError, Reason};

use crate::RedisTls;

/// The rustls config of `tls` (the cluster client and its redirections), errors naming
/// `backend.tls.*`.
pub(crate) fn client_config(tls: &RedisTls) -> Result<rustls::ClientConfig, PemError> {
    sluice_tls::install_default_provider();
    sluice_tls::client_config("backend.tls", &tls.files)
}

/// The files of `tls` as the `redis` crate takes them (PEM bytes), checked first.
pub(crate) fn redis_certificates(tls: &RedisTls) -> Result<::redis::TlsCertificates, PemError> {
    client_config(tls)?;
    let read = |field: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|err| PemError::new(field, path, format!("cannot read: {err}")))
    };
    let root_cert = match &tls.files.ca_file {
        Some(path) => Some(read("backend.tls.ca_file", path)?),
        None => None,
    };
    let client_tls = match (&tls.files.cert_file, &tls.files.key_file) {
        (Some(cert), Some(key)) => Some(::redis::ClientTlsConfig {
            client_cert: read("backend.tls.cert_file", cert)?,
            client_key: read("backend.tls.key_file", key)?,
        }),
        _ => None,
    };
    Ok(::redis::TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// What a failed connection to `address` (redacted) means, when TLS explains it: the
/// handshake's reason over TLS; over plain TCP, a server that closed on the first command
/// (what a TLS-only port does to a plain client). `None`: nothing TLS-specific to say.
pub(crate) fn explain(err: &(dyn Error + 'static), address: &str, tls: bool) -> Option<String> {
    if tls {
        return reason_in(err).map(|reason| match reason {
            Reason::NotTls => not_tls(address),
            reason => format!("TLS handshake with {address} failed: {reason}"),
        });
    }
    let closed = chain(err).any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
            )
        })
    }) || {
        // Client libraries that keep only the text of the I/O error.
        let text = err.to_string().to_ascii_lowercase();
        ["closed", "reset by peer", "end of file", "broken pipe"]
            .iter()
            .any(|words| text.contains(words))
    };
    closed.then(|| {
        format!(
            "{address} closed the connection: if that port speaks TLS only (tls-port), use rediss:// or backend.tls.enabled = true"
        )
    })
}

/// The message of a TLS client of `address` (redacted), a port that speaks plain RESP.
pub(crate) fn not_tls(address: &str) -> String {
    format!(
        "TLS handshake with {address} failed: it does not speak TLS (a plain port: use redis://, or the port with tls-port)"
    )
}

fn chain<'a>(err: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(err), |e: &&'a (dyn Error + 'static)| (*e).source())
}

/// The handshake's reason anywhere in `err`'s chain: a rustls error, or an I/O error carrying
/// one, or (client libraries that keep only the text) the words rustls uses.
pub(crate) fn reason_in(err: &(dyn Error + 'static)) -> Option<Reason> {
    for e in chain(err) {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(sluice_tls::reason_of_tls(tls));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(tls) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(sluice_tls::reason_of_tls(tls));
        }
    }
    let text = err.to_string();
    [
        ("UnknownIssuer", Reason::UnknownAuthority),
        ("UnknownCA", Reason::UnknownAuthority),
        ("BadSignature", Reason::UnknownAuthority),
        ("NotValidForName", Reason::NameMismatch),
        ("not valid for name", Reason::NameMismatch),
        ("Expired", Reason::Expired),
        ("expired", Reason::Expired),
        ("CertificateRequired", Reason::ClientCertificateRequired),
        ("HandshakeFailure", Reason::ClientCertificateRequired),
        ("InvalidContentType", Reason::NotTls),
        ("corrupt message", Reason::NotTls),
        ("InvalidMessage", Reason::NotTls),
    ]
    .into_iter()
    .find_map(|(words, reason)| text.contains(words).then_some(reason))
}
