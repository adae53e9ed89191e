//! The answers both kinds of RLS domain share ([`service`](super::service) for
//! `[[rls.descriptors]]`, [`yaml_domains`](super::yaml_domains) for `rls.envoy_config`): the
//! response to decided descriptors and the gRPC status of a limiter error. A module of its own
//! so neither answering module imports the other.

use http::HeaderMap;
use tonic::Status;

use super::generated::envoy::config::core::v3::HeaderValue;
use super::generated::envoy::service::ratelimit::v3 as pb;
use crate::service::answer::{body_of, set_headers};
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
    let mut headers = HeaderMap::new();
    let mut raw_body = Vec::new();
    if let Some(worst) = worst {
        set_headers(&mut headers, worst);
        if !allowed {
            raw_body = serde_json::to_vec(&body_of(worst)).unwrap_or_default();
            headers.insert(http::header::CONTENT_TYPE, PROBLEM_JSON);
        }
    }
    RateLimitResponse {
        overall_code: if allowed { Code::Ok } else { Code::OverLimit }.into(),
        statuses,
        response_headers_to_add: headers
            .iter()
            .filter_map(|(name, value)| {
                Some(HeaderValue {
                    key: name.as_str().to_owned(),
                    value: value.to_str().ok()?.to_owned(),
                    raw_value: Vec::new(),
                })
            })
            .collect(),
        raw_body,
        ..RateLimitResponse::default()
    }
}
