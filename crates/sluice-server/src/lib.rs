//! sluiced: the rate-limiter daemon.
//!
//! # Layout
//!
//! What the daemon decides sits in [`service`], free of any transport; the transports call
//! into it, [`server`] accepts their connections, and [`daemon`] wires the two. No top-level
//! module imports one that imports it (a test of the repository says so).
//!
//! The configuration is the crate `sluice-config`'s: the TOML file as written, where it comes
//! from, and its one compile into typed settings, the policies and the RLS rules (shared with
//! the `sluice` CLI and the stores). [`config_watch`]: a changed file reloads as SIGHUP does.
//!
//! - [`service`]: [`App`] and its reload; the configuration as the daemon runs on it
//!   ([`service::compiled`]: sluice-config's compile with each policy's metric series and the
//!   Redis client's URL check, used by start, SIGHUP and `--check-config` alike);
//!   [`service::overrides`]; [`service::snapshot`], all the run-time settings decide as one
//!   version, compiled and published by [`service::writer`], the one task that writes them
//!   (reloads, the overrides poll, admin changes); the stores ([`service::stores`], [`service::clients`],
//!   [`service::health`]); [`service::limiter`], the one place that calls a store; and
//!   [`service::answer`] / [`service::json`], what a decision is answered with (bodies,
//!   headers, the error answer; no transport's types).
//! - Transports: [`http`] (the check API, forward-auth, top, admin, the operational
//!   routes), [`rls`] (the Envoy RLS over gRPC), [`resp`] (`SLUICE.CHECK`, redis-cell's
//!   `CL.THROTTLE`).
//! - [`server`]: sockets and lifecycle for any protocol (binding, the connection gate, the
//!   accept loop, the lingering close, the stop); [`daemon`]: every listener served with its
//!   protocol and the service's background work; `main.rs` only parses arguments and turns
//!   signals and file changes into reloads and a stop.
//! - [`metrics`], [`histogram`], [`telemetry`], [`top`]: what the daemon reports about itself
//!   (and [`service::slo`], the last hour of every policy for `GET /v1/status`);
//!   [`exposition`]: the text format `/metrics` answers in; [`clock`]: the time checks are
//!   stamped with.
//! - [`testing`] (feature `test-support`): an in-process daemon, and `sluice-client` clients of
//!   it, for every crate's tests.
//!
//! # What is public
//!
//! What `main.rs`, the tests, the benches and the fuzz target use, no more: [`App`] and the
//! load of a configuration ([`service::load`]), the stores, the limiter's check input and
//! the wait for the backends ([`service::stores`], [`service::limiter`], [`service::connect`]);
//! [`daemon::serve_until`]; the sockets `main.rs` binds and announces ([`server::bind`],
//! [`server::activation`], [`server::fd_limit`]); [`telemetry`], [`config_watch`], [`clock`],
//! [`top`]; the Envoy RLS wire types ([`rls`]); the RESP frame reader ([`resp::connection`]);
//! and [`testing`]. Everything else is `pub(crate)`: the transports, the metrics, the answers
//! and the run-time settings are the daemon's own.
//!
//! # One check, from the socket to the store and back
//!
//! Over HTTP (`POST /v1/check`):
//! 1. `daemon.rs` runs the accept loop of `server/accept.rs` on the listener; the gate of
//!    `server/gate.rs` admits the connection (or answers 503 and closes it by
//!    `server/linger.rs`), and `server/http1/mod.rs` serves it under the header and idle
//!    timeouts: `server/http1/head.rs` reads each request head (httparse) from the
//!    connection's buffer. At the first request that is not a plain `POST /v1/check`, the
//!    connection and the bytes it holds go to hyper (`server/connection.rs`), and from there
//!    `http/api.rs` hands a check with a declared length straight to `http/check.rs`, every
//!    other request to the router of `http/mod.rs`.
//! 2. `http/check.rs` (through `http/api.rs`' `answer_check`, the same on both paths) reads
//!    the body (`http/plain_body.rs` for a plain one, serde otherwise) without copying its
//!    strings into a [`service::limiter::CheckInput`].
//! 3. `service/limiter/mod.rs` starts the span; `service/limiter/decide.rs` resolves the check
//!    against the policies of the one snapshot it loads (`service/snapshot.rs`, published
//!    whole by `service/writer.rs` on every reload and settings change) and
//!    refuses a cost above capacity; `service/limiter/call.rs` routes it by scope to a store
//!    of `service/stores.rs` (on Redis through `service/health.rs`) and times the call.
//! 4. The store (`sluice-store`) decides with the algorithm of `sluice-core`: in process
//!    memory, or one Lua script on Redis (grouped with the checks queued behind a call in
//!    flight), bounded by `backend.timeout`.
//! 5. `service/limiter/verdict.rs` applies shadow mode, or the fail mode of a store failure,
//!    and records the metrics and top keys; `service/answer.rs` turns the verdict into the
//!    body and the rate-limit headers, `http/respond.rs` makes them the HTTP response, and
//!    `server/http1/answer.rs` writes it as hyper would (with `date` from
//!    `server/http1/date.rs`) into the connection's output buffer; the answers of one read
//!    go back in one write.
//!
//! Over RESP (`SLUICE.CHECK`): steps 1 and 3–5 as above, with `resp/mod.rs` as the
//! connection handler: `resp/connection.rs` reads what the client sent, `resp/frame.rs`
//! decodes the frames, `resp/command.rs` reads each into a command, `resp/answer.rs` decides
//! every check of the read at once through the limiter, and `resp/reply.rs` writes the
//! replies in one write.

// The map above names private modules too, for whoever reads the source (`cargo doc
// --document-private-items` renders them).
#![allow(rustdoc::private_intra_doc_links)]

pub mod clock;
pub mod config_watch;
pub mod daemon;
pub(crate) mod events;
pub(crate) mod exposition;
pub(crate) mod histogram;
pub(crate) mod http;
pub(crate) mod metrics;
pub mod resp;
pub mod rls;
pub mod server;
pub mod service;
pub mod telemetry;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod top;

pub use crate::service::App;
