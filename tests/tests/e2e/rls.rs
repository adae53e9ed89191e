//! The Envoy RLS over gRPC from a Rust (tonic) client: the policies and descriptors of
//! `examples/envoy/sluice.toml` on a real daemon's `listen.grpc`.

use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use sluice_server::rls::pb::rate_limit_response::rate_limit::Unit;
use sluice_server::rls::pb::rate_limit_response::{Code, DescriptorStatus};
use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;
use sluice_server::rls::pb::{RateLimitRequest, RateLimitResponse};
use sluice_tests::{Daemon, repo_file};
use tonic::transport::Channel;

async fn daemon() -> (Daemon, RateLimitServiceClient<Channel>) {
    let d = Daemon::start(&repo_file("examples/envoy/sluice.toml")).await;
    let client = RateLimitServiceClient::connect(format!("http://{}", d.grpc))
        .await
        .unwrap();
    (d, client)
}

fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
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

fn header<'a>(answer: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    answer
        .response_headers_to_add
        .iter()
        .find(|h| h.key == name)
        .map(|h| h.value.as_str())
}

fn code(status: &DescriptorStatus) -> Code {
    Code::try_from(status.code).unwrap()
}

#[tokio::test]
async fn a_descriptor_is_limited_by_its_policy_with_statuses_headers_and_metrics() {
    let (d, mut client) = daemon().await;
    let ip = || request("edge", vec![descriptor(&[("remote_address", "10.0.0.1")])]);
    for left in (0..5u32).rev() {
        let answer = ask(&mut client, ip()).await;
        assert_eq!(answer.overall_code, i32::from(Code::Ok));
        let status = &answer.statuses[0];
        assert_eq!((code(status), status.limit_remaining), (Code::Ok, left));
        let limit = status.current_limit.as_ref().unwrap();
        assert_eq!(
            (limit.requests_per_unit, limit.unit, limit.name.as_str()),
            (5, i32::from(Unit::Minute), "\"per_ip\";q=5;w=60")
        );
        assert!(status.duration_until_reset.unwrap().seconds > 0);
        assert_eq!(header(&answer, "x-ratelimit-limit"), Some("5"));
        assert_eq!(
            header(&answer, "x-ratelimit-remaining"),
            Some(left.to_string().as_str())
        );
        assert_eq!(
            header(&answer, "ratelimit-policy"),
            Some("\"per_ip\";q=5;w=60")
        );
        assert!(header(&answer, "retry-after").is_none());
        assert!(answer.raw_body.is_empty());
    }
    let denied = ask(&mut client, ip()).await;
    assert_eq!(denied.overall_code, i32::from(Code::OverLimit));
    assert_eq!(code(&denied.statuses[0]), Code::OverLimit);
    assert_eq!(denied.statuses[0].limit_remaining, 0);
    // GCRA at 5 per minute: the next request fits in 12 s.
    assert_eq!(header(&denied, "retry-after"), Some("12"));
    assert_eq!(header(&denied, "ratelimit"), Some("\"per_ip\";r=0;t=12"));
    assert_eq!(
        header(&denied, "content-type"),
        Some("application/problem+json")
    );
    let body: serde_json::Value = serde_json::from_slice(&denied.raw_body).unwrap();
    assert_eq!(body["error"], "rate_limit_exceeded");
    assert_eq!(body["violated-policies"], serde_json::json!(["per_ip"]));
    // Another address has its own budget.
    let other = ask(
        &mut client,
        request("edge", vec![descriptor(&[("remote_address", "10.0.0.2")])]),
    )
    .await;
    assert_eq!(other.statuses[0].limit_remaining, 4);
    // RLS decisions are counted like every other check.
    let text = sluice_tests::metrics_text(&d).await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("rate_limit_requests_total")
                && l.contains("status=\"rejected\"")
                && l.contains("policy=\"per_ip\"")
                && l.ends_with(" 1")),
        "{text}"
    );
}

#[tokio::test]
async fn unknown_domains_and_descriptors_are_ok_and_not_limited() {
    let (_d, mut client) = daemon().await;
    for _ in 0..10 {
        let answer = ask(
            &mut client,
            request(
                "edge",
                vec![
                    descriptor(&[("path", "/a")]),
                    descriptor(&[("remote_address", "10.0.1.1"), ("path", "/a")]),
                ],
            ),
        )
        .await;
        assert_eq!(answer.overall_code, i32::from(Code::Ok));
        assert_eq!(answer.statuses.len(), 2);
        for status in &answer.statuses {
            assert_eq!(code(status), Code::Ok);
            assert!(status.current_limit.is_none());
        }
        assert!(answer.response_headers_to_add.is_empty());
        let other = ask(
            &mut client,
            request(
                "elsewhere",
                vec![descriptor(&[("remote_address", "10.0.1.1")])],
            ),
        )
        .await;
        assert_eq!(other.overall_code, i32::from(Code::Ok));
        assert!(other.statuses[0].current_limit.is_none());
    }
}

#[tokio::test]
async fn hits_addend_is_the_cost_and_the_descriptors_own_wins() {
    let (_d, mut client) = daemon().await;
    let mut r = request("edge", vec![descriptor(&[("remote_address", "10.0.2.1")])]);
    r.hits_addend = 2;
    assert_eq!(
        ask(&mut client, r.clone()).await.statuses[0].limit_remaining,
        3
    );
    r.descriptors[0].hits_addend = Some(3);
    let answer = ask(&mut client, r.clone()).await;
    assert_eq!(
        (answer.overall_code, answer.statuses[0].limit_remaining),
        (i32::from(Code::Ok), 0)
    );
    // A descriptor's own 0 asks: with nothing left, it is over the limit.
    r.hits_addend = 0;
    r.descriptors[0].hits_addend = Some(0);
    assert_eq!(
        ask(&mut client, r).await.overall_code,
        i32::from(Code::OverLimit)
    );
}

#[tokio::test]
async fn a_descriptors_own_hits_addend_of_0_asks_without_consuming_on_any_policy() {
    let (_d, mut client) = daemon().await;
    let mut r = request("edge", vec![descriptor(&[("remote_address", "10.0.2.9")])]);
    r.descriptors[0].hits_addend = Some(0);
    // Asked again and again, the key keeps all it has.
    for _ in 0..10 {
        let answer = ask(&mut client, r.clone()).await;
        assert_eq!(
            (answer.overall_code, answer.statuses[0].limit_remaining),
            (i32::from(Code::Ok), 5)
        );
    }
    // A request-level 0 with no hits_addend of the descriptor's own stays 1 (Envoy's rule).
    r.descriptors[0].hits_addend = None;
    assert_eq!(
        ask(&mut client, r.clone()).await.statuses[0].limit_remaining,
        4
    );
    r.descriptors[0].hits_addend = Some(4);
    assert_eq!(
        ask(&mut client, r.clone()).await.statuses[0].limit_remaining,
        0
    );
    // Nothing left: the ask is over the limit, and still consumes nothing.
    r.descriptors[0].hits_addend = Some(0);
    assert_eq!(
        ask(&mut client, r).await.overall_code,
        i32::from(Code::OverLimit)
    );
}

#[tokio::test]
async fn descriptors_are_all_or_nothing() {
    let (_d, mut client) = daemon().await;
    let both = || {
        request(
            "edge",
            vec![
                descriptor(&[("remote_address", "10.0.3.1")]),
                descriptor(&[("user", "ann")]),
            ],
        )
    };
    for _ in 0..3 {
        assert_eq!(
            ask(&mut client, both()).await.overall_code,
            i32::from(Code::Ok)
        );
    }
    let denied = ask(&mut client, both()).await;
    assert_eq!(denied.overall_code, i32::from(Code::OverLimit));
    assert_eq!(code(&denied.statuses[0]), Code::Ok);
    assert_eq!(code(&denied.statuses[1]), Code::OverLimit);
    // The headers are those of the denied (most restrictive) descriptor.
    assert_eq!(header(&denied, "x-ratelimit-limit"), Some("3"));
    // The denied request consumed nothing of the address's budget: 5 - 3 - this one.
    let ip = ask(
        &mut client,
        request("edge", vec![descriptor(&[("remote_address", "10.0.3.1")])]),
    )
    .await;
    assert_eq!(ip.statuses[0].limit_remaining, 1);
}

#[tokio::test]
async fn a_cost_above_the_capacity_is_over_the_limit_and_consumes_nothing() {
    let (_d, mut client) = daemon().await;
    let mut r = request(
        "edge",
        vec![
            descriptor(&[("remote_address", "10.0.4.1")]),
            descriptor(&[("user", "bob")]),
        ],
    );
    r.descriptors[1].hits_addend = Some(4);
    let answer = ask(&mut client, r).await;
    assert_eq!(answer.overall_code, i32::from(Code::OverLimit));
    assert_eq!(code(&answer.statuses[0]), Code::Ok);
    assert_eq!(code(&answer.statuses[1]), Code::OverLimit);
    let user = ask(
        &mut client,
        request("edge", vec![descriptor(&[("user", "bob")])]),
    )
    .await;
    assert_eq!(user.statuses[0].limit_remaining, 2);
}

#[tokio::test]
async fn bad_requests_are_invalid_argument_naming_the_field() {
    let (_d, mut client) = daemon().await;
    let one = || vec![descriptor(&[("remote_address", "10.0.5.1")])];
    let long = "x".repeat(600);
    let cases = [
        (request("", one()), "domain"),
        (request("edge", Vec::new()), "descriptors"),
        (
            request("edge", vec![descriptor(&[("user", "u")]); 65]),
            "descriptors",
        ),
        (
            request("edge", vec![descriptor(&[("remote_address", &long)])]),
            "descriptors[0]",
        ),
    ];
    for (r, field) in cases {
        let err = client.should_rate_limit(r).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
        assert!(err.message().starts_with(field), "{}", err.message());
    }
    // The daemon still answers.
    assert_eq!(
        ask(&mut client, request("edge", one())).await.overall_code,
        i32::from(Code::Ok)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_each_policy_applies_its_fail_mode() {
    let mut redis = sluice_testkit::RedisServer::start();
    let config = format!(
        r#"
[backend]
kind = "redis"
url = "{}"
timeout = "50ms"

[policies.open]
algorithm = "fixed_window"
limit = 100
window = "1m"
fail = "open"

[policies.closed]
algorithm = "fixed_window"
limit = 100
window = "1m"
fail = "closed"

[[rls.descriptors]]
domain = "edge"
keys = ["open"]
policy = "open"
key = "o:{{open}}"

[[rls.descriptors]]
domain = "edge"
keys = ["closed"]
policy = "closed"
key = "c:{{closed}}"
"#,
        redis.url()
    );
    let d = Daemon::start(&config).await;
    let mut client = RateLimitServiceClient::connect(format!("http://{}", d.grpc))
        .await
        .unwrap();
    let open = || request("edge", vec![descriptor(&[("open", "1")])]);
    let closed = || request("edge", vec![descriptor(&[("closed", "1")])]);
    // Until the daemon's connection to Redis is up, answers may be degraded.
    let started = std::time::Instant::now();
    while header(&ask(&mut client, open()).await, "x-ratelimit-degraded").is_some() {
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        ask(&mut client, closed()).await.overall_code,
        i32::from(Code::Ok)
    );

    redis.kill();
    let degraded = ask(&mut client, open()).await;
    assert_eq!(degraded.overall_code, i32::from(Code::Ok));
    assert_eq!(header(&degraded, "x-ratelimit-degraded"), Some("1"));
    let err = client.should_rate_limit(closed()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    // All-or-nothing with one closed policy failing: the request is refused as a whole.
    let both = request(
        "edge",
        vec![descriptor(&[("open", "2")]), descriptor(&[("closed", "2")])],
    );
    let err = client.should_rate_limit(both).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
}
