//! Client of the sluice daemon over a Unix socket or TCP (HTTP/1.1, keep-alive).
//!
//! Connections are kept open and reused: a check over a warm connection costs one write and
//! one read. Every call is bounded by the client's timeout.
//!
//! With the `tower` feature, [`layer::RateLimitLayer`] rate-limits an axum/hyper service
//! (feature `axum` adds axum's `ConnectInfo` as the client address).
//!
//! With the `tls` feature (on with `cli`), [`Client::https`] talks to a daemon whose listener
//! speaks TLS (`[listen.tls]`), with a CA file and a client certificate for mTLS.
//!
//! The default feature `cli` is the `sluice` binary's: it links `sluice-server` for the
//! daemon's config compile. A service using only the client or the layer turns it off.

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
