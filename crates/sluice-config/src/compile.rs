//! The configuration's own compile step: the configuration as written ([`Config`]) in, the
//! typed settings the daemon runs on ([`Settings`]) out, every problem collected on the way.
//! The policies and the RLS rules are compiled by the service from the same [`Config`], in
//! the same load (see [`load_with`](super::load::load_with)), so start, SIGHUP reload and
//! `--check-config` see every problem at once: nothing downstream parses a value again or
//! falls back on a default.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::backend::sentinel::SentinelStoreConfig;
use super::backend::stores::RedisTls;
use super::backend::{
    BackendSettings, ClusterStoreConfig, MemoryStoreConfig, RedisStoreConfig, UrlCheck, check_store,
};
use super::error::FieldError;
use super::forward_auth::CallerRules;
use super::parse::{parse_mode, parse_positive_duration};
use super::region::{RegionSettings, compile_region};
use super::schema::{BackendConfig, Config, ListenConfig, PolicyConfig, TelemetryConfig};
use super::tls::{ListenTls, compile_backend_tls, compile_listen_tls};

/// Everything the daemon runs on, compiled from one [`Config`].
#[derive(Debug)]
pub struct Settings {
    /// Where the config came from, as errors and the startup line name it.
    pub source: String,
    pub listen: ListenSettings,
    pub backend: BackendSettings,
    pub telemetry: TelemetrySettings,
    /// `admin.token`; `None` keeps the admin API off.
    pub admin_token: Option<Arc<str>>,
    /// `[policies.*]` as written: the service compiles them (with the run-time overrides
    /// merged in) into the policies checks are decided on.
    pub policy_configs: BTreeMap<String, PolicyConfig>,
    /// `[forward_auth]`: how forward-auth requests name their caller.
    pub forward_auth: CallerRules,
    pub region: RegionSettings,
}

/// An address a listener binds: TCP, or a Unix socket for `unix:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// `[listen]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenSettings {
    /// The Unix socket of the HTTP API.
    pub unix: Option<PathBuf>,
    /// File mode of every Unix socket the daemon creates.
    pub unix_mode: u32,
    pub http: Option<SocketAddr>,
    /// A listener serving only `/metrics`.
    pub metrics: Option<SocketAddr>,
    /// The Envoy RLS gRPC listener.
    pub grpc: Option<ListenAddr>,
    /// The RESP (Redis protocol) listener.
    pub resp: Option<ListenAddr>,
    /// After SIGTERM, how long connections may finish before they are dropped.
    pub shutdown_timeout: Duration,
    /// Timeouts and the cap of the connections every listener accepts.
    pub connections: ConnectionSettings,
    /// `[listen.tls]`; `None`: the TCP listeners speak plain TCP.
    pub tls: Option<ListenTls>,
}

/// How long a connection may take and how many may be open: `listen.header_timeout`,
/// `listen.idle_timeout`, `listen.max_connections`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// From accept, or from the first byte of a later request, to the end of its head.
    pub header_timeout: Duration,
    /// Between the end of an answer and the first byte of the next request.
    pub idle_timeout: Duration,
    /// As configured; the daemon lowers it below its fd limit at start.
    pub max_connections: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_connections: 10_000,
        }
    }
}

/// Output format of the logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// `[telemetry]`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySettings {
    /// The OTLP/gRPC collector; `None`: `OTEL_EXPORTER_OTLP_ENDPOINT` or no traces.
    pub otlp_endpoint: Option<String>,
    pub sample_ratio: f64,
    pub log_format: LogFormat,
}

/// Compiles `config`, or reports every problem of it; `redis_url` is the Redis client's parse
/// of a URL (see [`UrlCheck`]).
pub fn compile(config: &Config, redis_url: Option<UrlCheck>) -> Result<Settings, Vec<FieldError>> {
    let mut errors = Vec::new();
    let listen = compile_listen(&config.listen, &mut errors);
    let backend = compile_backend(&config.backend, redis_url, &mut errors);
    let telemetry = compile_telemetry(&config.telemetry, &mut errors);
    // With `rls.envoy_config`, its limits are the policies (and its problems say why none
    // compiled).
    if config.policies.is_empty() && config.rls.envoy_config.trim().is_empty() {
        errors.push(FieldError::new(
            "policies",
            "no policies: every check would answer unknown_policy; define at least one \
             [policies.NAME] section",
        ));
    }
    let forward_auth = CallerRules::compile(&config.forward_auth)
        .map_err(|mut caller_errors| errors.append(&mut caller_errors))
        .ok();
    let region = compile_region(
        &config.region,
        &config.backend,
        backend.as_ref(),
        redis_url,
        &mut errors,
    );
    match (listen, backend, telemetry, forward_auth, region) {
        (Some(listen), Some(backend), Some(telemetry), Some(forward_auth), Some(region))
            if errors.is_empty() =>
        {
            Ok(Settings {
                source: String::new(),
                listen,
                backend,
                telemetry,
                admin_token: (!config.admin.token.is_empty())
                    .then(|| config.admin.token.as_str().into()),
                policy_configs: config.policies.clone(),
                forward_auth,
                region,
            })
        }
        _ => Err(errors),
    }
}

fn compile_listen(config: &ListenConfig, errors: &mut Vec<FieldError>) -> Option<ListenSettings> {
    let before = errors.len();
    let unix_mode = parse_mode(&config.unix_mode).unwrap_or_else(|| {
        errors.push(FieldError::new(
            "listen.unix_mode",
            format!(
                "{:?} is not an octal file mode such as \"0660\"",
                config.unix_mode
            ),
        ));
        0
    });
    let mut tcp = |field: &str, value: &str| -> Option<SocketAddr> {
        if value.is_empty() {
            return None;
        }
        value.parse::<SocketAddr>().map_or_else(
            |_| {
                errors.push(FieldError::new(
                    field,
                    format!(
                        "{value:?} is not an address such as \"127.0.0.1:8080\" (\"\" disables)"
                    ),
                ));
                None
            },
            Some,
        )
    };
    let http = tcp("listen.http", &config.http);
    let metrics = tcp("listen.metrics", &config.metrics);
    let grpc = listen_addr("listen.grpc", &config.grpc, errors);
    let resp = listen_addr("listen.resp", &config.resp, errors);
    let shutdown_timeout =
        parse_positive_duration(&config.shutdown_timeout).unwrap_or_else(|why| {
            errors.push(FieldError::new("listen.shutdown_timeout", why));
            Duration::from_secs(10)
        });
    let connections = compile_connections(config, errors);
    let tls = compile_listen_tls(&config.tls, errors);
    let unix = (!config.unix.is_empty()).then(|| PathBuf::from(&config.unix));
    for (field, addr) in [("listen.grpc", &grpc), ("listen.resp", &resp)] {
        if let Some(ListenAddr::Unix(path)) = addr
            && unix.as_ref() == Some(path)
        {
            errors.push(FieldError::new(
                field,
                format!("{} is already the socket of listen.unix", path.display()),
            ));
        }
    }
    if let (Some(ListenAddr::Unix(grpc)), Some(ListenAddr::Unix(resp))) = (&grpc, &resp)
        && grpc == resp
    {
        errors.push(FieldError::new(
            "listen.resp",
            format!("{} is already the socket of listen.grpc", resp.display()),
        ));
    }
    // Both empty is valid: the service manager may hand the HTTP socket over (LISTEN_FDS);
    // whether anything is served is judged at start (`server::bind::serves_http`).
    (errors.len() == before).then_some(ListenSettings {
        unix,
        unix_mode,
        http,
        metrics,
        grpc,
        resp,
        shutdown_timeout,
        connections,
        tls,
    })
}

fn compile_connections(config: &ListenConfig, errors: &mut Vec<FieldError>) -> ConnectionSettings {
    let defaults = ConnectionSettings::default();
    let mut duration = |field: &str, text: &str, default: Duration| {
        parse_positive_duration(text).unwrap_or_else(|why| {
            errors.push(FieldError::new(field, why));
            default
        })
    };
    let header_timeout = duration(
        "listen.header_timeout",
        &config.header_timeout,
        defaults.header_timeout,
    );
    let idle_timeout = duration(
        "listen.idle_timeout",
        &config.idle_timeout,
        defaults.idle_timeout,
    );
    let max_connections = match usize::try_from(config.max_connections) {
        Ok(0) | Err(_) => {
            errors.push(FieldError::new(
                "listen.max_connections",
                format!(
                    "{} is not a connection count from 1 to {}",
                    config.max_connections,
                    usize::MAX
                ),
            ));
            defaults.max_connections
        }
        Ok(max) => max,
    };
    ConnectionSettings {
        header_timeout,
        idle_timeout,
        max_connections,
    }
}

/// A listener address: `HOST:PORT`, `unix:PATH`, or `""` (off).
pub(crate) fn listen_addr(
    field: &str,
    value: &str,
    errors: &mut Vec<FieldError>,
) -> Option<ListenAddr> {
    if value.is_empty() {
        return None;
    }
    if let Some(path) = value.strip_prefix("unix:") {
        if path.is_empty() {
            errors.push(FieldError::new(
                field,
                "\"unix:\" needs a socket path, e.g. \"unix:/tmp/sluiced-rls.sock\"",
            ));
            return None;
        }
        return Some(ListenAddr::Unix(PathBuf::from(path)));
    }
    match value.parse::<SocketAddr>() {
        Ok(addr) => Some(ListenAddr::Tcp(addr)),
        Err(_) => {
            errors.push(FieldError::new(
                field,
                format!(
                    "{value:?} is not an address such as \"127.0.0.1:8081\" or \"unix:PATH\" (\"\" disables)"
                ),
            ));
            None
        }
    }
}

fn compile_backend(
    config: &BackendConfig,
    redis_url: Option<UrlCheck>,
    errors: &mut Vec<FieldError>,
) -> Option<BackendSettings> {
    let before = errors.len();
    let timeout = parse_positive_duration(&config.timeout).unwrap_or_else(|why| {
        errors.push(FieldError::new("backend.timeout", why));
        Duration::from_millis(1)
    });
    let connect_timeout = parse_positive_duration(&config.connect_timeout).unwrap_or_else(|why| {
        errors.push(FieldError::new("backend.connect_timeout", why));
        Duration::from_millis(1)
    });
    if config.max_keys == 0 {
        errors.push(FieldError::new("backend.max_keys", "must be at least 1"));
    }
    if config.prefix.is_empty() || config.prefix.contains(['{', '}']) {
        errors.push(FieldError::new(
            "backend.prefix",
            "must be non-empty and hold no '{' or '}' (they pick the Redis cluster slot)",
        ));
    }
    let any_rediss = config.url.starts_with("rediss://")
        || config
            .nodes
            .iter()
            .chain(&config.sentinels)
            .any(|node| node.starts_with("rediss://"));
    if config.kind != "sentinel" {
        // Set for another kind, they would silently not be used.
        let set = [
            ("sentinels", !config.sentinels.is_empty()),
            ("master", !config.master.is_empty()),
            ("username", !config.username.is_empty()),
            ("password", config.password.get().is_some()),
        ];
        for (name, _) in set.iter().filter(|(_, set)| *set) {
            errors.push(FieldError::new(
                format!("backend.{name}"),
                format!(
                    "only used with kind = \"sentinel\" (kind is {:?}){}",
                    config.kind,
                    if config.kind == "redis" {
                        "; a Redis server's credentials go in backend.url"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    let tls = match config.kind.as_str() {
        "memory" => None,
        _ => compile_backend_tls("backend.tls", &config.tls, any_rediss, errors),
    };
    let settings = match config.kind.as_str() {
        "memory" => BackendSettings::Memory(MemoryStoreConfig {
            max_keys: config.max_keys,
            ..MemoryStoreConfig::default()
        }),
        "redis" => {
            if config.url.is_empty() {
                errors.push(FieldError::new(
                    "backend.url",
                    "backend kind redis needs a url",
                ));
            }
            BackendSettings::Redis(RedisStoreConfig {
                url: config.url.clone(),
                prefix: config.prefix.clone(),
                timeout,
                connect_timeout,
                tls,
                ..RedisStoreConfig::default()
            })
        }
        "cluster" => {
            if config.nodes.is_empty() {
                errors.push(FieldError::new(
                    "backend.nodes",
                    "backend kind cluster needs at least one node",
                ));
            }
            BackendSettings::Cluster(ClusterStoreConfig {
                nodes: config.nodes.clone(),
                prefix: config.prefix.clone(),
                timeout,
                connect_timeout,
                tls,
                ..ClusterStoreConfig::default()
            })
        }
        // Its own checks (no sentinels, no master name, a bad URL) come from the store's
        // config below, every one at once.
        "sentinel" => {
            BackendSettings::Sentinel(sentinel_config(config, timeout, connect_timeout, tls))
        }
        other => {
            errors.push(FieldError::new(
                "backend.kind",
                format!("unknown backend {other:?}; expected memory, redis, cluster or sentinel"),
            ));
            return None;
        }
    };
    if errors.len() > before {
        return None;
    }
    check_store(&settings, "backend", redis_url, errors);
    (errors.len() == before).then_some(settings)
}

/// The sentinel backend `config` (`[backend]` with `kind = "sentinel"`) describes, its
/// durations and TLS compiled already.
fn sentinel_config(
    config: &BackendConfig,
    timeout: Duration,
    connect_timeout: Duration,
    tls: Option<RedisTls>,
) -> SentinelStoreConfig {
    SentinelStoreConfig {
        sentinels: config.sentinels.clone(),
        master: config.master.trim().to_owned(),
        username: (!config.username.is_empty()).then(|| config.username.clone()),
        password: config.password.get().map(str::to_owned),
        prefix: config.prefix.clone(),
        timeout,
        connect_timeout,
        tls,
        ..SentinelStoreConfig::default()
    }
}

/// Whether `endpoint` is a URL the OTLP exporter can dial: a scheme of http or https and a
/// host (what the exporter would otherwise refuse only at start).
fn check_collector_url(endpoint: &str) -> Result<(), &'static str> {
    let uri: http::Uri = endpoint.parse().map_err(|_| "is not a URL")?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(_) => return Err("has a scheme other than http or https"),
        None => return Err("has no scheme"),
    }
    match uri.host() {
        Some(host) if !host.is_empty() => Ok(()),
        _ => Err("has no host"),
    }
}

fn compile_telemetry(
    config: &TelemetryConfig,
    errors: &mut Vec<FieldError>,
) -> Option<TelemetrySettings> {
    let before = errors.len();
    if !(0.0..=1.0).contains(&config.sample_ratio) {
        errors.push(FieldError::new(
            "telemetry.sample_ratio",
            format!("{} is not between 0 and 1", config.sample_ratio),
        ));
    }
    let log_format = match config.log_format.as_str() {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => {
            errors.push(FieldError::new(
                "telemetry.log_format",
                format!("unknown log format {other:?}; expected text or json"),
            ));
            LogFormat::Text
        }
    };
    let otlp_endpoint = Some(config.otlp_endpoint.trim())
        .filter(|endpoint| !endpoint.is_empty())
        .map(str::to_owned);
    if let Some(endpoint) = &otlp_endpoint
        && let Err(why) = check_collector_url(endpoint)
    {
        errors.push(FieldError::new(
            "telemetry.otlp_endpoint",
            format!(
                "{:?} {why}; expected the http:// or https:// URL of an OTLP/gRPC collector, \
                 e.g. \"http://127.0.0.1:4317\"",
                crate::backend::redact_url(endpoint)
            ),
        ));
    }
    (errors.len() == before).then_some(TelemetrySettings {
        otlp_endpoint,
        sample_ratio: config.sample_ratio,
        log_format,
    })
}
