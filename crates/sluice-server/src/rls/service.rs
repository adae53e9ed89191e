//! `ShouldRateLimit`: Envoy's question mapped onto the limiter, and the answer mapped back.
//!
//! - Each descriptor is matched against `[[rls.descriptors]]`; one that matches no rule is
//!   answered `OK` with no `current_limit` (not limited), as Envoy users expect.
//! - The cost of a descriptor is its own `hits_addend` when set, else the request's; a
//!   request-level 0 (unset) is 1, as in Envoy. A descriptor's own `hits_addend` of exactly 0
//!   asks without consuming, on every policy: `OVER_LIMIT` only once the key has nothing
//!   left (where envoyproxy/ratelimit still answers `OK` at exactly the limit). On a usage
//!   policy (`usage = true`) a descriptor's own `hits_addend` N > 0 is a charge of N (what
//!   Envoy's `apply_on_stream_done` rate limits send from the response), decided alone and
//!   never refused; without one the descriptor asks at the request's `hits_addend` (0: just
//!   whether anything is left). A descriptor's `limit` override is ignored: the policy
//!   decides.
//! - The matched descriptors are decided **all-or-nothing** with the limiter's batch check:
//!   when any is over its limit, none of them consumes, so a request Envoy rejects costs the
//!   caller nothing (the documented batch semantics). A cost above a policy's capacity can never pass:
//!   that descriptor is `OVER_LIMIT` without asking the store, and nothing is consumed.
//! - `overall_code` is `OVER_LIMIT` when any descriptor is; each `DescriptorStatus` carries
//!   `current_limit` (`requests_per_unit` = the limit, `unit` when the window is exactly one
//!   second, minute, hour or day, else `UNKNOWN`; `name` is the `RateLimit-Policy` value, which
//!   always states the window), `limit_remaining` and `duration_until_reset` (until the key is
//!   back to full).
//! - `response_headers_to_add` holds the documented headers of the most restrictive decision, exactly
//!   as `POST /v1/check` sends them; a denial also gets the documented 429 body as `raw_body` (and
//!   `Content-Type: application/problem+json`), so Envoy's 429 is the check API's.
//! - A backend failure follows the policy: `fail = "open"` answers `OK` with
//!   `X-RateLimit-Degraded: 1`; `fail = "closed"` answers the gRPC status `UNAVAILABLE`, which
//!   Envoy turns into a denial when its filter has `failure_mode_deny: true`.
//! - Bad input (no domain, no descriptors, more than 64, a key out of bounds) is
//!   `INVALID_ARGUMENT` naming the field.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sluice_api::{MAX_BATCH, MAX_KEY_BYTES};
use sluice_core::{CheckError, Mode};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use super::generated::envoy::service::ratelimit::v3 as pb;
use super::reply::{code_of, limit_error, response};
use super::tls::tls_incoming;
use crate::server::tls::ListenerTls;
use crate::service::app::App;
use crate::service::compiled::Policy;
use crate::service::limiter::{CheckInput, Verdict};
use crate::service::snapshot::Snapshot;
use pb::rate_limit_response::rate_limit::Unit;
use pb::rate_limit_response::{Code, DescriptorStatus, RateLimit};
use pb::rate_limit_service_server::{RateLimitService, RateLimitServiceServer};
use pb::{RateLimitRequest, RateLimitResponse};

/// The gRPC service; cheap to clone.
#[derive(Debug, Clone)]
pub struct RlsService {
    app: App,
}

impl RlsService {
    pub fn new(app: App) -> Self {
        RlsService { app }
    }
}

/// Serves the RLS on the Unix socket `listener` until `shutdown` completes.
pub async fn serve_unix(
    app: App,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    serve_incoming(app, UnixListenerStream::new(listener), shutdown).await
}

/// Serves the RLS on `listener` until `shutdown` completes.
pub async fn serve(
    app: App,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    serve_incoming(app, incoming, shutdown).await
}

/// Serves the RLS over TLS on `listener` (h2 by ALPN) until `shutdown` completes.
pub async fn serve_tls(
    app: App,
    listener: TcpListener,
    tls: ListenerTls,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    serve_incoming(app, tls_incoming(listener, tls), shutdown).await
}

/// Serves the RLS on the streams of `incoming` until `shutdown` completes, then drains.
async fn serve_incoming<IO, IE>(
    app: App,
    incoming: impl tokio_stream::Stream<Item = Result<IO, IE>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error>
where
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (stopping, stopped) = watch::channel(false);
    let server = tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(RlsService::new(app)))
        .serve_with_incoming_shutdown(incoming, async move {
            shutdown.await;
            let _ = stopping.send(true);
        });
    drain_bounded(server, stopped).await
}

/// How long a stop waits for gRPC clients to leave. An HTTP/2 graceful close waits for the
/// client to acknowledge it; a client that never does must not keep the daemon from stopping.
const DRAIN: Duration = Duration::from_secs(5);

/// Runs `server` to its end, or until [`DRAIN`] after `stopped` turns true, whichever is first.
async fn drain_bounded<E>(
    server: impl Future<Output = Result<(), E>>,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), E> {
    tokio::pin!(server);
    let deadline = async move {
        if stopped.wait_for(|stop| *stop).await.is_err() {
            // The sender went with the server future, which the select has seen end.
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(DRAIN).await;
    };
    tokio::select! {
        result = &mut server => result,
        () = deadline => {
            tracing::warn!("gRPC clients still connected {DRAIN:?} after stop: closing them");
            Ok(())
        }
    }
}

#[tonic::async_trait]
impl RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.answer(request.get_ref()).await.map(Response::new)
    }
}

/// A descriptor that matched a rule.
struct Matched {
    /// Its index in the request.
    index: usize,
    policy: Arc<Policy>,
    key: String,
    cost: u64,
    mode: Mode,
}

impl RlsService {
    /// The answer to one `ShouldRateLimit`: the descriptors a rule matches are decided
    /// together, all-or-nothing; the others are not limited.
    pub async fn answer(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        validate(request)?;
        // The rules and the policies they name, of one snapshot: one load a call.
        let snapshot = self.app.limiter.snapshot();
        // A domain of `rls.envoy_config` is answered as envoyproxy/ratelimit answers it.
        if snapshot.rls.envoy.get(&request.domain).is_some() {
            let domains = snapshot.rls.envoy.clone();
            drop(snapshot);
            return super::yaml_domains::answer(&self.app, &domains, request).await;
        }
        let matched = Self::matched(&snapshot, request)?;
        drop(snapshot);
        let mut statuses = vec![
            DescriptorStatus {
                code: Code::Ok.into(),
                ..DescriptorStatus::default()
            };
            request.descriptors.len()
        ];
        if matched.is_empty() {
            return Ok(RateLimitResponse {
                overall_code: Code::Ok.into(),
                statuses,
                ..RateLimitResponse::default()
            });
        }
        if let Some(refused) = over_capacity(&matched, &mut statuses) {
            return Ok(refused);
        }
        let verdicts = self.decide(&matched).await?;
        for (m, verdict) in matched.iter().zip(&verdicts) {
            statuses[m.index] = status_of(verdict);
        }
        Ok(response(statuses, &verdicts))
    }

    /// The descriptors some rule of `snapshot` limits, each with its policy, key and cost.
    fn matched(snapshot: &Snapshot, request: &RateLimitRequest) -> Result<Vec<Matched>, Status> {
        let (rules, policies) = (&snapshot.rls, &snapshot.policies);
        let mut matched = Vec::new();
        for (index, descriptor) in request.descriptors.iter().enumerate() {
            let entries: Vec<(&str, &str)> = descriptor
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            let Some(rule) = rules.find(&request.domain, &entries) else {
                continue;
            };
            let Some(policy) = policies.get(&rule.policy) else {
                // Rules are validated with the policies they name and replaced together.
                return Err(Status::failed_precondition(format!(
                    "descriptors[{index}]: policy {:?} is not loaded",
                    rule.policy
                )));
            };
            let key = rule.key(&entries);
            if key.is_empty() || key.len() > MAX_KEY_BYTES {
                return Err(Status::invalid_argument(format!(
                    "descriptors[{index}].entries: the key they make is {} bytes; a key is 1 to {MAX_KEY_BYTES}",
                    key.len()
                )));
            }
            let (cost, mode) =
                cost_and_mode(descriptor.hits_addend, request.hits_addend, policy.usage);
            matched.push(Matched {
                index,
                policy: policy.clone(),
                key,
                cost,
                mode,
            });
        }
        Ok(matched)
    }

    /// One verdict per matched descriptor, in order: the checks all-or-nothing, each charge
    /// alone (a charge is never refused, so it must not undo the checks, nor they it).
    async fn decide(&self, matched: &[Matched]) -> Result<Vec<Verdict>, Status> {
        let now_ms = self.app.clock.now_ms();
        // One descriptor, Envoy's common call: its one check (or charge), without the
        // vectors that sort a request's charges from its checks.
        if let [m] = matched {
            let input = CheckInput::descriptor(&m.policy.name, &m.key, m.cost, m.mode);
            let verdict = self.app.limiter.check(&input, now_ms).await;
            return verdict.map(|v| vec![v]).map_err(limit_error);
        }
        let inputs: Vec<CheckInput<'_>> = matched
            .iter()
            .map(|m| CheckInput::descriptor(&m.policy.name, &m.key, m.cost, m.mode))
            .collect();
        let (charges, checks): (Vec<usize>, Vec<usize>) =
            (0..inputs.len()).partition(|&i| inputs[i].mode == Mode::Charge);
        let mut verdicts: Vec<Option<Verdict>> = vec![None; inputs.len()];
        for &i in &charges {
            let verdict = self.app.limiter.check(&inputs[i], now_ms).await;
            verdicts[i] = Some(verdict.map_err(limit_error)?);
        }
        let checked: Vec<CheckInput<'_>> = checks.iter().map(|&i| inputs[i]).collect();
        let result = match checked.as_slice() {
            [] => Ok(Vec::new()),
            [one] => self.app.limiter.check(one, now_ms).await.map(|v| vec![v]),
            many => self.app.limiter.check_batch(many, now_ms).await,
        };
        for (&i, verdict) in checks.iter().zip(result.map_err(limit_error)?) {
            verdicts[i] = Some(verdict);
        }
        verdicts
            .into_iter()
            .map(|v| v.ok_or_else(|| Status::internal("a descriptor got no verdict")))
            .collect()
    }
}

/// The cost and mode of a descriptor from its own `hits_addend` (`own`, when set), the
/// request's, and whether its policy is a usage policy (see the module doc).
fn cost_and_mode(own: Option<u64>, request: u32, usage: bool) -> (u64, Mode) {
    match own {
        Some(0) => (0, Mode::Ask),
        Some(hits) if usage => (hits, Mode::Charge),
        Some(hits) => (hits, Mode::Consume),
        None if usage => (u64::from(request), Mode::Ask),
        None => (u64::from(request).max(1), Mode::Consume),
    }
}

/// A request must name its domain and hold 1 to [`MAX_BATCH`] descriptors.
fn validate(request: &RateLimitRequest) -> Result<(), Status> {
    if request.domain.is_empty() {
        return Err(Status::invalid_argument("domain: required"));
    }
    let count = request.descriptors.len();
    if count == 0 || count > MAX_BATCH {
        return Err(Status::invalid_argument(format!(
            "descriptors: a request holds 1 to {MAX_BATCH} descriptors, this one {count}"
        )));
    }
    Ok(())
}

/// Envoy sends hits it cannot know the limit of: descriptors costing more than their policy's
/// capacity are over the limit, and so, all-or-nothing, is the request (nothing consumed).
fn over_capacity(
    matched: &[Matched],
    statuses: &mut [DescriptorStatus],
) -> Option<RateLimitResponse> {
    let too_big = |m: &Matched| {
        matches!(
            sluice_core::validate_check(&m.policy.base.params, m.cost, m.mode),
            Err(CheckError::CostExceedsCapacity { .. })
        )
    };
    if !matched.iter().any(too_big) {
        return None;
    }
    for m in matched {
        statuses[m.index].current_limit = Some(current_limit(&m.policy));
        if too_big(m) {
            statuses[m.index].code = Code::OverLimit.into();
        }
    }
    Some(RateLimitResponse {
        overall_code: Code::OverLimit.into(),
        statuses: statuses.to_vec(),
        ..RateLimitResponse::default()
    })
}

fn status_of(verdict: &Verdict) -> DescriptorStatus {
    let d = &verdict.decision;
    let until_reset_ms = d.reset_ms.saturating_sub(verdict.now_ms);
    DescriptorStatus {
        code: code_of(verdict.allowed),
        current_limit: Some(RateLimit {
            name: verdict
                .limit
                .policy_header
                .to_str()
                .unwrap_or_default()
                .to_owned(),
            requests_per_unit: u32::try_from(d.limit).unwrap_or(u32::MAX),
            unit: unit_of(verdict.limit.params.window_ms).into(),
        }),
        limit_remaining: u32::try_from(d.remaining).unwrap_or(u32::MAX),
        duration_until_reset: Some(prost_types::Duration {
            seconds: i64::try_from(until_reset_ms / 1000).unwrap_or(i64::MAX),
            // Below 1e9, so it fits.
            nanos: i32::try_from((until_reset_ms % 1000) * 1_000_000).unwrap_or(0),
        }),
    }
}

/// `current_limit` of a policy's base limit (a descriptor answered without a decision).
fn current_limit(policy: &Policy) -> RateLimit {
    RateLimit {
        name: policy
            .base
            .policy_header
            .to_str()
            .unwrap_or_default()
            .to_owned(),
        requests_per_unit: u32::try_from(policy.base.params.limit).unwrap_or(u32::MAX),
        unit: unit_of(policy.base.params.window_ms).into(),
    }
}

/// The Envoy unit a window is exactly one of; `UNKNOWN` for any other window (the `name`
/// still states it, as `w=` seconds).
fn unit_of(window_ms: u64) -> Unit {
    match window_ms {
        1_000 => Unit::Second,
        60_000 => Unit::Minute,
        3_600_000 => Unit::Hour,
        86_400_000 => Unit::Day,
        _ => Unit::Unknown,
    }
}
