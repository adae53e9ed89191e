//! Traces end to end: the real `sluiced` binary exports its spans over OTLP/gRPC to a real
//! trace receiver (a tonic server of the official OTLP protos) started by the test.
//!
//! Each test runs its own daemon process: the tracer provider is global to a process, so it
//! cannot be exercised in the in-process e2e daemons.

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use sluice_client::Client;

const BIN: &str = env!("CARGO_BIN_EXE_sluiced");

/// How long a test waits for something that must happen (readiness, not an assertion on time).
const PATIENCE: Duration = Duration::from_secs(30);

/// Every span the receiver got, in arrival order.
#[derive(Debug, Clone, Default)]
struct Received(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Received {
    fn spans(&self) -> Vec<Span> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until a span named `name` of trace `trace_id` has arrived.
    async fn wait_for(&self, trace_id: &[u8], name: &str) -> Span {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(span) = self
                .spans()
                .into_iter()
                .find(|s| s.trace_id == trace_id && s.name == name)
            {
                return span;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {name} span of trace {} arrived; got {:?}",
                hex(trace_id),
                self.spans()
                    .iter()
                    .map(|s| (s.name.clone(), hex(&s.trace_id)))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `n` spans named `name` of trace `trace_id` have arrived.
    async fn wait_for_all(&self, trace_id: &[u8], name: &str, n: usize) -> Vec<Span> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let spans: Vec<Span> = self
                .spans()
                .into_iter()
                .filter(|s| s.trace_id == trace_id && s.name == name)
                .collect();
            if spans.len() >= n {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {n} {name} spans arrived",
                spans.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A real OTLP/gRPC trace receiver on a free loopback port.
async fn receiver() -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let service = TraceServiceServer::new(received.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (addr, received)
}

/// A `sluiced` on a temp socket exporting to `endpoint`, killed when dropped.
struct Daemon {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(endpoint: &str, sample_ratio: &str) -> Daemon {
        Daemon::start_serving_metrics(endpoint, sample_ratio, "", &[])
    }

    /// As [`Daemon::start`], with `/metrics` also on TCP `metrics` (`listen.metrics`) and the
    /// settings `env` (`SLUICE_…` variables).
    fn start_serving_metrics(
        endpoint: &str,
        sample_ratio: &str,
        metrics: &str,
        env: &[(&str, &str)],
    ) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("d.sock");
        let config = dir.path().join("sluice.toml");
        let log = dir.path().join("stderr.log");
        std::fs::write(
            &config,
            format!(
                "[listen]\nunix = {:?}\nhttp = \"\"\nmetrics = {metrics:?}\n\n\
                 [policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow = \"1h\"\n\n\
                 [policies.q]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow = \"1h\"\n",
                socket.display().to_string()
            ),
        )
        .unwrap();
        let child = Command::new(BIN)
            .arg("--config")
            .arg(&config)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("RUST_LOG")
            .env("SLUICE_TELEMETRY__OTLP_ENDPOINT", endpoint)
            .env("SLUICE_TELEMETRY__SAMPLE_RATIO", sample_ratio)
            // Export every 100 ms instead of every 5 s, so the test is quick.
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let daemon = Daemon {
            child,
            socket,
            log,
            _dir: dir,
        };
        wait_for_socket(&daemon.socket);
        daemon
    }

    fn client(&self) -> Client {
        Client::unix(&self.socket).with_timeout(Duration::from_secs(5))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// One check of `key` under `policy`, with `traceparent` if given; answers the status.
    async fn check(&self, policy: &str, key: &str, traceparent: Option<&str>) -> u16 {
        let headers: Vec<(&str, &str)> = traceparent
            .map(|value| vec![("traceparent", value)])
            .unwrap_or_default();
        let body = format!(r#"{{"policy":"{policy}","key":"{key}"}}"#);
        self.client()
            .send(Method::POST, "/v1/check", &headers, body)
            .await
            .unwrap()
            .status
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for_socket(socket: &Path) {
    for _ in 0..1500 {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("sluiced did not start on {}", socket.display());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn attribute(span: &Span, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

fn text(value: &str) -> Option<Value> {
    Some(Value::StringValue(value.to_owned()))
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn a_sampled_traceparent_is_continued_by_the_check_span_and_its_backend_call() {
    let (addr, received) = receiver().await;
    let d = Daemon::start(&format!("http://{addr}"), "1.0");

    // A caller whose trace is not sampled comes first: nothing of it may be exported.
    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    let status = d
        .check(
            "p",
            "u",
            Some(&format!("00-{unsampled}-b7ad6b7169203331-00")),
        )
        .await;
    assert_eq!(status, 200);

    let status = d
        .check("p", "user:1", Some(&format!("00-{TRACE}-{PARENT}-01")))
        .await;
    assert_eq!(status, 200);

    let trace = unhex(TRACE);
    let check = received.wait_for(&trace, "ratelimit.check").await;
    assert_eq!(
        check.parent_span_id,
        unhex(PARENT),
        "continues the caller's span"
    );
    assert_eq!(attribute(&check, "ratelimit.policy"), text("p"));
    assert_eq!(attribute(&check, "ratelimit.backend"), text("memory"));
    assert_eq!(
        attribute(&check, "ratelimit.allowed"),
        Some(Value::BoolValue(true))
    );

    let call = received.wait_for(&trace, "ratelimit.backend_call").await;
    assert_eq!(call.parent_span_id, check.span_id, "a child of the check");
    assert_eq!(attribute(&call, "ratelimit.op"), text("fixed_window"));
    assert_eq!(attribute(&call, "ratelimit.backend"), text("memory"));

    // Spans leave in the order they end; the unsampled check ended first.
    let spans = received.spans();
    assert!(
        spans.iter().all(|s| s.trace_id != unhex(unsampled)),
        "an unsampled caller's check was exported"
    );
    assert!(d.log().contains("traces=\"http://"), "{}", d.log());
}

#[tokio::test]
async fn a_denied_check_and_a_batch_are_traced_too() {
    let (addr, received) = receiver().await;
    let d = Daemon::start(&format!("http://{addr}"), "1.0");
    let denied_trace = "11111111111111111111111111111111";
    let traceparent = format!("00-{denied_trace}-{PARENT}-01");
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(d.check("q", "burst", Some(&traceparent)).await);
    }
    assert_eq!(statuses, [200, 200, 429]);
    let spans = received
        .wait_for_all(&unhex(denied_trace), "ratelimit.check", 3)
        .await;
    let allowed: Vec<Option<Value>> = spans
        .iter()
        .map(|s| attribute(s, "ratelimit.allowed"))
        .collect();
    let no = Some(Value::BoolValue(false));
    assert_eq!(
        allowed.iter().filter(|a| **a == no).count(),
        1,
        "{allowed:?}"
    );

    let batch_trace = "22222222222222222222222222222222";
    let raw = d
        .client()
        .send(
            Method::POST,
            "/v1/check",
            &[("traceparent", &format!("00-{batch_trace}-{PARENT}-01"))],
            r#"{"checks":[{"policy":"p","key":"b1"},{"policy":"q","key":"b2"}]}"#,
        )
        .await
        .unwrap();
    assert_eq!(raw.status, 200);
    let batch = received
        .wait_for(&unhex(batch_trace), "ratelimit.check")
        .await;
    assert_eq!(attribute(&batch, "ratelimit.policy"), text("p,q"));
    assert_eq!(
        attribute(&batch, "ratelimit.checks"),
        Some(Value::IntValue(2))
    );
    let call = received
        .wait_for(&unhex(batch_trace), "ratelimit.backend_call")
        .await;
    assert_eq!(attribute(&call, "ratelimit.op"), text("batch"));
}

#[tokio::test]
async fn a_check_without_traceparent_starts_a_trace_at_ratio_one() {
    let (addr, received) = receiver().await;
    let d = Daemon::start(&format!("http://{addr}"), "1.0");
    assert_eq!(d.check("p", "root", None).await, 200);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (check, call) = loop {
        let spans = received.spans();
        let check = spans.iter().find(|s| s.name == "ratelimit.check").cloned();
        let call = spans
            .iter()
            .find(|s| s.name == "ratelimit.backend_call")
            .cloned();
        if let (Some(check), Some(call)) = (check, call) {
            break (check, call);
        }
        assert!(tokio::time::Instant::now() < deadline, "no root spans");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(check.trace_id.len(), 16);
    assert!(check.trace_id.iter().any(|b| *b != 0), "a valid trace id");
    assert!(check.parent_span_id.is_empty(), "a root span");
    assert_eq!(call.trace_id, check.trace_id);
    assert_eq!(call.parent_span_id, check.span_id);
    assert_eq!(attribute(&check, "ratelimit.policy"), text("p"));
}

#[tokio::test]
async fn sample_ratio_zero_records_roots_never_but_follows_a_sampled_parent() {
    let (addr, received) = receiver().await;
    let d = Daemon::start(&format!("http://{addr}"), "0.0");
    for i in 0..20 {
        assert_eq!(d.check("p", &format!("root{i}"), None).await, 200);
    }
    assert_eq!(
        d.check("p", "child", Some(&format!("00-{TRACE}-{PARENT}-01")))
            .await,
        200
    );
    received.wait_for(&unhex(TRACE), "ratelimit.check").await;
    // The roots ended before the sampled check, so had they been sampled they would be here.
    let others: Vec<String> = received
        .spans()
        .iter()
        .filter(|s| s.trace_id != unhex(TRACE))
        .map(|s| hex(&s.trace_id))
        .collect();
    assert!(others.is_empty(), "roots exported at ratio 0: {others:?}");
}

#[tokio::test]
async fn the_environment_variable_names_the_collector_when_the_config_does_not() {
    let (addr, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("env.sock");
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[listen]\nunix = {:?}\nhttp = \"\"\n\n[telemetry]\nsample_ratio = 1.0\n\n\
             [policies.p]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1h\"\n",
            socket.display().to_string()
        ),
    )
    .unwrap();
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .env_remove("SLUICE_TELEMETRY__OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let d = Daemon {
        child,
        socket,
        log: dir.path().join("none"),
        _dir: dir,
    };
    wait_for_socket(&d.socket);
    let trace = "33333333333333333333333333333333";
    assert_eq!(
        d.check("p", "k", Some(&format!("00-{trace}-{PARENT}-01")))
            .await,
        200
    );
    received.wait_for(&unhex(trace), "ratelimit.check").await;
}

#[tokio::test]
async fn a_dead_collector_costs_a_log_line_and_checks_still_answer() {
    // A port nobody listens on: bound, then released.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let d = Daemon::start(&format!("http://{dead}"), "1.0");
    for i in 0..50 {
        assert_eq!(d.check("p", &format!("k{i}"), None).await, 200);
    }
    // The exporter notices and says so once; checks go on regardless.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !d.log().contains("trace export failed") {
        assert!(tokio::time::Instant::now() < deadline, "{}", d.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..50 {
        assert_eq!(d.check("p", &format!("again{i}"), None).await, 200);
    }
    assert_eq!(d.log().matches("trace export failed").count(), 1);
}

#[tokio::test]
async fn a_collector_that_never_answers_does_not_hold_checks() {
    // The kernel completes connections to a listener that never accepts, so the exporter
    // connects and then hears nothing: every export hangs until its own timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let d = Daemon::start(&format!("http://{addr}"), "1.0");
    // Two spans per check: more than the exporter's queue of 2048 holds.
    let client = d.client();
    for i in 0..1100 {
        let body = format!(r#"{{"policy":"p","key":"k{i}"}}"#);
        let raw = client
            .send(Method::POST, "/v1/check", &[], body)
            .await
            .unwrap();
        assert_eq!(raw.status, 200);
    }
    drop(d);
    drop(silent);
}

/// A free loopback port (bound, then released for the process that will listen on it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real Prometheus (the Debian package's `prometheus`) with exemplar storage, scraping
/// `target` every second; killed when dropped.
struct Prometheus {
    child: Child,
    client: Client,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// `None` when `prometheus` is not installed and `CI` is unset (the test then has nothing
    /// to run against); under `CI` a missing Prometheus fails the test.
    fn start(target: SocketAddr) -> Option<Prometheus> {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: sluiced\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let spawned = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={listen}"))
            .arg("--enable-feature=exemplar-storage")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(err) if std::env::var_os("CI").is_none() => {
                eprintln!("skipped: prometheus (Debian package prometheus) not runnable: {err}");
                return None;
            }
            Err(err) => panic!("prometheus (Debian package prometheus) is needed: {err}"),
        };
        Some(Prometheus {
            child,
            client: Client::tcp(listen.to_string()).with_timeout(Duration::from_secs(5)),
            _dir: dir,
        })
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let raw = self.client.send(Method::GET, path, &[], "").await.ok()?;
        Some((raw.status, String::from_utf8_lossy(&raw.body).into_owned()))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The trace ids of the exemplars Prometheus stored for `query` over the last hour.
    async fn exemplar_trace_ids(&self, query: &str) -> Vec<String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let path = format!(
            "/api/v1/query_exemplars?query={query}&start={}&end={}",
            now - 3600,
            now + 60
        );
        let Some((200, body)) = self.get(&path).await else {
            return Vec::new();
        };
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        let mut ids = Vec::new();
        for series in body["data"].as_array().into_iter().flatten() {
            for exemplar in series["exemplars"].as_array().into_iter().flatten() {
                if let Some(id) = exemplar["labels"]["trace_id"].as_str() {
                    ids.push(id.to_owned());
                }
            }
        }
        ids
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn prometheus_stores_exemplars_whose_trace_ids_the_trace_receiver_got() {
    let (addr, received) = receiver().await;
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let d =
        Daemon::start_serving_metrics(&format!("http://{addr}"), "1.0", &metrics.to_string(), &[]);
    // Sampled checks, allowed and denied, before and while Prometheus scrapes.
    for i in 0..20 {
        d.check("p", &format!("user:{i}"), None).await;
        d.check("q", "burst", None).await;
    }

    // Exemplars only for a scraper that asks for OpenMetrics: the 0.0.4 text stays as it was
    // and promtool accepts it.
    let scrape = Client::tcp(metrics.to_string()).with_timeout(Duration::from_secs(5));
    let plain = scrape.send(Method::GET, "/metrics", &[], "").await.unwrap();
    let plain = String::from_utf8(plain.body.to_vec()).unwrap();
    assert!(!plain.contains("trace_id"), "{plain}");
    assert!(plain.contains("rate_limit_check_duration_seconds_bucket{"));
    if let Err(refused) = sluice_testkit::promtool_check_metrics(&plain) {
        panic!("promtool check metrics: {refused}\n{plain}");
    }
    let open = openmetrics(&scrape).await;
    let exemplar = open
        .lines()
        .find(|l| l.starts_with("rate_limit_check_duration_seconds_bucket{") && l.contains(" # {"))
        .unwrap_or_else(|| panic!("no check exemplar in:\n{open}"));
    let id = exemplar
        .split("trace_id=\"")
        .nth(1)
        .and_then(|rest| rest.get(..32))
        .unwrap();
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{exemplar}");
    received.wait_for(&unhex(id), "ratelimit.check").await;

    let Some(prometheus) = Prometheus::start(metrics) else {
        return;
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let ids = loop {
        d.check("p", "while-scraped", None).await;
        let ids = prometheus
            .exemplar_trace_ids("rate_limit_check_duration_seconds_bucket")
            .await;
        if !ids.is_empty() {
            break ids;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus stored no exemplar; its log:\n{}",
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for id in &ids {
        assert_eq!(id.len(), 32, "{ids:?}");
        let span = received.wait_for(&unhex(id), "ratelimit.check").await;
        assert_eq!(hex(&span.trace_id), *id);
    }
    eprintln!("exemplar trace ids found in Prometheus and the trace receiver: {ids:?}");
}

#[tokio::test]
async fn a_redis_call_carries_the_trace_of_its_check_as_an_exemplar() {
    let redis = sluice_testkit::RedisServer::start();
    let (addr, received) = receiver().await;
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let url = redis.url();
    let d = Daemon::start_serving_metrics(
        &format!("http://{addr}"),
        "1.0",
        &metrics.to_string(),
        &[
            ("SLUICE_BACKEND__KIND", "redis"),
            ("SLUICE_BACKEND__URL", &url),
            ("SLUICE_BACKEND__TIMEOUT", "2s"),
        ],
    );
    assert_eq!(d.check("p", "on-redis", None).await, 200);
    let scrape = Client::tcp(metrics.to_string()).with_timeout(Duration::from_secs(5));
    let open = openmetrics(&scrape).await;
    let exemplar = open
        .lines()
        .find(|l| l.starts_with("rate_limit_redis_duration_seconds_bucket{") && l.contains(" # {"))
        .unwrap_or_else(|| panic!("no Redis exemplar in:\n{open}"));
    assert!(exemplar.contains(r#"op="fixed_window""#), "{exemplar}");
    let id = exemplar
        .split("trace_id=\"")
        .nth(1)
        .and_then(|rest| rest.get(..32))
        .unwrap();
    let call = received
        .wait_for(&unhex(id), "ratelimit.backend_call")
        .await;
    assert_eq!(attribute(&call, "ratelimit.backend"), text("redis"));
}

/// `/metrics` as a scraper asking for OpenMetrics reads it (exemplars included).
async fn openmetrics(scrape: &Client) -> String {
    let accept = [("accept", "application/openmetrics-text;version=1.0.0")];
    let open = scrape
        .send(Method::GET, "/metrics", &accept, "")
        .await
        .unwrap();
    String::from_utf8(open.body.to_vec()).unwrap()
}
