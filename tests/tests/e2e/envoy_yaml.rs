//! `rls.envoy_config` over gRPC on every backend (memory, Redis, Redis Cluster): the
//! envoyproxy/ratelimit YAML of `examples/envoy-ratelimit/config`, each feature sent as
//! descriptors and checked for the limit it gets (or none) and the code after N hits.

use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use sluice_server::rls::pb::rate_limit_response::rate_limit::Unit;
use sluice_server::rls::pb::rate_limit_response::Code;
use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;
use sluice_server::rls::pb::{RateLimitRequest, RateLimitResponse};
use sluice_tests::{Daemon, repo_path};
use tonic::transport::Channel;

use crate::backends::Backend;

async fn daemon(backend: &Backend) -> (Daemon, RateLimitServiceClient<Channel>) {
    let toml = format!(
        "{}\n[rls]\nenvoy_config = {:?}\n",
        backend.section("5s"),
        repo_path("examples/envoy-ratelimit/config")
            .display()
            .to_string()
    );
    let d = Daemon::start(&toml).await;
    let client = RateLimitServiceClient::connect(format!("http://{}", d.grpc))
        .await
        .unwrap();
    (d, client)
}

fn descriptor(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
        hits_addend: hits,
        ..RateLimitDescriptor::default()
    }
}

fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors,
        hits_addend: 0,
    }
}

async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    r: RateLimitRequest,
) -> RateLimitResponse {
    client.should_rate_limit(r).await.unwrap().into_inner()
}

/// One row: a descriptor of `domain`, sent `hits` times (one hit each); the limit it must get
/// (`requests_per_unit`, unit, name) or none, and the code of the last answer.
struct Row {
    domain: &'static str,
    entries: &'static [(&'static str, &'static str)],
    hits: usize,
    limit: Option<(u32, Unit, &'static str)>,
    code: Code,
}

const fn row(
    domain: &'static str,
    entries: &'static [(&'static str, &'static str)],
    hits: usize,
    limit: Option<(u32, Unit, &'static str)>,
    code: Code,
) -> Row {
    Row {
        domain,
        entries,
        hits,
        limit,
        code,
    }
}

const ADDR: &str = "remote_address";

const TABLE: &[Row] = &[
    // The address level: 3 a minute.
    row(
        "edge",
        &[(ADDR, "10.0.0.1")],
        3,
        Some((3, Unit::Minute, "")),
        Code::Ok,
    ),
    row(
        "edge",
        &[(ADDR, "10.0.0.2")],
        4,
        Some((3, Unit::Minute, "")),
        Code::OverLimit,
    ),
    // A wildcard value at the path level: 2 a second.
    row(
        "edge",
        &[(ADDR, "10.0.0.3"), ("path", "/api/orders")],
        2,
        Some((2, Unit::Second, "")),
        Code::Ok,
    ),
    row(
        "edge",
        &[(ADDR, "10.0.0.4"), ("path", "/api/orders")],
        3,
        Some((2, Unit::Second, "")),
        Code::OverLimit,
    ),
    // The third level: an exact value (named) before the key alone.
    row(
        "edge",
        &[(ADDR, "10.0.0.5"), ("path", "/api/x"), ("tenant", "gold")],
        5,
        Some((5, Unit::Hour, "gold")),
        Code::Ok,
    ),
    row(
        "edge",
        &[(ADDR, "10.0.0.6"), ("path", "/api/x"), ("tenant", "gold")],
        6,
        Some((5, Unit::Hour, "gold")),
        Code::OverLimit,
    ),
    row(
        "edge",
        &[(ADDR, "10.0.0.7"), ("path", "/api/x"), ("tenant", "tin")],
        2,
        Some((1, Unit::Hour, "")),
        Code::OverLimit,
    ),
    // unlimited: never limited, no current_limit.
    row(
        "edge",
        &[(ADDR, "10.0.0.8"), ("path", "/health")],
        10,
        None,
        Code::Ok,
    ),
    // The key alone at the path level: 4 a day.
    row(
        "edge",
        &[(ADDR, "10.0.0.9"), ("path", "/other")],
        5,
        Some((4, Unit::Day, "")),
        Code::OverLimit,
    ),
    // Deeper than the tree, or off it: no limit.
    row(
        "edge",
        &[(ADDR, "10.0.1.0"), ("path", "/other"), ("tenant", "gold")],
        9,
        None,
        Code::Ok,
    ),
    row("edge", &[("path", "/api/x")], 9, None, Code::Ok),
    row("nowhere", &[(ADDR, "10.0.1.1")], 9, None, Code::Ok),
    // Weeks, months and years; a multiplied unit.
    row(
        "features",
        &[("week", "a")],
        2,
        Some((2, Unit::Week, "")),
        Code::Ok,
    ),
    row(
        "features",
        &[("week", "b")],
        3,
        Some((2, Unit::Week, "")),
        Code::OverLimit,
    ),
    row(
        "features",
        &[("month", "a")],
        3,
        Some((2, Unit::Month, "")),
        Code::OverLimit,
    ),
    row(
        "features",
        &[("year", "a")],
        3,
        Some((2, Unit::Year, "")),
        Code::OverLimit,
    ),
    row(
        "features",
        &[("multiplied", "a")],
        3,
        Some((2, Unit::Second, "")),
        Code::OverLimit,
    ),
    // shadow_mode: over the limit, answered OK.
    row(
        "features",
        &[("shadow", "a")],
        3,
        Some((1, Unit::Minute, "")),
        Code::Ok,
    ),
    // The first matching wildcard wins; else the key alone.
    row(
        "features",
        &[("user", "ann-test")],
        2,
        Some((1, Unit::Minute, "")),
        Code::OverLimit,
    ),
    row(
        "features",
        &[("user", "bob")],
        2,
        Some((2, Unit::Minute, "")),
        Code::Ok,
    ),
    row(
        "features",
        &[("user", "cid")],
        3,
        Some((2, Unit::Minute, "")),
        Code::OverLimit,
    ),
    // A node without a limit limits nothing; its child does.
    row("features", &[("group", "g")], 5, None, Code::Ok),
    row(
        "features",
        &[("group", "g"), ("member", "m")],
        2,
        Some((1, Unit::Minute, "")),
        Code::OverLimit,
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feature_of_the_yaml_gets_its_limit_on_every_backend() {
    for backend in Backend::all() {
        let (d, mut client) = daemon(&backend).await;
        for (i, row) in TABLE.iter().enumerate() {
            let mut last = None;
            for _ in 0..row.hits {
                let r = request(row.domain, vec![descriptor(row.entries, None)]);
                last = Some(ask(&mut client, r).await);
            }
            let answer = last.unwrap();
            let status = &answer.statuses[0];
            let what = format!("{} row {i} {:?}", backend.name(), row.entries);
            assert_eq!(status.code, i32::from(row.code), "{what}");
            assert_eq!(answer.overall_code, i32::from(row.code), "{what}");
            let limit = status
                .current_limit
                .as_ref()
                .map(|l| (l.requests_per_unit, l.unit, l.name.as_str()));
            let expected = row.limit.map(|(n, unit, name)| (n, i32::from(unit), name));
            assert_eq!(limit, expected, "{what}");
            if let Some((n, _, _)) = row.limit {
                let left = u32::try_from(row.hits).map_or(0, |hits| n.saturating_sub(hits));
                assert_eq!(status.limit_remaining, left, "{what}");
                assert!(status.duration_until_reset.is_some(), "{what}");
            }
        }
        shared_counters_replaces_and_hits(&d, &mut client, backend.name()).await;
    }
}

/// share_threshold, replaces, counting in one request, hits_addend and the answer's extras.
async fn shared_counters_replaces_and_hits(
    d: &Daemon,
    client: &mut RateLimitServiceClient<Channel>,
    backend: &str,
) {
    // Every vip- user shares one counter of 3.
    for (user, code) in [
        ("vip-a", Code::Ok),
        ("vip-b", Code::Ok),
        ("vip-c", Code::Ok),
        ("vip-d", Code::OverLimit),
    ] {
        let answer = ask(
            client,
            request("features", vec![descriptor(&[("user", user)], None)]),
        )
        .await;
        assert_eq!(answer.overall_code, i32::from(code), "{backend} {user}");
    }
    // A trial descriptor drops the free limit it replaces: no current_limit, never limited.
    for _ in 0..4 {
        let answer = ask(
            client,
            request(
                "features",
                vec![
                    descriptor(&[("plan", "free")], None),
                    descriptor(&[("plan", "trial")], None),
                ],
            ),
        )
        .await;
        assert_eq!(answer.overall_code, i32::from(Code::Ok), "{backend}");
        assert!(answer.statuses[0].current_limit.is_none(), "{backend}");
        assert_eq!(
            answer.statuses[1]
                .current_limit
                .as_ref()
                .unwrap()
                .requests_per_unit,
            5
        );
    }
    // Alone, free is limited at 2.
    let free = || request("features", vec![descriptor(&[("plan", "free")], None)]);
    ask(client, free()).await;
    ask(client, free()).await;
    assert_eq!(
        ask(client, free()).await.overall_code,
        i32::from(Code::OverLimit),
        "{backend}"
    );

    // Every descriptor of a request is counted, the over-limit one too.
    let both = || {
        request(
            "edge",
            vec![
                descriptor(&[(ADDR, "10.0.2.1")], None),
                descriptor(&[(ADDR, "10.0.2.1"), ("path", "/other")], None),
            ],
        )
    };
    for _ in 0..3 {
        assert_eq!(ask(client, both()).await.overall_code, i32::from(Code::Ok));
    }
    let over = ask(client, both()).await;
    assert_eq!(over.overall_code, i32::from(Code::OverLimit), "{backend}");
    assert_eq!(over.statuses[0].code, i32::from(Code::OverLimit));
    assert_eq!(over.statuses[1].code, i32::from(Code::Ok));
    // The path limit (4 a day) counted the over-limit request's hit: none left.
    assert_eq!(over.statuses[1].limit_remaining, 0, "{backend}");
    let path_only = request(
        "edge",
        vec![descriptor(&[(ADDR, "10.0.2.1"), ("path", "/other")], None)],
    );
    assert_eq!(
        ask(client, path_only).await.overall_code,
        i32::from(Code::OverLimit),
        "{backend}"
    );

    // hits_addend: a descriptor's own 0 asks (nothing counted, OVER_LIMIT once nothing is
    // left); N counts N, beyond the limit too; the request's 0 is 1.
    let user = |hits| request("features", vec![descriptor(&[("user", "dan")], hits)]);
    let asked = ask(client, user(Some(0))).await;
    assert_eq!(
        (asked.overall_code, asked.statuses[0].limit_remaining),
        (i32::from(Code::Ok), 2)
    );
    let five = ask(client, user(Some(5))).await;
    assert_eq!(
        (five.overall_code, five.statuses[0].limit_remaining),
        (i32::from(Code::OverLimit), 0)
    );
    let asked = ask(client, user(Some(0))).await;
    assert_eq!(asked.overall_code, i32::from(Code::OverLimit), "{backend}");
    let mut r = request("features", vec![descriptor(&[("user", "eve")], None)]);
    r.hits_addend = 0;
    let eve = ask(client, r).await;
    assert_eq!(
        eve.statuses[0].limit_remaining, 1,
        "{backend}: a request-level 0 counts 1"
    );

    // The window's end, and sluice's headers and 429 body.
    let ten = ask(
        client,
        request("features", vec![descriptor(&[("multiplied", "b")], None)]),
    )
    .await;
    let until = ten.statuses[0].duration_until_reset.unwrap();
    assert!(
        until.seconds <= 10 && (until.seconds, until.nanos) > (0, 0),
        "{until:?}"
    );
    let header = |a: &RateLimitResponse, name: &str| {
        a.response_headers_to_add
            .iter()
            .find(|h| h.key == name)
            .map(|h| h.value.clone())
    };
    assert_eq!(header(&ten, "x-ratelimit-limit").as_deref(), Some("2"));
    assert_eq!(header(&ten, "x-ratelimit-remaining").as_deref(), Some("1"));
    ask(
        client,
        request("features", vec![descriptor(&[("multiplied", "b")], None)]),
    )
    .await;
    let denied = ask(
        client,
        request("features", vec![descriptor(&[("multiplied", "b")], None)]),
    )
    .await;
    assert_eq!(denied.overall_code, i32::from(Code::OverLimit));
    assert!(header(&denied, "retry-after").is_some(), "{backend}");
    let body: serde_json::Value = serde_json::from_slice(&denied.raw_body).unwrap();
    assert_eq!(body["error"], "rate_limit_exceeded");
    assert_eq!(
        body["violated-policies"],
        serde_json::json!(["features.multiplied"])
    );

    // Metrics: the policy label is <domain>.<key path>, or the limit's name; shadow
    // rejections counted.
    let text = sluice_tests::metrics_text(d).await;
    let has = |needle: &[&str]| text.lines().any(|l| needle.iter().all(|n| l.contains(n)));
    assert!(
        has(&[
            "rate_limit_requests_total",
            "policy=\"edge.remote_address\"",
            "status=\"rejected\""
        ]),
        "{text}"
    );
    assert!(
        has(&["rate_limit_requests_total", "policy=\"gold\""]),
        "{text}"
    );
    assert!(
        has(&[
            "rate_limit_shadow_rejections_total",
            "policy=\"features.shadow\""
        ]),
        "{text}"
    );
    // /v1/top ranks the keys of a YAML limit.
    let top = d
        .unix()
        .send(
            http::Method::GET,
            "/v1/top?policy=edge.remote_address&by=rejected&n=5",
            &[],
            "",
        )
        .await
        .unwrap();
    let top: serde_json::Value = serde_json::from_slice(&top.body).unwrap();
    assert!(top.to_string().contains("remote_address=10.0.0.2"), "{top}");
}

/// `detailed_metric`: the first 100 distinct values of a flagged limit get their own
/// `policy` label (envoyproxy/ratelimit's detailed key, `<domain>.<key>_<value>`), every
/// further one is `<policy>.other`, and a limit without the flag keeps its plain label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detailed_metric_labels_the_first_hundred_values_then_other() {
    let (d, mut client) = daemon(&Backend::Memory).await;
    let hit = |value: &str| request("features", vec![descriptor(&[("detailed", value)], None)]);
    // 101 values, one hit each, then the first and the 101st again (over their limit of 1).
    for i in 0..=100 {
        let code = ask(&mut client, hit(&format!("v{i}"))).await.overall_code;
        assert_eq!(code, i32::from(Code::Ok), "v{i}");
    }
    for value in ["v0", "v100"] {
        let code = ask(&mut client, hit(value)).await.overall_code;
        assert_eq!(code, i32::from(Code::OverLimit), "{value}");
    }
    let plain = request("features", vec![descriptor(&[("month", "m")], None)]);
    ask(&mut client, plain).await;
    // A shadow limit with the flag: over its limit, answered OK, the shadow rejection
    // counted under the value's label.
    for _ in 0..2 {
        let shadow = request(
            "features",
            vec![descriptor(&[("shadow_detailed", "s")], None)],
        );
        let code = ask(&mut client, shadow).await.overall_code;
        assert_eq!(code, i32::from(Code::Ok));
    }

    let text = sluice_tests::metrics_text(&d).await;
    // (status, policy label) → value of every rate_limit_requests_total series.
    let series: Vec<(String, String, f64)> = text
        .lines()
        .filter(|l| l.starts_with("rate_limit_requests_total{"))
        .map(|l| {
            let label = |name: &str| {
                let start = l.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                l[start..start + l[start..].find('"').unwrap()].to_owned()
            };
            let value = l.rsplit(' ').next().unwrap().parse().unwrap();
            (label("status"), label("policy"), value)
        })
        .collect();
    let count = |status: &str, policy: &str| {
        series
            .iter()
            .find(|(s, p, _)| s == status && p == policy)
            .map(|(_, _, v)| *v)
    };
    let detailed: std::collections::BTreeSet<&str> = series
        .iter()
        .filter(|(_, p, _)| p.starts_with("features.detailed_"))
        .map(|(_, p, _)| p.as_str())
        .collect();
    assert_eq!(detailed.len(), 100, "{detailed:?}");
    assert!(!detailed.contains("features.detailed_v100"), "{text}");
    assert_eq!(
        count("allowed", "features.detailed_v0"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        count("rejected", "features.detailed_v0"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        count("allowed", "features.detailed_v99"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        count("allowed", "features.detailed.other"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        count("rejected", "features.detailed.other"),
        Some(1.0),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("rate_limit_shadow_rejections_total{")
                && l.contains("policy=\"features.shadow_detailed_s\"")
                && l.ends_with(" 1")),
        "{text}"
    );
    // Without the flag: the plain label only.
    assert_eq!(count("allowed", "features.month"), Some(1.0), "{text}");
    assert!(
        !series
            .iter()
            .any(|(_, p, _)| p.starts_with("features.month_")),
        "{text}"
    );
}
