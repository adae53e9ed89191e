//! What the daemon decides, free of any transport: the policies compiled from the settings
//! and their run-time overrides, the stores they are decided on, the limiter that calls them,
//! the health of a Redis backend, and the answer a decision becomes. HTTP, the Envoy RLS and
//! RESP are transports that call into this module; nothing here imports a transport.
//!
//! - [`app`]: [`App`], the state every transport shares, and [`App::reload`].
//! - [`policy`]: policies compiled for the check path; [`overrides`]: the file's policies
//!   merged with the run-time settings (limit overrides and candidates, applied as [`merge`]
//!   says), and the loop that keeps them in sync.
//! - [`stores`]: the stores the settings describe, built from the clients of [`clients`];
//!   [`connect`]: the wait for them before the daemon serves; [`health`]: whether a Redis
//!   backend's checks get answers.
//! - [`rls_rules`]: which Envoy descriptors are limited, by which policy and key.
//! - [`limiter`]: the one place that calls a store.
//! - [`slo`]: the last hour of every policy and its SLO burn rates (`GET /v1/status`).
//! - [`answer`]: the body and headers of a decision; [`json`]: the JSON encoding of every
//!   answer and the error answer.

pub mod answer;
pub mod app;
pub mod clients;
pub mod compile;
pub mod connect;
pub mod health;
pub mod json;
pub mod limiter;
pub mod merge;
pub mod overrides;
pub mod policy;
pub mod rls_rules;
pub mod slo;
pub mod stores;

pub use app::App;
pub use compile::{Compiled, load};
