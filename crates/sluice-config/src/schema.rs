//! The configuration as written: one struct tree mirroring the TOML schema, every section
//! `deny_unknown_fields`, every key defaulted so that a missing required key is reported by
//! the compile step together with every other problem. Nothing here is interpreted: values
//! stay text until [`compile`](super::compile()) turns them into typed settings.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::backend::replication::DEFAULT_MAX_PENDING;

/// The policies compiled into the binary: what `sluiced` serves with no `--config`.
pub const BUILTIN_TOML: &str = include_str!("../../../examples/sluice.toml");

/// A duration as the compile reads it: an integer and a unit (`50ms`, `60s`, `5m`, `1h`, `1d`).
const DURATION_PATTERN: &str = "^[0-9]+(ms|s|m|h|d)$";
/// A policy's window: a duration, or a calendar window (`1w`, `1mo`).
const WINDOW_PATTERN: &str = "^([0-9]+(ms|s|m|h|d)|1w|1mo)$";

/// The algorithms' names, as `sluice_core::Algorithm` spells them (a test holds the two equal).
const ALGORITHMS: [&str; 6] = [
    "fixed_window",
    "sliding_window_log",
    "sliding_window_counter",
    "token_bucket",
    "leaky_bucket",
    "gcra",
];

/// The JSON Schema (draft 2020-12) of the config file, from the types below: every key, its
/// type, default and meaning; unknown keys refused. `sluiced --print-config-schema` prints it.
pub fn json_schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(Config)).unwrap_or_default();
    // A section's default would repeat every key's default as one object, `listen.unix` from
    // the environment included; each key carries its own, fixed one.
    if let Some(sections) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        for section in sections.values_mut() {
            if let Some(section) = section.as_object_mut() {
                section.remove("default");
            }
        }
    }
    schema
}

/// The name errors give to the built-in file.
pub const BUILTIN_NAME: &str = "<built-in examples/sluice.toml>";

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub listen: ListenConfig,
    pub backend: BackendConfig,
    pub telemetry: TelemetryConfig,
    pub admin: AdminConfig,
    /// `[forward_auth]`: how `GET /v1/forward-auth/{policy}` finds the caller.
    pub forward_auth: ForwardAuthConfig,
    pub policies: BTreeMap<String, PolicyConfig>,
    /// `[[rls.descriptors]]`: how Envoy RLS descriptors map to policies.
    pub rls: RlsConfig,
    /// `[region]`: multi-region limits (absent = single region).
    pub region: RegionConfig,
}

/// `[listen]`: where the daemon accepts connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ListenConfig {
    /// Unix socket path; "" disables. Default `$SLUICE_SOCKET`, else `/tmp/sluiced.sock`.
    // The schema names the fixed default: it must not change with the environment it is
    // printed in.
    #[schemars(extend("default" = "/tmp/sluiced.sock"))]
    pub unix: String,
    /// Octal file mode of the socket.
    #[serde(deserialize_with = "string_or_integer")]
    #[schemars(schema_with = "string_or_integer_schema")]
    pub unix_mode: String,
    /// TCP address of the HTTP API; "" disables.
    pub http: String,
    /// Separate TCP listener serving only `/metrics`; "" = none.
    pub metrics: String,
    /// Envoy RLS gRPC listener: `host:port`, or `unix:PATH` for a Unix socket; "" = off.
    pub grpc: String,
    /// RESP (Redis protocol) listener: `host:port`, or `unix:PATH` for a Unix socket; "" = off.
    pub resp: String,
    /// SIGTERM: how long in-flight work may finish before what is left is dropped.
    #[schemars(pattern(DURATION_PATTERN))]
    pub shutdown_timeout: String,
    /// A connection without a whole request head by then is closed.
    #[schemars(pattern(DURATION_PATTERN))]
    pub header_timeout: String,
    /// An idle keep-alive connection is closed after this.
    #[schemars(pattern(DURATION_PATTERN))]
    pub idle_timeout: String,
    /// Open connections over every listener; capped below the fd limit at start.
    pub max_connections: u64,
    /// `[listen.tls]`: TLS (and mTLS) on the TCP listeners.
    pub tls: ListenTlsConfig,
}

/// `[listen.tls]`: a certificate set makes the TCP listeners (http, grpc, resp) TLS only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ListenTlsConfig {
    /// PEM certificate chain; "" = plain TCP.
    pub cert_file: String,
    /// Its PEM private key.
    pub key_file: String,
    /// PEM CA bundle; set = a client must present a certificate it signed (mTLS).
    pub client_ca_file: String,
    /// `listen.metrics` serves HTTPS too (default: plain, for probes).
    pub metrics: bool,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            unix: default_socket_path(),
            unix_mode: "0660".to_owned(),
            http: "127.0.0.1:8080".to_owned(),
            metrics: String::new(),
            grpc: String::new(),
            resp: String::new(),
            shutdown_timeout: "10s".to_owned(),
            header_timeout: "10s".to_owned(),
            idle_timeout: "120s".to_owned(),
            max_connections: 10_000,
            tls: ListenTlsConfig::default(),
        }
    }
}

/// `$SLUICE_SOCKET` or `/tmp/sluiced.sock`: the default of `listen.unix`, so the override is
/// below the file and `SLUICE_LISTEN__UNIX` in precedence.
pub fn default_socket_path() -> String {
    match std::env::var("SLUICE_SOCKET") {
        Ok(path) if !path.is_empty() => path,
        _ => "/tmp/sluiced.sock".to_owned(),
    }
}

/// `[backend]`: where counters live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    /// Where counters live: in process memory, or a Redis server, or a Redis Cluster, or the
    /// Redis master a set of sentinels monitors.
    #[schemars(extend("enum" = ["memory", "redis", "cluster", "sentinel"]))]
    pub kind: String,
    /// redis: `redis://[:password@]host:port[/db]`.
    pub url: String,
    /// cluster: seed nodes; one reachable node is enough.
    pub nodes: Vec<String>,
    /// sentinel: `redis://[:password@]host:port` of each sentinel (a sentinel's own password
    /// in its URL); one reachable sentinel is enough.
    pub sentinels: Vec<String>,
    /// sentinel: the name the sentinels monitor the master under.
    pub master: String,
    /// sentinel: the master's ACL user ("" = the default user).
    pub username: String,
    /// sentinel: the master's password ("" = none); `SLUICE_BACKEND__PASSWORD`. Never logged.
    pub password: Secret,
    /// Bound on each backend call; past it the call counts as failed.
    #[schemars(pattern(DURATION_PATTERN))]
    pub timeout: String,
    /// How long sluiced waits for its backend before it serves (and the bound on opening one
    /// connection); past it the daemon serves anyway, by each policy's fail mode.
    #[schemars(pattern(DURATION_PATTERN))]
    pub connect_timeout: String,
    /// Prefix of every Redis key.
    pub prefix: String,
    /// memory: the most keys tracked.
    pub max_keys: u64,
    /// `[backend.tls]`: TLS to Redis.
    pub tls: BackendTlsConfig,
}

/// A password as written: read and written as a plain string, but never shown by `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Secret(pub String);

impl Secret {
    /// The password, `None` when empty.
    pub fn get(&self) -> Option<&str> {
        (!self.0.is_empty()).then_some(self.0.as_str())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "\"***\"" })
    }
}

/// `[backend.tls]` (and the `tls` table of a `[region]` backend): TLS to Redis. A `rediss://`
/// URL turns it on; `enabled = true` also for `redis://` URLs. Always verified.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BackendTlsConfig {
    pub enabled: bool,
    /// PEM CA bundle; "" = the system's root store.
    pub ca_file: String,
    /// Client certificate chain (PEM), for `tls-auth-clients yes`.
    pub cert_file: String,
    /// Its private key (PEM).
    pub key_file: String,
    /// The name verified (and sent as SNI); "" = the URL's host.
    pub server_name: String,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            kind: "memory".to_owned(),
            url: "redis://127.0.0.1:6379".to_owned(),
            nodes: Vec::new(),
            sentinels: Vec::new(),
            master: String::new(),
            username: String::new(),
            password: Secret::default(),
            timeout: "50ms".to_owned(),
            connect_timeout: "1s".to_owned(),
            prefix: "rl".to_owned(),
            max_keys: 1_000_000,
            tls: BackendTlsConfig::default(),
        }
    }
}

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// OTLP/gRPC collector for traces; "" uses `OTEL_EXPORTER_OTLP_ENDPOINT` when set.
    pub otlp_endpoint: String,
    /// Share of new traces sampled, 0 to 1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sample_ratio: f64,
    /// Log lines as text or JSON (`RUST_LOG` filters).
    #[schemars(extend("enum" = ["text", "json"]))]
    pub log_format: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: String::new(),
            sample_ratio: 0.01,
            log_format: "text".to_owned(),
        }
    }
}

/// `[admin]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Bearer token of the admin API; "" = no admin API. `SLUICE_ADMIN__TOKEN` sets it.
    pub token: String,
}

/// `[forward_auth]`: which headers of a forward-auth request name the caller. Only what the
/// proxy writes may: an identity header only when named here, and the `X-Forwarded-For`
/// entry the nearest `trusted_hops` proxies appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ForwardAuthConfig {
    /// The header the proxy sets to the authenticated caller (key `user:<value>`); "" = none.
    pub identity_header: String,
    /// The client address is the `X-Forwarded-For` entry this many from the right.
    pub trusted_hops: u64,
}

impl Default for ForwardAuthConfig {
    fn default() -> Self {
        ForwardAuthConfig {
            identity_header: String::new(),
            trusted_hops: 1,
        }
    }
}

/// `[rls]`: the Envoy rate-limit service (`listen.grpc`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RlsConfig {
    /// Envoy descriptors to policies.
    pub descriptors: Vec<RlsDescriptorConfig>,
    /// envoyproxy/ratelimit YAML: a directory of files (one domain each) or one file.
    pub envoy_config: String,
    /// Not a config key: the domains read from `envoy_config` by the load
    /// ([`envoy::attach`](crate::envoy::attach)).
    #[serde(skip)]
    pub envoy: std::sync::Arc<crate::envoy_yaml::EnvoyDomains>,
}

/// `[[rls.descriptors]]`: a descriptor of `domain` whose entry keys are exactly `keys` (in
/// order) is checked against `policy` under the key `key`, a template over the entry values
/// (`"ip:{remote_address}"`). Every field is required; missing ones are reported by
/// [`compile`](super::compile()).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RlsDescriptorConfig {
    /// The ratelimit filter's `domain`.
    pub domain: String,
    /// The descriptor's entry keys, exactly and in order.
    pub keys: Vec<String>,
    /// A configured policy.
    pub policy: String,
    /// The sluice key: `{name}` is the value of entry `name`, one of `keys`.
    pub key: String,
}

/// `[policies.NAME]`. Required keys are options so that a missing one is reported together
/// with every other error instead of stopping deserialization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Required: how the limit is counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ALGORITHMS))]
    pub algorithm: Option<String>,
    /// Required: requests per window (buckets: refilled `limit` per `window`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Required: `<integer><ms|s|m|h|d>`, at least 1 ms; windows are aligned to unix time.
    /// fixed_window also takes calendar windows: `1w` (from Monday) and `1mo` (from the
    /// first), and `1d` with `calendar` set, in `calendar`'s zone (UTC by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(WINDOW_PATTERN))]
    pub window: Option<String>,
    /// fixed_window only: the IANA time zone (e.g. `Asia/Tokyo`) whose midnights bound the
    /// calendar windows `1d`, `1w` and `1mo`; daylight-saving days are 23 or 25 hours long.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// Defaults to `limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// On backend failure: `open` allows (marked degraded), `closed` answers 503.
    #[schemars(extend("enum" = ["open", "closed"]))]
    pub fail: String,
    /// Decide and record, never deny.
    pub shadow: bool,
    /// Stacked limits, in place of `limit`, `window` and `burst` (1 to 4): a check passes only
    /// when every one has room, and all or none of them consume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Vec<LimitConfig>>,
    /// Plans with their own limit: `{ pro = { limit = 1000, burst = 2000 } }`.
    pub tiers: BTreeMap<String, TierConfig>,
    /// Values of the `endpoint` metrics label recorded as themselves; others are `other`.
    pub endpoints: Vec<String>,
    /// `local` (default) | `global` | `replicated`.
    #[schemars(extend("enum" = ["local", "global", "replicated"]))]
    pub scope: String,
    /// `replicated`: consumption reaches every peer at least this often. Default 100ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub sync_interval: Option<String>,
    /// `replicated`: admitted may exceed the limit by at most this fraction. Default 0.05.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overshoot_budget: Option<f64>,
    /// `auto` (default): leases and the denied cache on the Redis backends; `off`: neither.
    #[schemars(extend("enum" = ["auto", "off"]))]
    pub lease: String,
    /// `[policies.NAME.candidate]`: limits judged beside the policy's, never enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateConfig>,
    /// A usage policy: checks ask (cost defaults to 0) and what a request used is charged
    /// after it (`POST /v1/charge`), into debt if need be.
    pub usage: bool,
    /// Not a config key: how the policy's checks count. The limits of `rls.envoy_config`
    /// count every hit, as envoyproxy/ratelimit does; `[policies.*]` count what they admit.
    #[serde(skip)]
    pub counting: sluice_core::Counting,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            algorithm: None,
            limit: None,
            window: None,
            calendar: None,
            burst: None,
            fail: "open".to_owned(),
            shadow: false,
            limits: None,
            tiers: BTreeMap::new(),
            endpoints: Vec::new(),
            scope: "local".to_owned(),
            sync_interval: None,
            overshoot_budget: None,
            lease: "auto".to_owned(),
            candidate: None,
            usage: false,
            counting: sluice_core::Counting::Admitted,
        }
    }
}

/// `[policies.NAME.candidate]`: a candidate limit of the policy's own limit (tier `none`, and
/// the tiers the policy does not name) and, in `tiers`, of its tiers. Every check of a
/// (policy, tier) with a candidate is also decided against it, on a state of its own, and the
/// answer the caller gets never changes. `window` and `algorithm` default to the policy's and
/// are the defaults of the tiers' candidates too; `burst` defaults to the candidate's own
/// limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CandidateConfig {
    /// The candidate of tier `none`; without it only the tiers in `tiers` have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub window: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ALGORITHMS))]
    pub algorithm: Option<String>,
    /// The candidates of the policy's tiers.
    pub tiers: BTreeMap<String, CandidateTierConfig>,
}

/// `[policies.NAME.candidate.tiers.TIER]`: the candidate of one of the policy's tiers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CandidateTierConfig {
    /// Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Defaults to the candidate's `window`, then the policy's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub window: Option<String>,
    /// Defaults to this candidate's limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Defaults to the candidate's `algorithm`, then the policy's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ALGORITHMS))]
    pub algorithm: Option<String>,
}

/// `[policies.NAME.tiers.TIER]`: overrides of the policy's limit for one plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TierConfig {
    /// Defaults to the policy's limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Defaults to the tier's limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// The tier's own stacked limits (1 to 4), in place of `limit` and `burst`; required when
    /// the policy has `limits`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Vec<LimitConfig>>,
}

/// One of a policy's or tier's stacked `limits`: `{ limit = 20000, window = "1m" }`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitConfig {
    /// Required: requests (or units) per window, at least 1.
    pub limit: u64,
    /// Required: as the policy's `window` (calendar windows included).
    #[schemars(pattern(WINDOW_PATTERN))]
    pub window: String,
    /// Defaults to `limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

/// Default timeout of calls to the global backend and to peers: a cross-region round trip.
pub const DEFAULT_REMOTE_TIMEOUT: &str = "1s";

/// `[region]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RegionConfig {
    /// This daemon's region; "" = single region.
    pub name: String,
    /// The backend of `scope = "global"` policies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global: Option<RemoteConfig>,
    /// The other regions, for `scope = "replicated"` policies.
    pub peers: Vec<RemoteConfig>,
    /// Most (limit, window) totals buffered per peer while it is unreachable.
    pub max_pending: u64,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig {
            name: String::new(),
            global: None,
            peers: Vec::new(),
            max_pending: DEFAULT_MAX_PENDING as u64,
        }
    }
}

/// A backend in another place: `{ name = "…", kind = "redis", url = "…" }` (name for peers
/// only; `kind = "cluster"` takes `nodes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RemoteConfig {
    /// The peer region's name (peers only).
    pub name: String,
    /// `redis` (with `url`) or `cluster` (with `nodes`).
    #[schemars(extend("enum" = ["redis", "cluster"]))]
    pub kind: String,
    /// redis: `redis://[:password@]host:port[/db]`.
    pub url: String,
    /// cluster: seed nodes.
    pub nodes: Vec<String>,
    /// Bound on one call. Default 1s (a check on the global backend waits this long at most;
    /// a delivery to a peer never delays a check).
    #[schemars(pattern(DURATION_PATTERN))]
    pub timeout: String,
    /// TLS to this backend, as `[backend.tls]`.
    pub tls: BackendTlsConfig,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            name: String::new(),
            kind: "redis".to_owned(),
            url: String::new(),
            nodes: Vec::new(),
            timeout: DEFAULT_REMOTE_TIMEOUT.to_owned(),
            tls: BackendTlsConfig::default(),
        }
    }
}

/// `listen.unix_mode` in the schema: the octal digits as text, or as a number (an env var).
fn string_or_integer_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "integer"],
        "pattern": "^[0-7]{3,4}$"
    })
}

/// An env var such as `SLUICE_LISTEN__UNIX_MODE=0660` arrives as a number; keep its digits.
fn string_or_integer<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Number(u64),
    }
    Ok(match Either::deserialize(deserializer)? {
        Either::Text(text) => text,
        Either::Number(number) => format!("{number:04}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_the_algorithms_the_core_has() {
        let core: Vec<&str> = sluice_core::Algorithm::ALL
            .iter()
            .map(|a| a.as_str())
            .collect();
        assert_eq!(ALGORITHMS.to_vec(), core);
    }

    #[test]
    fn the_schema_is_draft_2020_12_and_closed_to_unknown_keys() {
        let schema = json_schema();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            schema["$defs"]["PolicyConfig"]["additionalProperties"],
            false
        );
    }
}
