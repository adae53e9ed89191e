//! Calendar windows end to end, on every backend: a month of Asia/Tokyo and a day of
//! America/New_York answered through the check API at chosen instants (the daemon's test
//! clock), with the true boundary in `reset`, `X-RateLimit-Reset` and `Retry-After`.

use sluice_tests::Daemon;

use crate::backends::Backend;

const TOML: &str = r#"
[policies.monthly]
algorithm = "fixed_window"
limit = 3
window = "1mo"
calendar = "Asia/Tokyo"

[policies.daily]
algorithm = "fixed_window"
limit = 2
window = "1d"
calendar = "America/New_York"
"#;

/// Unix milliseconds of an RFC 3339 UTC time.
fn ms(utc: &str) -> u64 {
    let t = chrono::DateTime::parse_from_rfc3339(utc).unwrap();
    u64::try_from(t.timestamp_millis()).unwrap()
}

/// One check of `policy` for `key`: (status, body, headers).
async fn check(
    d: &Daemon,
    policy: &str,
    key: &str,
    cost: u64,
) -> (u16, serde_json::Value, http::HeaderMap) {
    let body = format!(r#"{{"policy":"{policy}","key":"{key}","cost":{cost}}}"#);
    let out = d
        .unix()
        .send(http::Method::POST, "/v1/check", &[], body)
        .await
        .unwrap();
    (
        out.status,
        serde_json::from_slice(&out.body).unwrap(),
        out.headers,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tokyo_month_resets_at_15_utc_on_its_last_day_on_every_backend() {
    for backend in Backend::all() {
        let name = backend.name();
        let d = Daemon::start(&format!("{}{TOML}", backend.section("5s"))).await;
        let end = ms("2026-02-28T15:00:00Z");
        d.clock.set(end - 2_000);
        let (status, body, headers) = check(&d, "monthly", "acme", 3).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["reset"], end / 1000, "{name}: {body}");
        assert_eq!(
            headers["x-ratelimit-reset"],
            (end / 1000).to_string(),
            "{name}"
        );
        assert_eq!(
            headers["ratelimit-policy"], "\"monthly\";q=3;w=2592000",
            "{name}"
        );
        let (status, body, headers) = check(&d, "monthly", "acme", 1).await;
        assert_eq!(status, 429, "{name}: {body}");
        assert_eq!(body["retry_after"], 2, "{name}: {body}");
        assert_eq!(headers["retry-after"], "2", "{name}");
        // 14:59:59.999 UTC is still February in Tokyo; 15:00 is March, with a budget anew.
        d.clock.set(end - 1);
        assert_eq!(check(&d, "monthly", "acme", 1).await.0, 429, "{name}");
        d.clock.set(end);
        let (status, body, _) = check(&d, "monthly", "acme", 1).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["remaining"], 2, "{name}: {body}");
        assert_eq!(
            body["reset"],
            ms("2026-03-31T15:00:00Z") / 1000,
            "{name}: {body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_york_day_is_23_hours_in_march_and_25_in_november_on_every_backend() {
    for backend in Backend::all() {
        let name = backend.name();
        let d = Daemon::start(&format!("{}{TOML}", backend.section("5s"))).await;
        for (midnight, next) in [
            ("2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"),
            ("2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"),
        ] {
            let (start, end) = (ms(midnight), ms(next));
            d.clock.set(start);
            let (status, body, _) = check(&d, "daily", midnight, 2).await;
            assert_eq!(status, 200, "{name} {midnight}: {body}");
            assert_eq!(body["reset"], end / 1000, "{name} {midnight}: {body}");
            assert_eq!(
                (end - start) / 3_600_000,
                if start < ms("2026-06-01T00:00:00Z") {
                    23
                } else {
                    25
                }
            );
            d.clock.set(end - 1);
            assert_eq!(
                check(&d, "daily", midnight, 1).await.0,
                429,
                "{name} {midnight}"
            );
            d.clock.set(end);
            assert_eq!(
                check(&d, "daily", midnight, 1).await.0,
                200,
                "{name} {midnight}"
            );
        }
    }
}
