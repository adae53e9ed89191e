//! Run-time settings on every backend (limit overrides and candidates): stored, replaced,
//! listed, deleted, versioned, and (on Redis and Cluster) seen by a second store on the same
//! backend, as a second daemon would. One test body, every backend.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use sluice_store::{CandidateOverride, LimitOverride};

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

fn candidate(tier: &str, limit: u64) -> CandidateOverride {
    CandidateOverride::new("public", tier, limit)
}

/// Candidates live beside the overrides: a record of their own per (policy, tier), so a
/// candidate and an override of one tier never replace each other, and the one version moves
/// with either, so one poll covers both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_are_stored_beside_overrides_under_the_same_version_on_every_backend() {
    let servers = common::Servers::start();
    let first = common::override_stores(&servers, "cand").await;
    let second = common::override_stores(&servers, "cand").await;
    for ((name, store), (_, other)) in first.into_iter().zip(second) {
        let empty = store.settings().await.unwrap();
        assert!(
            empty.limits.is_empty() && empty.candidates.is_empty(),
            "{name}"
        );

        store.put(&pro(200, None)).await.unwrap();
        let v1 = store.version().await.unwrap();
        let full = CandidateOverride {
            burst: Some(300),
            window: Some("30s".into()),
            algorithm: Some("gcra".into()),
            ..candidate("pro", 250)
        };
        store.put_candidate(&full).await.unwrap();
        store.put_candidate(&candidate("none", 150)).await.unwrap();
        let v2 = store.version().await.unwrap();
        assert!(v2 > v1, "{name}: a candidate bumps the one version");

        let seen = store.settings().await.unwrap();
        assert_eq!(seen.version, v2, "{name}");
        assert_eq!(seen.limits, vec![pro(200, None)], "{name}");
        assert_eq!(
            seen.candidates,
            vec![candidate("none", 150), full.clone()],
            "{name}: every field kept, sorted by (policy, tier)"
        );
        let (_, limits) = store.list().await.unwrap();
        assert_eq!(
            limits,
            vec![pro(200, None)],
            "{name}: list is the overrides only"
        );

        if name != "memory" {
            assert_eq!(other.settings().await.unwrap(), seen, "{name}");
        }

        // Replacing drops what the new candidate does not say.
        store.put_candidate(&candidate("pro", 260)).await.unwrap();
        assert!(store.delete_candidate("public", "none").await.unwrap());
        assert!(!store.delete_candidate("public", "none").await.unwrap());
        let seen = store.settings().await.unwrap();
        assert_eq!(seen.candidates, vec![candidate("pro", 260)], "{name}");
        assert_eq!(
            seen.limits,
            vec![pro(200, None)],
            "{name}: the override of the same tier stays"
        );
        assert!(store.delete("public", "pro").await.unwrap(), "{name}");
        assert_eq!(
            store.settings().await.unwrap().candidates,
            vec![candidate("pro", 260)],
            "{name}: and the candidate outlives the override"
        );
    }
}
