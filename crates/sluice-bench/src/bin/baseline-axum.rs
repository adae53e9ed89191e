//! `baseline-axum`: the comparison point of the HTTP performance targets. A minimal axum server that parses the
//! same check JSON as sluiced (`POST /v1/check`, borrowed strings, the same fields) and
//! answers a fixed 200 JSON, over TCP and/or a Unix socket, on tokio's default multi-thread
//! runtime like sluiced. What sluiced spends beyond this is the rate limiter's own cost.
//!
//! `baseline-axum --unix /tmp/base.sock --http 127.0.0.1:9090`

use std::borrow::Cow;
use std::path::PathBuf;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::Parser;
use serde::Deserialize;

#[derive(Debug, Parser)]
#[command(
    name = "baseline-axum",
    about = "Minimal axum 'parse the check JSON, answer 200' server"
)]
struct Args {
    /// Unix socket to serve on (replaced if it exists).
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// TCP address to serve on.
    #[arg(long, value_name = "HOST:PORT")]
    http: Option<String>,
}

/// The check body of the README's "Check API".
#[derive(Debug, Deserialize)]
struct Check<'a> {
    #[serde(borrow)]
    policy: Cow<'a, str>,
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(default)]
    cost: Option<u64>,
    #[serde(borrow, default)]
    tier: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    endpoint: Option<Cow<'a, str>>,
}

const ANSWER: &str = r#"{"allowed":true,"policy":"bench","limit":100000000,"remaining":99999999,"reset":1800000000,"delay_ms":0}"#;

async fn check(body: Bytes) -> Response {
    match serde_json::from_slice::<Check<'_>>(&body) {
        Ok(check) if !check.policy.is_empty() && !check.key.is_empty() => {
            std::hint::black_box((&check.cost, &check.tier, &check.endpoint));
            (StatusCode::OK, [(CONTENT_TYPE, "application/json")], ANSWER).into_response()
        }
        _ => (
            StatusCode::BAD_REQUEST,
            [(CONTENT_TYPE, "application/json")],
            r#"{"error":"bad_request","message":"malformed check"}"#,
        )
            .into_response(),
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.unix.is_some() || args.http.is_some(),
        "give --unix PATH and/or --http HOST:PORT"
    );
    let app = Router::new().route("/v1/check", post(check));
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(addr) = &args.http {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        eprintln!("baseline-axum: http {}", listener.local_addr()?);
        let app = app.clone();
        tasks.spawn(async move { axum::serve(listener, app).await });
    }
    if let Some(path) = &args.unix {
        if path.exists() {
            std::fs::remove_file(path)
                .with_context(|| format!("cannot replace {}", path.display()))?;
        }
        let listener = tokio::net::UnixListener::bind(path)
            .with_context(|| format!("cannot listen on {}", path.display()))?;
        eprintln!("baseline-axum: unix {}", path.display());
        let app = app.clone();
        tasks.spawn(async move { axum::serve(listener, app).await });
    }
    tokio::select! {
        joined = tasks.join_next() => {
            if let Some(joined) = joined {
                joined.context("server task")?.context("serving failed")?;
            }
        }
        signal = tokio::signal::ctrl_c() => signal.context("cannot wait for ctrl-c")?,
    }
    if let Some(path) = &args.unix {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}
