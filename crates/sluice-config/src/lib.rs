//! The sluice configuration, raw in, typed out: what the daemon (`sluiced`), the `sluice` CLI
//! (`sluice replay`) and the stores build on. Pure: no async runtime, no server, no Redis
//! client (a lint test of the repository keeps them out of its dependency tree).
//!
//! - [`schema`]: the TOML tree as written (every key a string or number, defaults filled in);
//! - [`load`](mod@load): where it comes from (defaults, the file, `SLUICE_` env vars, through
//!   figment); `env` reads the variables, reaching policies and tiers whose names have
//!   capitals, `.` or `-`;
//! - [`compile()`]: the one step that turns it into [`Settings`] or reports every problem at
//!   once, each naming its field; [`region`] is its `[region]` part, [`backend`] its
//!   `[backend]` part (and the stores' own configurations, which sluice-store builds on),
//!   [`forward_auth`] its `[forward_auth]` part;
//! - [`policy`]: `[policies.*]` compiled into the policies checks are decided on;
//!   [`rls_rules`]: `[[rls.descriptors]]`, which Envoy descriptors are limited by which policy;
//! - [`compiled`]: the whole compile, settings, policies and RLS rules in one pass
//!   ([`load()`]), which the daemon's start, SIGHUP reload and `--check-config` and
//!   `sluice replay` all go through, so what `--check-config` accepts the daemon accepts, by
//!   construction;
//! - [`parse`]: the value syntaxes (names, durations, modes) the compile step reads.
//!
//! The one check this crate cannot make, whether the Redis client parses a URL, is handed to
//! [`load()`] by whoever links the client ([`backend::UrlCheck`]).

pub mod backend;
mod compile;
pub mod compiled;
mod env;
pub mod envoy;
pub mod envoy_yaml;
pub mod error;
mod extract;
pub mod forward_auth;
pub mod load;
pub mod parse;
pub mod policy;
pub mod region;
pub mod rls_rules;
pub mod schema;
pub mod tls;

pub use backend::{BackendKind, BackendSettings};
pub use compile::{
    ConnectionSettings, ListenAddr, ListenSettings, LogFormat, Settings, TelemetrySettings, compile,
};
pub use compiled::{Compiled, load, load_with_env};
pub use error::{ConfigError, FieldError};
pub use load::{ConfigSource, env_provider};
pub use parse::{format_duration_ms, is_valid_name, parse_duration_ms};
pub use region::RegionSettings;
pub use schema::{
    AdminConfig, BUILTIN_NAME, BUILTIN_TOML, BackendConfig, Config, ForwardAuthConfig,
    ListenConfig, ListenTlsConfig, PolicyConfig, RegionConfig, RemoteConfig, RlsConfig,
    RlsDescriptorConfig, TelemetryConfig, TierConfig, default_socket_path, json_schema,
};
pub use tls::ListenTls;
