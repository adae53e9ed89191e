//! Candidate limits through the admin API, on every backend: set, shown with where they come
//! from, removed back to the file's, promoted to a limit override (refused when the window or
//! the algorithm differs), every bad body refused naming its field; on Redis and Cluster a
//! second daemon on the same backend follows within its poll and a restarted one finds them.

use std::time::{Duration, Instant};

use http::Method;
use sluice_api::{
    CandidateRemoved, CandidateView, CheckRequest, ErrorBody, OverridesResponse, PoliciesResponse,
    PromotedView,
};
use sluice_tests::{Daemon, header};

use crate::admin::{TOKEN, admin};
use crate::backends::Backend;

/// `cand` has a candidate in the file for tier `none` and tier `pro` (the latter on another
/// window: judged, never promotable); `plain` has none.
const POLICIES: &str = r#"
[policies.cand]
algorithm = "fixed_window"
limit = 100
window = "60s"
tiers = { pro = { limit = 1000 } }

[policies.cand.candidate]
limit = 120
tiers = { pro = { limit = 1100, window = "30s" } }

[policies.plain]
algorithm = "token_bucket"
limit = 10
window = "10s"
"#;

async fn daemon_on(backend: &Backend) -> Daemon {
    Daemon::start(&format!(
        "{}[admin]\ntoken = \"{TOKEN}\"\n{POLICIES}",
        backend.section("2s")
    ))
    .await
}

fn path(policy: &str, tier: &str) -> String {
    format!("/v1/admin/policies/{policy}/tiers/{tier}/candidate")
}

/// `POST …/candidate/promote` of (`cand`, `tier`).
async fn promote(d: &Daemon, tier: &str) -> sluice_client::RawResponse {
    let at = format!("{}/promote", path("cand", tier));
    admin(d, Method::POST, &at, "").await
}

/// `GET` the candidate of (`cand`, `tier`): its status and, on a 200, the view.
async fn candidate(d: &Daemon, tier: &str) -> (u16, Option<CandidateView>) {
    let out = admin(d, Method::GET, &path("cand", tier), "").await;
    let view = (out.status == 200).then(|| out.json().unwrap());
    (out.status, view)
}

/// The `X-RateLimit-Limit` a peek of `cand` on `tier` gets (fixed_window: its limit).
async fn limit_of(d: &Daemon, tier: Option<&str>) -> String {
    let check = CheckRequest {
        tier: tier.map(str::to_owned),
        cost: Some(0),
        ..CheckRequest::new("cand", "user:candidate-test")
    };
    let out = d.unix().check(&check).await.unwrap();
    header(&out.headers, "x-ratelimit-limit").to_owned()
}

/// The candidate (limit, source) of tier `tier` as `d` shows it, `None` when it has none.
async fn shown(d: &Daemon, tier: &str) -> Option<(u64, String)> {
    let (_, view) = candidate(d, tier).await;
    view.map(|v| (v.candidate.limit, v.source))
}

/// Polls `d` until `probe` gives `want` (a bound on a hang, generous for a loaded machine: the
/// daemons poll every 250 ms).
async fn until<T: PartialEq + std::fmt::Debug, F: std::future::Future<Output = T>>(
    what: &str,
    want: T,
    mut probe: impl FnMut() -> F,
) {
    let start = Instant::now();
    loop {
        let got = probe().await;
        if got == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: still {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_are_set_shown_removed_and_promoted_on_every_backend() {
    for backend in Backend::all() {
        let name = backend.name();
        let d = daemon_on(&backend).await;

        // The file's candidate, beside the limit it is judged with.
        let (status, view) = candidate(&d, "none").await;
        assert_eq!(status, 200, "{name}");
        let view = view.unwrap();
        assert_eq!(view.source, "file", "{name}");
        assert_eq!(
            (
                view.candidate.limit,
                view.candidate.burst,
                view.current.limit
            ),
            (120, 120, 100),
            "{name}"
        );
        assert!(view.promotable, "{name}");

        // A run-time candidate replaces it; /v1/policies shows it.
        let out = admin(&d, Method::PUT, &path("cand", "none"), r#"{"limit": 150}"#).await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        let set: CandidateView = out.json().unwrap();
        assert_eq!(set.source, "admin", "{name}");
        assert_eq!(
            (
                set.candidate.limit,
                set.candidate.burst,
                set.candidate.window.as_str(),
                set.candidate.algorithm.as_str()
            ),
            (150, 150, "60s", "fixed_window"),
            "{name}: burst its own limit, window and algorithm the policy's"
        );
        let policies: PoliciesResponse = d
            .unix()
            .send(Method::GET, "/v1/policies", &[], "")
            .await
            .unwrap()
            .json()
            .unwrap();
        let cand = &policies.policies["cand"];
        assert_eq!(
            cand.candidate.as_ref().map(|c| c.limit),
            Some(150),
            "{name}"
        );
        assert_eq!(
            cand.tiers["pro"].candidate.as_ref().map(|c| c.window_ms),
            Some(30_000),
            "{name}"
        );
        assert!(policies.policies["plain"].candidate.is_none(), "{name}");
        let listed: OverridesResponse = admin(&d, Method::GET, "/v1/admin/policies", "")
            .await
            .json()
            .unwrap();
        assert_eq!(listed.candidates.len(), 1, "{name}");
        assert_eq!(listed.candidates[0].request.limit, 150, "{name}");

        // Removing it puts the file's in force again, and says so.
        let out = admin(&d, Method::DELETE, &path("cand", "none"), "").await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        let removed: CandidateRemoved = out.json().unwrap();
        let file = removed.in_force.unwrap();
        assert_eq!((file.source.as_str(), file.candidate.limit), ("file", 120));
        let out = admin(&d, Method::DELETE, &path("cand", "none"), "").await;
        assert_eq!(out.status, 404, "{name}: nothing set at run time");

        // A candidate on another window or algorithm is judged but cannot be promoted.
        for (body, field) in [
            (r#"{"limit": 1500, "window": "30s"}"#, "window"),
            (r#"{"limit": 1500, "algorithm": "gcra"}"#, "algorithm"),
        ] {
            let out = admin(&d, Method::PUT, &path("cand", "pro"), body).await;
            assert_eq!(out.status, 200, "{name} {body}: {:?}", out.body);
            assert!(!out.json::<CandidateView>().unwrap().promotable, "{name}");
            let out = promote(&d, "pro").await;
            assert_eq!(out.status, 409, "{name} {body}: {:?}", out.body);
            let error: ErrorBody = out.json().unwrap();
            assert_eq!(error.error, "candidate_not_promotable", "{name}");
            assert_eq!(error.field.as_deref(), Some(field), "{name}");
        }

        // Promoting a run-time candidate: the override is in force, the candidate cleared
        // (the file's of the tier is in force again).
        let out = admin(&d, Method::PUT, &path("cand", "pro"), r#"{"limit": 1500}"#).await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        let out = promote(&d, "pro").await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        let promoted: PromotedView = out.json().unwrap();
        assert_eq!(
            (
                promoted.previous.limit,
                promoted.limit.limit,
                promoted.source.as_str()
            ),
            (1000, 1500, "admin"),
            "{name}"
        );
        assert_eq!(limit_of(&d, Some("pro")).await, "1500", "{name}");
        assert_eq!(
            shown(&d, "pro").await,
            Some((1100, "file".to_owned())),
            "{name}"
        );
        let listed: OverridesResponse = admin(&d, Method::GET, "/v1/admin/policies", "")
            .await
            .json()
            .unwrap();
        assert_eq!(
            (listed.overrides.len(), listed.candidates.len()),
            (1, 0),
            "{name}"
        );

        // Promoting the file's candidate of the policy's own limit: the override is in force;
        // the file still names the candidate, so it stays judged.
        let out = promote(&d, "none").await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        let promoted: PromotedView = out.json().unwrap();
        assert_eq!(promoted.source, "file", "{name}");
        assert_eq!(limit_of(&d, None).await, "120", "{name}");
        assert_eq!(
            limit_of(&d, Some("pro")).await,
            "1500",
            "{name}: the tiers keep theirs"
        );
        assert_eq!(
            shown(&d, "none").await,
            Some((120, "file".to_owned())),
            "{name}"
        );

        // A candidate on a tier an override added outlives the tier in the backend (left out
        // while the tier is gone) and can still be removed.
        let gold = "/v1/admin/policies/cand/tiers/gold";
        let out = admin(&d, Method::PUT, gold, r#"{"limit": 5000}"#).await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        let out = admin(&d, Method::PUT, &path("cand", "gold"), r#"{"limit": 6000}"#).await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        assert_eq!(admin(&d, Method::DELETE, gold, "").await.status, 200);
        assert_eq!(candidate(&d, "gold").await.0, 404, "{name}: no tier gold");
        let out = admin(&d, Method::DELETE, &path("cand", "gold"), "").await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
    }
}

#[tokio::test]
async fn missing_policies_tiers_and_candidates_are_404_and_bad_bodies_name_their_field() {
    let backend = Backend::Memory;
    let d = daemon_on(&backend).await;
    for (method, at, code) in [
        (Method::GET, path("nope", "none"), "unknown_policy"),
        (Method::PUT, path("nope", "none"), "unknown_policy"),
        (Method::GET, path("cand", "gold"), "unknown_tier"),
        (Method::PUT, path("cand", "gold"), "unknown_tier"),
        (Method::DELETE, path("cand", "gold"), "unknown_tier"),
        (Method::GET, path("plain", "none"), "not_found"),
        (
            Method::POST,
            format!("{}/promote", path("plain", "none")),
            "not_found",
        ),
        (Method::DELETE, path("plain", "none"), "not_found"),
    ] {
        let out = admin(&d, method.clone(), &at, r#"{"limit": 5}"#).await;
        assert_eq!(out.status, 404, "{method} {at}: {:?}", out.body);
        let error: ErrorBody = out.json().unwrap();
        assert_eq!(error.error, code, "{method} {at}");
        if code == "unknown_tier" {
            assert!(
                error.message.contains("its tiers are none, pro"),
                "{error:?}"
            );
        }
    }
    // A file candidate cannot be deleted through the API: the answer says where it is.
    let out = admin(&d, Method::DELETE, &path("cand", "none"), "").await;
    assert_eq!(out.status, 404);
    assert!(
        out.json::<ErrorBody>()
            .unwrap()
            .message
            .contains("config file"),
        "{:?}",
        out.body
    );

    for (body, field) in [
        (r#"{"limit": 0}"#, "limit"),
        (r#"{"limit": 5, "burst": 0}"#, "burst"),
        (r#"{"limit": 5, "algorithm": "fast"}"#, "algorithm"),
        (r#"{"limit": 5, "window": "soon"}"#, "window"),
        (r#"{"limit": 5, "window": "0s"}"#, "window"),
        (r#"{"limit": "many"}"#, "limit"),
        (r#"{"burst": 5}"#, "limit"),
        (r#"{"limit": 5, "speed": 1}"#, "speed"),
    ] {
        let out = admin(&d, Method::PUT, &path("cand", "pro"), body).await;
        assert_eq!(out.status, 400, "{body}: {:?}", out.body);
        let error: ErrorBody = out.json().unwrap();
        assert_eq!(error.field.as_deref(), Some(field), "{body}: {error:?}");
    }
    assert_eq!(
        shown(&d, "pro").await,
        Some((1100, "file".to_owned())),
        "nothing refused was stored"
    );
}

#[tokio::test]
async fn the_candidate_routes_need_the_token() {
    let d = daemon_on(&Backend::Memory).await;
    let promote = format!("{}/promote", path("cand", "none"));
    for (method, at) in [
        (Method::GET, path("cand", "none")),
        (Method::PUT, path("cand", "none")),
        (Method::DELETE, path("cand", "none")),
        (Method::POST, promote),
    ] {
        for auth in [None, Some("Bearer wrong"), Some(TOKEN)] {
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("authorization", a)).into_iter().collect();
            let out = d
                .unix()
                .send(method.clone(), &at, &headers, r#"{"limit": 5}"#)
                .await
                .unwrap();
            assert_eq!(out.status, 401, "{method} {at} with {auth:?}");
        }
    }
    assert_eq!(
        shown(&d, "none").await,
        Some((120, "file".to_owned())),
        "nothing changed"
    );
}

/// Two daemons on one backend: a candidate set on one is judged by the other after its next
/// poll, a daemon started later finds it, and a promotion on one is in force on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_reaches_every_daemon_on_the_backend_and_survives_a_restart() {
    for backend in Backend::all().into_iter().skip(1) {
        let name = backend.name();
        let a = daemon_on(&backend).await;
        let b = daemon_on(&backend).await;
        let out = admin(&a, Method::PUT, &path("cand", "none"), r#"{"limit": 150}"#).await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        let admin_150 = Some((150, "admin".to_owned()));
        until(name, admin_150.clone(), || shown(&b, "none")).await;

        drop(b);
        let b = daemon_on(&backend).await;
        until(name, admin_150, || shown(&b, "none")).await;

        let out = promote(&b, "none").await;
        assert_eq!(out.status, 200, "{name}: {:?}", out.body);
        until(name, "150".to_owned(), || limit_of(&a, None)).await;
        until(name, Some((120, "file".to_owned())), || shown(&a, "none")).await;
    }
}
