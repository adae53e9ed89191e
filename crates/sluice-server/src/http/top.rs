//! `GET /v1/top`: the heaviest keys of a policy, from the limiter's fixed-memory sketches.

use std::collections::HashMap;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;
use http::StatusCode;
use sluice_api::{TopEntry, TopErrorBound, TopResponse, codes};

use super::respond::json_response;
use crate::service::app::App;
use crate::service::json::ApiError;
use crate::top::{By, MAX_TOP, Period};

/// `GET /v1/top?policy=P&by=rejected|checked|candidate_rejected&n=20&period=5m|60m`. By
/// `candidate_rejected`, `rejected`, `ratio`, the total and the error bound of rejections are
/// the candidate limit's would-be rejections.
pub(crate) async fn top_keys(
    State(app): State<App>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let field = |name: &str| query.get(name).map(String::as_str);
    let bad = |name: &str, why: &str| {
        ApiError::bad_request(format!("{name}: {why}"), Some(name.to_owned()))
    };
    let policy = field("policy").ok_or_else(|| bad("policy", "required"))?;
    let by = match field("by") {
        None => By::Rejected,
        Some(text) => By::parse(text)
            .ok_or_else(|| bad("by", "must be rejected, checked or candidate_rejected"))?,
    };
    let period = match field("period") {
        None => Period::FiveMinutes,
        Some(text) => Period::parse(text).ok_or_else(|| bad("period", "must be 5m or 60m"))?,
    };
    let n = match field("n") {
        None => 20,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_TOP).contains(n))
            .ok_or_else(|| bad("n", &format!("must be an integer from 1 to {MAX_TOP}")))?,
    };
    let report = app
        .limiter
        .top()
        .top(policy, period, by, n, app.clock.now_ms())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                codes::UNKNOWN_POLICY,
                format!("unknown policy {policy:?}"),
            )
            .field(Some("policy".to_owned()))
        })?;
    let body = TopResponse {
        policy: policy.to_owned(),
        by: by.as_str().to_owned(),
        period: period.as_str().to_owned(),
        approximate: true,
        error_bound: TopErrorBound {
            checked: report.error_checked,
            rejected: report.error_rejected,
        },
        total_checked: report.total_checked,
        total_rejected: report.total_rejected,
        keys: report
            .entries
            .into_iter()
            .map(|e| TopEntry {
                key: e.key,
                rejected: e.rejected,
                checked: e.checked,
                ratio: e.ratio,
            })
            .collect(),
    };
    Ok(json_response(StatusCode::OK, &body))
}
