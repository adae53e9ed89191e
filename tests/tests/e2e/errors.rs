//! Every row of the documented bad-input table: JSON errors, the right code, never a 5xx.

use http::Method;
use sluice_api::{ErrorBody, MAX_BODY_BYTES, codes};
use sluice_tests::Daemon;

async fn post(d: &Daemon, body: &str) -> (u16, ErrorBody) {
    let raw = d
        .unix()
        .send(Method::POST, "/v1/check", &[], body.to_owned())
        .await
        .unwrap();
    assert_eq!(
        raw.header("content-type"),
        Some("application/json"),
        "{body}"
    );
    (raw.status, raw.json().unwrap())
}

#[tokio::test]
async fn malformed_json_is_a_bad_request() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    for body in [
        r#"{"policy":"#,
        "not json",
        r#"{"policy":"fw","key":"a"} trailing"#,
        "[1]",
        "",
    ] {
        let (status, err) = post(&d, body).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(err.error, codes::BAD_REQUEST, "{body}");
    }
}

#[tokio::test]
async fn a_missing_field_is_named() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let (status, err) = post(&d, r#"{"key":"a"}"#).await;
    assert_eq!((status, err.error.as_str()), (400, codes::BAD_REQUEST));
    assert_eq!(err.field.as_deref(), Some("policy"));
    let (status, err) = post(&d, r#"{"policy":"fw"}"#).await;
    assert_eq!(status, 400);
    assert_eq!(err.field.as_deref(), Some("key"));
    assert!(err.message.contains("key"), "{}", err.message);
}

#[tokio::test]
async fn a_wrong_typed_field_is_named() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    for (body, field) in [
        (r#"{"policy":"fw","key":"a","cost":"x"}"#, "cost"),
        (r#"{"policy":"fw","key":7}"#, "key"),
        (r#"{"policy":["fw"],"key":"a"}"#, "policy"),
        (r#"{"policy":"fw","key":"a","tier":1}"#, "tier"),
        (r#"{"policy":"fw","key":"a","cost":1.5}"#, "cost"),
        (
            r#"{"checks":[{"policy":"fw","key":"a"},{"policy":"fw","key":"b","cost":true}]}"#,
            "checks[1].cost",
        ),
        (
            r#"{"checks":[{"policy":"fw","key":"a"},{"policy":"fw"}]}"#,
            "checks[1].key",
        ),
        (r#"{"checks":"all"}"#, "checks"),
    ] {
        let (status, err) = post(&d, body).await;
        assert_eq!(
            (status, err.error.as_str()),
            (400, codes::BAD_REQUEST),
            "{body}"
        );
        assert_eq!(err.field.as_deref(), Some(field), "{body}");
        assert!(err.message.contains(field), "{body}: {}", err.message);
    }
}

#[tokio::test]
async fn a_key_is_1_to_512_bytes() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let (status, err) = post(&d, r#"{"policy":"fw","key":""}"#).await;
    assert_eq!((status, err.error.as_str()), (400, codes::BAD_REQUEST));
    assert_eq!(err.field.as_deref(), Some("key"));

    let long = "k".repeat(513);
    let (status, err) = post(&d, &format!(r#"{{"policy":"fw","key":"{long}"}}"#)).await;
    assert_eq!((status, err.error.as_str()), (400, codes::BAD_REQUEST));
    assert_eq!(err.field.as_deref(), Some("key"));

    // 512 bytes of multi-byte UTF-8 is still fine: the bound is bytes.
    let exact = "é".repeat(256);
    let raw = d
        .unix()
        .send(
            Method::POST,
            "/v1/check",
            &[],
            format!(r#"{{"policy":"fw","key":"{exact}"}}"#),
        )
        .await
        .unwrap();
    assert_eq!(raw.status, 200);
}

#[tokio::test]
async fn a_negative_cost_is_a_bad_request() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let (status, err) = post(&d, r#"{"policy":"fw","key":"a","cost":-1}"#).await;
    assert_eq!((status, err.error.as_str()), (400, codes::BAD_REQUEST));
    assert_eq!(err.field.as_deref(), Some("cost"));
}

#[tokio::test]
async fn a_cost_above_capacity_is_refused() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let (status, err) = post(&d, r#"{"policy":"fw","key":"a","cost":6}"#).await;
    assert_eq!(
        (status, err.error.as_str()),
        (400, codes::COST_EXCEEDS_CAPACITY)
    );
    // The bucket's capacity is its burst, not its limit.
    let (status, _) = post(&d, r#"{"policy":"public","key":"a","cost":101}"#).await;
    assert_eq!(status, 400);
    let raw = d
        .unix()
        .send(
            Method::POST,
            "/v1/check",
            &[],
            r#"{"policy":"public","key":"a","tier":"pro","cost":2000}"#,
        )
        .await
        .unwrap();
    assert_eq!(raw.status, 200);
}

#[tokio::test]
async fn an_unknown_policy_is_404() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let (status, err) = post(&d, r#"{"policy":"nope","key":"a"}"#).await;
    assert_eq!((status, err.error.as_str()), (404, codes::UNKNOWN_POLICY));
    assert!(err.message.contains("nope"));
}

#[tokio::test]
async fn unknown_paths_and_wrong_methods_answer_json() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let c = d.unix();
    let raw = c.send(Method::GET, "/v2/nothing", &[], "").await.unwrap();
    assert_eq!(raw.status, 404);
    assert_eq!(raw.json::<ErrorBody>().unwrap().error, codes::NOT_FOUND);

    for (method, path) in [
        (Method::GET, "/v1/check"),
        (Method::PUT, "/v1/check"),
        (Method::POST, "/healthz"),
        (Method::DELETE, "/v1/policies"),
    ] {
        let raw = c.send(method.clone(), path, &[], "").await.unwrap();
        assert_eq!(raw.status, 405, "{method} {path}");
        assert_eq!(raw.header("content-type"), Some("application/json"));
        assert_eq!(
            raw.json::<ErrorBody>().unwrap().error,
            codes::METHOD_NOT_ALLOWED
        );
    }
}

#[tokio::test]
async fn a_body_over_64_kib_is_413() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let pad = "x".repeat(MAX_BODY_BYTES);
    let (status, err) = post(&d, &format!(r#"{{"policy":"fw","key":"a","pad":"{pad}"}}"#)).await;
    assert_eq!(
        (status, err.error.as_str()),
        (413, codes::PAYLOAD_TOO_LARGE)
    );
}

#[tokio::test]
async fn the_content_type_does_not_matter() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json",
    ] {
        let raw = d
            .unix()
            .send(
                Method::POST,
                "/v1/check",
                &[("content-type", content_type)],
                r#"{"policy":"fw","key":"ct"}"#,
            )
            .await
            .unwrap();
        assert_eq!(raw.status, 200, "{content_type}");
    }
}

#[tokio::test]
async fn a_batch_must_hold_1_to_64_checks() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let (status, err) = post(&d, r#"{"checks":[]}"#).await;
    assert_eq!((status, err.error.as_str()), (400, codes::BAD_REQUEST));
    let checks: Vec<String> = (0..65)
        .map(|i| format!(r#"{{"policy":"public","key":"k{i}"}}"#))
        .collect();
    let (status, err) = post(&d, &format!(r#"{{"checks":[{}]}}"#, checks.join(","))).await;
    assert_eq!((status, err.error.as_str()), (400, codes::BAD_REQUEST));
    assert_eq!(err.field.as_deref(), Some("checks"));
    // Nothing of the refused batch was consumed.
    let raw = d
        .unix()
        .send(
            Method::POST,
            "/v1/check",
            &[],
            r#"{"policy":"public","key":"k0","cost":0}"#,
        )
        .await
        .unwrap();
    assert_eq!(raw.json::<serde_json::Value>().unwrap()["remaining"], 100);
}
