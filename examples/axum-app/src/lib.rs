//! An axum service rate-limited by sluiced: the router of the example, a library so the
//! end-to-end test (`e2e layer::`) serves exactly this code against a real daemon.
//!
//! A toy authentication middleware turns `Authorization: Bearer <user>` into the
//! [`UserId`] extension the layer keys on (a real service would verify a token here);
//! anonymous callers are limited by their address (axum's `ConnectInfo`).

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use sluice_client::Client;
use sluice_client::layer::{RateLimitLayer, UserId};

/// The app: `GET /orders` behind the `public` policy (or whichever `policy` names).
pub async fn app(client: Arc<Client>, policy: &str) -> anyhow::Result<Router> {
    // The policy's fail mode comes from the daemon; an unknown policy fails here, at start.
    let limit = RateLimitLayer::from_daemon(client, policy).await?;
    Ok(Router::new()
        .route("/orders", get(|| async { "orders\n" }))
        // Layers run bottom-up: authentication first, so the limiter sees the user.
        .layer(limit)
        .layer(middleware::from_fn(authenticate)))
}

/// `Authorization: Bearer <user>` → [`UserId`]. For the example only: nothing is verified.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let user = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|user| UserId(user.trim().to_owned()));
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}
