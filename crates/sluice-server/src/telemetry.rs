//! Logs and traces: the `tracing` subscriber (`telemetry.log_format` text or json, `RUST_LOG`
//! filters) and, when an OTLP endpoint is configured, OpenTelemetry spans exported over
//! OTLP/gRPC by a batching exporter.
//!
//! Spans of a check (`ratelimit.check` and its child `ratelimit.backend_call`) are made by
//! [`check_span`] and [`backend_span`], which the limiter calls around the store. They use the
//! target [`TRACE_TARGET`], which only the OpenTelemetry layer listens to, so they never reach
//! the log output. What they cost per check:
//!
//! - no endpoint: no OpenTelemetry layer at all and [`check_span`] answers a disabled span after
//!   one relaxed atomic load;
//! - an incoming `traceparent` whose sampled flag is off: the same, decided by reading the
//!   flag, with no span made (the `ParentBased` sampler would drop it anyway);
//! - a root (no `traceparent`): the trace id is drawn first and the SDK's root sampler,
//!   `TraceIdRatioBased(sample_ratio)`, is asked about it; an unsampled root makes no span. A
//!   sampled one is made with that very trace id (handed to the SDK's id generator), so the
//!   provider's `ParentBased(TraceIdRatioBased(sample_ratio))` sampler reaches the same decision;
//! - a sampled check: attributes, a child span per backend call, and a place in the exporter's
//!   bounded queue. The exporter runs on its own thread: a check never waits for it, a full
//!   queue drops spans, and a collector that does not answer costs one warning in the log
//!   (and one line when it answers again).

use std::cell::Cell;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanId, SpanKind, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, Sampler,
    SamplingDecision, SdkTracerProvider, ShouldSample, SpanData, SpanExporter,
};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

use sluice_config::{LogFormat, TelemetrySettings};

/// The target of the per-check spans: exported as traces, never logged.
pub const TRACE_TARGET: &str = "sluice::trace";

/// The standard variables naming the collector, most specific first; `telemetry.otlp_endpoint`
/// wins over both.
pub const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// How long a stop waits for the last spans to leave.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether an OpenTelemetry layer is installed: without one no span is ever made.
static TRACING: AtomicBool = AtomicBool::new(false);

/// `telemetry.sample_ratio` (f64 bits), for the root decision of [`check_span`].
static RATIO: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The trace id [`check_span`] drew for the root span it is starting on this thread.
    static NEXT_TRACE_ID: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// The SDK's id generator, except that a root started by [`check_span`] gets the trace id its
/// sampling was decided on. The hand-over is synchronous: set, span started, cleared, with no
/// `.await` in between.
#[derive(Debug, Default)]
struct HandedTraceIds(RandomIdGenerator);

impl IdGenerator for HandedTraceIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("cannot set up the OTLP exporter for {endpoint} (telemetry.otlp_endpoint): {source}")]
    Exporter {
        endpoint: String,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("a log subscriber is already installed: {0}")]
    AlreadyInstalled(#[from] tracing_subscriber::util::TryInitError),
}

/// What [`init`] set up; [`Telemetry::shutdown`] flushes the spans still queued.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    endpoint: Option<String>,
}

impl Telemetry {
    /// The collector spans go to, if any.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// Exports what is queued (bounded by a few seconds) and stops the exporter. Blocking: call
    /// it off the async workers (`spawn_blocking`) while the runtime still runs.
    pub fn shutdown(self) {
        TRACING.store(false, Ordering::Relaxed);
        if let Some(provider) = self.provider
            && let Err(err) = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT)
        {
            tracing::warn!(error = %err, "trace exporter did not shut down cleanly");
        }
    }
}

/// The collector endpoint: `telemetry.otlp_endpoint` if set, else the first non-empty of
/// [`ENDPOINT_VARS`] as `env` reports them.
pub fn resolve_endpoint(
    config: &TelemetrySettings,
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    if let Some(endpoint) = &config.otlp_endpoint {
        return Some(endpoint.clone());
    }
    ENDPOINT_VARS
        .iter()
        .filter_map(|name| env(name))
        .map(|value| value.trim().to_owned())
        .find(|value| !value.is_empty())
}

/// Installs the global subscriber: logs per `telemetry.log_format` (filtered by `RUST_LOG`,
/// default `info`), plus the OpenTelemetry layer when a collector endpoint is configured.
///
/// Must run inside the Tokio runtime: the gRPC channel of the exporter lives on it.
pub fn init(config: &TelemetrySettings) -> Result<Telemetry, TelemetryError> {
    let endpoint = resolve_endpoint(config, |name| std::env::var(name).ok());
    let provider = match &endpoint {
        Some(endpoint) => Some(tracer_provider(endpoint, config.sample_ratio)?),
        None => None,
    };
    let otel = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("sluice"))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(Targets::new().with_target(TRACE_TARGET, LevelFilter::TRACE))
    });
    tracing_subscriber::registry()
        .with(log_layer(config.log_format))
        .with(otel)
        .try_init()?;
    RATIO.store(config.sample_ratio.to_bits(), Ordering::Relaxed);
    TRACING.store(provider.is_some(), Ordering::Relaxed);
    Ok(Telemetry { provider, endpoint })
}

/// The log output: `RUST_LOG` (default `info`), never the per-check spans.
fn log_layer(format: LogFormat) -> Box<dyn Layer<Registry> + Send + Sync> {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env_lossy()
        .add_directive(
            format!("{TRACE_TARGET}=off")
                .parse()
                .unwrap_or_else(|_| LevelFilter::OFF.into()),
        );
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if format == LogFormat::Json {
        layer.json().with_filter(filter).boxed()
    } else {
        layer.with_filter(filter).boxed()
    }
}

fn tracer_provider(endpoint: &str, ratio: f64) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|source| TelemetryError::Exporter {
            endpoint: endpoint.to_owned(),
            source,
        })?;
    let exporter = Reporting {
        inner: exporter,
        endpoint: endpoint.to_owned(),
        failing: AtomicBool::new(false),
    };
    // The OTEL_BSP_* variables tune the queue and the delay; the defaults (2048 spans, 5 s)
    // suit a daemon sampling a small share of its checks.
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(BatchConfigBuilder::default().build())
        .build();
    // The default detectors read OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("sluiced");
    }
    let resource = resource.build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))))
        .with_id_generator(HandedTraceIds::default())
        .with_resource(resource)
        .build())
}

/// The OTLP exporter, logging when exports start failing and when they recover, not per batch.
#[derive(Debug)]
struct Reporting<E> {
    inner: E,
    endpoint: String,
    failing: AtomicBool,
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        match &result {
            Err(err) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        error = %err,
                        "trace export failed; spans are dropped until the collector answers"
                    );
                }
            }
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(endpoint = %self.endpoint, "trace export works again");
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// What a request says about the trace it belongs to (its W3C `traceparent`).
#[derive(Debug, Clone, Default)]
pub enum TraceParent {
    /// No (valid) `traceparent`: the check starts a trace, sampled at `sample_ratio`.
    #[default]
    Absent,
    /// The caller's trace is not sampled: nothing to record.
    Unsampled,
    /// The caller's sampled trace, which the check's span continues.
    Sampled(opentelemetry::Context),
}

impl TraceParent {
    /// The parent carried by `headers` (`traceparent`, `tracestate`). Reads nothing when
    /// tracing is off.
    pub fn from_headers(headers: &HeaderMap) -> TraceParent {
        if !TRACING.load(Ordering::Relaxed) {
            return TraceParent::Absent;
        }
        let Some(value) = headers.get("traceparent") else {
            return TraceParent::Absent;
        };
        // Most callers' traces are unsampled: tell those from the flag alone, without parsing
        // the whole header into a context.
        if sampled_flag(value.as_bytes()) == Some(false) {
            return TraceParent::Unsampled;
        }
        let context = TraceContextPropagator::new().extract(&Headers(headers));
        let (valid, sampled) = {
            let span = context.span();
            let parent = span.span_context();
            (parent.is_valid(), parent.is_sampled())
        };
        match (valid, sampled) {
            (false, _) => TraceParent::Absent,
            (true, true) => TraceParent::Sampled(context),
            (true, false) => TraceParent::Unsampled,
        }
    }
}

/// The sampled bit of a well-formed version-00 `traceparent`
/// (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`), `None` for anything else.
fn sampled_flag(value: &[u8]) -> Option<bool> {
    if value.len() != 55 || !value.starts_with(b"00-") || value[35] != b'-' || value[52] != b'-' {
        return None;
    }
    let flags = std::str::from_utf8(&value[53..]).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(flags & 1 == 1)
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The `ratelimit.check` span of one check (or one batch), or a disabled span when this check
/// is not traced. Its fields are recorded by the limiter: `ratelimit.policy`,
/// `ratelimit.backend`, `ratelimit.allowed` (and `ratelimit.degraded`, `ratelimit.checks`).
pub fn check_span(parent: &TraceParent) -> Span {
    if !TRACING.load(Ordering::Relaxed) {
        return Span::none();
    }
    match parent {
        TraceParent::Unsampled => Span::none(),
        TraceParent::Sampled(context) => {
            let span = new_check_span();
            // Only fails for a disabled span, which has nothing to continue.
            let _ = span.set_parent(context.clone());
            started_if_sampled(span)
        }
        TraceParent::Absent => {
            let trace_id = RandomIdGenerator::default().new_trace_id();
            if !root_sampled(trace_id) {
                return Span::none();
            }
            NEXT_TRACE_ID.with(|next| next.set(Some(trace_id)));
            let span = started_if_sampled(new_check_span());
            NEXT_TRACE_ID.with(|next| next.set(None));
            span
        }
    }
}

/// The decision the SDK's root sampler makes for a trace starting with `trace_id`.
fn root_sampled(trace_id: TraceId) -> bool {
    let ratio = f64::from_bits(RATIO.load(Ordering::Relaxed));
    let result = Sampler::TraceIdRatioBased(ratio).should_sample(
        None,
        trace_id,
        "ratelimit.check",
        &SpanKind::Server,
        &[],
        &[],
    );
    result.decision == SamplingDecision::RecordAndSample
}

/// The trace id of a sampled check's `span`, for the latency exemplars; `None` (after one
/// check of a flag) for the disabled span of a check that is not traced.
pub fn trace_id(span: &Span) -> Option<u128> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let otel = context.span();
    let ids = otel.span_context();
    (ids.is_valid() && ids.is_sampled()).then(|| u128::from_be_bytes(ids.trace_id().to_bytes()))
}

/// Starts `span` (the sampler decides then) and keeps it only if it is sampled.
fn started_if_sampled(span: Span) -> Span {
    if span.context().span().span_context().is_sampled() {
        span
    } else {
        Span::none()
    }
}

fn new_check_span() -> Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        "ratelimit.check",
        otel.kind = "server",
        otel.status_code = Empty,
        ratelimit.policy = Empty,
        ratelimit.backend = Empty,
        ratelimit.allowed = Empty,
        ratelimit.degraded = Empty,
        ratelimit.checks = Empty,
    )
}

/// The child span of one backend call under `parent` (disabled when `parent` is).
pub fn backend_span(parent: &Span, backend: &'static str, op: &'static str) -> Span {
    if parent.is_disabled() {
        return Span::none();
    }
    tracing::info_span!(
        target: TRACE_TARGET,
        parent: parent,
        "ratelimit.backend_call",
        otel.kind = "client",
        otel.status_code = Empty,
        ratelimit.backend = backend,
        ratelimit.op = op,
        error.type = Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str) -> TelemetrySettings {
        TelemetrySettings {
            otlp_endpoint: (!endpoint.is_empty()).then(|| endpoint.to_owned()),
            sample_ratio: 0.01,
            log_format: LogFormat::Text,
        }
    }

    #[test]
    fn the_config_wins_over_the_environment() {
        let env = |name: &str| {
            (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://env:4317".to_owned())
        };
        assert_eq!(
            resolve_endpoint(&config("http://conf:4317"), env).as_deref(),
            Some("http://conf:4317")
        );
        assert_eq!(
            resolve_endpoint(&config(""), env).as_deref(),
            Some("http://env:4317")
        );
        assert_eq!(resolve_endpoint(&config(""), |_| None), None);
        assert_eq!(resolve_endpoint(&config(""), |_| Some(" ".into())), None);
    }

    #[test]
    fn the_traces_variable_is_more_specific() {
        let env = |name: &str| {
            Some(match name {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => "http://traces:4317".to_owned(),
                _ => "http://all:4317".to_owned(),
            })
        };
        assert_eq!(
            resolve_endpoint(&config(""), env).as_deref(),
            Some("http://traces:4317")
        );
    }

    #[test]
    fn the_sampled_flag_is_read_from_a_well_formed_traceparent_only() {
        let id = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-";
        assert_eq!(sampled_flag(format!("{id}01").as_bytes()), Some(true));
        assert_eq!(sampled_flag(format!("{id}00").as_bytes()), Some(false));
        assert_eq!(sampled_flag(format!("{id}03").as_bytes()), Some(true));
        assert_eq!(sampled_flag(format!("{id}zz").as_bytes()), None);
        assert_eq!(sampled_flag(b"01-whatever"), None);
        assert_eq!(sampled_flag(b""), None);
    }

    #[test]
    fn a_handed_trace_id_is_used_once() {
        let ids = HandedTraceIds::default();
        let handed = TraceId::from(42_u128);
        NEXT_TRACE_ID.with(|next| next.set(Some(handed)));
        assert_eq!(ids.new_trace_id(), handed);
        assert_ne!(ids.new_trace_id(), handed);
    }

    #[test]
    fn the_root_decision_follows_the_ratio() {
        RATIO.store(1.0_f64.to_bits(), Ordering::Relaxed);
        assert!(root_sampled(TraceId::from(u128::MAX)));
        RATIO.store(0.0_f64.to_bits(), Ordering::Relaxed);
        assert!(!root_sampled(TraceId::from(1_u128)));
    }

    #[test]
    fn without_tracing_no_span_is_made() {
        // No `init` in unit tests: the flag is off.
        assert!(check_span(&TraceParent::Absent).is_disabled());
        assert!(backend_span(&Span::none(), "memory", "gcra").is_disabled());
        assert_eq!(trace_id(&Span::none()), None);
        let mut headers = HeaderMap::new();
        headers.insert(
            "traceparent",
            http::HeaderValue::from_static(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        );
        assert!(matches!(
            TraceParent::from_headers(&headers),
            TraceParent::Absent
        ));
    }
}
