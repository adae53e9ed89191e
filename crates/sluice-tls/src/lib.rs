//! TLS for sluice, in one place: sluiced's listeners ([`server`]), its connections to Redis
//! and the daemon's own clients ([`client`]) all read their PEM files through [`pem`] and
//! name a failed handshake through [`reason`], so a certificate problem reads the same in
//! `--check-config`, a reload, a log line and a metric label.
//!
//! rustls with the ring provider only: nothing links OpenSSL, and the provider is chosen here
//! explicitly, never by whichever crypto features the dependency graph happens to enable.
//! Certificates are always verified: there is no switch that turns verification off.

pub mod client;
pub mod pem;
pub mod reason;
pub mod server;

use std::sync::Arc;

pub use self::client::{ClientFiles, client_config};
pub use self::pem::PemError;
pub use self::reason::{Reason, reason_of, reason_of_tls};
pub use self::server::{ServerFiles, server_config};

/// The crypto every config of this crate is built with: ring. rustls marks ring's provider
/// deprecated because it lacks post-quantum key exchange; aws-lc-rs has it but needs cmake and
/// a long C build, and Redis and the daemon's clients negotiate classical groups anyway.
#[allow(deprecated)]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes ring the process's default provider, for the libraries that build their own rustls
/// config from the process default (the Redis clients). Idempotent; call it before any TLS
/// connection is made.
#[allow(deprecated)]
pub fn install_default_provider() {
    // Err only when a provider is installed already: then that one stays, as intended.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
