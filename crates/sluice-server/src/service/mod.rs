//! What the daemon decides, free of any transport: the policies compiled from the settings
//! and their run-time overrides, the stores they are decided on, the limiter that calls them,
//! the health of a Redis backend, and the answer a decision becomes. HTTP, the Envoy RLS and
//! RESP are transports that call into this module; nothing here imports a transport.
//!
//! - [`app`]: [`App`], the state every transport shares, and [`App::reload`].
//! - [`compiled`]: the configuration as the daemon runs on it (sluice-config's policies,
//!   each with its metric series, and the one load); [`overrides`]: the file's policies
//!   merged with the run-time settings (limit overrides and candidates, applied as [`merge`]
//!   says); [`snapshot`]: all the run-time settings decide, published whole; [`writer`]: the
//!   one task that compiles and publishes them (reloads, the poll, admin changes).
//! - [`stores`]: the stores the settings describe, built from the clients of [`clients`];
//!   [`connect`]: the wait for them before the daemon serves; [`health`]: whether a Redis
//!   backend's checks get answers.
//! - [`limiter`]: the one place that calls a store.
//! - [`slo`]: the last hour of every policy and its SLO burn rates (`GET /v1/status`).
//! - [`answer`]: the body and headers of a decision; [`json`]: the JSON encoding of every
//!   answer and the error answer.

pub(crate) mod answer;
pub(crate) mod app;
pub(crate) mod clients;
pub(crate) mod compiled;
pub mod connect;
pub(crate) mod health;
pub(crate) mod json;
pub mod limiter;
pub(crate) mod merge;
pub(crate) mod overrides;
pub(crate) mod slo;
pub mod snapshot;
pub mod stores;
pub mod writer;

pub use app::App;
pub use compiled::{Compiled, load};
