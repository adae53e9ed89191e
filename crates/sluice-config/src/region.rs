//! `[region]`: this daemon's region, the global backend of `scope = "global"` policies and
//! the peer regions of `scope = "replicated"` ones (the policies' scopes are checked against
//! them by the service's compile).
//!
//! Compiling refuses every combination that cannot keep its promise, each with the reason: a
//! scope without the backend it needs, an algorithm whose state cannot be merged across
//! regions, a budget that `sync_interval` cannot keep at the policy's rate (the bound is
//! derived in [`crate::backend::replication`]). The region is read once at start: a reload that
//! changes it is refused.

use std::collections::HashSet;

use super::backend::{
    BackendSettings, ClusterStoreConfig, DEFAULT_CONNECT_TIMEOUT, RedisStoreConfig, UrlCheck,
    check_store,
};
use super::error::FieldError;
use super::parse::{is_valid_name, parse_positive_duration};
use super::schema::{BackendConfig, RegionConfig, RemoteConfig};
use super::tls::compile_backend_tls;

/// `[region]`, compiled. The default is a single region.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionSettings {
    /// This daemon's region; empty for a single region.
    pub name: String,
    /// The backend `scope = "global"` policies decide on.
    pub global: Option<BackendSettings>,
    /// The peer regions' backends, by region name.
    pub peers: Vec<(String, BackendSettings)>,
    /// This region's backend as replication writes to it (with peers only).
    pub local: Option<BackendSettings>,
    /// Most (limit, window) totals buffered per peer while it is unreachable.
    pub max_pending: usize,
}

/// A backend in another place (`region.global`, `region.peers[i]`), reached over a link to
/// another region.
fn compile_remote(
    config: &RemoteConfig,
    field: &str,
    backend: &BackendConfig,
    redis_url: Option<UrlCheck>,
    errors: &mut Vec<FieldError>,
) -> Option<BackendSettings> {
    let before = errors.len();
    let prefix = backend.prefix.as_str();
    // `backend.connect_timeout` bounds every backend's connection and the wait before serving
    // (its errors are `[backend]`'s, reported once there).
    let connect_timeout =
        parse_positive_duration(&backend.connect_timeout).unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    let timeout = parse_positive_duration(&config.timeout)
        .map_err(|why| errors.push(FieldError::new(format!("{field}.timeout"), why)))
        .ok();
    let any_rediss = config.url.starts_with("rediss://")
        || config
            .nodes
            .iter()
            .any(|node| node.starts_with("rediss://"));
    let tls = compile_backend_tls(&format!("{field}.tls"), &config.tls, any_rediss, errors);
    let settings = match config.kind.as_str() {
        "redis" if config.url.is_empty() => {
            errors.push(FieldError::new(
                format!("{field}.url"),
                "kind redis needs a url",
            ));
            None
        }
        "cluster" if config.nodes.is_empty() => {
            errors.push(FieldError::new(
                format!("{field}.nodes"),
                "kind cluster needs at least one node",
            ));
            None
        }
        "redis" => Some(BackendSettings::Redis(RedisStoreConfig {
            url: config.url.clone(),
            prefix: prefix.to_owned(),
            timeout: timeout?,
            connect_timeout,
            // On a cross-region link Nagle would hold concurrent commands back a round trip.
            tcp_nodelay: true,
            tls,
            ..RedisStoreConfig::default()
        })),
        "cluster" => Some(BackendSettings::Cluster(ClusterStoreConfig {
            nodes: config.nodes.clone(),
            prefix: prefix.to_owned(),
            timeout: timeout?,
            connect_timeout,
            tls,
            ..ClusterStoreConfig::default()
        })),
        other => {
            errors.push(FieldError::new(
                format!("{field}.kind"),
                format!("{other:?} cannot be shared between regions; expected redis or cluster"),
            ));
            None
        }
    }?;
    // A TLS file already reported is not reported again by the store's own checks.
    if errors.len() == before {
        check_store(&settings, field, redis_url, errors);
    }
    (errors.len() == before).then_some(settings)
}

/// Every problem of `[region]` and of the policies' scopes against it.
pub(crate) fn compile_region(
    region: &RegionConfig,
    backend: &BackendConfig,
    compiled: Option<&BackendSettings>,
    redis_url: Option<UrlCheck>,
    errors: &mut Vec<FieldError>,
) -> Option<RegionSettings> {
    let before = errors.len();
    let single = region.name.is_empty();
    if !single && !is_valid_name(&region.name) {
        errors.push(FieldError::new(
            "region.name",
            "a region name is 1 to 64 of A-Z a-z 0-9 _ . -",
        ));
    }
    if single && (region.global.is_some() || !region.peers.is_empty()) {
        errors.push(FieldError::new(
            "region.name",
            "is required with region.global or region.peers",
        ));
    }
    let global = region.global.as_ref().and_then(|global| {
        if !global.name.is_empty() {
            errors.push(FieldError::new(
                "region.global.name",
                "the global backend has no region name",
            ));
        }
        compile_remote(global, "region.global", backend, redis_url, errors)
    });
    let mut seen = HashSet::new();
    let mut peers = Vec::new();
    for (i, peer) in region.peers.iter().enumerate() {
        let field = format!("region.peers[{i}]");
        if let Some(settings) = compile_remote(peer, &field, backend, redis_url, errors) {
            peers.push((peer.name.clone(), settings));
        }
        if !is_valid_name(&peer.name) {
            errors.push(FieldError::new(
                format!("{field}.name"),
                "a peer needs a region name of 1 to 64 of A-Z a-z 0-9 _ . -",
            ));
        } else if peer.name == region.name {
            errors.push(FieldError::new(
                format!("{field}.name"),
                "a peer cannot be this region",
            ));
        } else if !seen.insert(peer.name.as_str()) {
            errors.push(FieldError::new(
                format!("{field}.name"),
                format!("peer {:?} is listed twice", peer.name),
            ));
        }
    }
    if region.max_pending == 0 {
        errors.push(FieldError::new("region.max_pending", "must be at least 1"));
    }
    if errors.len() > before {
        return None;
    }
    if single {
        return Some(RegionSettings::default());
    }
    // Replication writes this region's counters through a client of its own.
    let local = match backend.kind.as_str() {
        "redis" | "cluster" if !region.peers.is_empty() => compile_remote(
            &RemoteConfig {
                kind: backend.kind.clone(),
                url: backend.url.clone(),
                nodes: backend.nodes.clone(),
                timeout: backend.timeout.clone(),
                ..RemoteConfig::default()
            },
            "backend",
            backend,
            redis_url,
            errors,
        )
        .map(|local| match local {
            BackendSettings::Redis(config) => BackendSettings::Redis(RedisStoreConfig {
                tcp_nodelay: false,
                ..config
            }),
            other => other,
        }),
        // The same master, found through the same sentinels (`[backend]`'s problems are
        // reported there).
        "sentinel" if !region.peers.is_empty() => compiled.cloned(),
        _ => None,
    };
    Some(RegionSettings {
        name: region.name.clone(),
        global,
        peers,
        local,
        max_pending: usize::try_from(region.max_pending).unwrap_or(usize::MAX),
    })
}

#[cfg(test)]
mod tests {
    use figment::providers::Env;

    use crate::ConfigSource;
    use crate::compiled::load_with_env;

    const REGION: &str = r#"
[backend]
kind = "redis"
url = "redis://127.0.0.1:6379"
[region]
name = "us-east"
global = { kind = "redis", url = "redis://10.0.0.5:6379" }
peers = [ { name = "ap-northeast", kind = "redis", url = "redis://10.1.0.5:6379" } ]
"#;

    /// `(field, message)` of every problem of `toml`, or none.
    fn problems(toml: &str) -> Vec<(String, String)> {
        match load_with_env::<()>(
            &ConfigSource::Text {
                name: "t.toml".into(),
                toml: toml.into(),
            },
            Env::raw().only(&[]),
            None,
        ) {
            Ok(_) => Vec::new(),
            Err(err) => err
                .problems
                .into_iter()
                .map(|(_, p)| (p.field, p.message))
                .collect(),
        }
    }

    fn refused(toml: &str, field: &str, why: &str) {
        let got = problems(toml);
        assert!(
            got.iter().any(|(f, m)| f == field && m.contains(why)),
            "expected {field}: …{why}…, got {got:?}"
        );
    }

    #[test]
    fn the_documented_region_example_loads() {
        let toml = format!(
            "{REGION}
[policies.billing]
algorithm = \"fixed_window\"
limit = 100
window = \"60s\"
scope = \"global\"
[policies.public]
algorithm = \"sliding_window_counter\"
limit = 1000
window = \"60s\"
scope = \"replicated\"
sync_interval = \"100ms\"
overshoot_budget = 0.05
"
        );
        assert_eq!(problems(&toml), Vec::new());
    }

    #[test]
    fn algorithms_that_cannot_merge_are_refused_with_the_reason() {
        for (algorithm, why) in [
            ("token_bucket", "do not commute"),
            ("gcra", "do not commute"),
            ("leaky_bucket", "do not commute"),
            ("sliding_window_log", "one entry per admitted request"),
        ] {
            let toml = format!(
                "{REGION}\n[policies.p]\nalgorithm = \"{algorithm}\"\nlimit = 1000\nwindow = \"60s\"\nscope = \"replicated\"\n"
            );
            refused(&toml, "policies.p.algorithm", why);
        }
    }

    #[test]
    fn a_budget_the_sync_interval_cannot_keep_is_refused() {
        // 2 · 500ms / 5s = 0.2 > 0.05.
        let slow = format!(
            "{REGION}\n[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow = \"5s\"\nscope = \"replicated\"\nsync_interval = \"500ms\"\n"
        );
        refused(
            &slow,
            "policies.p.overshoot_budget",
            "cannot be kept at sync_interval 500ms",
        );
        // 0.05 · 10 = 0.5 request: less than one may be unacknowledged.
        let tiny = format!(
            "{REGION}\n[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"60s\"\nscope = \"replicated\"\n"
        );
        refused(&tiny, "policies.p.overshoot_budget", "at least 1 is needed");
        // A tier's own limit is held to the same bound.
        let tier = format!(
            "{REGION}\n[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow = \"60s\"\nscope = \"replicated\"\ntiers = {{ free = {{ limit = 5 }} }}\n"
        );
        refused(&tier, "policies.p.overshoot_budget", "(tier free)");
        for bad in ["0", "1.5", "-0.1"] {
            let toml = format!(
                "{REGION}\n[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow = \"60s\"\nscope = \"replicated\"\novershoot_budget = {bad}\n"
            );
            refused(&toml, "policies.p.overshoot_budget", "not a fraction");
        }
    }

    #[test]
    fn a_scope_without_its_backend_is_refused() {
        let policy = |scope: &str| {
            format!(
                "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow = \"60s\"\nscope = \"{scope}\"\n"
            )
        };
        refused(&policy("global"), "policies.p.scope", "needs region.global");
        refused(
            &policy("replicated"),
            "policies.p.scope",
            "at least one region.peers",
        );
        refused(&policy("everywhere"), "policies.p.scope", "unknown scope");
        // Peers write into this region's backend: process memory cannot be shared.
        let memory = format!(
            "{}\n{}",
            REGION.replace(
                "kind = \"redis\"\nurl = \"redis://127.0.0.1:6379\"",
                "kind = \"memory\""
            ),
            policy("replicated")
        );
        refused(
            &memory,
            "policies.p.scope",
            "backend.kind redis, cluster or sentinel",
        );
        let stray = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1s\"\nsync_interval = \"100ms\"\n";
        refused(stray, "policies.p.sync_interval", "only applies to scope");
    }

    #[test]
    fn replication_writes_to_the_master_the_sentinels_name() {
        let toml = REGION.replace(
            "kind = \"redis\"\nurl = \"redis://127.0.0.1:6379\"",
            "kind = \"sentinel\"\nsentinels = [\"redis://10.0.0.1:26379\"]\nmaster = \"m\"\npassword = \"pw\"",
        ) + "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow = \"60s\"\nscope = \"replicated\"\n";
        let settings = load_with_env::<()>(
            &ConfigSource::Text {
                name: "t.toml".into(),
                toml,
            },
            Env::raw().only(&[]),
            None,
        )
        .unwrap()
        .settings;
        let Some(crate::BackendSettings::Sentinel(local)) = settings.region.local else {
            panic!("replication writes elsewhere: {:?}", settings.region.local);
        };
        assert_eq!(local.master, "m");
        assert_eq!(local.password.as_deref(), Some("pw"));
    }

    #[test]
    fn a_bad_region_section_names_its_field() {
        refused(
            "[region]\npeers = [ { name = \"b\", url = \"redis://x:1\" } ]\n",
            "region.name",
            "is required",
        );
        refused(
            "[region]\nname = \"a\"\npeers = [ { name = \"a\", url = \"redis://x:1\" } ]\n",
            "region.peers[0].name",
            "cannot be this region",
        );
        refused(
            "[region]\nname = \"a\"\npeers = [ { name = \"b\", kind = \"memory\" } ]\n",
            "region.peers[0].kind",
            "cannot be shared",
        );
        refused(
            "[region]\nname = \"a\"\nglobal = { kind = \"redis\" }\n",
            "region.global.url",
            "needs a url",
        );
    }
}
