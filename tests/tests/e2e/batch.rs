//! Batches: all-or-nothing, one result per check in order, headers of the worst result.

use sluice_api::BatchRequest;
use sluice_tests::{Daemon, header, req, req_cost};

#[tokio::test]
async fn an_allowed_batch_consumes_every_check() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    let batch = BatchRequest {
        checks: vec![
            req("fw", "b1"),
            req_cost("public", "b1", 10),
            req("log", "b1"),
        ],
    };
    let out = c.check_batch(&batch).await.unwrap();
    assert_eq!(out.status, 200);
    assert!(out.body.allowed);
    let results = &out.body.results;
    assert_eq!(results.len(), 3);
    assert_eq!(
        results
            .iter()
            .map(|r| (r.policy.as_str(), r.remaining))
            .collect::<Vec<_>>(),
        vec![("fw", 4), ("public", 90), ("log", 4)]
    );
    // Headers of the result with the least left.
    assert_eq!(header(&out.headers, "x-ratelimit-remaining"), "4");
    assert_eq!(header(&out.headers, "content-type"), "application/json");
    let after = c.check(&req_cost("public", "b1", 0)).await.unwrap();
    assert_eq!(after.body.remaining, 90);
}

#[tokio::test]
async fn a_denied_batch_consumes_nothing() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    for _ in 0..5 {
        c.check(&req("fw", "full")).await.unwrap();
    }
    d.clock.advance(4_000);
    let batch = BatchRequest {
        checks: vec![
            req_cost("public", "b2", 50),
            req("fw", "full"),
            req("log", "b2"),
        ],
    };
    let out = c.check_batch(&batch).await.unwrap();
    assert_eq!(out.status, 429);
    assert!(!out.body.allowed);
    let r = &out.body.results;
    assert_eq!(
        r.iter().map(|r| r.allowed).collect::<Vec<_>>(),
        vec![true, false, true]
    );
    // Each result describes the state left unchanged.
    assert_eq!((r[0].remaining, r[2].remaining), (100, 5));
    assert_eq!(r[1].retry_after, Some(6));
    let problem = out.body.problem.as_ref().unwrap();
    assert_eq!(problem.violated_policies, vec!["fw".to_owned()]);
    assert_eq!(problem.status, 429);
    assert_eq!(
        header(&out.headers, "content-type"),
        "application/problem+json"
    );
    assert_eq!(header(&out.headers, "retry-after"), "6");
    assert_eq!(header(&out.headers, "ratelimit"), r#""fw";r=0;t=6"#);

    // Nothing was consumed by the denied batch.
    assert_eq!(
        c.check(&req_cost("public", "b2", 0))
            .await
            .unwrap()
            .body
            .remaining,
        100
    );
    assert_eq!(
        c.check(&req_cost("log", "b2", 0))
            .await
            .unwrap()
            .body
            .remaining,
        5
    );
}

#[tokio::test]
async fn the_longest_retry_wins_the_headers() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    for _ in 0..5 {
        c.check(&req("fw", "r")).await.unwrap();
        c.check(&req("log", "r")).await.unwrap();
        d.clock.advance(1_000);
    }
    // fw frees at T0+10 s (5 s from now); the log's oldest entry frees at T0+10 s too, but
    // a cost of 2 must wait for the second, at T0+11 s.
    let batch = BatchRequest {
        checks: vec![req("fw", "r"), req_cost("log", "r", 2)],
    };
    let out = c.check_batch(&batch).await.unwrap();
    assert_eq!(out.status, 429);
    assert_eq!(out.body.results[0].retry_after, Some(5));
    assert_eq!(out.body.results[1].retry_after, Some(6));
    assert_eq!(header(&out.headers, "retry-after"), "6");
    assert_eq!(
        header(&out.headers, "ratelimit-policy"),
        r#""log";q=5;w=10"#
    );
}

#[tokio::test]
async fn a_batch_of_64_is_accepted() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let batch = BatchRequest {
        checks: (0..64).map(|i| req("public", &format!("k{i}"))).collect(),
    };
    let out = d.unix().check_batch(&batch).await.unwrap();
    assert_eq!(out.status, 200);
    assert_eq!(out.body.results.len(), 64);
}
