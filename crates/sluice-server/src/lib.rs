//! sluiced: the rate-limiter daemon.
//!
//! # Layout
//!
//! - [`config`]: the TOML file as written ([`config::schema`]), where it comes from
//!   ([`config::load`]) and the one compile step into typed [`config::Settings`], used by start,
//!   SIGHUP reload and `--check-config` alike.
//! - [`policy`]: policies compiled for the check path (parameters, header values, metric
//!   slots); [`overrides`]: the file's policies merged with the run-time overrides.
//! - [`app`]: [`App`], the state every listener shares (limiter, clock, policies and rules).
//! - [`stores`]: the stores the settings describe (memory, Redis, Cluster, and with
//!   `[region]` the global and replicated stores), built in one place from the clients of
//!   [`clients`]; [`health`]: whether
//!   a Redis backend's checks get answers (outage logs, readiness, rebuilding its client).
//! - [`limiter`]: the one place that calls a store: resolves a check against its policy,
//!   bounds the call, applies fail and shadow modes, records metrics and spans.
//! - [`http`]: the HTTP API (check, forward-auth, top, admin, the operational routes) and
//!   [`http::answer`], the body and headers of a decision; [`rls`]: the Envoy RLS over gRPC;
//!   [`resp`]: the Redis protocol (`SLUICE.CHECK`, redis-cell's `CL.THROTTLE`).
//! - [`server`]: sockets and lifecycle (binding the Unix socket safely, serving every
//!   listener, graceful stop); `main.rs` only parses arguments and turns signals into
//!   reloads and a stop.
//! - [`metrics`], [`histogram`], [`telemetry`], [`top`]: what the daemon reports about itself;
//!   [`slo`]: the last hour of every policy and its SLO burn rates (`GET /v1/status`);
//!   [`exposition`]: the text format `/metrics` answers in.
//! - [`testing`] (feature `test-support`): an in-process daemon for every crate's tests.
//!
//! # One check, from the socket to the store and back
//!
//! 1. [`server::serve`] accepts the connection on the Unix socket or TCP listener and hands
//!    it to the router of [`http`].
//! 2. `POST /v1/check` is parsed in `http::check` without copying its strings into a
//!    [`limiter::CheckInput`].
//! 3. [`limiter::Limiter`] looks the policy and tier up in the current
//!    [`policy::PolicySet`] (swapped whole on reload), refuses a cost above capacity, and routes
//!    by scope to a store of [`stores::Stores`].
//! 4. The store decides with the algorithm of `sluice-core` (in process memory, or one Lua
//!    script on Redis), bounded by `backend.timeout`; a failure becomes the policy's fail mode.
//! 5. The limiter records the decision (metrics, top keys, the span) and returns a
//!    [`limiter::Verdict`], which [`http::answer`] turns into the body and the rate-limit
//!    headers of the response.

pub mod app;
pub mod clients;
pub mod clock;
pub mod config;
pub mod exposition;
pub mod health;
pub mod histogram;
pub mod http;
pub mod limiter;
pub mod metrics;
pub mod overrides;
pub mod policy;
pub mod resp;
pub mod rls;
pub mod server;
pub mod slo;
pub mod stores;
pub mod telemetry;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod top;

pub use crate::app::App;
