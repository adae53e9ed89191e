//! `GET /v1/status`: every policy's last hour and SLO burn rates (see [`crate::service::slo`]), what
//! `sluice status` prints.

use axum::extract::State;
use axum::response::Response;
use http::StatusCode;

use super::respond::json_response;
use crate::service::app::App;

/// `GET /v1/status`.
pub(crate) async fn status(State(app): State<App>) -> Response {
    let report = app.status.report(&app.limiter, app.clock.now_ms());
    json_response(StatusCode::OK, &report)
}
