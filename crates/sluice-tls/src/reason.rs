//! Why a TLS handshake failed, in the few words an operator acts on. The same names label
//! `rate_limit_tls_handshake_errors_total{reason}` and the one log line a Redis outage gets.

use std::io;

use rustls::{AlertDescription, CertificateError};

/// A handshake failure, by what fixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The peer's certificate does not chain to a trusted CA (wrong `ca_file`).
    UnknownAuthority,
    /// The certificate is not for the name verified (`server_name`, the URL's host).
    NameMismatch,
    /// The certificate expired (or is not valid yet).
    Expired,
    /// The server asks for a client certificate and none (or none it trusts) was sent.
    ClientCertificateRequired,
    /// The peer does not speak TLS (a plain port, a plain client).
    NotTls,
    /// The handshake did not finish in time.
    Timeout,
    /// The peer closed the connection during the handshake.
    Closed,
    /// Anything else (no shared protocol version or cipher, a bad message).
    Other,
}

impl Reason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Reason::UnknownAuthority => "unknown_authority",
            Reason::NameMismatch => "name_mismatch",
            Reason::Expired => "expired",
            Reason::ClientCertificateRequired => "client_certificate_required",
            Reason::NotTls => "not_tls",
            Reason::Timeout => "timeout",
            Reason::Closed => "closed",
            Reason::Other => "other",
        }
    }

    /// The words of a log line or an error.
    pub fn describe(self) -> &'static str {
        match self {
            Reason::UnknownAuthority => {
                "unknown authority: the certificate is not signed by a trusted CA (ca_file)"
            }
            Reason::NameMismatch => {
                "name mismatch: the certificate is not for the name verified (server_name, or the URL's host)"
            }
            Reason::Expired => "expired: the certificate is outside its validity period",
            Reason::ClientCertificateRequired => {
                "client certificate required: the server wants a client certificate it trusts (cert_file, key_file)"
            }
            Reason::NotTls => "the peer does not speak TLS (a plain port?)",
            Reason::Timeout => "the handshake timed out",
            Reason::Closed => "the peer closed the connection during the handshake",
            Reason::Other => "the handshake failed",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// The reason of a rustls error, seen from either side of the handshake.
pub fn reason_of_tls(err: &rustls::Error) -> Reason {
    use rustls::Error;
    match err {
        Error::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                Reason::UnknownAuthority
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                Reason::NameMismatch
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => Reason::Expired,
            _ => Reason::Other,
        },
        Error::NoCertificatesPresented => Reason::ClientCertificateRequired,
        Error::AlertReceived(alert) => match alert {
            AlertDescription::UnknownCA => Reason::UnknownAuthority,
            AlertDescription::CertificateExpired => Reason::Expired,
            AlertDescription::CertificateRequired => Reason::ClientCertificateRequired,
            _ => Reason::Other,
        },
        Error::InvalidMessage(_) | Error::InappropriateMessage { .. } => Reason::NotTls,
        _ => Reason::Other,
    }
}

/// The reason of a failed handshake as tokio-rustls reports it (an I/O error carrying the
/// rustls error, or the transport's own).
pub fn reason_of(err: &io::Error) -> Reason {
    if let Some(tls) = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return reason_of_tls(tls);
    }
    match err.kind() {
        io::ErrorKind::TimedOut => Reason::Timeout,
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => Reason::Closed,
        _ => Reason::Other,
    }
}
