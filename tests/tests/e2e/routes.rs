//! The other routes, and the two listeners answering alike.

use http::Method;
use sluice_api::PoliciesResponse;
use sluice_tests::{Daemon, req};

#[tokio::test]
async fn healthz_and_readyz_answer_200() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    for path in ["/healthz", "/readyz"] {
        let raw = d.unix().send(Method::GET, path, &[], "").await.unwrap();
        assert_eq!(raw.status, 200, "{path}");
        assert_eq!(raw.header("content-type"), Some("application/json"));
    }
}

#[tokio::test]
async fn policies_lists_the_effective_policies() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let raw = d
        .tcp()
        .send(Method::GET, "/v1/policies", &[], "")
        .await
        .unwrap();
    assert_eq!(raw.status, 200);
    let body: PoliciesResponse = raw.json().unwrap();
    let public = &body.policies["public"];
    assert_eq!(public.algorithm, "token_bucket");
    assert_eq!(
        (public.limit, public.window_ms, public.burst),
        (100, 60_000, 100)
    );
    assert_eq!(public.window, "60s");
    assert_eq!(public.fail, "open");
    assert_eq!(public.tiers["free"].limit, 2);
    assert_eq!(public.tiers["free"].burst, 2);
    assert_eq!(
        (public.tiers["pro"].limit, public.tiers["pro"].burst),
        (1000, 2000)
    );
    assert!(body.policies["shadowed"].shadow);
    assert_eq!(public.scope, "local");
    assert_eq!(body.policies.len(), 9);
}

/// Callers choose `endpoint` and `tier` freely; the series they can create may not grow with
/// them. 300 distinct made-up values of each, allowed and rejected, land in a fixed set of
/// series: the policy's tiers and endpoints, `none` and `other`.
#[tokio::test]
async fn made_up_endpoints_and_tiers_never_grow_the_series() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    let series = |text: &str| {
        text.lines()
            .filter(|l| {
                l.starts_with("rate_limit_requests_total{") && l.contains("policy=\"public\"")
            })
            .count()
    };
    let before = {
        let raw = c.send(Method::GET, "/metrics", &[], "").await.unwrap();
        series(std::str::from_utf8(&raw.body).unwrap())
    };
    for i in 0..300 {
        let mut check = req("public", &format!("spray:{}", i % 2));
        check.endpoint = Some(format!("/made-up/{i}"));
        check.tier = Some(format!("tier-{i}"));
        c.check(&check).await.unwrap();
    }
    let raw = c.send(Method::GET, "/metrics", &[], "").await.unwrap();
    let text = String::from_utf8(raw.body.to_vec()).unwrap();
    assert!(
        !text.contains("made-up") && !text.contains("tier-1"),
        "{text}"
    );
    // 150 checks on each of 2 keys of a bucket of 100: 200 allowed and 100 rejected, each
    // outcome in one `other`/`other` series.
    for (status, count) in [("allowed", 200), ("rejected", 100)] {
        let line = format!(
            r#"rate_limit_requests_total{{status="{status}",policy="public",endpoint="other",plan_tier="other"}} {count}"#
        );
        assert!(text.contains(&line), "{line}: {text}");
    }
    let after = series(&text);
    assert!(
        after <= before + 2,
        "series grew from {before} to {after}: {text}"
    );
}

#[tokio::test]
async fn metrics_names_every_recorded_metric() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    c.check(&req("fw", "m")).await.unwrap();
    let mut endpoint = req("public", "m");
    endpoint.endpoint = Some("/orders".to_owned());
    endpoint.tier = Some("pro".to_owned());
    c.check(&endpoint).await.unwrap();
    endpoint.endpoint = Some("/anything-else".to_owned());
    endpoint.tier = Some("made-up".to_owned());
    c.check(&endpoint).await.unwrap();
    let raw = c.send(Method::GET, "/metrics", &[], "").await.unwrap();
    assert_eq!(raw.status, 200);
    let text = String::from_utf8(raw.body.to_vec()).unwrap();
    for name in [
        "rate_limit_requests_total",
        "rate_limit_check_duration_seconds",
        "rate_limit_fail_open_total",
        "rate_limit_fail_closed_total",
        "rate_limit_backend_errors_total",
        "rate_limit_shadow_rejections_total",
        "rate_limit_keys",
        "rate_limit_config_reloads_total",
        "rate_limit_utilization",
    ] {
        assert!(
            text.contains(&format!("# TYPE {}", name.trim_end_matches("_total"))),
            "{name}: {text}"
        );
        assert!(text.contains(name), "{name}");
    }
    assert!(text.contains(
        r#"rate_limit_requests_total{status="allowed",policy="fw",endpoint="none",plan_tier="none"} 1"#
    ), "{text}");
    assert!(text.contains(
        r#"rate_limit_requests_total{status="allowed",policy="public",endpoint="/orders",plan_tier="pro"} 1"#
    ), "{text}");
    // Values the config does not name are bounded to `other`.
    assert!(text.contains(
        r#"rate_limit_requests_total{status="allowed",policy="public",endpoint="other",plan_tier="other"} 1"#
    ), "{text}");
    assert!(!text.contains("anything-else"));
    assert!(
        text.contains(r#"rate_limit_keys{backend="memory"} 2"#),
        "{text}"
    );
    assert!(
        text.contains("rate_limit_check_duration_seconds_bucket{le=\"0.000025\",policy=\"fw\"}")
            || text
                .contains("rate_limit_check_duration_seconds_bucket{policy=\"fw\",le=\"2.5e-5\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_speak_prometheus_text_that_promtool_accepts_and_openmetrics_on_request() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    c.check(&req("public", "promtool")).await.unwrap();
    let plain = c.send(Method::GET, "/metrics", &[], "").await.unwrap();
    assert_eq!(
        plain.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = String::from_utf8(plain.body.to_vec()).unwrap();
    assert!(text.contains("# HELP rate_limit_requests_total "), "{text}");
    assert!(!text.contains("# EOF"), "{text}");
    if let Err(refused) = sluice_testkit::promtool_check_metrics(&text) {
        panic!("promtool check metrics: {refused}");
    }

    let open = c
        .send(
            Method::GET,
            "/metrics",
            &[(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
            )],
            "",
        )
        .await
        .unwrap();
    assert_eq!(
        open.headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = String::from_utf8(open.body.to_vec()).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(
        text.contains("# TYPE rate_limit_requests counter"),
        "{text}"
    );
}

#[tokio::test]
async fn unix_and_tcp_answer_identically() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let unix = d.unix();
    let tcp = d.tcp();
    for body in [
        r#"{"policy":"fw","key":"same"}"#,
        r#"{"policy":"fw","key":""}"#,
        r#"{"policy":"nope","key":"a"}"#,
        r#"{"checks":[{"policy":"fw","key":"b"},{"policy":"log","key":"b"}]}"#,
    ] {
        let a = unix
            .send(Method::POST, "/v1/check", &[], body)
            .await
            .unwrap();
        // Same time, a fresh key of the same shape: the answers must match byte for byte.
        let twin = body.replace("same", "twin").replace("\"b\"", "\"c\"");
        let b = tcp
            .send(Method::POST, "/v1/check", &[], twin.clone())
            .await
            .unwrap();
        assert_eq!(a.status, b.status, "{body}");
        let strip = |h: &http::HeaderMap| {
            let mut v: Vec<(String, String)> = h
                .iter()
                .filter(|(n, _)| *n != "date")
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
                .collect();
            v.sort();
            v
        };
        assert_eq!(strip(&a.headers), strip(&b.headers), "{body}");
        assert_eq!(a.body, b.body, "{body}");
    }
    for path in ["/healthz", "/readyz", "/v1/policies"] {
        let a = unix.send(Method::GET, path, &[], "").await.unwrap();
        let b = tcp.send(Method::GET, path, &[], "").await.unwrap();
        assert_eq!((a.status, &a.body), (b.status, &b.body), "{path}");
    }
}

#[tokio::test]
async fn a_graceful_stop_removes_the_socket() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    assert_eq!(
        d.unix().check(&req("fw", "stop")).await.unwrap().status,
        200
    );
    let socket = d.socket.clone();
    assert!(socket.exists());
    d.stop().await.unwrap();
    assert!(!socket.exists());
}

#[tokio::test]
async fn the_metrics_listener_serves_only_metrics() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = sluice_client::Client::tcp(d.metrics.to_string());
    let raw = c.send(Method::GET, "/metrics", &[], "").await.unwrap();
    assert_eq!(raw.status, 200);
    assert!(String::from_utf8_lossy(&raw.body).contains("rate_limit_requests_total"));
    let raw = c
        .send(
            Method::POST,
            "/v1/check",
            &[],
            r#"{"policy":"fw","key":"a"}"#,
        )
        .await
        .unwrap();
    assert_eq!(raw.status, 404);
}
