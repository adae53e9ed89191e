//! Candidate limits on the check path, one body over every backend (memory, Redis, Redis
//! Cluster — real servers) with the daemon's manual clock: the caller's answers are the
//! enforced limit's, the same status, headers and body as the same policy without a
//! candidate, while the candidate is judged on its own state and counted in
//! `rate_limit_candidate_decisions_total` and `/v1/top?by=candidate_rejected` — stricter and
//! looser candidates, per tier, with another algorithm, window after window, in batches, over
//! RESP, on a shadow policy, and exactly under 32 concurrent clients on one key.

use std::sync::Arc;

use http::Method;
use sluice_api::{BatchRequest, CheckRequest, TopResponse};
use sluice_tests::{Daemon, T0, req};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backends::Backend;

/// Every policy enforces 5 a minute (fixed_window); all but `plain` have a candidate.
const POLICIES: &str = r#"
[policies.plain]
algorithm = "fixed_window"
limit = 5
window = "60s"

[policies.looser]
algorithm = "fixed_window"
limit = 5
window = "60s"
candidate = { limit = 8 }

[policies.stricter]
algorithm = "fixed_window"
limit = 5
window = "60s"
candidate = { limit = 3 }

[policies.tiered]
algorithm = "fixed_window"
limit = 5
window = "60s"
tiers = { pro = { limit = 5 } }
candidate = { tiers = { pro = { limit = 2 } } }

[policies.smooth]
algorithm = "fixed_window"
limit = 5
window = "60s"
candidate = { limit = 8, algorithm = "gcra" }

[policies.watched]
algorithm = "fixed_window"
limit = 5
window = "60s"
shadow = true
candidate = { limit = 8 }

[policies.hot]
algorithm = "fixed_window"
limit = 100
window = "60s"
candidate = { limit = 150 }
"#;

/// One minute: every policy's window, and T0 starts one.
const WINDOW_MS: u64 = 60_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn candidates_are_judged_beside_the_limit_and_never_change_an_answer() {
    for backend in Backend::all() {
        let d = Daemon::start(&format!("{}{POLICIES}", backend.section("5s"))).await;
        let on = backend.name();
        answers_are_the_enforced_limits(&d, on).await;
        only_the_candidates_tier_is_judged(&d, on).await;
        another_algorithm_judges_on_its_own_terms(&d, on).await;
        the_top_ranks_the_candidates_rejections(&d, on).await;
        a_batch_judges_each_candidate_alone(&d, on).await;
        resp_and_shadow_checks_are_judged(&d, on).await;
        the_next_window_starts_both_fresh(&d, on).await;
        thirty_two_clients_get_exactly_the_candidates_limit(&d, on).await;
    }
}

/// 10 checks in one window: the caller sees 5 allowed, 5 denied, as `plain` answers them,
/// headers included; the candidate of 8 would allow 8, the one of 3 would allow 3. Nothing
/// of a policy with a candidate is answered from leases or the denied cache.
async fn answers_are_the_enforced_limits(d: &Daemon, on: &str) {
    for policy in ["looser", "stricter"] {
        let mut allowed = 0;
        for i in 0..10 {
            let expected = answer(d, "plain", &format!("same-{policy}")).await;
            let got = answer(d, policy, &format!("same-{policy}")).await;
            assert_eq!(got, expected, "{on} {policy}: check {i}");
            allowed += usize::from(got.0 == 200);
        }
        assert_eq!(allowed, 5, "{on} {policy}");
    }
    assert_eq!(judged(d, "looser", "none"), (8, 2), "{on}");
    assert_eq!(judged(d, "stricter", "none"), (3, 7), "{on}");
    assert_eq!(judged(d, "plain", "none"), (0, 0), "{on}: no candidate");
    for policy in ["looser", "stricter"] {
        let local = metric(
            d,
            &format!("rate_limit_local_decisions_total{{policy=\"{policy}\""),
        );
        assert_eq!(local, 0, "{on} {policy}: answered locally");
    }
}

/// `tiered` has a candidate for `pro` only: its checks are judged, tier none's and an unknown
/// tier's (the policy's own limit, which has none) are not.
async fn only_the_candidates_tier_is_judged(d: &Daemon, on: &str) {
    let c = d.unix();
    for tier in [Some("pro"), None, Some("gold")] {
        let key = format!("tier-{}", tier.unwrap_or("none"));
        let mut allowed = 0;
        for _ in 0..10 {
            let check = CheckRequest {
                tier: tier.map(str::to_owned),
                ..req("tiered", &key)
            };
            allowed += usize::from(c.check(&check).await.unwrap().status == 200);
        }
        assert_eq!(allowed, 5, "{on} tiered {tier:?}");
    }
    assert_eq!(judged(d, "tiered", "pro"), (2, 8), "{on}");
    assert_eq!(judged(d, "tiered", "none"), (0, 0), "{on}");
    assert_eq!(judged(d, "tiered", "other"), (0, 0), "{on}");
}

/// `smooth` enforces a fixed window and judges a gcra candidate (8 a minute, a burst of 8):
/// 10 at once, then one more after an emission interval (7.5 s), which the window still
/// refuses and gcra would allow.
async fn another_algorithm_judges_on_its_own_terms(d: &Daemon, on: &str) {
    let c = d.unix();
    let mut allowed = 0;
    for _ in 0..10 {
        allowed += usize::from(c.check(&req("smooth", "g")).await.unwrap().status == 200);
    }
    assert_eq!(allowed, 5, "{on}");
    assert_eq!(judged(d, "smooth", "none"), (8, 2), "{on}");
    d.clock.set(T0 + 7_500);
    assert_eq!(c.check(&req("smooth", "g")).await.unwrap().status, 429);
    assert_eq!(judged(d, "smooth", "none"), (9, 2), "{on}");
    d.clock.set(T0);
}

/// `by=candidate_rejected` ranks keys by what the candidate would have rejected: `a` 10
/// checks (7 over the candidate of 3), `b` 5 (2 over), `c` 3 (none).
async fn the_top_ranks_the_candidates_rejections(d: &Daemon, on: &str) {
    let c = d.unix();
    for (key, checks) in [("top-a", 10), ("top-b", 5), ("top-c", 3)] {
        for _ in 0..checks {
            c.check(&req("stricter", key)).await.unwrap();
        }
    }
    let out = c
        .send(
            Method::GET,
            "/v1/top?policy=stricter&by=candidate_rejected&n=10",
            &[],
            "",
        )
        .await
        .unwrap();
    assert_eq!(out.status, 200, "{on}: {:?}", out.body);
    let top: TopResponse = out.json().unwrap();
    assert_eq!(top.by, "candidate_rejected");
    let ranked: Vec<(&str, u64)> = top
        .keys
        .iter()
        .filter(|k| k.key.starts_with("top-"))
        .map(|k| (k.key.as_str(), k.rejected))
        .collect();
    assert_eq!(ranked, [("top-a", 7), ("top-b", 2)], "{on}: {top:?}");
    let bad = c
        .send(Method::GET, "/v1/top?policy=stricter&by=nope", &[], "")
        .await
        .unwrap();
    assert_eq!(bad.status, 400, "{on}");
}

/// A batch decides all-or-nothing, and each candidate alone: with `plain`'s key spent, the
/// batch is refused whole, `looser`'s enforced state is untouched, and its candidate still
/// consumes for each batch (so 3 refused batches leave it 5 of 8).
async fn a_batch_judges_each_candidate_alone(d: &Daemon, on: &str) {
    let c = d.unix();
    for _ in 0..5 {
        c.check(&req("plain", "batch-spent")).await.unwrap();
    }
    let before = judged(d, "looser", "none");
    let batch = BatchRequest {
        checks: vec![req("looser", "batch"), req("plain", "batch-spent")],
    };
    for _ in 0..3 {
        let out = c.check_batch(&batch).await.unwrap();
        assert_eq!(out.status, 429, "{on}");
    }
    assert_eq!(
        judged(d, "looser", "none"),
        (before.0 + 3, before.1),
        "{on}"
    );
    let alone = c.check(&req("looser", "batch")).await.unwrap();
    assert_eq!((alone.status, alone.body.remaining), (200, 4), "{on}");
    // The candidate has 4 of 8 left.
    for _ in 0..6 {
        c.check(&req("looser", "batch")).await.unwrap();
    }
    assert_eq!(
        judged(d, "looser", "none"),
        (before.0 + 8, before.1 + 2),
        "{on}"
    );
}

/// `SLUICE.CHECK` over RESP is the same call into the limiter; a shadow policy's candidate is
/// judged like any other (the shadow policy allows all 10, its candidate would allow 8).
async fn resp_and_shadow_checks_are_judged(d: &Daemon, on: &str) {
    let before = judged(d, "stricter", "none");
    let frame = |key: &str| {
        format!(
            "*3\r\n$12\r\nSLUICE.CHECK\r\n$8\r\nstricter\r\n${}\r\n{key}\r\n",
            key.len()
        )
    };
    let replies = resp(d, &(0..5).map(|_| frame("resp")).collect::<String>()).await;
    assert_eq!(
        replies.matches("*7\r\n:1\r\n").count(),
        5,
        "{on}: {replies}"
    );
    assert_eq!(
        judged(d, "stricter", "none"),
        (before.0 + 3, before.1 + 2),
        "{on}"
    );

    let c = d.unix();
    for _ in 0..10 {
        let out = c.check(&req("watched", "shadow")).await.unwrap();
        assert_eq!(out.status, 200, "{on}: a shadow policy never denies");
    }
    assert_eq!(judged(d, "watched", "none"), (8, 2), "{on}");
}

/// In the next window both the limit and the candidate start fresh.
async fn the_next_window_starts_both_fresh(d: &Daemon, on: &str) {
    d.clock.set(T0 + WINDOW_MS);
    let before = judged(d, "stricter", "none");
    let mut allowed = 0;
    for _ in 0..10 {
        allowed += usize::from(answer(d, "stricter", "same-stricter").await.0 == 200);
    }
    assert_eq!(allowed, 5, "{on}");
    assert_eq!(
        judged(d, "stricter", "none"),
        (before.0 + 3, before.1 + 7),
        "{on}"
    );
}

/// 32 clients, 10 checks each, on one key in one window: the limit admits exactly 100, its
/// candidate would admit exactly 150 (fixed_window is exact on every backend).
async fn thirty_two_clients_get_exactly_the_candidates_limit(d: &Daemon, on: &str) {
    d.clock.set(T0 + 2 * WINDOW_MS);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let client = Arc::new(if i % 2 == 0 { d.unix() } else { d.tcp() });
        tasks.push(tokio::spawn(async move {
            let mut allowed = 0;
            for _ in 0..10 {
                let out = client.check(&req("hot", "hot")).await.unwrap();
                assert!(!out.body.degraded);
                allowed += usize::from(out.status == 200);
            }
            allowed
        }));
    }
    let mut allowed = 0;
    for task in tasks {
        allowed += task.await.unwrap();
    }
    assert_eq!(allowed, 100, "{on}");
    assert_eq!(judged(d, "hot", "none"), (150, 170), "{on}");
}

/// A check's status, headers and body, with the policy's name (in `RateLimit-Policy`,
/// `RateLimit` and the body) made `P` so two policies' answers compare; `date` and
/// `content-length` (the name's length) left out.
async fn answer(d: &Daemon, policy: &str, key: &str) -> (u16, Vec<(String, String)>, String) {
    let body = format!(r#"{{"policy":"{policy}","key":"{key}"}}"#);
    let out = d
        .unix()
        .send(Method::POST, "/v1/check", &[], body)
        .await
        .unwrap();
    let quoted = format!("\"{policy}\"");
    let headers = out
        .headers
        .iter()
        .filter(|(name, _)| ![http::header::DATE, http::header::CONTENT_LENGTH].contains(name))
        .map(|(name, value)| {
            let value = value.to_str().unwrap().replace(&quoted, "\"P\"");
            (name.to_string(), value)
        })
        .collect();
    let text = String::from_utf8(out.body.to_vec()).unwrap();
    (out.status, headers, text.replace(&quoted, "\"P\""))
}

/// The candidate's (would_allow, would_reject) of `policy`'s tier `plan_tier`.
fn judged(d: &Daemon, policy: &str, plan_tier: &str) -> (u64, u64) {
    let series = |outcome: &str| {
        metric(
            d,
            &format!(
                "rate_limit_candidate_decisions_total{{policy=\"{policy}\",plan_tier=\"{plan_tier}\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    (series("would_allow"), series("would_reject"))
}

/// The sum of the series that start with `prefix` in `d`'s metrics (0 when there is none).
fn metric(d: &Daemon, prefix: &str) -> u64 {
    d.app
        .limiter
        .metrics()
        .encode()
        .lines()
        .filter(|line| line.starts_with(prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Writes `frames` to the RESP socket in one write and reads every reply until the daemon
/// closes after the half-close.
async fn resp(d: &Daemon, frames: &str) -> String {
    let mut stream = tokio::net::UnixStream::connect(&d.resp_socket)
        .await
        .unwrap();
    stream.write_all(frames.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}
