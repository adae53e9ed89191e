//! What a replay is given: the policies (built by the caller from a compiled config; this
//! crate never reads a config file) and the options of `sluice replay`.

use std::collections::BTreeMap;

/// One limit: algorithm, limit, window and burst, exactly as the daemon enforces it.
pub type LimitSpec = sluice_core::Params;

/// The tier label of a line naming no tier, and the key of a policy's own limit in
/// [`ReplayPolicy::candidates`].
pub const NO_TIER: &str = "none";
/// The tier label of a line naming a tier its policy does not have (replayed against the
/// policy's own limit, as the daemon does and labels its metrics).
pub const OTHER_TIER: &str = "other";

/// Most limits a policy or tier stacks (`limits = [...]`), as the daemon's config allows.
pub const MAX_STACKED: usize = 4;

/// One limit of a stacked policy or tier, and the label the daemon names it by in headers
/// (`<policy>.<window>`), which the report names it by too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackedLimit {
    pub label: String,
    pub params: LimitSpec,
}

/// A policy as replayed: its own limit, its tiers' limits, their stacked limits, and the
/// candidate limits judged beside them with `--candidate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayPolicy {
    pub name: String,
    /// The limit of lines naming no tier, or a tier the policy does not have.
    pub base: LimitSpec,
    /// The limit of each tier, by tier name.
    pub tiers: BTreeMap<String, LimitSpec>,
    /// Candidate limits by tier name, `none` (= [`NO_TIER`]) for the policy's own limit (which
    /// also judges lines of unknown tiers). A tier without an entry has no candidate: the
    /// caller resolves any defaults (a tier's candidate inheriting the policy's) beforehand.
    pub candidates: BTreeMap<String, LimitSpec>,
    /// Stacked limits by tier name, `none` for the policy's own (which also judges lines of
    /// unknown tiers): every limit of that tier (2 to [`MAX_STACKED`]), the first being its
    /// limit in `base` or `tiers`. A tier without an entry has its one limit.
    pub stacks: BTreeMap<String, Vec<StackedLimit>>,
    /// `usage = true`: each line is a check that asks (allowed while every limit has at least
    /// 1 left, consuming nothing) and, when allowed, a charge of its cost afterwards (the
    /// balance may go into debt), as a gateway in front of the daemon does.
    pub usage: bool,
}

impl ReplayPolicy {
    /// A policy with its own limit only.
    pub fn new(name: impl Into<String>, base: LimitSpec) -> Self {
        ReplayPolicy {
            name: name.into(),
            base,
            tiers: BTreeMap::new(),
            candidates: BTreeMap::new(),
            stacks: BTreeMap::new(),
            usage: false,
        }
    }
}

/// The access-log format of the input files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// nginx: `combined` when `log_format` is `None`, else that `log_format` string.
    Nginx { log_format: Option<String> },
    /// Envoy's default text access-log format.
    Envoy,
    /// One JSON object per line, the time in `time_field` (default: `time`, else `timestamp`).
    Json { time_field: Option<String> },
    /// `timestamp,key[,policy,tier,cost]`.
    Csv,
}

impl Format {
    /// nginx `combined`.
    pub fn nginx_combined() -> Self {
        Format::Nginx { log_format: None }
    }

    /// The `--key` expression used when none is given: `ip:$remote_addr` for nginx and JSON
    /// (the field nginx's `escape=json` log formats name after the variable),
    /// `ip:$x_forwarded_for` for Envoy, `$key` for CSV.
    pub fn default_key(&self) -> &'static str {
        match self {
            Format::Nginx { .. } | Format::Json { .. } => "ip:$remote_addr",
            Format::Envoy => "ip:$x_forwarded_for",
            Format::Csv => "$key",
        }
    }
}

/// The options of one replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOptions {
    pub format: Format,
    /// The `--key` expression; `None`: [`Format::default_key`].
    pub key: Option<String>,
    /// `--policy`: replay every line through this policy only (a CSV `policy` value wins).
    pub policy: Option<String>,
    /// `--tier`: the expression giving each line's tier (a CSV `tier` value wins).
    pub tier: Option<String>,
    /// `--candidate`: judge each (policy, tier)'s candidate limit beside its limit.
    pub candidate: bool,
    /// `--cost`: the expression giving each line's cost (a whole number; default: the CSV
    /// `cost` column, else 1).
    pub cost: Option<String>,
    /// `--max-reject`: the share of requests the suggested limit may reject (0..=1). `None`:
    /// the suggestion follows the keys rule alone (see the crate doc).
    pub max_reject: Option<f64>,
    /// Distinct keys tracked at most; a line with a new key past it is unparsed ("key table
    /// full"), so memory stays bounded whatever the log holds.
    pub max_keys: usize,
    /// Show a progress bar on stderr (only ever drawn when stderr is a terminal).
    pub progress: bool,
}

/// [`ReplayOptions::max_keys`] when not set: ten million keys, a few GiB at most.
pub const DEFAULT_MAX_KEYS: usize = 10_000_000;

impl ReplayOptions {
    /// Defaults for `format`: its default key, every policy, no tier, no cost expression, no
    /// candidate, the keys rule alone, no progress bar.
    pub fn new(format: Format) -> Self {
        ReplayOptions {
            format,
            key: None,
            policy: None,
            tier: None,
            cost: None,
            candidate: false,
            max_reject: None,
            max_keys: DEFAULT_MAX_KEYS,
            progress: false,
        }
    }
}
