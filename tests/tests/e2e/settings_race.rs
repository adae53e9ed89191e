//! The run-time settings have one writer: admin changes, reloads of the file and the poll of
//! the backend's settings, all at once on a real Redis and a real Redis Cluster, never let an
//! admin change be answered (or a check after its answer be decided) with the policies from
//! before it, and never let a reload drop a stored override.
//!
//! Several writers each change the limit of a tier of their own (an override adds the tier)
//! hundreds of times; after each answer a check of that tier must carry the new limit. Beside
//! them the file is reloaded over and over (alternating the policy's base limit) and the
//! settings are re-read as the poll does, so every change meets reloads and re-reads in
//! flight: thousands of interleavings per backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use http::Method;
use sluice_api::CheckRequest;
use sluice_config::ConfigSource;
use sluice_tests::{Daemon, header};

use crate::admin::{TOKEN, admin};
use crate::backends::Backend;

/// Writers changing a tier each, and the changes each makes.
const WRITERS: u64 = 4;
const CHANGES: u64 = 250;

/// The file, with the base limit `base` (reloads alternate it).
fn config(backend: &Backend, base: u64) -> String {
    format!(
        "{}[admin]\ntoken = \"{TOKEN}\"\n[policies.race]\nalgorithm = \"fixed_window\"\nlimit = {base}\nwindow = \"1h\"\n",
        backend.section("2s")
    )
}

/// The `X-RateLimit-Limit` a peek of `race` on `tier` gets (fixed_window: its limit).
async fn limit_of(d: &Daemon, tier: &str) -> String {
    let check = CheckRequest {
        tier: Some(tier.to_owned()),
        cost: Some(0),
        ..CheckRequest::new("race", "user:race")
    };
    let out = d.unix().check(&check).await.unwrap();
    header(&out.headers, "x-ratelimit-limit").to_owned()
}

/// Writer `w`: sets its tier's limit `CHANGES` times, each time checking that the answer came
/// after the change was in force.
async fn write(d: Arc<Daemon>, w: u64) -> u64 {
    let tier = format!("w{w}");
    let path = format!("/v1/admin/policies/race/tiers/{tier}");
    for i in 0..CHANGES {
        let limit = 1_000 * (w + 1) + i;
        let out = admin(&d, Method::PUT, &path, &format!("{{\"limit\": {limit}}}")).await;
        assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
        assert_eq!(
            limit_of(&d, &tier).await,
            limit.to_string(),
            "change {i} of writer {w}: a check after its answer saw an older limit"
        );
    }
    CHANGES
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_changes_reloads_and_the_poll_never_answer_with_older_policies() {
    for backend in [
        Backend::Redis(sluice_testkit::RedisServer::start()),
        Backend::Cluster(sluice_testkit::RedisCluster::start()),
    ] {
        let d = Arc::new(Daemon::start(&config(&backend, 10)).await);
        let done = Arc::new(AtomicBool::new(false));
        let reloads = Arc::new(AtomicU64::new(0));
        let reloading = {
            let (d, done, reloads) = (d.clone(), done.clone(), reloads.clone());
            let sources = [11, 10].map(|base| ConfigSource::Text {
                name: "race.toml".into(),
                toml: config(&backend, base),
            });
            tokio::spawn(async move {
                let mut at = 0;
                while !done.load(Ordering::Relaxed) {
                    d.app.reload(&sources[at % 2]).await;
                    reloads.fetch_add(1, Ordering::Relaxed);
                    at += 1;
                }
            })
        };
        let polling = {
            let (d, done) = (d.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    // What the poll does, as often as it can.
                    d.app.settings.sync().await.unwrap();
                }
            })
        };
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| tokio::spawn(write(d.clone(), w)))
            .collect();
        let mut changes = 0;
        for writer in writers {
            changes += writer.await.unwrap();
        }
        done.store(true, Ordering::Relaxed);
        reloading.await.unwrap();
        polling.await.unwrap();
        let reloads = reloads.load(Ordering::Relaxed);
        assert_eq!(changes, WRITERS * CHANGES);
        assert!(
            reloads >= 10,
            "{}: only {reloads} reloads ran beside the changes",
            backend.name()
        );
        // Every override survived every reload: each tier at its last limit.
        for w in 0..WRITERS {
            let last = 1_000 * (w + 1) + CHANGES - 1;
            assert_eq!(limit_of(&d, &format!("w{w}")).await, last.to_string());
        }
    }
}
