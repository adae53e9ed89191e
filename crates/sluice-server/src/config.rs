//! The daemon's configuration: one struct tree mirroring SPEC's TOML schema, loaded through
//! figment (defaults, then the TOML file, then `SLUICE_` env vars) and validated in one pass
//! that reports every bad value at once, so an operator fixes a file in one round trip.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Deserializer, Serialize};

/// The policies compiled into the binary: what `sluiced` serves with no `--config`.
pub const BUILTIN_TOML: &str = include_str!("../../../examples/sluice.toml");

/// The name errors give to the built-in file.
pub const BUILTIN_NAME: &str = "<built-in examples/sluice.toml>";

/// Top-level sections env vars may set. Anything else under `SLUICE_` (such as
/// `SLUICE_SOCKET` or the CLI's `SLUICE_ADMIN_TOKEN`) is not config and must not reach the
/// strict deserializer.
const SECTIONS: [&str; 7] = [
    "listen",
    "backend",
    "telemetry",
    "admin",
    "policies",
    "rls",
    "region",
];

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub listen: ListenConfig,
    pub backend: BackendConfig,
    pub telemetry: TelemetryConfig,
    pub admin: AdminConfig,
    pub policies: BTreeMap<String, PolicyConfig>,
    /// `[[rls.descriptors]]`: how Envoy RLS descriptors map to policies.
    pub rls: RlsConfig,
    /// `[region]`: multi-region limits (absent = single region).
    pub region: crate::region::RegionConfig,
}

/// `[listen]`: where the daemon accepts connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenConfig {
    /// Unix socket path; "" disables.
    pub unix: String,
    /// Octal file mode of the socket.
    #[serde(deserialize_with = "string_or_integer")]
    pub unix_mode: String,
    /// TCP address of the HTTP API; "" disables.
    pub http: String,
    /// Separate TCP listener serving only `/metrics`; "" = none.
    pub metrics: String,
    /// Envoy RLS gRPC listener: `host:port`, or `unix:PATH` for a Unix socket; "" = off.
    pub grpc: String,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            unix: default_socket_path(),
            unix_mode: "0660".to_owned(),
            http: "127.0.0.1:8080".to_owned(),
            metrics: String::new(),
            grpc: String::new(),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    pub kind: String,
    pub url: String,
    pub nodes: Vec<String>,
    pub timeout: String,
    pub prefix: String,
    pub max_keys: u64,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            kind: "memory".to_owned(),
            url: "redis://127.0.0.1:6379".to_owned(),
            nodes: Vec::new(),
            timeout: "50ms".to_owned(),
            prefix: "rl".to_owned(),
            max_keys: 1_000_000,
        }
    }
}

impl BackendConfig {
    /// `timeout` in milliseconds; the validated config always parses.
    pub fn timeout_ms(&self) -> u64 {
        parse_duration_ms(&self.timeout).unwrap_or(50)
    }
}

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    pub otlp_endpoint: String,
    pub sample_ratio: f64,
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    pub token: String,
}

/// `[rls]`: the Envoy rate-limit service (`listen.grpc`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RlsConfig {
    pub descriptors: Vec<RlsDescriptorConfig>,
}

/// `[[rls.descriptors]]`: a descriptor of `domain` whose entry keys are exactly `keys` (in
/// order) is checked against `policy` under the key `key`, a template over the entry values
/// (`"ip:{remote_address}"`). Every field is required; missing ones are reported by
/// [`Config::validate`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RlsDescriptorConfig {
    pub domain: String,
    pub keys: Vec<String>,
    pub policy: String,
    pub key: String,
}

/// `[policies.NAME]`. Required keys are options so that a missing one is reported together
/// with every other error instead of stopping deserialization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Defaults to `limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    pub fail: String,
    pub shadow: bool,
    pub tiers: BTreeMap<String, TierConfig>,
    /// Values of the `endpoint` metrics label recorded as themselves; others are `other`.
    pub endpoints: Vec<String>,
    /// `local` (default) | `global` | `replicated` (SPEC "Multi-region").
    pub scope: String,
    /// `replicated`: consumption reaches every peer at least this often. Default 100ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_interval: Option<String>,
    /// `replicated`: admitted may exceed the limit by at most this fraction. Default 0.05.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overshoot_budget: Option<f64>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            algorithm: None,
            limit: None,
            window: None,
            burst: None,
            fail: "open".to_owned(),
            shadow: false,
            tiers: BTreeMap::new(),
            endpoints: Vec::new(),
            scope: "local".to_owned(),
            sync_interval: None,
            overshoot_budget: None,
        }
    }
}

/// `[policies.NAME.tiers.TIER]`: overrides of the policy's limit for one plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TierConfig {
    /// Defaults to the policy's limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Defaults to the tier's limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

/// One bad value: the dotted field and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Why a configuration could not be loaded: every problem, each naming where it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// `(source, field, why)`; the source is the file path or the env var.
    pub problems: Vec<(String, FieldError)>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (source, problem)) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            if problem.field.is_empty() {
                write!(f, "{source}: {}", problem.message)?;
            } else {
                write!(f, "{source}: {}: {}", problem.field, problem.message)?;
            }
        }
        Ok(())
    }
}

/// Where a configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The policies compiled into the binary.
    Builtin,
    /// A TOML file on disk.
    File(PathBuf),
    /// TOML text under a display name (tests, embedders).
    Text { name: String, toml: String },
}

impl ConfigSource {
    fn name(&self) -> String {
        match self {
            ConfigSource::Builtin => BUILTIN_NAME.to_owned(),
            ConfigSource::File(path) => path.display().to_string(),
            ConfigSource::Text { name, .. } => name.clone(),
        }
    }
}

/// Loads and validates: defaults, then `source`, then `SLUICE_` env vars.
pub fn load(source: &ConfigSource) -> Result<Config, ConfigError> {
    load_with_env(source, env_provider())
}

/// As [`load`], with the env provider given (tests pass their own map).
pub fn load_with_env(source: &ConfigSource, env: Env) -> Result<Config, ConfigError> {
    let name = source.name();
    let base = Figment::from(Serialized::defaults(Config::default()));
    let figment = match source {
        ConfigSource::Builtin => base.merge(Toml::string(BUILTIN_TOML)),
        ConfigSource::File(path) => {
            if let Err(err) = std::fs::metadata(path) {
                return Err(ConfigError {
                    problems: vec![(name, FieldError::new("", format!("cannot read: {err}")))],
                });
            }
            base.merge(Toml::file_exact(path))
        }
        ConfigSource::Text { toml, .. } => base.merge(Toml::string(toml)),
    }
    .merge(env);
    let config: Config = figment.extract().map_err(|err| from_figment(err, &name))?;
    let errors = config.validate();
    if errors.is_empty() {
        return Ok(config);
    }
    let problems = errors
        .into_iter()
        .map(|error| (source_of(&figment, &error.field, &name), error))
        .collect();
    Err(ConfigError { problems })
}

/// `SLUICE_SECTION__KEY=value`, limited to the config's own sections.
pub fn env_provider() -> Env {
    Env::prefixed("SLUICE_").split("__").filter(is_config_key)
}

fn is_config_key(key: &figment::value::UncasedStr) -> bool {
    let key = key.as_str();
    SECTIONS.iter().any(|section| {
        key.len() > section.len() + 2
            && key.is_char_boundary(section.len())
            && key[..section.len()].eq_ignore_ascii_case(section)
            // `split` may already have turned `__` into `.`.
            && (key[section.len()..].starts_with("__") || key[section.len()..].starts_with('.'))
    })
}

/// The provider that set `field`: the env var when it came from the environment, else the file.
fn source_of(figment: &Figment, field: &str, file: &str) -> String {
    match figment.find_metadata(field) {
        Some(meta) if meta.name.contains("environment") => {
            format!(
                "env SLUICE_{}",
                field.replace('.', "__").to_ascii_uppercase()
            )
        }
        _ => file.to_owned(),
    }
}

fn from_figment(err: figment::Error, file: &str) -> ConfigError {
    let problems = err
        .into_iter()
        .map(|e| {
            let source = match e.metadata.as_ref() {
                Some(meta) if meta.name.contains("environment") => {
                    "environment (SLUICE_*)".to_owned()
                }
                _ => file.to_owned(),
            };
            let field = e.path.join(".");
            (source, FieldError::new(field, e.kind.to_string()))
        })
        .collect();
    ConfigError { problems }
}

impl Config {
    /// Every problem of the configuration, empty when it is valid.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.listen.validate(&mut errors);
        self.backend.validate(&mut errors);
        self.telemetry.validate(&mut errors);
        let policies = match crate::policy::PolicySet::compile(&self.policies) {
            Ok(policies) => Some(policies),
            Err(mut policy_errors) => {
                errors.append(&mut policy_errors);
                None
            }
        };
        if let Err(mut rls_errors) = crate::rls::Rules::compile(&self.rls, &self.policies) {
            errors.append(&mut rls_errors);
        }
        crate::region::validate(&self.region, &self.backend, policies.as_ref(), &mut errors);
        errors
    }
}

impl ListenConfig {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if parse_mode(&self.unix_mode).is_none() {
            errors.push(FieldError::new(
                "listen.unix_mode",
                format!(
                    "{:?} is not an octal file mode such as \"0660\"",
                    self.unix_mode
                ),
            ));
        }
        if let Some(path) = self.grpc.strip_prefix("unix:")
            && path.is_empty()
        {
            errors.push(FieldError::new(
                "listen.grpc",
                "\"unix:\" needs a socket path, e.g. \"unix:/tmp/sluiced-rls.sock\"",
            ));
        }
        let grpc_tcp = (!self.grpc.starts_with("unix:")).then_some(&self.grpc);
        for (field, value) in [
            ("listen.http", Some(&self.http)),
            ("listen.metrics", Some(&self.metrics)),
            ("listen.grpc", grpc_tcp),
        ] {
            let Some(value) = value else { continue };
            if !value.is_empty() && value.parse::<SocketAddr>().is_err() {
                errors.push(FieldError::new(
                    field,
                    format!(
                        "{value:?} is not an address such as \"127.0.0.1:8080\" (\"\" disables)"
                    ),
                ));
            }
        }
    }

    /// `unix_mode` as bits; the validated config always parses.
    pub fn mode(&self) -> u32 {
        parse_mode(&self.unix_mode).unwrap_or(0o660)
    }

    /// The socket path, if enabled.
    pub fn unix_path(&self) -> Option<&Path> {
        (!self.unix.is_empty()).then(|| Path::new(&self.unix))
    }

    /// The RLS socket path when `grpc` is `"unix:PATH"`.
    pub fn grpc_unix_path(&self) -> Option<&Path> {
        self.grpc
            .strip_prefix("unix:")
            .filter(|path| !path.is_empty())
            .map(Path::new)
    }
}

impl BackendConfig {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        match self.kind.as_str() {
            "memory" => {}
            "redis" => {
                if self.url.is_empty() {
                    errors.push(FieldError::new(
                        "backend.url",
                        "backend kind redis needs a url",
                    ));
                }
            }
            "cluster" => {
                if self.nodes.is_empty() {
                    errors.push(FieldError::new(
                        "backend.nodes",
                        "backend kind cluster needs at least one node",
                    ));
                }
            }
            other => errors.push(FieldError::new(
                "backend.kind",
                format!("unknown backend {other:?}; expected memory, redis or cluster"),
            )),
        }
        match parse_duration_ms(&self.timeout) {
            Ok(0) => errors.push(FieldError::new("backend.timeout", "must be at least 1ms")),
            Ok(_) => {}
            Err(why) => errors.push(FieldError::new("backend.timeout", why)),
        }
        if self.max_keys == 0 {
            errors.push(FieldError::new("backend.max_keys", "must be at least 1"));
        }
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            errors.push(FieldError::new(
                "backend.prefix",
                "must be non-empty and hold no '{' or '}' (they pick the Redis cluster slot)",
            ));
        }
    }
}

impl TelemetryConfig {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            errors.push(FieldError::new(
                "telemetry.sample_ratio",
                format!("{} is not between 0 and 1", self.sample_ratio),
            ));
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            errors.push(FieldError::new(
                "telemetry.log_format",
                format!(
                    "unknown log format {:?}; expected text or json",
                    self.log_format
                ),
            ));
        }
    }
}

/// Whether `name` may name a policy or a tier: `[A-Za-z0-9_.-]{1,64}`, so it is safe in a
/// header's quoted string, a metrics label and a Redis key.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `"<integer><unit>"` with unit ms, s, m, h or d, in milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let bad = || {
        format!("{text:?} is not a duration such as \"50ms\", \"60s\", \"5m\", \"1h\" or \"1d\"")
    };
    if number.is_empty() {
        return Err(bad());
    }
    let factor: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("{text:?} is too long a duration"))
}

fn parse_mode(text: &str) -> Option<u32> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|mode| *mode <= 0o7777)
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
#[allow(clippy::result_large_err)] // figment's Jail closures return its error type.
mod tests {
    use super::*;

    fn text(toml: &str) -> ConfigSource {
        ConfigSource::Text {
            name: "t.toml".to_owned(),
            toml: toml.to_owned(),
        }
    }

    fn fields(err: &ConfigError) -> Vec<&str> {
        err.problems.iter().map(|(_, p)| p.field.as_str()).collect()
    }

    #[test]
    fn the_builtin_policies_load() {
        let config = load_with_env(&ConfigSource::Builtin, Env::raw().only(&[])).unwrap();
        assert_eq!(
            config.policies.keys().collect::<Vec<_>>(),
            vec!["admin", "internal", "public"]
        );
        let public = &config.policies["public"];
        assert_eq!(public.algorithm.as_deref(), Some("token_bucket"));
        assert_eq!(public.tiers["pro"].burst, Some(2000));
        assert_eq!(
            config.policies["internal"].algorithm.as_deref(),
            Some("sliding_window_counter")
        );
        assert_eq!(
            config.policies["admin"].algorithm.as_deref(),
            Some("fixed_window")
        );
        assert_eq!(config.backend.kind, "memory");
        assert_eq!(config.listen.http, "127.0.0.1:8080");
    }

    #[test]
    fn every_invalid_value_is_named() {
        let err = load_with_env(
            &text(
                r#"
[listen]
unix_mode = "8"
http = "nowhere"
[backend]
kind = "etcd"
timeout = "5 minutes"
max_keys = 0
[telemetry]
sample_ratio = -0.5
log_format = "yaml"
[policies.a]
algorithm = "fixed_windows"
limit = 0
window = "1s"
[policies.b]
algorithm = "token_bucket"
limit = 10
window = "0s"
burst = 0
fail = "sideways"
tiers = { "bad tier" = { limit = 1 }, ok = { limit = 0, burst = 0 } }
[policies.c]
[policies."way/too/long"]
algorithm = "gcra"
limit = 1
window = "1w"
"#,
            ),
            Env::raw().only(&[]),
        )
        .unwrap_err();
        let mut got = fields(&err);
        got.sort_unstable();
        let mut want = vec![
            "listen.unix_mode",
            "listen.http",
            "backend.kind",
            "backend.timeout",
            "backend.max_keys",
            "telemetry.sample_ratio",
            "telemetry.log_format",
            "policies.a.algorithm",
            "policies.a.limit",
            "policies.b.window",
            "policies.b.burst",
            "policies.b.fail",
            "policies.b.tiers.bad tier",
            "policies.b.tiers.ok.limit",
            "policies.b.tiers.ok.burst",
            "policies.c.algorithm",
            "policies.c.limit",
            "policies.c.window",
            "policies.way/too/long",
            "policies.way/too/long.window",
        ];
        want.sort_unstable();
        assert_eq!(got, want, "{err}");
        for line in err.to_string().lines() {
            assert!(line.starts_with("t.toml: "), "{line}");
        }
    }

    #[test]
    fn an_unknown_field_names_the_field_and_the_file() {
        let err = load_with_env(
            &text("[backend]\nkindd = \"memory\"\n"),
            Env::raw().only(&[]),
        )
        .unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.starts_with("t.toml: backend.kindd: unknown field"),
            "{shown}"
        );
    }

    #[test]
    fn listen_grpc_takes_an_address_or_a_unix_socket() {
        let load = |grpc: &str| {
            load_with_env(
                &text(&format!("[listen]\ngrpc = {grpc:?}\n")),
                Env::raw().only(&[]),
            )
        };
        let unix = load("unix:/run/sluice/rls.sock").unwrap();
        assert_eq!(
            unix.listen.grpc_unix_path(),
            Some(Path::new("/run/sluice/rls.sock"))
        );
        let tcp = load("127.0.0.1:8081").unwrap();
        assert_eq!(tcp.listen.grpc_unix_path(), None);
        for bad in ["unix:", "localhost", "8081"] {
            let err = load(bad).unwrap_err();
            assert_eq!(fields(&err), vec!["listen.grpc"], "{bad}: {err}");
        }
    }

    #[test]
    fn durations_take_every_unit() {
        assert_eq!(parse_duration_ms("50ms"), Ok(50));
        assert_eq!(parse_duration_ms("60s"), Ok(60_000));
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        for bad in [
            "",
            "s",
            "1",
            "1.5s",
            "-1s",
            "1 s",
            "1sec",
            "99999999999999999999d",
        ] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn burst_defaults_to_limit_and_tier_burst_to_tier_limit() {
        let config = load_with_env(
            &text(
                "[policies.p]\nalgorithm = \"token_bucket\"\nlimit = 7\nwindow = \"1s\"\ntiers = { a = { limit = 3 }, b = { burst = 9 } }\n",
            ),
            Env::raw().only(&[]),
        )
        .unwrap();
        let set = crate::policy::PolicySet::compile(&config.policies).unwrap();
        let p = set.get("p").unwrap();
        assert_eq!((p.base.params.limit, p.base.params.burst), (7, 7));
        let a = p.limit_for(Some("a")).params;
        assert_eq!((a.limit, a.burst), (3, 3));
        let b = p.limit_for(Some("b")).params;
        assert_eq!((b.limit, b.burst), (7, 9));
        assert_eq!(p.limit_for(Some("zzz")).params, p.base.params);
    }

    #[test]
    fn env_overrides_the_file_and_foreign_vars_are_ignored() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("SLUICE_POLICIES__PUBLIC__LIMIT", "250");
            jail.set_env("SLUICE_BACKEND__TIMEOUT", "20ms");
            jail.set_env("SLUICE_SOCKET", "/tmp/from-env.sock");
            jail.set_env("SLUICE_ADMIN_TOKEN", "cli-only");
            jail.set_env("SLUICE_UNRELATED", "x");
            let config = load(&ConfigSource::Builtin).map_err(|e| e.to_string())?;
            assert_eq!(config.policies["public"].limit, Some(250));
            assert_eq!(config.backend.timeout_ms(), 20);
            assert_eq!(config.listen.unix, "/tmp/from-env.sock");
            assert_eq!(config.admin.token, "");
            Ok(())
        });
    }

    #[test]
    fn an_invalid_env_value_names_the_variable() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("SLUICE_POLICIES__PUBLIC__LIMIT", "0");
            jail.set_env("SLUICE_LISTEN__UNIX_MODE", "0600");
            let err = load(&ConfigSource::Builtin).unwrap_err();
            assert_eq!(err.problems.len(), 1, "{err}");
            assert_eq!(
                err.to_string(),
                "env SLUICE_POLICIES__PUBLIC__LIMIT: policies.public.limit: limit must be at least 1"
            );
            Ok(())
        });
    }
}
