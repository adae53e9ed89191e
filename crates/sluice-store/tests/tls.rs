//! TLS to a TLS-only Redis that requires client certificates: a connection verified and
//! presenting its certificate works; a wrong CA, a wrong server name, an expired server
//! certificate and a missing client certificate each fail with the reason named; a plain URL
//! against the TLS port gets its own message. The
//! conformance table and the window-edge test run over TLS too (`common::all_stores`).

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

use std::time::Duration;

use sluice_store::{RedisStore, RedisStoreConfig, RedisTls, Store, StoreError};
use sluice_testkit::RedisServer;
use sluice_testkit::certs::{Certs, Pair};

mod common;

fn store(url: String, tls: Option<RedisTls>) -> RedisStore {
    RedisStore::new(RedisStoreConfig {
        url,
        prefix: "tls".into(),
        timeout: Duration::from_secs(2),
        tls,
        ..RedisStoreConfig::default()
    })
    .unwrap()
}

fn tls(ca: &std::path::Path, client: Option<&Pair>) -> Option<RedisTls> {
    Some(RedisTls {
        files: sluice_tls::ClientFiles {
            ca_file: Some(ca.to_path_buf()),
            cert_file: client.map(|p| p.cert.clone()),
            key_file: client.map(|p| p.key.clone()),
        },
        server_name: None,
    })
}

/// The message a ping fails with.
async fn failure(store: &RedisStore) -> String {
    match store.ping().await {
        Err(StoreError::Unavailable(why)) => why,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn each_handshake_failure_names_its_reason() {
    let certs = Certs::new();
    let server = RedisServer::start_tls(&certs);
    let good = store(server.tls_url(), tls(&certs.ca_file, Some(&certs.client)));
    good.ping().await.unwrap();

    let why = failure(&store(
        server.tls_url(),
        tls(&certs.other_ca_file, Some(&certs.client)),
    ))
    .await;
    assert!(
        why.contains("unknown authority") && why.contains("localhost:"),
        "{why}"
    );

    let why = failure(&store(server.tls_url(), tls(&certs.ca_file, None))).await;
    assert!(why.contains("client certificate required"), "{why}");

    let expired = RedisServer::start_tls_serving(&certs, &certs.expired);
    let why = failure(&store(
        expired.tls_url(),
        tls(&certs.ca_file, Some(&certs.client)),
    ))
    .await;
    assert!(why.contains("expired"), "{why}");

    let elsewhere = RedisServer::start_tls_serving(&certs, &certs.wrong_name);
    let why = failure(&store(
        elsewhere.tls_url(),
        tls(&certs.ca_file, Some(&certs.client)),
    ))
    .await;
    assert!(why.contains("name mismatch"), "{why}");
}

/// Each direction, again and again (each attempt a new connection, a new TLS hello).
const ATTEMPTS: usize = 20;

#[tokio::test]
async fn the_wrong_scheme_for_the_port_is_named_every_time() {
    let certs = Certs::new();
    let tls_only = RedisServer::start_tls(&certs);
    let plain_url = tls_only.tls_url().replace("rediss://", "redis://");
    for attempt in 0..ATTEMPTS {
        let why = failure(&store(plain_url.clone(), None)).await;
        assert!(why.contains("use rediss://"), "attempt {attempt}: {why}");
    }

    // A plain server reads the TLS hello as an inline command: it answers an error when the
    // hello's random bytes hold a newline, else it waits for the rest of the line (the
    // handshake gets nothing back); both end with the plain port named, never a timeout.
    let plain = RedisServer::start();
    let tls_url = plain.url().replace("redis://", "rediss://");
    for attempt in 0..ATTEMPTS {
        // Named before the connect timeout would end the handshake as a bare timeout.
        let why = failure(&store(tls_url.clone(), tls(&certs.ca_file, None))).await;
        assert!(
            why.contains("does not speak TLS") && why.contains("use redis://"),
            "attempt {attempt}: {why}"
        );
    }
}
