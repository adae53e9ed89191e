//! Where the configuration comes from: figment merges the built-in defaults, the TOML file
//! (or the built-in policies) and `SLUICE_` environment variables, then [`compile`] turns the
//! result into [`Settings`], beside the policies' compile of the same tree
//! ([`crate::compiled`]); every problem of both is reported at once, with the source that set
//! the value.

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};

use super::backend::UrlCheck;
use super::compile::{Settings, compile};
use super::env::EnvOverlay;
use super::error::{ConfigError, FieldError};
use super::extract::extract;
use super::schema::{BUILTIN_NAME, BUILTIN_TOML, Config};
use std::path::PathBuf;

/// Top-level sections env vars may set. Anything else under `SLUICE_` (such as
/// `SLUICE_SOCKET` or the CLI's `SLUICE_ADMIN_TOKEN`) is not config and must not reach the
/// strict deserializer.
const SECTIONS: [&str; 8] = [
    "listen",
    "backend",
    "telemetry",
    "admin",
    "policies",
    "rls",
    "region",
    "forward_auth",
];

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
    /// How errors and the startup line name this source.
    pub fn name(&self) -> String {
        match self {
            ConfigSource::Builtin => BUILTIN_NAME.to_owned(),
            ConfigSource::File(path) => path.display().to_string(),
            ConfigSource::Text { name, .. } => name.clone(),
        }
    }
}

/// Loads `source` (with `env` over it) and compiles it twice in one pass: into [`Settings`]
/// (Redis URLs checked by `redis_url`), and by `also`, the policies' compile of the same tree
/// ([`crate::load`]). Every problem of either is reported at once, each with the source that
/// set it.
pub(crate) fn load_with<T>(
    source: &ConfigSource,
    env: Env,
    redis_url: Option<UrlCheck>,
    also: impl FnOnce(&Config) -> Result<T, Vec<FieldError>>,
) -> Result<(Settings, T), ConfigError> {
    let name = source.name();
    let base = Figment::from(Serialized::defaults(Config::default()));
    let below = match source {
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
    };
    // The variables reach the policies and tiers of the layers below by name (see env.rs).
    let names = EnvOverlay::names_of(below.find_value("policies").ok().as_ref());
    let overlay = EnvOverlay::new(env, names);
    let set_by_env = overlay.fields();
    let figment = below.merge(overlay);
    let mut extracted = extract(&figment).map_err(|err| from_figment(*err, &name))?;
    // The YAML of `rls.envoy_config` adds its domains and their policies to the tree, so
    // both compiles below see them.
    let dir = match source {
        ConfigSource::File(path) => path.parent(),
        _ => None,
    };
    let yaml = crate::envoy::attach(&mut extracted.config, dir);
    let errors: Vec<FieldError> = match (
        compile(&extracted.config, redis_url),
        also(&extracted.config),
    ) {
        (Ok(mut settings), Ok(theirs)) if extracted.problems.is_empty() && yaml.is_empty() => {
            settings.source = name;
            return Ok((settings, theirs));
        }
        // A field refused by the extraction reached the compile step unset: it is reported
        // once, as what it was, not again as missing.
        (ours, theirs) => yaml
            .into_iter()
            .chain(ours.err().unwrap_or_default())
            .chain(theirs.err().unwrap_or_default())
            .filter(|error| !extracted.refused(&error.field))
            .collect(),
    };
    let problems = extracted
        .problems
        .into_iter()
        .chain(errors)
        .map(|error| (source_of(&set_by_env, &error.field, &name), error))
        .collect();
    Err(ConfigError { problems })
}

/// `SLUICE_SECTION__KEY=value`, limited to the config's own sections.
pub fn env_provider() -> Env {
    // Not split at `__` here: EnvOverlay splits, and resolves policy and tier names.
    Env::prefixed("SLUICE_")
        .lowercase(false)
        .filter(is_config_key)
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

/// What set `field`: the env var that set it or a table above it, else the file. (figment's
/// own metadata cannot tell: a policy name may hold a `.`, which it reads as a level.)
fn source_of(set_by_env: &[(String, String)], field: &str, file: &str) -> String {
    set_by_env
        .iter()
        .find(|(path, _)| {
            field == path
                || field.starts_with(&format!("{path}."))
                || path.starts_with(&format!("{field}."))
        })
        .map_or_else(|| file.to_owned(), |(_, var)| format!("env {var}"))
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

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment's Jail closures return its error type.
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::{BackendKind, ListenAddr};

    /// The whole load (the settings of this module and the policies, in one pass), so these
    /// tests see every problem a file can have. No Redis client checks URLs here: that check
    /// is the store's, tested with the daemon (`sluiced --check-config`).
    fn load_with_env(source: &ConfigSource, env: Env) -> Result<Settings, ConfigError> {
        crate::compiled::load_with_env::<()>(source, env, None).map(|compiled| compiled.settings)
    }

    fn load(source: &ConfigSource) -> Result<Settings, ConfigError> {
        load_with_env(source, env_provider())
    }

    fn text(toml: &str) -> ConfigSource {
        ConfigSource::Text {
            name: "t.toml".to_owned(),
            toml: toml.to_owned(),
        }
    }

    /// A policy, for configs about something else (a config without policies is refused).
    const POLICY: &str = "[policies.p]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\n";

    fn fields(err: &ConfigError) -> Vec<&str> {
        err.problems.iter().map(|(_, p)| p.field.as_str()).collect()
    }

    #[test]
    fn the_builtin_policies_load() {
        let settings = load_with_env(&ConfigSource::Builtin, Env::raw().only(&[])).unwrap();
        assert_eq!(
            settings.policy_configs.keys().collect::<Vec<_>>(),
            vec!["admin", "internal", "public"]
        );
        let public = &settings.policy_configs["public"];
        assert_eq!(public.algorithm.as_deref(), Some("token_bucket"));
        assert_eq!(public.tiers["pro"].burst, Some(2000));
        assert_eq!(
            settings.policy_configs["internal"].algorithm.as_deref(),
            Some("sliding_window_counter")
        );
        assert_eq!(
            settings.policy_configs["admin"].algorithm.as_deref(),
            Some("fixed_window")
        );
        assert_eq!(settings.backend.kind(), BackendKind::Memory);
        assert_eq!(settings.listen.http, "127.0.0.1:8080".parse().ok());
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
    fn unknown_fields_wrong_types_and_bad_values_are_reported_together() {
        let err = load_with_env(
            &text(
                r#"
[listen]
htp = "127.0.0.1:1"
[policies.a]
algorithm = "token_bukcet"
limit = 0
window = "10 sec"
[policies.b]
algorithm = "gcra"
limit = "ten"
window = "1s"
brust = 3
"#,
            ),
            Env::raw().only(&[]),
        )
        .unwrap_err();
        let shown = err.to_string();
        let mut got = fields(&err);
        got.sort_unstable();
        assert_eq!(
            got,
            vec![
                "listen.htp",
                "policies.a.algorithm",
                "policies.a.limit",
                "policies.a.window",
                "policies.b.brust",
                "policies.b.limit",
            ],
            "{shown}"
        );
        assert!(
            shown.contains("t.toml: policies.b.brust: unknown field; did you mean \"burst\"?"),
            "{shown}"
        );
        assert!(!shown.contains('`'), "{shown}");
    }

    #[test]
    fn listen_grpc_takes_an_address_or_a_unix_socket() {
        let load = |grpc: &str| {
            load_with_env(
                &text(&format!("[listen]\ngrpc = {grpc:?}\n{POLICY}")),
                Env::raw().only(&[]),
            )
        };
        let unix = load("unix:/run/sluice/rls.sock").unwrap();
        assert_eq!(
            unix.listen.grpc,
            Some(ListenAddr::Unix(Path::new("/run/sluice/rls.sock").into()))
        );
        let tcp = load("127.0.0.1:8081").unwrap();
        assert!(matches!(tcp.listen.grpc, Some(ListenAddr::Tcp(_))));
        for bad in ["unix:", "localhost", "8081"] {
            let err = load(bad).unwrap_err();
            assert_eq!(fields(&err), vec!["listen.grpc"], "{bad}: {err}");
        }
    }

    #[test]
    fn listen_resp_is_off_by_default_and_takes_an_address_or_a_unix_socket() {
        let load = |listen: &str| {
            load_with_env(
                &text(&format!("[listen]\n{listen}\n{POLICY}")),
                Env::raw().only(&[]),
            )
        };
        assert_eq!(load("").unwrap().listen.resp, None);
        let unix = load(r#"resp = "unix:/run/sluice/resp.sock""#).unwrap();
        assert_eq!(
            unix.listen.resp,
            Some(ListenAddr::Unix(Path::new("/run/sluice/resp.sock").into()))
        );
        let tcp = load(r#"resp = "127.0.0.1:6380""#).unwrap();
        assert!(matches!(tcp.listen.resp, Some(ListenAddr::Tcp(_))));
        for bad in [
            r#"resp = "unix:""#,
            r#"resp = "localhost""#,
            r#"resp = "unix:/tmp/a.sock"
unix = "/tmp/a.sock""#,
            r#"resp = "unix:/tmp/a.sock"
grpc = "unix:/tmp/a.sock""#,
        ] {
            let err = load(bad).unwrap_err();
            assert_eq!(fields(&err), vec!["listen.resp"], "{bad}: {err}");
        }
    }

    #[test]
    fn burst_defaults_to_limit_and_tier_burst_to_tier_limit() {
        let settings = crate::compiled::load_with_env::<()>(
            &text(
                "[policies.p]\nalgorithm = \"token_bucket\"\nlimit = 7\nwindow = \"1s\"\ntiers = { a = { limit = 3 }, b = { burst = 9 } }\n",
            ),
            Env::raw().only(&[]),
            None,
        )
        .unwrap();
        let set = &settings.policies;
        let p = set.get("p").unwrap();
        assert_eq!((p.base.params.limit, p.base.params.burst), (7, 7));
        let a = p.limit_for(Some("a")).params;
        assert_eq!((a.limit, a.burst), (3, 3));
        let b = p.limit_for(Some("b")).params;
        assert_eq!((b.limit, b.burst), (7, 9));
        assert_eq!(p.limit_for(Some("zzz")).params, p.base.params);
    }

    #[test]
    fn candidates_default_to_the_policy_and_name_every_bad_field() {
        let compiled = crate::compiled::load_with_env::<()>(
            &text(concat!(
                "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"60s\"\n",
                "tiers = { pro = { limit = 1000 }, free = { limit = 10 } }\n",
                "[policies.p.candidate]\nlimit = 150\n",
                "tiers = { pro = { limit = 1500, algorithm = \"gcra\", window = \"1m\" } }\n",
            )),
            Env::raw().only(&[]),
            None,
        )
        .unwrap();
        let p = compiled.policies.get("p").unwrap();
        let base = p.base.candidate.unwrap();
        assert_eq!(
            (base.algorithm, base.limit, base.window_ms, base.burst),
            (sluice_core::Algorithm::FixedWindow, 150, 60_000, 150)
        );
        let pro = p.limit_for(Some("pro")).candidate.unwrap();
        assert_eq!(
            (pro.algorithm, pro.limit, pro.burst),
            (sluice_core::Algorithm::Gcra, 1500, 1500)
        );
        assert_eq!(p.limit_for(Some("free")).candidate, None);
        // A tier the policy does not name is decided as tier none: so is its candidate.
        assert_eq!(p.limit_for(Some("zzz")).candidate, Some(base));

        let err = load(&text(concat!(
            "[policies.p]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\ntiers = { pro = { limit = 2 } }\n",
            "[policies.p.candidate]\nlimit = 0\nalgorithm = \"fixed\"\nwindow = \"soon\"\n",
            "tiers = { gold = { limit = 3 }, pro = {} }\n",
            "[policies.r]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\nscope = \"replicated\"\n",
            "[policies.r.candidate]\nlimit = 2\n",
            "[policies.e]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\n[policies.e.candidate]\nlimt = 2\n",
            "[policies.t]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\ntiers = { none = { limit = 2 }, other = { limit = 3 } }\n",
        )))
        .unwrap_err();
        let fields = fields(&err);
        for field in [
            "policies.p.candidate.limit",
            "policies.p.candidate.algorithm",
            "policies.p.candidate.window",
            "policies.p.candidate.tiers.gold",
            "policies.p.candidate.tiers.pro.limit",
            "policies.e.candidate.limt",
            "policies.r.candidate.limit",
            "policies.t.tiers.none",
            "policies.t.tiers.other",
        ] {
            assert!(fields.contains(&field), "{field} not in {err}");
        }
        assert!(err.to_string().contains("its tiers are pro"), "{err}");
        assert!(err.to_string().contains("did you mean \"limit\""), "{err}");
    }

    #[test]
    fn env_overrides_the_file_and_foreign_vars_are_ignored() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("SLUICE_POLICIES__PUBLIC__LIMIT", "250");
            jail.set_env("SLUICE_BACKEND__KIND", "redis");
            jail.set_env("SLUICE_BACKEND__TIMEOUT", "20ms");
            jail.set_env("SLUICE_SOCKET", "/tmp/from-env.sock");
            jail.set_env("SLUICE_ADMIN_TOKEN", "cli-only");
            jail.set_env("SLUICE_UNRELATED", "x");
            let settings = load(&ConfigSource::Builtin).map_err(|e| e.to_string())?;
            assert_eq!(settings.policy_configs["public"].limit, Some(250));
            assert_eq!(
                settings.backend.timeout(),
                Some(std::time::Duration::from_millis(20))
            );
            assert_eq!(
                settings.listen.unix,
                Some(PathBuf::from("/tmp/from-env.sock"))
            );
            assert_eq!(settings.admin_token, None);
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

    #[test]
    fn a_sentinel_backend_takes_the_master_password_from_env_and_never_shows_it() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("SLUICE_BACKEND__PASSWORD", "hunter2-master");
            let toml = format!(
                "[backend]\nkind = \"sentinel\"\nsentinels = [\"redis://:s3nt@10.0.0.1:26379\", \"redis://10.0.0.2:26379\"]\nmaster = \"mymaster\"\nusername = \"app\"\n{POLICY}"
            );
            let settings = load(&text(&toml)).map_err(|e| e.to_string())?;
            let crate::BackendSettings::Sentinel(config) = &settings.backend else {
                panic!("not a sentinel backend: {:?}", settings.backend);
            };
            assert_eq!(config.password.as_deref(), Some("hunter2-master"));
            assert_eq!(config.username.as_deref(), Some("app"));
            assert_eq!(config.master, "mymaster");
            let shown = format!("{settings:?} {}", settings.backend.address());
            assert!(!shown.contains("hunter2-master"), "{shown}");
            assert!(!shown.contains("s3nt"), "{shown}");
            Ok(())
        });
    }

    #[test]
    fn every_sentinel_problem_is_named_at_once() {
        let err = load_with_env(
            &text(&format!(
                "[backend]\nkind = \"sentinel\"\nsentinels = [\"redis://10.0.0.1:26379\", \"redis://:pw-in-url@h:port\"]\nmaster = \"\"\npassword = \"hunter2\"\n{POLICY}"
            )),
            Env::raw().only(&[]),
        )
        .unwrap_err();
        assert_eq!(
            fields(&err),
            ["backend.master", "backend.sentinels[1]"],
            "{err}"
        );
        let none = load_with_env(
            &text(&format!("[backend]\nkind = \"sentinel\"\n{POLICY}")),
            Env::raw().only(&[]),
        )
        .unwrap_err();
        assert_eq!(fields(&none), ["backend.sentinels", "backend.master"]);
        // Sentinel's keys on another kind would silently not be used.
        let redis = load_with_env(
            &text(&format!(
                "[backend]\nkind = \"redis\"\nurl = \"redis://h:1\"\npassword = \"hunter2\"\nmaster = \"m\"\n{POLICY}"
            )),
            Env::raw().only(&[]),
        )
        .unwrap_err();
        assert_eq!(fields(&redis), ["backend.master", "backend.password"]);
        for text in [err.to_string(), none.to_string(), redis.to_string()] {
            assert!(!text.contains("hunter2"), "{text}");
            assert!(!text.contains("pw-in-url"), "{text}");
        }
    }
}
