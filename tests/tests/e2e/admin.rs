//! Limits changed at run time through the admin API: two daemons on one real Redis, the
//! override set on one in force on the other within a second, surviving a restart, deleted
//! back to the file's limit; the token guard and the validation of every field.

use std::time::{Duration, Instant};

use http::Method;
use sluice_api::{CheckRequest, ErrorBody, OverridesResponse};
use sluice_testkit::RedisServer;
use sluice_tests::{Daemon, TEST_CONFIG, header};

pub(crate) const TOKEN: &str = "s3cret-token";

async fn daemon_on(redis: &RedisServer) -> Daemon {
    Daemon::start(&format!(
        "[backend]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"2s\"\n[admin]\ntoken = \"{TOKEN}\"\n{TEST_CONFIG}",
        redis.url()
    ))
    .await
}

/// `method path` with `body`, carrying the admin token.
pub(crate) async fn admin(
    d: &Daemon,
    method: Method,
    path: &str,
    body: &str,
) -> sluice_client::RawResponse {
    let auth = format!("Bearer {TOKEN}");
    d.unix()
        .send(method, path, &[("authorization", &auth)], body.to_owned())
        .await
        .unwrap()
}

/// The `X-RateLimit-Limit` a `pro` check of `public` gets (a peek: consumes nothing). `public` is a
/// token bucket, so this is the bucket's capacity: its `burst`.
async fn pro_limit(d: &Daemon) -> String {
    let check = CheckRequest {
        tier: Some("pro".into()),
        cost: Some(0),
        ..CheckRequest::new("public", "user:admin-test")
    };
    let out = d.unix().check(&check).await.unwrap();
    header(&out.headers, "x-ratelimit-limit").to_owned()
}

/// Polls `d` until the pro limit is `want`; how long it took.
async fn until_pro_limit(d: &Daemon, want: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if pro_limit(d).await == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "pro limit not {want} after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_reaches_every_daemon_survives_restarts_and_deletes_back() {
    let redis = RedisServer::start();
    let a = daemon_on(&redis).await;
    let b = daemon_on(&redis).await;
    assert_eq!(pro_limit(&b).await, "2000", "the file's pro tier");

    let out = admin(
        &a,
        Method::PUT,
        "/v1/admin/policies/public/tiers/pro",
        r#"{"limit": 7, "burst": 9}"#,
    )
    .await;
    assert_eq!(out.status, 200, "{:?}", out.body);
    assert_eq!(
        pro_limit(&a).await,
        "9",
        "in force at once where it was set"
    );
    until_pro_limit(&b, "9", Duration::from_secs(1)).await;

    let listed: OverridesResponse = admin(&b, Method::GET, "/v1/admin/policies", "")
        .await
        .json()
        .unwrap();
    assert_eq!(listed.overrides.len(), 1);
    assert_eq!(
        (listed.overrides[0].limit, listed.overrides[0].burst),
        (7, Some(9))
    );

    // A daemon started later (B restarted) finds the override in the backend.
    drop(b);
    let b = daemon_on(&redis).await;
    until_pro_limit(&b, "9", Duration::from_secs(1)).await;

    let out = admin(
        &b,
        Method::DELETE,
        "/v1/admin/policies/public/tiers/pro",
        "",
    )
    .await;
    assert_eq!(out.status, 200, "{:?}", out.body);
    until_pro_limit(&a, "2000", Duration::from_secs(1)).await;
    let out = admin(
        &b,
        Method::DELETE,
        "/v1/admin/policies/public/tiers/pro",
        "",
    )
    .await;
    assert_eq!(out.status, 404, "nothing left to delete");
}

#[tokio::test]
async fn the_admin_api_needs_the_token() {
    let redis = RedisServer::start();
    let d = daemon_on(&redis).await;
    for (method, path) in [
        (Method::GET, "/v1/admin/policies"),
        (Method::PUT, "/v1/admin/policies/public/tiers/pro"),
        (Method::DELETE, "/v1/admin/policies/public/tiers/pro"),
    ] {
        for auth in [None, Some("Bearer wrong"), Some(TOKEN)] {
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("authorization", a)).into_iter().collect();
            let out = d
                .unix()
                .send(method.clone(), path, &headers, r#"{"limit": 5}"#)
                .await
                .unwrap();
            assert_eq!(out.status, 401, "{method} {path} with {auth:?}");
            assert_eq!(out.json::<ErrorBody>().unwrap().error, "unauthorized");
        }
    }
    // Without a configured token the admin API does not exist at all.
    let plain = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let auth = format!("Bearer {TOKEN}");
    let out = plain
        .unix()
        .send(
            Method::GET,
            "/v1/admin/policies",
            &[("authorization", &auth)],
            "",
        )
        .await
        .unwrap();
    assert_eq!(out.status, 404);
}

#[tokio::test]
async fn bad_overrides_are_refused_naming_the_field() {
    let redis = RedisServer::start();
    let d = daemon_on(&redis).await;
    for (path, body, status, field) in [
        (
            "/v1/admin/policies/public/tiers/pro",
            r#"{"limit": 0}"#,
            400,
            "limit",
        ),
        (
            "/v1/admin/policies/public/tiers/pro",
            r#"{"limit": 5, "burst": 0}"#,
            400,
            "burst",
        ),
        (
            "/v1/admin/policies/public/tiers/pro",
            r#"{"limit": "many"}"#,
            400,
            "limit",
        ),
        (
            "/v1/admin/policies/public/tiers/pro",
            r#"{"limit": -3}"#,
            400,
            "limit",
        ),
        (
            "/v1/admin/policies/public/tiers/pro",
            r#"{"limit": 5, "speed": 1}"#,
            400,
            "speed",
        ),
        (
            "/v1/admin/policies/public/tiers/pro",
            r#"{"burst": 5}"#,
            400,
            "limit",
        ),
        (
            "/v1/admin/policies/public/tiers/bad%20tier",
            r#"{"limit": 5}"#,
            400,
            "tier",
        ),
        (
            "/v1/admin/policies/nope/tiers/pro",
            r#"{"limit": 5}"#,
            404,
            "policy",
        ),
    ] {
        let out = admin(&d, Method::PUT, path, body).await;
        assert_eq!(out.status, status, "{path} {body}: {:?}", out.body);
        let error: ErrorBody = out.json().unwrap();
        assert_eq!(
            error.field.as_deref(),
            Some(field),
            "{path} {body}: {error:?}"
        );
    }
    let listed: OverridesResponse = admin(&d, Method::GET, "/v1/admin/policies", "")
        .await
        .json()
        .unwrap();
    assert!(listed.overrides.is_empty(), "nothing refused was stored");
}
