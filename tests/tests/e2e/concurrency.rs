//! Exactness under concurrency: many clients at once never get more than `limit` admitted.

use std::sync::Arc;

use sluice_tests::{Daemon, req};

async fn admitted(d: &Daemon, policy: &str, clients: usize, each: usize) -> usize {
    let mut tasks = Vec::new();
    for i in 0..clients {
        // Half over the socket, half over TCP: the listeners share one limiter.
        let client = Arc::new(if i % 2 == 0 { d.unix() } else { d.tcp() });
        let policy = policy.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut allowed = 0;
            for _ in 0..each {
                let out = client.check(&req(&policy, "hot")).await.unwrap();
                assert!(out.status == 200 || out.status == 429, "{}", out.status);
                allowed += usize::from(out.status == 200);
            }
            allowed
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fixed_window_admits_exactly_its_limit() {
    let d = Daemon::start().await;
    assert_eq!(admitted(&d, "exact_fw", 40, 25).await, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sliding_log_admits_exactly_its_limit() {
    let d = Daemon::start().await;
    assert_eq!(admitted(&d, "exact_log", 40, 25).await, 100);
}
