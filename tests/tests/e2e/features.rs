//! Tiers, peeks, the leaky bucket's delay, GCRA and shadow mode.

use sluice_api::CheckRequest;
use sluice_tests::{Daemon, header, req, req_cost};

fn tiered(key: &str, tier: &str) -> CheckRequest {
    CheckRequest {
        tier: Some(tier.to_owned()),
        ..req("public", key)
    }
}

#[tokio::test]
async fn tiers_have_their_own_limits() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    let free = c.check(&tiered("t-free", "free")).await.unwrap();
    assert_eq!((free.body.limit, free.body.remaining), (2, 1));
    assert_eq!(
        header(&free.headers, "ratelimit-policy"),
        r#""public";q=2;w=60"#
    );
    assert_eq!(
        c.check(&tiered("t-free", "free")).await.unwrap().status,
        200
    );
    assert_eq!(
        c.check(&tiered("t-free", "free")).await.unwrap().status,
        429
    );

    let pro = c.check(&tiered("t-pro", "pro")).await.unwrap();
    // A bucket reports its capacity (burst 2000) as the limit, so Remaining never exceeds it;
    // the policy header says the same rate as 2000 per the 120 s a full refill takes.
    assert_eq!((pro.body.limit, pro.body.remaining), (2000, 1999));
    assert_eq!(
        header(&pro.headers, "ratelimit-policy"),
        r#""public";q=2000;w=120"#
    );
    assert_eq!(header(&pro.headers, "x-ratelimit-limit"), "2000");
    assert_eq!(header(&pro.headers, "x-ratelimit-remaining"), "1999");
}

#[tokio::test]
async fn a_bucket_larger_than_its_limit_never_shows_more_remaining_than_limit() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    // pro: limit 1000 per 60 s, burst 2000. Spend half the bucket in one check.
    let half = c
        .check(&CheckRequest {
            cost: Some(1000),
            ..tiered("t-half", "pro")
        })
        .await
        .unwrap();
    assert_eq!(half.status, 200);
    assert_eq!((half.body.limit, half.body.remaining), (2000, 1000));
    for _ in 0..5 {
        let out = c.check(&tiered("t-half", "pro")).await.unwrap();
        let limit: u64 = header(&out.headers, "x-ratelimit-limit").parse().unwrap();
        let remaining: u64 = header(&out.headers, "x-ratelimit-remaining")
            .parse()
            .unwrap();
        assert!(remaining <= limit, "remaining {remaining} > limit {limit}");
        assert_eq!(limit, out.body.limit);
    }
    // Utilization is consumed / capacity: the first check alone observed 0.5.
    let metrics = d
        .tcp()
        .send(http::Method::GET, "/metrics", &[], "")
        .await
        .unwrap();
    let text = String::from_utf8(metrics.body.to_vec()).unwrap();
    let sum: f64 = text
        .lines()
        .find(|l| {
            l.starts_with("rate_limit_utilization_sum{")
                && l.contains(r#"policy="public""#)
                && l.contains(r#"plan_tier="pro""#)
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no utilization sum for public/pro in\n{text}"));
    assert!(
        sum >= 0.5,
        "utilization sum {sum}: half the bucket was spent"
    );
}

#[tokio::test]
async fn an_unknown_or_absent_tier_gets_the_base_limit() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    let unknown = c.check(&tiered("t-x", "enterprise")).await.unwrap();
    assert_eq!(
        (unknown.status, unknown.body.limit, unknown.body.remaining),
        (200, 100, 99)
    );
    let none = c.check(&req("public", "t-y")).await.unwrap();
    assert_eq!((none.body.limit, none.body.remaining), (100, 99));
}

#[tokio::test]
async fn cost_zero_peeks_without_consuming() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    for _ in 0..3 {
        let peek = c.check(&req_cost("fw", "peek", 0)).await.unwrap();
        assert_eq!((peek.status, peek.body.remaining), (200, 5));
    }
    c.check(&req_cost("fw", "peek", 5)).await.unwrap();
    let peek = c.check(&req_cost("fw", "peek", 0)).await.unwrap();
    assert_eq!(peek.body.remaining, 0);
    assert_eq!(c.check(&req("fw", "peek")).await.unwrap().status, 429);
}

#[tokio::test]
async fn the_leaky_bucket_spaces_admissions_with_delay_ms() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    // 10 per 10 s: one every 1000 ms, queue of 3.
    let delays: Vec<(u16, u64)> = leaky_checks(&c, 4).await;
    assert_eq!(delays, vec![(200, 0), (200, 1000), (200, 2000), (429, 0)]);
    d.clock.advance(1_000);
    let next = c.check(&req("leaky", "lb")).await.unwrap();
    assert_eq!((next.status, next.body.delay_ms), (200, 2000));
}

async fn leaky_checks(c: &sluice_client::Client, n: usize) -> Vec<(u16, u64)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let r = c.check(&req("leaky", "lb")).await.unwrap();
        out.push((r.status, r.body.delay_ms));
    }
    out
}

#[tokio::test]
async fn gcra_allows_its_burst_then_one_per_interval() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    assert_eq!(c.check(&req("gcra", "g")).await.unwrap().status, 200);
    assert_eq!(c.check(&req("gcra", "g")).await.unwrap().status, 200);
    let denied = c.check(&req("gcra", "g")).await.unwrap();
    assert_eq!((denied.status, denied.body.retry_after), (429, Some(1)));
    d.clock.advance(1_000);
    assert_eq!(c.check(&req("gcra", "g")).await.unwrap().status, 200);
}

#[tokio::test]
async fn shadow_mode_never_denies_but_counts() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    for _ in 0..3 {
        let out = c.check(&req("shadowed", "s")).await.unwrap();
        assert_eq!(out.status, 200);
        assert!(out.body.allowed);
        assert_eq!(header(&out.headers, "x-ratelimit-shadow"), "1");
        assert!(out.headers.get("retry-after").is_none());
    }
    let text = sluice_tests::metrics_text(&d).await;
    assert!(
        text.contains(r#"rate_limit_shadow_rejections_total{policy="shadowed"} 2"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_shadow_denial_does_not_cancel_a_batch() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    c.check(&req("shadowed", "sb")).await.unwrap();
    let batch = sluice_api::BatchRequest {
        checks: vec![req("shadowed", "sb"), req("fw", "sb")],
    };
    let out = c.check_batch(&batch).await.unwrap();
    assert_eq!(out.status, 200);
    assert!(out.body.allowed);
    assert_eq!(
        c.check(&req_cost("fw", "sb", 0))
            .await
            .unwrap()
            .body
            .remaining,
        4
    );
}
