//! The answers both kinds of RLS domain share ([`service`](super::service) for
//! `[[rls.descriptors]]`, [`yaml_domains`](super::yaml_domains) for `rls.envoy_config`): the
//! response to decided descriptors and the gRPC status of a limiter error. A module of its own
//! so neither answering module imports the other.
//!
//! The response's headers are the HTTP answer's (`service::answer`), in its order, written
//! straight into the message's name and value strings: no header map is built to be copied.

use http::HeaderName;
use http::header::CONTENT_TYPE;
use tonic::Status;

use super::generated::envoy::config::core::v3::HeaderValue;
use super::generated::envoy::service::ratelimit::v3 as pb;
use crate::service::answer::{
    HeaderTexts, RATELIMIT, RATELIMIT_POLICY, X_LIMIT, X_REMAINING, X_RESET, body_of, limit_value,
    rare_headers,
};
use crate::service::json::PROBLEM_JSON;
use crate::service::limiter::{LimitError, Verdict};
use pb::RateLimitResponse;
use pb::rate_limit_response::{Code, DescriptorStatus};

/// The gRPC status of a limiter error.
pub(super) fn limit_error(err: LimitError) -> Status {
    match err {
        LimitError::BackendUnavailable => {
            Status::unavailable("the rate-limit backend is unavailable and the policy fails closed")
        }
        LimitError::BadRequest { .. } | LimitError::CostExceedsCapacity { .. } => {
            Status::invalid_argument(err.to_string())
        }
        LimitError::UnknownPolicy { .. } => Status::failed_precondition(err.to_string()),
    }
}

/// The code of an answer (a descriptor's, or the whole request's) that `allowed` or not.
pub(super) fn code_of(allowed: bool) -> i32 {
    if allowed { Code::Ok } else { Code::OverLimit }.into()
}

/// The response to decided descriptors: the headers of the most restrictive verdict (the
/// longest wait of a denial, else the least remaining), and on a denial sluiced's problem
/// document as the body.
pub(super) fn response(statuses: Vec<DescriptorStatus>, verdicts: &[Verdict]) -> RateLimitResponse {
    let allowed = verdicts.iter().all(|v| v.allowed);
    let worst = verdicts
        .iter()
        .filter(|v| !v.allowed)
        .max_by_key(|v| v.decision.retry_after_ms)
        .or_else(|| verdicts.iter().min_by_key(|v| v.decision.remaining));
    let mut headers = Vec::new();
    let mut raw_body = Vec::new();
    if let Some(worst) = worst {
        decision_headers(&mut headers, worst);
        if !allowed {
            raw_body = serde_json::to_vec(&body_of(worst)).unwrap_or_default();
            push(&mut headers, CONTENT_TYPE, PROBLEM_JSON.as_bytes());
        }
    }
    RateLimitResponse {
        overall_code: code_of(allowed),
        statuses,
        response_headers_to_add: headers,
        raw_body,
        ..RateLimitResponse::default()
    }
}

/// The rate-limit headers of `verdict`, as `service::answer::set_headers` sets them.
fn decision_headers(headers: &mut Vec<HeaderValue>, verdict: &Verdict) {
    headers.reserve(9);
    let mut texts = Vec::with_capacity(64 + verdict.policy.name.len());
    let [remaining, reset, ratelimit] = HeaderTexts::write(&mut texts, verdict).texts(&texts);
    push(headers, X_LIMIT, limit_value(verdict).as_bytes());
    push(headers, X_REMAINING, remaining);
    push(headers, X_RESET, reset);
    push(
        headers,
        RATELIMIT_POLICY,
        verdict.limit.policy_header.as_bytes(),
    );
    push(headers, RATELIMIT, ratelimit);
    for (name, value) in rare_headers(verdict) {
        push(headers, name, value.as_bytes());
    }
}

/// Adds the header `name: value` when `value` is visible ASCII (tab included), the text
/// `HeaderValue::to_str` reads; a value that is not is left out, as it always was.
fn push(headers: &mut Vec<HeaderValue>, name: HeaderName, value: &[u8]) {
    let visible = |b: u8| b == b'\t' || (0x20..0x7f).contains(&b);
    if let Ok(value) = std::str::from_utf8(value)
        && value.bytes().all(visible)
    {
        headers.push(HeaderValue {
            key: name.as_str().to_owned(),
            value: value.to_owned(),
            raw_value: Vec::new(),
        });
    }
}
