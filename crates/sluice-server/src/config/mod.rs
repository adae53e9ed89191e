//! The daemon's configuration, raw in, typed out.
//!
//! - [`schema`]: the TOML tree as written (every key a string or number, defaults filled in);
//! - [`load`]: where it comes from (defaults, the file, `SLUICE_` env vars, through figment);
//! - [`compile()`]: the one step that turns it into [`Settings`] or reports every problem at
//!   once, each naming its field; [`region`] is its `[region]` part;
//! - [`parse`]: the value syntaxes (names, durations, modes) the compile step reads.
//!
//! A leaf: it knows nothing of policies as checks decide on them or of the RLS rules. The
//! service compiles those from the same tree in the same pass ([`load_with`]), and start,
//! SIGHUP reload and `--check-config` all go through that one load, so what
//! `--check-config` accepts the daemon accepts, by construction.

mod backend;
mod compile;
pub mod envoy;
pub mod error;
mod extract;
pub mod forward_auth;
pub mod load;
pub mod parse;
pub mod region;
pub mod schema;

pub use backend::{BackendKind, BackendSettings};
pub use compile::{
    ConnectionSettings, ListenAddr, ListenSettings, LogFormat, Settings, TelemetrySettings, compile,
};
pub use error::{ConfigError, FieldError};
pub use load::{ConfigSource, env_provider, load, load_with, load_with_env};
pub use parse::{format_duration_ms, is_valid_name, parse_duration_ms};
pub use region::RegionSettings;
pub use schema::{
    AdminConfig, BUILTIN_NAME, BUILTIN_TOML, BackendConfig, Config, ForwardAuthConfig,
    ListenConfig, PolicyConfig, RegionConfig, RemoteConfig, RlsConfig, RlsDescriptorConfig,
    TelemetryConfig, TierConfig, default_socket_path,
};
