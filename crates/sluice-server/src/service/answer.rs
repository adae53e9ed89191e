//! The answer to a decision, whatever the transport: its body and its rate-limit headers
//! (`X-RateLimit-*`, `RateLimit`, `RateLimit-Policy`, `Retry-After`), shared by the check API,
//! forward-auth and the Envoy RLS.

use std::ops::Range;

use bytes::Bytes;
use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};
use sluice_api::{BatchResponse, CheckResponse, Problem};

use crate::service::json::ONE;
use crate::service::limiter::Verdict;

pub(crate) const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub(crate) const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub(crate) const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const X_DEGRADED: HeaderName = HeaderName::from_static("x-ratelimit-degraded");
const X_SHADOW: HeaderName = HeaderName::from_static("x-ratelimit-shadow");
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub(crate) const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

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
        debt: verdict.policy.usage.then_some(d.debt),
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

/// `X-RateLimit-Limit`: the (policy, tier)'s own, computed once, unless the decision says
/// otherwise.
pub(crate) fn limit_value(verdict: &Verdict) -> HeaderValue {
    let d = &verdict.decision;
    if d.limit == verdict.limit.params.capacity() {
        verdict.limit.limit_header.clone()
    } else {
        HeaderValue::from(d.limit)
    }
}

/// How `RateLimit` names the limit that answered: the policy, or of a stacked policy the
/// limit that bound (`<policy>.<window>`, as `RateLimit-Policy` lists it).
fn bound_name(verdict: &Verdict) -> &str {
    verdict
        .limit
        .answering(verdict.decision.limit)
        .map_or(&verdict.policy.name, |s| &s.label)
}

/// The `t` of `RateLimit`: the wait of a denial, else the seconds until the window resets.
pub(crate) fn ratelimit_seconds(verdict: &Verdict) -> u64 {
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
pub(crate) fn set_rare_headers(headers: &mut HeaderMap, verdict: &Verdict) {
    for (name, value) in rare_headers(verdict) {
        headers.insert(name, value);
    }
}

/// The headers of [`set_rare_headers`], in the order it sets them.
pub(crate) fn rare_headers(verdict: &Verdict) -> impl Iterator<Item = (HeaderName, HeaderValue)> {
    let retry = verdict
        .decision
        .retry_after_secs()
        .map(|retry| (RETRY_AFTER, HeaderValue::from(retry)));
    let degraded = verdict.degraded.then_some((X_DEGRADED, ONE));
    let shadow = verdict.shadow.then_some((X_SHADOW, ONE));
    retry.into_iter().chain(degraded).chain(shadow)
}

/// Where the text of `X-RateLimit-Remaining`, `X-RateLimit-Reset` and `RateLimit` sit in
/// the buffer they were written to.
pub(crate) struct HeaderTexts {
    remaining: Range<usize>,
    reset: Range<usize>,
    ratelimit: Range<usize>,
}

impl HeaderTexts {
    /// Appends the three texts of `verdict` to `out`.
    pub(crate) fn write(out: &mut Vec<u8>, verdict: &Verdict) -> HeaderTexts {
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
                bound_name(verdict).as_bytes(),
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

    /// The three texts in `buf` (what [`write`](Self::write) appended to):
    /// `X-RateLimit-Remaining`, `X-RateLimit-Reset` and `RateLimit`.
    pub(crate) fn texts<'b>(&self, buf: &'b [u8]) -> [&'b [u8]; 3] {
        [
            &buf[self.remaining.clone()],
            &buf[self.reset.clone()],
            &buf[self.ratelimit.clone()],
        ]
    }

    pub(crate) fn remaining(&self, shared: &Bytes) -> HeaderValue {
        digits(shared.slice(self.remaining.clone()))
    }

    pub(crate) fn reset(&self, shared: &Bytes) -> HeaderValue {
        digits(shared.slice(self.reset.clone()))
    }

    pub(crate) fn ratelimit(&self, shared: &Bytes) -> Option<HeaderValue> {
        HeaderValue::from_maybe_shared(shared.slice(self.ratelimit.clone())).ok()
    }
}

/// A header value of decimal digits (always valid; `0` should it not be).
fn digits(text: Bytes) -> HeaderValue {
    HeaderValue::from_maybe_shared(text).unwrap_or(HeaderValue::from_static("0"))
}
