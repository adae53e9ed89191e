//! The answer to a decision, whatever the transport: its body and its rate-limit headers
//! (`X-RateLimit-*`, `RateLimit`, `RateLimit-Policy`, `Retry-After`), shared by the check API,
//! forward-auth and the Envoy RLS.

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};
use sluice_api::{BatchResponse, CheckResponse, Problem};

use crate::service::json::ONE;
use crate::service::limiter::Verdict;

const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const X_DEGRADED: HeaderName = HeaderName::from_static("x-ratelimit-degraded");
const X_SHADOW: HeaderName = HeaderName::from_static("x-ratelimit-shadow");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

pub(crate) fn body_of(verdict: &Verdict) -> CheckResponse {
    let d = &verdict.decision;
    CheckResponse {
        allowed: verdict.allowed,
        policy: verdict.policy.name.to_string(),
        limit: d.limit,
        remaining: d.remaining,
        reset: d.reset_secs(),
        retry_after: d.retry_after_secs(),
        delay_ms: d.delay_ms,
        degraded: verdict.degraded,
        problem: (!verdict.allowed)
            .then(|| Problem::quota_exceeded(vec![verdict.policy.name.to_string()])),
    }
}

/// The body of a batch's answer: whether every check was allowed, each check's answer, and
/// the policies that denied.
pub(crate) fn batch_body(verdicts: &[Verdict]) -> BatchResponse {
    let allowed = verdicts.iter().all(|v| v.allowed);
    let mut violated: Vec<String> = Vec::new();
    for v in verdicts.iter().filter(|v| !v.allowed) {
        if !violated.iter().any(|p| **p == *v.policy.name) {
            violated.push(v.policy.name.to_string());
        }
    }
    BatchResponse {
        allowed,
        results: verdicts.iter().map(body_of).collect(),
        problem: (!allowed).then(|| Problem::quota_exceeded(violated)),
    }
}

/// The denied result with the longest wait, else the allowed one with the least left.
pub(crate) fn most_restrictive(verdicts: &[Verdict]) -> Option<&Verdict> {
    verdicts
        .iter()
        .filter(|v| !v.allowed)
        .max_by_key(|v| v.decision.retry_after_ms)
        .or_else(|| verdicts.iter().min_by_key(|v| v.decision.remaining))
}

pub(crate) fn set_headers(headers: &mut HeaderMap, verdict: &Verdict) {
    let d = &verdict.decision;
    // A no-op on answers of `json_with`, which made the room already.
    headers.reserve(10);
    let limit = if d.limit == verdict.limit.params.capacity() {
        verdict.limit.limit_header.clone()
    } else {
        HeaderValue::from(d.limit)
    };
    headers.insert(X_LIMIT, limit);
    headers.insert(X_REMAINING, HeaderValue::from(d.remaining));
    headers.insert(X_RESET, HeaderValue::from(d.reset_secs()));
    headers.insert(RATELIMIT_POLICY, verdict.limit.policy_header.clone());
    let retry = d.retry_after_secs();
    let t = retry.unwrap_or_else(|| d.secs_until_reset(verdict.now_ms));
    // Built on the stack and copied once: a `String` handed to `HeaderValue` costs a second
    // allocation whenever its capacity is not its length.
    let name = verdict.policy.name.as_bytes();
    let mut value = [0u8; 2 * 20 + 64 + 8];
    let mut numbers = itoa::Buffer::new();
    let mut len = 0;
    for part in [
        b"\"".as_slice(),
        name,
        b"\";r=",
        numbers.format(d.remaining).as_bytes(),
        b";t=",
        itoa::Buffer::new().format(t).as_bytes(),
    ] {
        let Some(room) = value.get_mut(len..len + part.len()) else {
            break;
        };
        room.copy_from_slice(part);
        len += part.len();
    }
    if let Ok(value) = HeaderValue::from_bytes(&value[..len]) {
        headers.insert(RATELIMIT, value);
    }
    if let Some(retry) = retry {
        headers.insert(RETRY_AFTER, HeaderValue::from(retry));
    }
    if verdict.degraded {
        headers.insert(X_DEGRADED, ONE);
    }
    if verdict.shadow {
        headers.insert(X_SHADOW, ONE);
    }
}
