//! Client of the sluice daemon over a Unix socket or TCP (HTTP/1.1, keep-alive).
//!
//! Connections are kept open and reused: a check over a warm connection costs one write and
//! one read. Every call is bounded by the client's timeout.

mod client;
mod error;

pub use client::{BatchOutcome, CheckOutcome, Client, Endpoint, RawResponse};
pub use error::ClientError;
pub use sluice_api as api;
