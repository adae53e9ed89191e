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

/// [`provider`] with the AES-128-GCM suites first, for sluiced's listeners, which choose by
/// their own order (`ignore_client_order`): every answer is its own small record, and
/// AES-128 takes 10 rounds a block where AES-256 takes 14, on the daemon and on its clients
/// (OpenSSL, Envoy, curl prefer AES-256 when asked). The same suites are offered; only the
/// choice among the ones a client offers changes.
pub fn listener_provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::CipherSuite::{
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        TLS13_AES_128_GCM_SHA256,
    };
    let mut provider = Arc::unwrap_or_clone(provider());
    // Stable, within each TLS version: the rest keep ring's order.
    provider.cipher_suites.sort_by_key(|suite| {
        let aes_128 = matches!(
            suite.suite(),
            TLS13_AES_128_GCM_SHA256
                | TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        );
        (suite.tls13().is_none(), !aes_128)
    });
    Arc::new(provider)
}

/// Makes ring the process's default provider, for the libraries that build their own rustls
/// config from the process default (the Redis clients). Idempotent; call it before any TLS
/// connection is made.
#[allow(deprecated)]
pub fn install_default_provider() {
    // Err only when a provider is installed already: then that one stays, as intended.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listeners_offer_every_suite_aes_128_first() {
        let names = |p: &rustls::crypto::CryptoProvider| -> Vec<String> {
            p.cipher_suites
                .iter()
                .map(|s| format!("{:?}", s.suite()))
                .collect()
        };
        let (all, listener) = (names(&provider()), names(&listener_provider()));
        assert_eq!(listener[0], "TLS13_AES_128_GCM_SHA256");
        let (mut a, mut b) = (all.clone(), listener.clone());
        a.sort();
        b.sort();
        assert_eq!(a, b, "the same suites");
        // TLS 1.3 suites before TLS 1.2 ones still.
        let first_tls12 = listener
            .iter()
            .position(|n| !n.starts_with("TLS13"))
            .unwrap();
        assert!(
            listener[first_tls12..]
                .iter()
                .all(|n| !n.starts_with("TLS13"))
        );
    }
}
