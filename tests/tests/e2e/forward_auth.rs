//! `GET /v1/forward-auth/{policy}` as a proxy calls it: the key from the headers the proxy
//! writes (the identity header only when configured, the trusted `X-Forwarded-For` entry),
//! the deny status of `?deny=` in the status line and the problem document, and bad input
//! answered 400 naming the field.

use sluice_tests::{Daemon, header, req_cost};

async fn get(d: &Daemon, path: &str, headers: &[(&str, &str)]) -> sluice_client::RawResponse {
    d.unix()
        .send(http::Method::GET, path, headers, "")
        .await
        .unwrap()
}

async fn remaining(d: &Daemon, key: &str) -> u64 {
    d.unix()
        .check(&req_cost("fw", key, 0))
        .await
        .unwrap()
        .body
        .remaining
}

fn with_forward_auth(section: &str) -> String {
    format!("{}\n[forward_auth]\n{section}\n", sluice_tests::TEST_CONFIG)
}

#[tokio::test]
async fn the_key_is_the_last_forwarded_address_and_a_denial_has_the_asked_status() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    // `fw`: 5 per 10 s. The last X-Forwarded-For entry is what the nearest proxy saw; the
    // client wrote the ones left of it, and no identity header is configured.
    for (i, left) in (0..5).rev().enumerate() {
        let spoof = format!("10.99.0.{i}");
        let chain = [
            ("x-forwarded-for", format!("{spoof}, 10.30.0.1")),
            ("x-user-id", format!("rotating-{i}")),
        ];
        let chain: Vec<(&str, &str)> = chain.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = get(&d, "/v1/forward-auth/fw", &chain).await;
        assert_eq!(answer.status, 200);
        assert_eq!(
            header(&answer.headers, "x-ratelimit-remaining"),
            left.to_string()
        );
    }
    assert_eq!(remaining(&d, "ip:10.30.0.1").await, 0);
    let chain = [("x-forwarded-for", "10.99.9.9, 10.30.0.1")];
    let denied = get(&d, "/v1/forward-auth/fw", &chain).await;
    assert_eq!(denied.status, 429);
    let body: serde_json::Value = serde_json::from_slice(&denied.body).unwrap();
    assert_eq!(body["status"], 429, "{body}");
    // nginx's auth_request needs 403; the problem document says what was sent.
    let nginx = get(&d, "/v1/forward-auth/fw?deny=403", &chain).await;
    assert_eq!(nginx.status, 403);
    assert_eq!(header(&nginx.headers, "retry-after"), "10");
    assert_eq!(
        header(&nginx.headers, "content-type"),
        "application/problem+json"
    );
    let body: serde_json::Value = serde_json::from_slice(&nginx.body).unwrap();
    assert_eq!(
        (body["error"].as_str(), body["status"].as_u64()),
        (Some("rate_limit_exceeded"), Some(403)),
        "{body}"
    );
    let unauthorized = get(&d, "/v1/forward-auth/fw?deny=401", &chain).await;
    let body: serde_json::Value = serde_json::from_slice(&unauthorized.body).unwrap();
    assert_eq!(
        (unauthorized.status, body["status"].as_u64()),
        (401, Some(401))
    );
    // X-Real-IP is the last resort, written in canonical form.
    let real = get(
        &d,
        "/v1/forward-auth/fw",
        &[("x-real-ip", "::ffff:10.30.0.2")],
    )
    .await;
    assert_eq!(real.status, 200);
    assert_eq!(remaining(&d, "ip:10.30.0.2").await, 4);
}

#[tokio::test]
async fn a_configured_identity_is_keyed_apart_from_addresses() {
    let d = Daemon::start(&with_forward_auth("identity_header = \"X-User-Id\"")).await;
    let user = get(
        &d,
        "/v1/forward-auth/fw",
        &[("x-user-id", "ann"), ("x-forwarded-for", "10.31.0.1")],
    )
    .await;
    assert_eq!(
        (user.status, header(&user.headers, "x-ratelimit-remaining")),
        (200, "4")
    );
    assert_eq!(remaining(&d, "user:ann").await, 4);
    // An identity naming another client's address spends its own budget, not the address's.
    for _ in 0..5 {
        let spoof = [
            ("x-user-id", "ip:10.31.0.66"),
            ("x-forwarded-for", "10.31.0.2"),
        ];
        assert_eq!(get(&d, "/v1/forward-auth/fw", &spoof).await.status, 200);
    }
    assert_eq!(remaining(&d, "ip:10.31.0.66").await, 5);
    assert_eq!(remaining(&d, "user:ip:10.31.0.66").await, 0);
    let victim = get(
        &d,
        "/v1/forward-auth/fw",
        &[("x-forwarded-for", "10.31.0.66")],
    )
    .await;
    assert_eq!(victim.status, 200);
}

#[tokio::test]
async fn trusted_hops_picks_the_entry_the_outermost_trusted_proxy_wrote() {
    let d = Daemon::start(&with_forward_auth("trusted_hops = 2")).await;
    // client-chosen, the client as the edge proxy saw it, the edge proxy as the inner saw it.
    let chain = [("x-forwarded-for", "10.99.0.1, 10.32.0.1, 10.0.0.254")];
    assert_eq!(get(&d, "/v1/forward-auth/fw", &chain).await.status, 200);
    assert_eq!(remaining(&d, "ip:10.32.0.1").await, 4);
    // Fewer entries than hops: the leftmost.
    let short = [("x-forwarded-for", "10.32.0.2")];
    assert_eq!(get(&d, "/v1/forward-auth/fw", &short).await.status, 200);
    assert_eq!(remaining(&d, "ip:10.32.0.2").await, 4);
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_field() {
    let d = Daemon::start(&with_forward_auth("identity_header = \"X-User-Id\"")).await;
    let ip = [("x-real-ip", "10.30.1.1")];
    let long_chain = vec!["10.30.1.1"; 1000].join(",");
    for (path, headers, field) in [
        ("/v1/forward-auth/fw?deny=500", &ip[..], "deny"),
        ("/v1/forward-auth/fw?cost=-1", &ip[..], "cost"),
        ("/v1/forward-auth/fw", &[][..], "X-Forwarded-For"),
        (
            "/v1/forward-auth/fw",
            &[("x-forwarded-for", "not-an-address")][..],
            "x-forwarded-for",
        ),
        (
            "/v1/forward-auth/fw",
            &[("x-forwarded-for", long_chain.as_str())][..],
            "x-forwarded-for",
        ),
        (
            "/v1/forward-auth/fw",
            &[("x-user-id", "ann"), ("x-user-id", "bob"), ip[0]][..],
            "x-user-id",
        ),
    ] {
        let answer = get(&d, path, headers).await;
        assert_eq!(answer.status, 400, "{path} {headers:?}");
        let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(
            (body["error"].as_str(), body["field"].as_str()),
            (Some("bad_request"), Some(field)),
            "{body}"
        );
    }
    let unknown = get(&d, "/v1/forward-auth/nope", &ip).await;
    assert_eq!(unknown.status, 404);
}
