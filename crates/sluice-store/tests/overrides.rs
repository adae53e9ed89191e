//! Run-time limit overrides on every backend: stored, replaced, listed, deleted, versioned,
//! and (on Redis and Cluster) seen by a second store on the same backend, as a second daemon
//! would. One test body, every backend.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use sluice_store::LimitOverride;

fn pro(limit: u64, burst: Option<u64>) -> LimitOverride {
    LimitOverride {
        policy: "public".into(),
        tier: "pro".into(),
        limit,
        burst,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrides_are_stored_replaced_listed_and_deleted_on_every_backend() {
    let servers = common::Servers::start();
    let first = common::override_stores(&servers, "ovr").await;
    let second = common::override_stores(&servers, "ovr").await;
    for ((name, store), (_, other)) in first.into_iter().zip(second) {
        let (v0, none) = store.list().await.unwrap();
        assert!(none.is_empty(), "{name}");

        store.put(&pro(200, Some(400))).await.unwrap();
        let free = LimitOverride {
            tier: "free".into(),
            ..pro(5, None)
        };
        store.put(&free).await.unwrap();
        let (v1, all) = store.list().await.unwrap();
        assert!(v1 > v0, "{name}: every change bumps the version");
        assert_eq!(all, vec![free.clone(), pro(200, Some(400))], "{name}");
        assert_eq!(store.version().await.unwrap(), v1, "{name}");

        // Replacing drops what the new override does not say (the burst).
        store.put(&pro(300, None)).await.unwrap();
        let (_, all) = store.list().await.unwrap();
        assert_eq!(all, vec![free.clone(), pro(300, None)], "{name}");

        if name != "memory" {
            // Another daemon on the same backend sees the same overrides and version.
            let (v, seen) = other.list().await.unwrap();
            assert_eq!(seen, all, "{name}");
            assert_eq!(v, store.version().await.unwrap(), "{name}");
        }

        assert!(store.delete("public", "pro").await.unwrap(), "{name}");
        assert!(!store.delete("public", "pro").await.unwrap(), "{name}");
        let (_, all) = store.list().await.unwrap();
        assert_eq!(all, vec![free], "{name}");
    }
}
