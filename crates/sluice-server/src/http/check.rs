//! `POST /v1/check`: a single check or an all-or-nothing batch, parsed from the body without
//! copying its strings, decided by the limiter, answered by [`answer`](crate::service::answer).

use std::borrow::Cow;
use std::fmt;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::error::{body_rejection, parse_json};
use super::plain_body;
use super::respond::{batch_response, check_answer};
use crate::service::answer::body_of;
use crate::service::app::App;
use crate::service::json::{ApiError, JSON, PROBLEM_JSON};
use crate::service::limiter::CheckInput;
use crate::telemetry::TraceParent;

/// A string borrowed from the body when it has no escapes, so parsing allocates nothing.
#[derive(Debug)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// One check of a batch. Mirrors `sluice_api::CheckRequest`, borrowed from the body.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a check object such as {\"policy\": \"public\", \"key\": \"user:1\"}")]
struct IncomingCheck<'a> {
    #[serde(borrow)]
    policy: Text<'a>,
    #[serde(borrow)]
    key: Text<'a>,
    #[serde(default)]
    cost: Option<u64>,
    #[serde(borrow, default)]
    tier: Option<Text<'a>>,
    #[serde(borrow, default)]
    endpoint: Option<Text<'a>>,
}

impl IncomingCheck<'_> {
    fn input(&self) -> CheckInput<'_> {
        CheckInput {
            policy: &self.policy.0,
            key: &self.key.0,
            cost: self.cost,
            tier: self.tier.as_ref().map(|t| &*t.0),
            endpoint: self.endpoint.as_ref().map(|e| &*e.0),
            mode: sluice_core::Mode::Consume,
            detail: None,
        }
    }
}

/// A single check or a batch (`checks`): every field optional, so either shape parses and a
/// missing field is named by us.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
struct Incoming<'a> {
    #[serde(borrow, default)]
    policy: Option<Text<'a>>,
    #[serde(borrow, default)]
    key: Option<Text<'a>>,
    #[serde(default)]
    cost: Option<u64>,
    #[serde(borrow, default)]
    tier: Option<Text<'a>>,
    #[serde(borrow, default)]
    endpoint: Option<Text<'a>>,
    #[serde(borrow, default)]
    checks: Option<Vec<IncomingCheck<'a>>>,
}

/// The body: a plain single check is scanned directly ([`plain_body`]), anything else goes
/// through serde (which also names the errors).
fn parse(body: &[u8]) -> Result<Incoming<'_>, ApiError> {
    let Some(plain) = plain_body::scan(body) else {
        return parse_json(body);
    };
    Ok(Incoming {
        policy: text(plain.policy),
        key: text(plain.key),
        cost: plain.cost,
        tier: text(plain.tier),
        endpoint: text(plain.endpoint),
        checks: None,
    })
}

fn text(field: Option<&str>) -> Option<Text<'_>> {
    field.map(|value| Text(Cow::Borrowed(value)))
}

fn required<'a>(value: &'a Option<Text<'_>>, field: &str) -> Result<&'a str, ApiError> {
    value.as_ref().map(|t| &*t.0).ok_or_else(|| {
        ApiError::bad_request(format!("missing field `{field}`"), Some(field.to_owned()))
    })
}

/// The caller's trace, read from the `traceparent` header without copying the headers.
#[derive(Debug)]
pub(crate) struct Traced(pub(crate) TraceParent);

impl<S: Send + Sync> FromRequestParts<S> for Traced {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Traced(TraceParent::from_headers(&parts.headers)))
    }
}

pub(crate) async fn check(
    State(app): State<App>,
    Traced(parent): Traced,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match body {
        Ok(body) => answer(&app, &body, &parent).await,
        Err(rejection) => body_rejection(&rejection).into_response(),
    }
}

/// The answer to the check (or batch) in `body`, the router's path or [`super::api`]'s.
pub(crate) async fn answer(app: &App, body: &[u8], parent: &TraceParent) -> Response {
    match decide(app, body, parent).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn decide(app: &App, body: &[u8], parent: &TraceParent) -> Result<Response, ApiError> {
    let incoming = parse(body)?;
    let now_ms = app.clock.now_ms();
    if let Some(checks) = &incoming.checks {
        // A body holding both shapes is ambiguous: refuse it rather than guess which was meant.
        if let Some(field) = [
            ("policy", incoming.policy.is_some()),
            ("key", incoming.key.is_some()),
            ("cost", incoming.cost.is_some()),
            ("tier", incoming.tier.is_some()),
            ("endpoint", incoming.endpoint.is_some()),
        ]
        .into_iter()
        .find_map(|(name, set)| set.then_some(name))
        {
            return Err(ApiError::bad_request(
                format!("{field}: a batch takes its checks from `checks` only, not beside it"),
                Some(field.to_owned()),
            ));
        }
        let inputs: Vec<CheckInput<'_>> = checks.iter().map(IncomingCheck::input).collect();
        let verdicts = app
            .limiter
            .check_batch_traced(&inputs, now_ms, parent)
            .await?;
        return Ok(batch_response(&verdicts));
    }
    let input = CheckInput {
        policy: required(&incoming.policy, "policy")?,
        key: required(&incoming.key, "key")?,
        cost: incoming.cost,
        tier: incoming.tier.as_ref().map(|t| &*t.0),
        endpoint: incoming.endpoint.as_ref().map(|e| &*e.0),
        mode: sluice_core::Mode::Consume,
        detail: None,
    };
    let verdict = app.limiter.check_traced(&input, now_ms, parent).await?;
    let body = body_of(&verdict);
    Ok(if verdict.allowed {
        check_answer(StatusCode::OK, JSON, &body, &verdict)
    } else {
        check_answer(StatusCode::TOO_MANY_REQUESTS, PROBLEM_JSON, &body, &verdict)
    })
}
