//! The decision headers and bodies on 200 and 429, exact under the manual clock.

use sluice_api::QUOTA_EXCEEDED_TYPE;
use sluice_tests::{Daemon, T0, header, req};

const T0_SECS: u64 = T0 / 1000;

#[tokio::test]
async fn an_allowed_check_carries_every_header() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let out = d.unix().check(&req("fw", "h1")).await.unwrap();
    assert_eq!(out.status, 200);
    let h = &out.headers;
    assert_eq!(header(h, "content-type"), "application/json");
    assert_eq!(header(h, "x-ratelimit-limit"), "5");
    assert_eq!(header(h, "x-ratelimit-remaining"), "4");
    assert_eq!(header(h, "x-ratelimit-reset"), (T0_SECS + 10).to_string());
    assert_eq!(header(h, "ratelimit-policy"), r#""fw";q=5;w=10"#);
    assert_eq!(header(h, "ratelimit"), r#""fw";r=4;t=10"#);
    assert!(h.get("retry-after").is_none());
    assert!(h.get("x-ratelimit-degraded").is_none());
    assert!(h.get("x-ratelimit-shadow").is_none());
    let b = &out.body;
    assert!(b.allowed);
    assert_eq!((b.policy.as_str(), b.limit, b.remaining), ("fw", 5, 4));
    assert_eq!(b.reset, T0_SECS + 10);
    assert_eq!(b.retry_after, None);
    assert_eq!(b.delay_ms, 0);
    assert!(b.problem.is_none());
}

#[tokio::test]
async fn a_denied_check_is_a_problem_document_with_retry_after() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    for _ in 0..5 {
        assert_eq!(c.check(&req("fw", "h2")).await.unwrap().status, 200);
    }
    d.clock.advance(3_000);
    let out = c.check(&req("fw", "h2")).await.unwrap();
    assert_eq!(out.status, 429);
    let h = &out.headers;
    assert_eq!(header(h, "content-type"), "application/problem+json");
    assert_eq!(header(h, "x-ratelimit-limit"), "5");
    assert_eq!(header(h, "x-ratelimit-remaining"), "0");
    assert_eq!(header(h, "x-ratelimit-reset"), (T0_SECS + 10).to_string());
    assert_eq!(header(h, "retry-after"), "7");
    assert_eq!(header(h, "ratelimit-policy"), r#""fw";q=5;w=10"#);
    assert_eq!(header(h, "ratelimit"), r#""fw";r=0;t=7"#);
    let b = &out.body;
    assert!(!b.allowed);
    assert_eq!((b.remaining, b.retry_after), (0, Some(7)));
    let p = b.problem.as_ref().unwrap();
    assert_eq!(p.error, "rate_limit_exceeded");
    assert_eq!(
        p.message,
        "Too many requests. Please retry after the specified time."
    );
    assert_eq!(p.problem_type, QUOTA_EXCEEDED_TYPE);
    assert_eq!(p.status, 429);
    assert_eq!(p.violated_policies, vec!["fw".to_owned()]);
    assert!(!p.title.is_empty());
}

#[tokio::test]
async fn a_token_bucket_reports_when_it_is_full_again() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    // 100 per 60 s refills one token every 600 ms; 3 spent are back after 1.8 s.
    for _ in 0..3 {
        c.check(&req("public", "tb")).await.unwrap();
    }
    let out = c.check(&req("public", "tb")).await.unwrap();
    let h = &out.headers;
    assert_eq!(header(h, "x-ratelimit-remaining"), "96");
    assert_eq!(header(h, "ratelimit-policy"), r#""public";q=100;w=60"#);
    assert_eq!(header(h, "ratelimit"), r#""public";r=96;t=3"#);
    assert_eq!(header(h, "x-ratelimit-reset"), (T0_SECS + 3).to_string());
}

#[tokio::test]
async fn a_window_resets_at_its_aligned_edge() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    for _ in 0..5 {
        c.check(&req("fw", "edge")).await.unwrap();
    }
    assert_eq!(c.check(&req("fw", "edge")).await.unwrap().status, 429);
    d.clock.advance(10_000);
    let out = c.check(&req("fw", "edge")).await.unwrap();
    assert_eq!(out.status, 200);
    assert_eq!(
        header(&out.headers, "x-ratelimit-reset"),
        (T0_SECS + 20).to_string()
    );
}
