//! Client of the sluice daemon over a Unix socket or TCP (HTTP/1.1, keep-alive).
//!
//! Connections are kept open and reused: a check over a warm connection costs one write and
//! one read. Every call is bounded by the client's timeout.
//!
//! With the `tower` feature, [`layer::RateLimitLayer`] rate-limits an axum/hyper service
//! (feature `axum` adds axum's `ConnectInfo` as the client address).
//!
//! With the `tls` feature, [`Client::https`] talks to a daemon whose listener speaks TLS
//! (`[listen.tls]`), with a CA file and a client certificate for mTLS.
//!
//! A library only, and a light one: no feature links the daemon, a Redis client or gRPC (a
//! lint test of the repository holds its dependency tree to that). The `sluice` CLI built on
//! it is the crate `sluice-cli`.

mod client;
mod error;
#[cfg(feature = "tower")]
pub mod layer;
#[cfg(feature = "tls")]
mod tls;

pub use client::{BatchOutcome, CheckOutcome, Client, Endpoint, RawResponse};
pub use error::ClientError;
pub use sluice_api as api;
/// The CA file and client certificate of [`Client::https`].
#[cfg(feature = "tls")]
pub use sluice_tls::ClientFiles as TlsFiles;
