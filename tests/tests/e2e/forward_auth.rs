//! `GET /v1/forward-auth/{policy}` as a proxy calls it: the key from the headers, the deny
//! status of `?deny=`, and bad input answered 400 naming the field.

use sluice_tests::{Daemon, header, req_cost};

async fn get(d: &Daemon, path: &str, headers: &[(&str, &str)]) -> sluice_client::RawResponse {
    d.unix()
        .send(http::Method::GET, path, headers, "")
        .await
        .unwrap()
}

#[tokio::test]
async fn the_key_comes_from_the_headers_and_a_denial_has_the_asked_status() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    // `fw`: 5 per 10 s. The first X-Forwarded-For address is the caller.
    let chain = [("x-forwarded-for", "10.30.0.1, 10.0.0.254")];
    for left in (0..5).rev() {
        let answer = get(&d, "/v1/forward-auth/fw", &chain).await;
        assert_eq!(answer.status, 200);
        assert_eq!(
            header(&answer.headers, "x-ratelimit-remaining"),
            left.to_string()
        );
    }
    assert_eq!(get(&d, "/v1/forward-auth/fw", &chain).await.status, 429);
    let nginx = get(&d, "/v1/forward-auth/fw?deny=403", &chain).await;
    assert_eq!(nginx.status, 403);
    assert_eq!(header(&nginx.headers, "retry-after"), "10");
    let body: serde_json::Value = serde_json::from_slice(&nginx.body).unwrap();
    assert_eq!(body["error"], "rate_limit_exceeded");
    let peek = d
        .unix()
        .check(&req_cost("fw", "ip:10.30.0.1", 0))
        .await
        .unwrap();
    assert_eq!(peek.body.remaining, 0);
    // X-User-Id wins over the address; X-Real-IP is the last resort.
    let user = get(&d, "/v1/forward-auth/fw", &[("x-user-id", "ann"), chain[0]]).await;
    assert_eq!(
        (user.status, header(&user.headers, "x-ratelimit-remaining")),
        (200, "4")
    );
    let real = get(&d, "/v1/forward-auth/fw", &[("x-real-ip", "10.30.0.2")]).await;
    assert_eq!(real.status, 200);
    let peek = d
        .unix()
        .check(&req_cost("fw", "ip:10.30.0.2", 0))
        .await
        .unwrap();
    assert_eq!(peek.body.remaining, 4);
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_field() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let ip = [("x-real-ip", "10.30.1.1")];
    for (path, headers, field) in [
        ("/v1/forward-auth/fw?deny=500", &ip[..], "deny"),
        ("/v1/forward-auth/fw?cost=-1", &ip[..], "cost"),
        ("/v1/forward-auth/fw", &[][..], "X-User-Id"),
    ] {
        let answer = get(&d, path, headers).await;
        assert_eq!(answer.status, 400, "{path}");
        let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(
            (body["error"].as_str(), body["field"].as_str()),
            (Some("bad_request"), Some(field))
        );
    }
    let unknown = get(&d, "/v1/forward-auth/nope", &ip).await;
    assert_eq!(unknown.status, 404);
}
