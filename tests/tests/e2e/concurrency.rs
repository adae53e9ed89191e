//! Exactness under concurrency: many clients at once never get more than `limit` admitted.

use sluice_tests::{Daemon, admitted};

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
