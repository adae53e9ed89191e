//! `GET /v1/top` and `rate_limit_denied_keys_ratio`: who is being limited, from the daemon.

use http::Method;
use sluice_api::{ErrorBody, TopResponse};
use sluice_tests::{Daemon, req};

async fn get(d: &Daemon, path: &str) -> sluice_client::RawResponse {
    d.unix().send(Method::GET, path, &[], "").await.unwrap()
}

#[tokio::test]
async fn the_top_list_names_the_keys_that_are_limited() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    for _ in 0..20 {
        c.check(&req("fw", "user:heavy")).await.unwrap();
    }
    for _ in 0..2 {
        c.check(&req("fw", "user:light")).await.unwrap();
    }
    let out = get(&d, "/v1/top?policy=fw&by=rejected&n=5&period=5m").await;
    assert_eq!(out.status, 200, "{:?}", out.body);
    let top: TopResponse = out.json().unwrap();
    assert!(top.approximate);
    assert_eq!((top.total_checked, top.total_rejected), (22, 15));
    let first = &top.keys[0];
    assert_eq!(first.key, "user:heavy");
    assert!(first.rejected >= 15 && first.rejected <= 15 + top.error_bound.rejected);
    assert!(first.checked >= 20 && first.checked <= 20 + top.error_bound.checked);
    assert!(
        top.keys.iter().all(|k| k.key != "user:light"),
        "never rejected"
    );

    let by_checked: TopResponse = get(&d, "/v1/top?policy=fw&by=checked&period=60m")
        .await
        .json()
        .unwrap();
    let keys: Vec<&str> = by_checked.keys.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(keys, ["user:heavy", "user:light"]);

    // The ratio comes from HyperLogLogs of 1 024 registers: two keys share one about once in
    // a thousand runs (the ratio then reads 1). Eight keys of each kind keep a shared register
    // within the tolerance.
    for i in 2..=8 {
        for _ in 0..20 {
            c.check(&req("fw", &format!("user:heavy-{i}")))
                .await
                .unwrap();
        }
        for _ in 0..2 {
            c.check(&req("fw", &format!("user:light-{i}")))
                .await
                .unwrap();
        }
    }
    let metrics = String::from_utf8(get(&d, "/metrics").await.body.to_vec()).unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("rate_limit_denied_keys_ratio{") && l.contains("policy=\"fw\""))
        .unwrap();
    let ratio: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((ratio - 0.5).abs() < 0.1, "half of the keys denied: {line}");
}

#[tokio::test]
async fn bad_top_parameters_are_named() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    for (query, field) in [
        ("by=rejected", "policy"),
        ("policy=fw&by=often", "by"),
        ("policy=fw&n=0", "n"),
        ("policy=fw&n=101", "n"),
        ("policy=fw&n=many", "n"),
        ("policy=fw&period=1d", "period"),
    ] {
        let out = get(&d, &format!("/v1/top?{query}")).await;
        assert_eq!(out.status, 400, "{query}");
        let body: ErrorBody = out.json().unwrap();
        assert_eq!(body.error, "bad_request");
        assert_eq!(body.field.as_deref(), Some(field), "{query}");
    }
    let out = get(&d, "/v1/top?policy=nope").await;
    assert_eq!(out.status, 404);
    assert_eq!(out.json::<ErrorBody>().unwrap().error, "unknown_policy");
}
