//! `backend.kind = "sentinel"` on real processes: a master, a replica and three
//! `redis-sentinel`s (quorum 2, `down-after-milliseconds` 1 s). Checks are exact through
//! Sentinel; a failover (`SENTINEL FAILOVER`, the master SIGKILLed or SIGSTOPped) is followed
//! without a new store, checks resume within the failover time plus 2 s, no check reaches the
//! old master after it, and a count the replica had received survives exactly; the first sentinel down at start is passed over; a wrong master
//! name is a clear error; the master's password never shows.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Params};
use sluice_store::{
    Check, SentinelStore, SentinelStoreConfig, Store, StoreError, StoreExt, StoreKind,
};
use sluice_testkit::certs::Certs;
use sluice_testkit::{RedisSentinels, SentinelSetup, free_port};

const TIMEOUT: Duration = Duration::from_millis(500);
/// What the spec allows past the failover itself for checks to resume.
const RESUME_WITHIN: Duration = Duration::from_secs(2);
/// The limit of the hot keys: never reached.
const HOT_LIMIT: u64 = 1_000_000;
const MASTER_PASSWORD: &str = "m4ster-pw-never-shown";
const SENTINEL_PASSWORD: &str = "s3ntinel-pw-never-shown";

fn params(limit: u64) -> Params {
    // A day-long window: what was consumed stays counted for the whole test.
    Params::new(Algorithm::FixedWindow, limit, 86_400_000, limit).unwrap()
}

fn store_on(sentinels: Vec<String>, master: &str, password: Option<&str>) -> SentinelStore {
    SentinelStore::new(SentinelStoreConfig {
        sentinels,
        master: master.into(),
        password: password.map(str::to_owned),
        prefix: "sent".into(),
        timeout: TIMEOUT,
        ..SentinelStoreConfig::default()
    })
    .unwrap()
}

/// Pings until the store answers (it finds the master in the background).
async fn until_ready(store: &dyn Store, limit: Duration) {
    let start = Instant::now();
    loop {
        match store.ping().await {
            Ok(()) => return,
            Err(err) => assert!(start.elapsed() < limit, "not ready after {limit:?}: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The error of a store whose first lookup failed (a ping answers it once made).
async fn first_lookup_failure(store: &SentinelStore) -> String {
    let start = Instant::now();
    loop {
        let err = store
            .ping()
            .await
            .expect_err("no master can be found")
            .to_string();
        if !err.contains("not found through the sentinels yet") {
            return err;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "still {err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Checks of cost 1 on `key` (limit `limit`) from `clients` tasks at once until each is
/// denied; how many were allowed. Errors fail the test.
async fn admitted_until_denied(store: &Arc<SentinelStore>, key: &str, limit: u64) -> u64 {
    let admitted = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (store, admitted, key) = (Arc::clone(store), Arc::clone(&admitted), key.to_owned());
            tokio::spawn(async move {
                loop {
                    let check = Check::new("p", &key, params(limit), 1);
                    let decision = store.check(&check, common::now_ms()).await.unwrap();
                    if !decision.allowed {
                        return;
                    }
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    admitted.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exact_through_sentinel_with_the_first_sentinel_down_and_no_password_shown() {
    let group = RedisSentinels::start_with(SentinelSetup {
        password: Some(MASTER_PASSWORD),
        sentinel_password: Some(SENTINEL_PASSWORD),
        tls: None,
    });
    // The first sentinel listed is down (nothing listens there): found through the next.
    let mut sentinels = vec![format!(
        "redis://:{SENTINEL_PASSWORD}@127.0.0.1:{}",
        free_port()
    )];
    sentinels.extend(group.sentinel_urls());
    let store = Arc::new(store_on(
        sentinels.clone(),
        &group.master_name,
        Some(MASTER_PASSWORD),
    ));
    assert_eq!(store.kind(), StoreKind::Redis);
    until_ready(store.as_ref(), Duration::from_secs(5)).await;
    assert_eq!(
        store.master_address(),
        Some(format!("127.0.0.1:{}", group.master_port()))
    );
    assert_eq!(admitted_until_denied(&store, "exact", 100).await, 100);

    // The master's password is refused without it: the error names no password.
    let without = store_on(sentinels.clone(), &group.master_name, Some("wrong-pw"));
    let start = Instant::now();
    let failure = loop {
        match without.ping().await {
            Err(err) if start.elapsed() > Duration::from_secs(1) => break err,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(()) => panic!("a wrong master password was accepted"),
        }
    };
    let text = format!("{failure} {failure:?} {without:?} {store:?}");
    println!("wrong password: {failure}");
    for secret in [MASTER_PASSWORD, SENTINEL_PASSWORD, "wrong-pw"] {
        assert!(!text.contains(secret), "{secret} shown in {text}");
    }

    // A name no sentinel monitors: a clear error naming it and the field, nothing served.
    let wrong = store_on(sentinels, "no-such-master", Some(MASTER_PASSWORD));
    let text = first_lookup_failure(&wrong).await;
    println!("wrong master name: {text}");
    let err = wrong.ping().await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(
        text.contains("no sentinel knows a master named \"no-such-master\" (backend.master)"),
        "{text}"
    );
    assert!(!text.contains(SENTINEL_PASSWORD), "{text}");
    let check = Check::new("p", "k", params(10), 1);
    assert!(wrong.check(&check, common::now_ms()).await.is_err());
}

/// Hot keys checked by 32 clients until stopped; each answer's time, and whether it was an
/// error.
struct Load {
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<(Instant, bool)>>>,
}

impl Load {
    fn start(store: &Arc<SentinelStore>) -> Load {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks = (0..32)
            .map(|i| {
                let (store, stop) = (Arc::clone(store), Arc::clone(&stop));
                tokio::spawn(async move {
                    let key = format!("hot{}", i % 4);
                    let mut answers = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let check = Check::new("p", &key, params(HOT_LIMIT), 1);
                        let result = store.check(&check, common::now_ms()).await;
                        answers.push((Instant::now(), result.is_err()));
                        if result.is_err() {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                    answers
                })
            })
            .collect();
        Load { stop, tasks }
    }

    /// Stops the clients; every answer, in time order.
    async fn stop(self) -> Vec<(Instant, bool)> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for task in self.tasks {
            all.extend(task.await.unwrap());
        }
        all.sort_by_key(|(at, _)| *at);
        all
    }
}

/// How a failover is made.
#[derive(Clone, Copy, Debug)]
enum Failover {
    Command,
    KillMaster,
    /// SIGSTOP: the old master hangs (its connections stay open) and comes back, demoted.
    PauseMaster,
}

/// A failover under load on one store: checks resume within `RESUME_WITHIN` of the
/// sentinels naming the new master, no check after that reaches the old master, and a count
/// the replica had received survives exactly.
async fn follows(failover: Failover) {
    let mut group = RedisSentinels::start();
    let store = Arc::new(store_on(group.sentinel_urls(), &group.master_name, None));
    until_ready(store.as_ref(), Duration::from_secs(5)).await;
    let old = group.master_port();

    // 20 of a limit of 50 taken and replicated before the failover.
    let kept = Check::new("p", "kept", params(50), 1);
    for _ in 0..20 {
        assert!(store.check(&kept, common::now_ms()).await.unwrap().allowed);
    }
    group.wait_replicated(Duration::from_secs(5));

    let load = Load::start(&store);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    match failover {
        Failover::Command => group.failover(),
        Failover::KillMaster => group.kill_server(old),
        Failover::PauseMaster => group.pause_server(old),
    }
    let (new, moved_at) = group.wait_master_moved(old, Duration::from_secs(30));
    // Run on past the switch long enough to see the checks resume.
    tokio::time::sleep(RESUME_WITHIN + Duration::from_millis(500)).await;
    let answers = load.stop().await;
    let failover_took = moved_at - started;
    // What the old master admitted that never reached the new one (asynchronous replication):
    // the admitted checks of the hot keys less what the new master counts of them.
    let admitted = answers.iter().filter(|(_, failed)| !failed).count() as u64;
    let mut counted = 0;
    for i in 0..4 {
        let key = format!("hot{i}");
        let peek = Check::new("p", &key, params(HOT_LIMIT), 0);
        counted += HOT_LIMIT
            - store
                .check(&peek, common::now_ms())
                .await
                .unwrap()
                .remaining;
    }
    println!(
        "{failover:?}: {admitted} checks admitted, {counted} counted by the new master: {} lost with the old master",
        admitted.saturating_sub(counted)
    );

    let failures: Vec<_> = answers.iter().filter(|(_, failed)| *failed).collect();
    let last_failure = failures.last().map(|(at, _)| *at);
    let resumed_after =
        last_failure.map_or(Duration::ZERO, |at| at.saturating_duration_since(moved_at));
    let outage = last_failure.map_or(Duration::ZERO, |at| at.saturating_duration_since(started));
    println!(
        "{failover:?}: sentinels switched {old} -> {new} after {failover_took:?}; {} answers, {} failed; \
         the last failure {outage:?} after the failover began, {resumed_after:?} after the switch",
        answers.len(),
        failures.len()
    );
    assert!(
        resumed_after <= RESUME_WITHIN,
        "checks still failing {resumed_after:?} after the sentinels switched"
    );
    assert!(
        answers.iter().any(|(at, failed)| !failed && *at > moved_at),
        "no check answered after the switch"
    );
    assert_eq!(store.master_address(), Some(format!("127.0.0.1:{new}")));

    // The same store, no restart: the old master (if alive, now a replica) answers no check.
    if let Failover::PauseMaster = failover {
        group.resume_server(old);
    }
    let old_calls = match failover {
        Failover::Command | Failover::PauseMaster => Some(common::evalsha_calls(
            &group.server_cli(old, &["INFO", "commandstats"]),
        )),
        Failover::KillMaster => None,
    };
    let hot = Check::new("p", "after", params(1_000_000), 1);
    for _ in 0..50 {
        assert!(store.check(&hot, common::now_ms()).await.unwrap().allowed);
    }
    if let Some(before) = old_calls {
        let after = common::evalsha_calls(&group.server_cli(old, &["INFO", "commandstats"]));
        assert_eq!(after, before, "the old master ran checks after the switch");
    }

    // The replicated count survived: exactly 30 more are admitted, across 32 clients.
    assert_eq!(admitted_until_denied(&store, "kept", 50).await, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follows_sentinel_failover_without_a_restart() {
    follows(Failover::Command).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follows_a_killed_master_without_a_restart() {
    follows(Failover::KillMaster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follows_a_hung_master_without_a_restart() {
    follows(Failover::PauseMaster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_and_master_over_tls() {
    let certs = Certs::new();
    let group = RedisSentinels::start_with(SentinelSetup {
        tls: Some(&certs),
        ..SentinelSetup::default()
    });
    let store = Arc::new(
        SentinelStore::new(SentinelStoreConfig {
            sentinels: group.sentinel_urls(),
            master: group.master_name.clone(),
            prefix: "sent-tls".into(),
            timeout: TIMEOUT,
            tls: Some(common::client_tls(&certs)),
            ..SentinelStoreConfig::default()
        })
        .unwrap(),
    );
    until_ready(store.as_ref(), Duration::from_secs(5)).await;
    assert_eq!(admitted_until_denied(&store, "exact", 40).await, 40);

    // Another CA: neither a sentinel nor the master is trusted, and the error says why.
    let mut wrong = common::client_tls(&certs);
    wrong.files.ca_file = Some(certs.other_ca_file.clone());
    let untrusted = SentinelStore::new(SentinelStoreConfig {
        sentinels: group.sentinel_urls(),
        master: group.master_name.clone(),
        timeout: TIMEOUT,
        tls: Some(wrong),
        ..SentinelStoreConfig::default()
    })
    .unwrap();
    let err = first_lookup_failure(&untrusted).await;
    println!("untrusted: {err}");
    assert!(err.contains("unknown authority"), "{err}");
}
