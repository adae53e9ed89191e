//! `[region]` (SPEC "Multi-region"): this daemon's region, the global backend of
//! `scope = "global"` policies and the peer regions of `scope = "replicated"` ones.
//!
//! Validation refuses, at start and on reload, every combination that cannot keep its promise,
//! each with the reason: a scope without the backend it needs, an algorithm whose state cannot
//! be merged across regions, a budget that `sync_interval` cannot keep at the policy's rate
//! (the bound is derived in `sluice_store::replicated`). Building turns the section into the
//! stores the limiter routes to; the region itself is read once at start.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_store::replicated::{self, DEFAULT_MAX_PENDING};
use sluice_store::{
    ClusterStore, ClusterStoreConfig, PeerBackend, RedisStore, RedisStoreConfig, ReplicatedStore,
    ReplicatedStoreConfig, SharedBackend, Store,
};

use crate::clock::Clock;
use crate::config::{BackendConfig, FieldError, is_valid_name, parse_duration_ms};
use crate::policy::{PolicySet, Scope};

/// Default timeout of calls to the global backend and to peers: a cross-region round trip.
pub const DEFAULT_REMOTE_TIMEOUT: &str = "1s";

/// `[region]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RemoteConfig {
    pub name: String,
    pub kind: String,
    pub url: String,
    pub nodes: Vec<String>,
    /// Bound on one call. Default 1s (a check on the global backend waits this long at most;
    /// a delivery to a peer never delays a check).
    pub timeout: String,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            name: String::new(),
            kind: "redis".to_owned(),
            url: String::new(),
            nodes: Vec::new(),
            timeout: DEFAULT_REMOTE_TIMEOUT.to_owned(),
        }
    }
}

impl RemoteConfig {
    /// `timeout`; the validated config always parses.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(parse_duration_ms(&self.timeout).unwrap_or(1000).max(1))
    }

    fn validate(&self, field: &str, errors: &mut Vec<FieldError>) {
        match self.kind.as_str() {
            "redis" if self.url.is_empty() => errors.push(FieldError::new(
                format!("{field}.url"),
                "kind redis needs a url",
            )),
            "cluster" if self.nodes.is_empty() => errors.push(FieldError::new(
                format!("{field}.nodes"),
                "kind cluster needs at least one node",
            )),
            "redis" | "cluster" => {}
            other => errors.push(FieldError::new(
                format!("{field}.kind"),
                format!("{other:?} cannot be shared between regions; expected redis or cluster"),
            )),
        }
        match parse_duration_ms(&self.timeout) {
            Ok(0) => errors.push(FieldError::new(
                format!("{field}.timeout"),
                "must be at least 1ms",
            )),
            Ok(_) => {}
            Err(why) => errors.push(FieldError::new(format!("{field}.timeout"), why)),
        }
    }
}

/// Every problem of `[region]` and of the policies' scopes against it.
pub fn validate(
    region: &RegionConfig,
    backend: &BackendConfig,
    policies: Option<&PolicySet>,
    errors: &mut Vec<FieldError>,
) {
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
    if let Some(global) = &region.global {
        global.validate("region.global", errors);
        if !global.name.is_empty() {
            errors.push(FieldError::new(
                "region.global.name",
                "the global backend has no region name",
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, peer) in region.peers.iter().enumerate() {
        let field = format!("region.peers[{i}]");
        peer.validate(&field, errors);
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
    let Some(policies) = policies else { return };
    let mut names: Vec<_> = policies.iter().collect();
    names.sort_by(|a, b| a.name.cmp(&b.name));
    for policy in names {
        let field = |key: &str| format!("policies.{}.{key}", policy.name);
        match policy.scope {
            Scope::Local => {}
            Scope::Global => {
                if region.global.is_none() {
                    errors.push(FieldError::new(
                        field("scope"),
                        "scope = \"global\" needs region.global (the backend every region decides on)",
                    ));
                }
            }
            Scope::Replicated => {
                if single || region.peers.is_empty() {
                    errors.push(FieldError::new(
                        field("scope"),
                        "scope = \"replicated\" needs region.name and at least one region.peers entry",
                    ));
                    continue;
                }
                if backend.kind == "memory" {
                    errors.push(FieldError::new(
                        field("scope"),
                        "scope = \"replicated\" needs backend.kind redis or cluster: peer regions \
                         write this region's counters into its backend",
                    ));
                }
                let algorithm = policy.base.params.algorithm;
                if let Some(why) = replicated::unreplicable(algorithm) {
                    errors.push(FieldError::new(
                        field("algorithm"),
                        format!("{} cannot be replicated: {why}", algorithm.as_str()),
                    ));
                    continue;
                }
                let Some(replication) = policy.replication else {
                    continue;
                };
                let peers = region.peers.len();
                let mut limits = vec![(String::new(), policy.base.params)];
                let mut tiers: Vec<_> = policy.tiers.iter().collect();
                tiers.sort_by(|a, b| a.0.cmp(b.0));
                limits.extend(
                    tiers
                        .into_iter()
                        .map(|(t, l)| (format!(" (tier {t})"), l.params)),
                );
                for (tier, params) in limits {
                    if let Err(why) = replicated::check_budget(
                        params.limit,
                        params.window_ms,
                        &replication,
                        peers,
                    ) {
                        errors.push(FieldError::new(
                            field("overshoot_budget"),
                            format!("{why}{tier}"),
                        ));
                        break;
                    }
                }
            }
        }
    }
}

/// The stores of the non-local scopes.
#[derive(Debug, Clone, Default)]
pub struct RegionStores {
    /// `scope = "global"`, with its call timeout.
    pub global: Option<(Arc<dyn Store>, Duration)>,
    /// `scope = "replicated"`.
    pub replicated: Option<ReplicatedStore>,
}

/// A backend shared between regions; `cross_region`: reached over a link to another region.
fn shared(
    config: &RemoteConfig,
    prefix: &str,
    cross_region: bool,
) -> Result<SharedBackend, FieldError> {
    let timeout = config.timeout();
    let built = match config.kind.as_str() {
        "cluster" => ClusterStore::new(ClusterStoreConfig {
            nodes: config.nodes.clone(),
            prefix: prefix.to_owned(),
            timeout,
            ..ClusterStoreConfig::default()
        })
        .map(SharedBackend::Cluster),
        _ => RedisStore::new(RedisStoreConfig {
            url: config.url.clone(),
            prefix: prefix.to_owned(),
            timeout,
            // On a cross-region link Nagle would hold concurrent commands back a round trip.
            tcp_nodelay: cross_region,
            ..RedisStoreConfig::default()
        })
        .map(SharedBackend::Redis),
    };
    built.map_err(|e| FieldError::new("region", e.to_string()))
}

/// Builds the global and replicated stores `config` asks for and starts replication, reading
/// time from `clock`. Must run inside a Tokio runtime.
pub fn build(
    region: &RegionConfig,
    backend: &BackendConfig,
    clock: Arc<dyn Clock>,
) -> Result<RegionStores, FieldError> {
    let mut stores = RegionStores::default();
    if region.name.is_empty() {
        return Ok(stores);
    }
    if let Some(global) = &region.global {
        let store: Arc<dyn Store> = match shared(global, &backend.prefix, true)? {
            SharedBackend::Redis(s) => Arc::new(s),
            SharedBackend::Cluster(s) => Arc::new(s),
        };
        stores.global = Some((store, global.timeout()));
    }
    if !region.peers.is_empty() && matches!(backend.kind.as_str(), "redis" | "cluster") {
        let local = shared(
            &RemoteConfig {
                kind: backend.kind.clone(),
                url: backend.url.clone(),
                nodes: backend.nodes.clone(),
                timeout: backend.timeout.clone(),
                ..RemoteConfig::default()
            },
            &backend.prefix,
            false,
        )?;
        let peers = region
            .peers
            .iter()
            .map(|peer| {
                Ok(PeerBackend {
                    name: peer.name.clone(),
                    backend: shared(peer, &backend.prefix, true)?,
                })
            })
            .collect::<Result<Vec<_>, FieldError>>()?;
        let store = ReplicatedStore::new(ReplicatedStoreConfig {
            region: region.name.clone(),
            local,
            peers,
            max_pending: usize::try_from(region.max_pending).unwrap_or(usize::MAX),
        });
        store.start(Arc::new(move || clock.now_ms()));
        stores.replicated = Some(store);
    }
    Ok(stores)
}

#[cfg(test)]
mod tests {
    use figment::providers::Env;

    use crate::config::{ConfigSource, load_with_env};

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
        match load_with_env(
            &ConfigSource::Text {
                name: "t.toml".into(),
                toml: toml.into(),
            },
            Env::raw().only(&[]),
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
    fn the_spec_example_loads() {
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
        refused(&memory, "policies.p.scope", "backend.kind redis or cluster");
        let stray = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1s\"\nsync_interval = \"100ms\"\n";
        refused(stray, "policies.p.sync_interval", "only applies to scope");
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
