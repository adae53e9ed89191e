//! The answer to a decision, whatever the transport: its body and its rate-limit headers
//! (`X-RateLimit-*`, `RateLimit`, `RateLimit-Policy`, `Retry-After`), shared by the check API,
//! forward-auth and the Envoy RLS.

use std::ops::Range;
use std::sync::LazyLock;

use axum::body::Bytes;
use axum::response::Response;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use sluice_api::{BatchResponse, CheckResponse, Problem};

use crate::service::json::{
    ANSWER_CAPACITY, ONE, PROBLEM_JSON, json_response, json_with, serde_into,
};
use crate::service::limiter::Verdict;

const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const X_DEGRADED: HeaderName = HeaderName::from_static("x-ratelimit-degraded");
const X_SHADOW: HeaderName = HeaderName::from_static("x-ratelimit-shadow");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// One check's answer: its body written directly when it is plain (every allowed answer),
/// through serde otherwise (the same text either way), and its headers.
///
/// The headers come from a clone of [`TEMPLATE`] with their values set in place, by position:
/// no header name is hashed and the map is allocated once. The numbers of the varying values
/// are written after the body in the body's own buffer and shared from it, so the body and
/// those values cost one allocation (and the sharing's one) rather than one each.
pub(crate) fn check_answer(
    status: StatusCode,
    content_type: HeaderValue,
    body: &CheckResponse,
    verdict: &Verdict,
) -> Response {
    let mut bytes = Vec::with_capacity(ANSWER_CAPACITY);
    if !body.write_plain_json(&mut bytes) {
        // `write_plain_json` left the buffer empty: serde writes into the same allocation.
        if serde_json::to_writer(&mut bytes, body).is_err() {
            return serde_into(status, content_type, bytes, body);
        }
    }
    let body_end = bytes.len();
    let texts = HeaderTexts::write(&mut bytes, verdict);
    let shared = Bytes::from(bytes);
    let mut headers = TEMPLATE.clone();
    let mut values = headers.values_mut();
    for value in [
        content_type,
        limit_value(verdict),
        texts.remaining(&shared),
        texts.reset(&shared),
        verdict.limit.policy_header.clone(),
    ] {
        if let Some(slot) = values.next() {
            *slot = value;
        }
    }
    match (texts.ratelimit(&shared), values.next()) {
        (Some(value), Some(slot)) => *slot = value,
        // A policy name no header may hold: the answer goes without `RateLimit`, as before.
        _ => {
            headers.remove(RATELIMIT);
        }
    }
    set_rare_headers(&mut headers, verdict);
    let mut response = Response::new(axum::body::Body::from(shared.slice(..body_end)));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// The headers of every check answer, in their order on the wire, with placeholder values
/// [`check_answer`] overwrites.
static TEMPLATE: LazyLock<HeaderMap> = LazyLock::new(|| {
    let mut headers = HeaderMap::with_capacity(12);
    for name in [
        CONTENT_TYPE,
        X_LIMIT,
        X_REMAINING,
        X_RESET,
        RATELIMIT_POLICY,
        RATELIMIT,
    ] {
        headers.insert(name, ONE);
    }
    headers
});

/// Where the text of `X-RateLimit-Remaining`, `X-RateLimit-Reset` and `RateLimit` sit in
/// the buffer they were written to.
struct HeaderTexts {
    remaining: Range<usize>,
    reset: Range<usize>,
    ratelimit: Range<usize>,
}

impl HeaderTexts {
    /// Appends the three texts of `verdict` to `out`.
    fn write(out: &mut Vec<u8>, verdict: &Verdict) -> HeaderTexts {
        let d = &verdict.decision;
        let mut numbers = itoa::Buffer::new();
        let put = |out: &mut Vec<u8>, parts: &[&[u8]]| {
            let start = out.len();
            for part in parts {
                out.extend_from_slice(part);
            }
            start..out.len()
        };
        let remaining = put(out, &[numbers.format(d.remaining).as_bytes()]);
        let reset = put(out, &[numbers.format(d.reset_secs()).as_bytes()]);
        let ratelimit = put(
            out,
            &[
                b"\"",
                verdict.policy.name.as_bytes(),
                b"\";r=",
                numbers.format(d.remaining).as_bytes(),
                b";t=",
                itoa::Buffer::new()
                    .format(ratelimit_seconds(verdict))
                    .as_bytes(),
            ],
        );
        HeaderTexts {
            remaining,
            reset,
            ratelimit,
        }
    }

    fn remaining(&self, shared: &Bytes) -> HeaderValue {
        digits(shared.slice(self.remaining.clone()))
    }

    fn reset(&self, shared: &Bytes) -> HeaderValue {
        digits(shared.slice(self.reset.clone()))
    }

    fn ratelimit(&self, shared: &Bytes) -> Option<HeaderValue> {
        HeaderValue::from_maybe_shared(shared.slice(self.ratelimit.clone())).ok()
    }
}

/// A header value of decimal digits (always valid; `0` should it not be).
fn digits(text: Bytes) -> HeaderValue {
    HeaderValue::from_maybe_shared(text).unwrap_or(HeaderValue::from_static("0"))
}

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

pub(crate) fn batch_response(verdicts: &[Verdict]) -> Response {
    let allowed = verdicts.iter().all(|v| v.allowed);
    let mut violated: Vec<String> = Vec::new();
    for v in verdicts.iter().filter(|v| !v.allowed) {
        if !violated.iter().any(|p| **p == *v.policy.name) {
            violated.push(v.policy.name.to_string());
        }
    }
    let body = BatchResponse {
        allowed,
        results: verdicts.iter().map(body_of).collect(),
        problem: (!allowed).then(|| Problem::quota_exceeded(violated)),
    };
    let mut response = if allowed {
        json_response(StatusCode::OK, &body)
    } else {
        json_with(StatusCode::TOO_MANY_REQUESTS, PROBLEM_JSON, &body)
    };
    if let Some(worst) = most_restrictive(verdicts) {
        set_headers(response.headers_mut(), worst);
    }
    response
}

/// The denied result with the longest wait, else the allowed one with the least left.
fn most_restrictive(verdicts: &[Verdict]) -> Option<&Verdict> {
    verdicts
        .iter()
        .filter(|v| !v.allowed)
        .max_by_key(|v| v.decision.retry_after_ms)
        .or_else(|| verdicts.iter().min_by_key(|v| v.decision.remaining))
}

/// `X-RateLimit-Limit`: the (policy, tier)'s own, computed once, unless the decision says
/// otherwise.
fn limit_value(verdict: &Verdict) -> HeaderValue {
    let d = &verdict.decision;
    if d.limit == verdict.limit.params.capacity() {
        verdict.limit.limit_header.clone()
    } else {
        HeaderValue::from(d.limit)
    }
}

/// The `t` of `RateLimit`: the wait of a denial, else the seconds until the window resets.
fn ratelimit_seconds(verdict: &Verdict) -> u64 {
    let d = &verdict.decision;
    d.retry_after_secs()
        .unwrap_or_else(|| d.secs_until_reset(verdict.now_ms))
}

/// The rate-limit headers of `verdict`, for the answers built around a map of their own
/// (batches, forward-auth, the RLS); [`check_answer`] writes the same ones.
pub(crate) fn set_headers(headers: &mut HeaderMap, verdict: &Verdict) {
    // A no-op on answers of `json_with`, which made the room already.
    headers.reserve(10);
    let mut texts = Vec::with_capacity(64 + verdict.policy.name.len());
    let written = HeaderTexts::write(&mut texts, verdict);
    let shared = Bytes::from(texts);
    headers.insert(X_LIMIT, limit_value(verdict));
    headers.insert(X_REMAINING, written.remaining(&shared));
    headers.insert(X_RESET, written.reset(&shared));
    headers.insert(RATELIMIT_POLICY, verdict.limit.policy_header.clone());
    if let Some(value) = written.ratelimit(&shared) {
        headers.insert(RATELIMIT, value);
    }
    set_rare_headers(headers, verdict);
}

/// The headers only some answers carry: `Retry-After` of a denial, and the degraded and
/// shadow marks.
fn set_rare_headers(headers: &mut HeaderMap, verdict: &Verdict) {
    if let Some(retry) = verdict.decision.retry_after_secs() {
        headers.insert(RETRY_AFTER, HeaderValue::from(retry));
    }
    if verdict.degraded {
        headers.insert(X_DEGRADED, ONE);
    }
    if verdict.shadow {
        headers.insert(X_SHADOW, ONE);
    }
}
