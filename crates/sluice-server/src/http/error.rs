//! Body parsing that names the bad field, and the fallbacks for unknown paths and methods:
//! the HTTP side of the error answers of [`crate::service::json`].

use axum::extract::rejection::BytesRejection;
use http::StatusCode;
use serde::Deserialize;
use sluice_api::{MAX_BODY_BYTES, codes};

use crate::service::json::ApiError;

/// A JSON body as `T`, or a 400 naming the missing, unknown or wrong-typed field.
pub(crate) fn parse_json<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, ApiError> {
    // The fast path: a well-formed body parses once, without tracking the path (which costs
    // a few percent of a check). Only a bad body is parsed again, to name its field.
    if let Ok(parsed) = serde_json::from_slice(body) {
        return Ok(parsed);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: T = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let mut field = (path != ".").then_some(path);
        // A missing field is reported at its parent; name the field itself.
        let message = inner.to_string();
        if let Some(name) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
        {
            field = Some(match field {
                Some(parent) => format!("{parent}.{name}"),
                None => name.to_owned(),
            });
        }
        let message = match &field {
            Some(field) if !inner.is_syntax() && !inner.is_eof() => format!("{field}: {message}"),
            _ => format!("malformed JSON: {message}"),
        };
        ApiError::bad_request(message, field)
    })?;
    de.end()
        .map_err(|err| ApiError::bad_request(format!("malformed JSON: {err}"), None))?;
    Ok(parsed)
}

pub(crate) fn body_rejection(rejection: &BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            codes::PAYLOAD_TOO_LARGE,
            format!("the body is over {MAX_BODY_BYTES} bytes"),
        )
    } else {
        ApiError::bad_request(format!("could not read the body: {rejection}"), None)
    }
}

pub(crate) async fn not_found(uri: http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::NOT_FOUND,
        format!("no route {}", uri.path()),
    )
}

pub(crate) async fn method_not_allowed(method: http::Method, uri: http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        codes::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
