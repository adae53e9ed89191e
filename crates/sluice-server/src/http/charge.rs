//! `POST /v1/charge`: what a request used, charged to a usage policy after its response
//! (`{"policy", "key", "tier", "amount"}`). A charge always debits, into debt when the key
//! has less left (a negative amount refunds, never above full), and answers 200 with the
//! body of a check: `remaining` (never below 0), `debt`, and `allowed` saying whether the key
//! still has room for a request.

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use sluice_api::ChargeRequest;

use super::check::Traced;
use super::error::{body_rejection, parse_json};
use super::respond::check_answer;
use crate::service::answer::body_of;
use crate::service::app::App;
use crate::service::json::{ApiError, JSON};
use crate::service::limiter::CheckInput;

pub(crate) async fn charge(
    State(app): State<App>,
    Traced(parent): Traced,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_rejection(&rejection).into_response(),
    };
    let answer = async {
        let incoming: ChargeRequest = parse_json(&body)?;
        let input = CheckInput::charge(
            &incoming.policy,
            &incoming.key,
            incoming.tier.as_deref(),
            incoming.amount,
        )?;
        let now_ms = app.clock.now_ms();
        let verdict = app.limiter.check_traced(&input, now_ms, &parent).await?;
        Ok::<_, ApiError>(check_answer(
            StatusCode::OK,
            JSON,
            &body_of(&verdict),
            &verdict,
        ))
    };
    match answer.await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}
