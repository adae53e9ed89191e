//! What every forward-auth proxy example must do, checked the same way for nginx, Caddy and
//! Traefik: the daemon trusts `X-User-Id` (`[forward_auth] identity_header`), as a deployment
//! keying per user does, so only the proxy dropping the client's own header keeps a client
//! from picking its key. A client rotating `X-User-Id` (and `X-Forwarded-For`, and asking for
//! the `pro` plan) still gets only the address's budget through.

use sluice_client::{Client, RawResponse};
use sluice_tests::{Daemon, header, repo_file, req_cost};

/// `public` of `examples/sluice.toml`: a token bucket of 100, refilled 100 per 60 s (the
/// test clock stands still, so nothing refills).
pub const LIMIT: u64 = 100;
const POLICY_HEADER: &str = "\"public\";q=100;w=60";

/// The headers an allowed answer carries, each exactly once; a denial adds Retry-After.
const RATE_LIMIT_HEADERS: [&str; 5] = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "ratelimit-policy",
    "ratelimit",
];

/// A daemon on the example policies, trusting `X-User-Id` as an identity.
pub async fn daemon() -> Daemon {
    let config = format!(
        "{}\n[forward_auth]\nidentity_header = \"X-User-Id\"\n",
        repo_file("examples/sluice.toml")
    );
    Daemon::start(&config).await
}

/// One request through the proxy, as the test's client sends it.
pub async fn get(client: &Client, headers: &[(&str, &str)]) -> RawResponse {
    client
        .send(http::Method::GET, "/orders?id=7", headers, "")
        .await
        .unwrap()
}

/// How many lines of header `name` the answer has.
pub fn lines(answer: &RawResponse, name: &str) -> usize {
    answer.headers.get_all(name).iter().count()
}

/// The proxy in front of the app, as the checks see it.
pub struct Proxied<'a> {
    pub daemon: &'a Daemon,
    pub client: &'a Client,
    /// Requests the app has received so far.
    pub app_hits: &'a dyn Fn() -> usize,
    /// The proxy's log, for assertion messages.
    pub log: &'a dyn Fn() -> String,
}

/// Sends `requests` requests, each with a new `X-User-Id`, `X-Forwarded-For` and a claim to
/// the `pro` plan and to quota left, after `spent` requests already counted against the
/// client's address. Every allowed one reaches the app with the rate-limit headers once each
/// on the answer; every other one is a 429 with Retry-After and the JSON body. Returns how
/// many got through.
pub async fn rotating_ids(p: &Proxied<'_>, spent: u64, requests: usize) -> u64 {
    let hits_before = (p.app_hits)();
    let mut passed = 0u64;
    for i in 0..requests {
        let user = format!("rotating-{i}");
        let forwarded = format!("10.{}.{}.7", i / 250, i % 250);
        let spoof = [
            ("x-user-id", user.as_str()),
            ("x-forwarded-for", forwarded.as_str()),
            ("x-plan-tier", "pro"),
            ("x-ratelimit-remaining", "9999"),
        ];
        let answer = get(p.client, &spoof).await;
        let log = (p.log)();
        for name in RATE_LIMIT_HEADERS {
            assert_eq!(lines(&answer, name), 1, "{name} on answer {i}: {log}");
        }
        // The plan the client asked for is not the one it gets: `pro` has 2000.
        assert_eq!(header(&answer.headers, "x-ratelimit-limit"), "100");
        assert_eq!(header(&answer.headers, "ratelimit-policy"), POLICY_HEADER);
        if answer.status == 200 {
            passed += 1;
            assert_eq!(&answer.body[..], b"app");
            let left = LIMIT - spent - passed;
            assert_eq!(
                header(&answer.headers, "x-ratelimit-remaining"),
                left.to_string(),
                "answer {i}"
            );
            assert_eq!(lines(&answer, "retry-after"), 0, "answer {i}");
        } else {
            assert_eq!(answer.status, 429, "answer {i}: {log}");
            assert_eq!(lines(&answer, "retry-after"), 1, "answer {i}");
            // One token comes back every 0.6 s.
            assert_eq!(header(&answer.headers, "retry-after"), "1");
            assert_eq!(header(&answer.headers, "x-ratelimit-remaining"), "0");
            let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
            assert_eq!(body["error"], "rate_limit_exceeded", "{body}");
        }
    }
    assert_eq!(
        ((p.app_hits)() - hits_before) as u64,
        passed,
        "only the allowed requests reached the app"
    );
    // The budget spent is the address's; no identity the client named was charged.
    let left = |key: &'static str| async move {
        let check = req_cost("public", key, 0);
        p.daemon.unix().check(&check).await.unwrap().body.remaining
    };
    assert_eq!(left("ip:127.0.0.1").await, 0);
    assert_eq!(left("user:rotating-0").await, LIMIT);
    passed
}
