//! What every change through the admin API shares, limit overrides and candidates alike: the
//! names in its path, the answers to a refused or unstorable change, the re-read that puts it
//! in force here at once, and the audit line.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use http::StatusCode;
use serde::de::DeserializeOwned;
use sluice_api::codes;
use sluice_store::StoreError;

use super::error::parse_json;
use crate::service::app::App;
use crate::service::json::ApiError;
use crate::service::overrides::OverrideError;
use sluice_config::is_valid_name;

/// The backend failed `what` ("store the change", "read the overrides").
pub(crate) fn unavailable(what: &str, err: &StoreError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        codes::BACKEND_UNAVAILABLE,
        format!("the backend could not {what}: {err}"),
    )
}

/// The body of a change to (`policy`, `tier`), once both names are valid.
pub(crate) fn request_of<T: DeserializeOwned>(
    (policy, tier): (&str, &str),
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    check_names(policy, tier)?;
    let body = body.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    parse_json(&body)
}

pub(crate) fn check_names(policy: &str, tier: &str) -> Result<(), ApiError> {
    if !is_valid_name(tier) {
        return Err(ApiError::bad_request(
            "tier: 1 to 64 of A-Z a-z 0-9 _ . -",
            Some("tier".to_owned()),
        ));
    }
    if !is_valid_name(policy) {
        return Err(unknown_policy(policy));
    }
    Ok(())
}

/// The `(limit, burst)` a caller of `policy` on `tier` is held to right now.
pub(crate) fn effective(app: &App, policy: &str, tier: &str) -> Option<(u64, u64)> {
    let snapshot = app.limiter.snapshot();
    let policies = &snapshot.policies;
    let params = policies.get(policy)?.limit_for(Some(tier)).params;
    Some((params.limit, params.burst))
}

/// One line an operator reads: `policy=public tier=pro limit 1000→2000 burst 2000→4000`, with
/// `why` after the limit (` (promoted candidate)`) when there is more to say.
pub(crate) fn log_change(
    what: &str,
    why: &str,
    (policy, tier): (&str, &str),
    before: Option<(u64, u64)>,
    app: &App,
) {
    let after = effective(app, policy, tier);
    let show = |value: Option<u64>| value.map_or_else(|| "?".to_owned(), |v| v.to_string());
    tracing::info!(
        who = "admin-token",
        "{what}: policy={policy} tier={tier} limit {}→{}{why} burst {}→{}",
        show(before.map(|b| b.0)),
        show(after.map(|a| a.0)),
        show(before.map(|b| b.1)),
        show(after.map(|a| a.1)),
    );
}

/// The answer to a setting the runtime limits refused: 404 for a policy or tier that is not
/// there, else 400 naming the field.
pub(crate) fn refused(err: OverrideError) -> ApiError {
    match err {
        OverrideError::UnknownPolicy(policy) => unknown_policy(&policy),
        unknown @ OverrideError::UnknownTier { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            codes::UNKNOWN_TIER,
            unknown.to_string(),
        )
        .field(Some("tier".to_owned())),
        OverrideError::Invalid { field, message } => {
            ApiError::bad_request(format!("{field}: {message}"), Some(field))
        }
    }
}

/// Reads the settings back after a change, through the settings writer, so it is in force
/// here (published) before the change is answered; the other daemons follow on their next
/// poll.
pub(crate) async fn resync(app: &App, what: &str) {
    if let Err(err) = app.settings.sync().await {
        tracing::warn!(error = %err, "{what} stored but not yet re-read");
    }
}

pub(crate) fn unknown_policy(policy: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::UNKNOWN_POLICY,
        format!("unknown policy {policy:?}"),
    )
    .field(Some("policy".to_owned()))
}
