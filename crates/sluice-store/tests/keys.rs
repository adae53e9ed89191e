//! The Redis key layout on real servers: hostile user keys neither collide nor move a limit
//! off its slot, every key has a TTL no longer than its state needs, batches over many slots
//! never hit CROSSSLOT, and each check is exactly one EVALSHA.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use sluice_core::{Algorithm, Params, State};
use sluice_store::StoreExt;
use sluice_store::keys::{candidate_keys, key_slot, limit_keys, slot};
use sluice_store::{Check, Store};
use sluice_testkit::info_field;

/// Hostile keys, and the encoded forms of some of them.
const HOSTILE: [&str; 12] = [
    "a}b", "{x}", "}{", "user:{1}", "%7B", "%7Bx%7D", "a%7Db", "{", "}", "%", "%25", "x",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_keys_neither_collide_nor_change_slot() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    let params = Params::new(Algorithm::FixedWindow, 20, 3_600_000, 20).unwrap();
    for (name, store) in common::all_stores(&servers, "hostile").await {
        // Key i consumes i + 1; every key must then show exactly its own consumption.
        for (i, key) in HOSTILE.iter().enumerate() {
            let check = Check::new("h", key, params, i as u64 + 1);
            assert!(
                store.check(&check, now).await.unwrap().allowed,
                "{name} {key}"
            );
        }
        for (i, key) in HOSTILE.iter().enumerate() {
            let peek = Check::new("h", key, params, 0);
            let left = store.check(&peek, now).await.unwrap().remaining;
            assert_eq!(left, 20 - (i as u64 + 1), "{name}: key {key:?} collided");
        }
    }
    // Every key of every limit is on the limit's slot, as the server computes it, and the
    // keys exist where the store put them.
    for key in HOSTILE {
        for algorithm in Algorithm::ALL {
            let names = limit_keys("hostile", "h", key, algorithm);
            for redis_key in &names {
                assert_eq!(
                    servers.cluster.keyslot(redis_key),
                    slot("h", key),
                    "{redis_key}"
                );
                assert_eq!(key_slot(redis_key), slot("h", key));
            }
        }
        let fw = &limit_keys("hostile", "h", key, Algorithm::FixedWindow)[0];
        assert_eq!(
            servers.cluster.cli(&["EXISTS", fw]),
            "1",
            "{fw} on the cluster"
        );
        assert_eq!(servers.redis.cli(&["EXISTS", fw]), "1", "{fw} on redis");
    }
    // The hostile keys do not all hash alike (the tag is the whole policy:key).
    let mut slots: Vec<u16> = HOSTILE.iter().map(|k| slot("h", k)).collect();
    slots.sort_unstable();
    slots.dedup();
    assert!(slots.len() > 6);
}

/// `redis-cli` against one deployment.
type Cli<'a> = Box<dyn Fn(&[&str]) -> String + 'a>;

/// How much slower than the last check the first check of a run may reach Redis.
const SLOW_FIRST_CALL_MS: u64 = 50;

/// PTTL of every key after a run of checks reaches past the state's expiry (as the core
/// computes it) by the store's expiry grace, so a check that queued past the edge finds it,
/// and no further; within two windows and the grace for these shapes. Candidate limits'
/// keys alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_key_has_a_ttl_within_its_state_expiry() {
    let servers = common::Servers::start();
    let redis = common::redis_store(&servers.redis, "ttl", common::TEST_TIMEOUT);
    let cluster = common::cluster_store(&servers.cluster, "ttl", common::TEST_TIMEOUT).await;
    let stores: [(&str, &dyn Store, Cli<'_>); 2] = [
        ("redis", &redis, Box::new(|args| servers.redis.cli(args))),
        (
            "cluster",
            &cluster,
            Box::new(|args| servers.cluster.cli(args)),
        ),
    ];
    let window = 10_000;
    let grace = sluice_store::expiry_grace(common::TEST_TIMEOUT).as_millis() as u64;
    for (name, store, cli) in &stores {
        for algorithm in Algorithm::ALL {
            let params = Params::new(algorithm, 10, window, 10).unwrap();
            // Each state twice: as a limit, checked alone, and as the candidate of a check of
            // a limit it never reaches (its keys `cand:<suffix>`, in the same call).
            let in_force = Params::new(Algorithm::FixedWindow, 100, window, 100).unwrap();
            for candidate in [false, true] {
                let key = format!("{}-{algorithm}", if candidate { "c" } else { "k" });
                let mut state = State::Fresh;
                let mut now = 0;
                for i in 0..6 {
                    now = common::now_ms();
                    let mut check = Check::new("ttl", &key, params, 1 + i % 2);
                    let got = if candidate {
                        check.params = in_force;
                        store
                            .check_with_candidate(&check, &params, now)
                            .await
                            .unwrap()
                            .1
                    } else {
                        store.check(&check, now).await.unwrap()
                    };
                    let want = sluice_core::decide(&params, &mut state, now, check.cost).unwrap();
                    assert_eq!(got, want, "{name} {algorithm} candidate {candidate}");
                }
                let expires = sluice_core::expires_at(&params, &state);
                let redis_keys = if candidate {
                    candidate_keys("ttl", "ttl", &key, algorithm)
                } else {
                    limit_keys("ttl", "ttl", &key, algorithm)
                };
                for redis_key in redis_keys {
                    let pttl: i64 = cli(&["PTTL", &redis_key]).trim().parse().unwrap();
                    let asked = common::now_ms();
                    assert!(pttl > 0, "{name} {redis_key}: PTTL {pttl}");
                    let pttl = pttl as u64;
                    // A window's TTL is set by its first write (KEEPTTL after), counted from
                    // when Redis ran that write: a first call slower than the last (a cold
                    // connection) leaves a few ms more than `now` says.
                    assert!(
                        pttl <= expires - now + grace + SLOW_FIRST_CALL_MS,
                        "{name} {redis_key}: PTTL {pttl} > expiry in {} + grace {grace}",
                        expires - now
                    );
                    assert!(
                        asked + pttl >= expires + grace,
                        "{name} {redis_key}: gone {} ms before expiry + grace",
                        expires + grace - asked - pttl
                    );
                    assert!(
                        pttl <= 2 * window + grace,
                        "{name} {redis_key}: PTTL {pttl}"
                    );
                }
            }
        }
    }
}

/// 64 checks over 64 keys (and so many slots) in one batch: no CROSSSLOT, all decided, and
/// with one of them denied nothing is consumed anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_over_many_slots_work_on_the_cluster() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    let keys: Vec<String> = (0..64).map(|i| format!("user:{i}")).collect();
    let params = |i: usize| {
        let algorithm = Algorithm::ALL[i % Algorithm::ALL.len()];
        Params::new(algorithm, 5, 60_000, 5).unwrap()
    };
    let mut slots: Vec<u16> = keys.iter().map(|k| slot("many", k)).collect();
    slots.sort_unstable();
    slots.dedup();
    assert!(slots.len() > 50);
    for (name, store) in common::all_stores(&servers, "many").await {
        let batch: Vec<Check<'_>> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| Check::new("many", key, params(i), 2))
            .collect();
        let first = store.check_all(&batch, now).await.unwrap();
        assert!(
            first.iter().all(|d| d.allowed && d.remaining == 3),
            "{name}"
        );
        // One check in the batch asks for more than is left: the whole batch is refused and
        // every key keeps exactly 3.
        let mut greedy = batch.clone();
        greedy[37].cost = 4;
        let denied = store.check_all(&greedy, now).await.unwrap();
        assert!(!denied[37].allowed, "{name}");
        assert!(denied.iter().enumerate().all(|(i, d)| i == 37 || d.allowed));
        assert!(
            denied.iter().all(|d| d.remaining == 3),
            "{name}: {denied:?}"
        );
        for (i, key) in keys.iter().enumerate() {
            let peek = Check::new("many", key, params(i), 0);
            assert_eq!(
                store.check(&peek, now).await.unwrap().remaining,
                3,
                "{name} {key}"
            );
        }
    }
    // Keys written by batches and refunds carry TTLs too (at most two 60 s windows and the
    // expiry grace).
    let most = 120_000 + sluice_store::expiry_grace(common::TEST_TIMEOUT).as_millis() as i64;
    for (i, key) in keys.iter().enumerate() {
        for redis_key in limit_keys("many", "many", key, params(i).algorithm) {
            for (name, pttl) in [
                ("redis", servers.redis.cli(&["PTTL", &redis_key])),
                ("cluster", servers.cluster.cli(&["PTTL", &redis_key])),
            ] {
                let pttl: i64 = pttl.trim().parse().unwrap();
                assert!(pttl > 0 && pttl <= most, "{name} {redis_key}: PTTL {pttl}");
            }
        }
    }
}

/// Exactly one EVALSHA per check (the script body is never sent again), on Redis and on the
/// cluster (summed over the masters).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_check_is_exactly_one_evalsha() {
    let servers = common::Servers::start();
    let redis = common::redis_store(&servers.redis, "stat", common::TEST_TIMEOUT);
    let cluster = common::cluster_store(&servers.cluster, "stat", common::TEST_TIMEOUT).await;
    let ports = servers.cluster.ports();
    let stores: [(&str, &dyn Store, Vec<u16>); 2] = [
        ("redis", &redis, vec![servers.redis.port()]),
        ("cluster", &cluster, ports),
    ];
    const CHECKS: u64 = 120;
    for (name, store, ports) in &stores {
        // Check `i`: every algorithm in turn, on 17 keys.
        let check = |i: u64| async move {
            let algorithm = Algorithm::ALL[(i % 6) as usize];
            let key = format!("user:{}", i % 17);
            let c = Check::new(
                "stat",
                &key,
                Params::new(algorithm, 1000, 60_000, 1000).unwrap(),
                1,
            );
            store.check(&c, common::now_ms()).await.unwrap();
        };
        // Warm up: the first call of each script on each node meets NOSCRIPT and runs it as
        // EVAL, which caches it there. 6 × 17 checks run every algorithm on every key, and so
        // every script on every master that holds one of the keys.
        for i in 0..6 * 17 {
            check(i).await;
        }
        for port in ports {
            sluice_testkit::cli(*port, &["CONFIG", "RESETSTAT"]);
        }
        for i in 0..CHECKS {
            check(i).await;
        }
        let mut evalsha = 0;
        let mut eval = 0;
        let mut load = 0;
        let mut report = Vec::new();
        for port in ports {
            let stats = sluice_testkit::cli(*port, &["INFO", "commandstats"]);
            evalsha += common::evalsha_calls(&stats);
            eval += u64::from(info_field(&stats, "cmdstat_eval").is_some());
            load += u64::from(info_field(&stats, "cmdstat_script|load").is_some());
            report.extend(
                stats
                    .lines()
                    .filter(|l| l.starts_with("cmdstat_"))
                    .map(|l| l.split(",usec=").next().unwrap_or(l).to_owned()),
            );
        }
        println!("{name}: {CHECKS} checks -> {report:?}");
        assert_eq!(evalsha, CHECKS, "{name}: EVALSHA calls for {CHECKS} checks");
        assert_eq!(eval, 0, "{name}: EVAL was used");
        assert_eq!(load, 0, "{name}: scripts reloaded after warm-up");
    }
    // A batch on one Redis is one EVALSHA too, whatever its size.
    let keys: Vec<String> = (0..10).map(|i| format!("b{i}")).collect();
    let batch: Vec<Check<'_>> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            Check::new(
                "stat",
                key,
                Params::new(Algorithm::ALL[i % 6], 9, 60_000, 9).unwrap(),
                1,
            )
        })
        .collect();
    redis.check_all(&batch, common::now_ms()).await.unwrap(); // loads the batch script
    sluice_testkit::cli(servers.redis.port(), &["CONFIG", "RESETSTAT"]);
    redis.check_all(&batch, common::now_ms()).await.unwrap();
    let stats = servers.redis.cli(&["INFO", "commandstats"]);
    assert_eq!(common::evalsha_calls(&stats), 1);
}
