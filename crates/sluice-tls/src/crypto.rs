//! The one crypto provider of every TLS config sluice builds (ring), in one place so the
//! listeners, the Redis clients and the CLI agree.

use std::sync::Arc;

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
