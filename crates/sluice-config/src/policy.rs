//! Policies as the limiter uses them: compiled once from the config into immutable, validated
//! parameters (and the header values they always produce), so the check path only looks up.
//! A reload builds a new `PolicySet` and swaps it in whole.
//!
//! Each policy carries what its runtime records its checks into, reached by slot rather than
//! by label ([`Meters`]): the daemon attaches its metric series, a tool that records nothing
//! attaches `()`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ahash::RandomState;

use http::HeaderValue;
use sluice_api::{LimitView, ParamsView, PoliciesResponse, PolicyView};
use sluice_core::{Algorithm, Params};

use crate::backend::replication::Replication;
use crate::error::FieldError;
use crate::parse::{format_duration_ms, is_valid_name};
use crate::schema::PolicyConfig;

mod candidates;
mod fields;
mod header;
mod scope;
mod stack;
mod usage;
mod window;

use self::candidates::{Candidates, compile_candidates};
use self::fields::field;
use self::header::policy_header;
pub use self::header::window_secs;
use self::scope::compile_scope;
pub use self::scope::{DEFAULT_OVERSHOOT_BUDGET, DEFAULT_SYNC_INTERVAL_MS, Scope};
pub use self::stack::{MAX_STACKED, Stacked};
use self::stack::{check_stack_fits, compile_stack};
use self::usage::check_usage;
use self::window::compile_window;

/// The maps the check path looks names up in: aHash, since SipHash over every policy, tier and
/// endpoint name was a visible share of a check's CPU (the keys are config, not caller input
/// that could be chosen to collide: callers only look names up).
type Names<V> = HashMap<Box<str>, V, RandomState>;

/// The tier of a check naming none: its `plan_tier` label, and in the admin API the policy's
/// own limit.
pub const NO_TIER: &str = "none";

/// What a runtime keeps beside each policy to record its checks in, sized by the policy's
/// tier and endpoint slots (see [`Policy::tier`] and [`Policy::endpoint_slot`]) when the
/// policy compiles.
pub trait Meters: Sized {
    fn new(tiers: usize, endpoints: usize) -> Self;
}

/// Records nothing: the policies of a tool that only reads them (`sluice replay`).
impl Meters for () {
    fn new(_tiers: usize, _endpoints: usize) -> Self {}
}

/// What a backend failure answers for a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Allow, marked degraded.
    Open,
    /// 503 `backend_unavailable`.
    Closed,
}

impl FailMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailMode::Open => "open",
            FailMode::Closed => "closed",
        }
    }
}

/// The parameters of one (policy, tier) and what they always put in headers.
#[derive(Debug, Clone)]
pub struct Limit {
    pub params: Params,
    /// `RateLimit-Policy`, computed once.
    pub policy_header: HeaderValue,
    /// The `plan_tier` metrics label.
    pub tier_label: Arc<str>,
    /// `X-RateLimit-Limit`, computed once.
    pub limit_header: HeaderValue,
    /// Where this tier's series sit in [`Policy::meters`].
    pub tier_slot: usize,
    /// The candidate limit judged beside this one (`[policies.NAME.candidate]`, or set at run
    /// time), never enforced.
    pub candidate: Option<Params>,
    /// Stacked limits (`limits = [...]`), the first being `params`; empty for one limit.
    pub stacked: Vec<Stacked>,
}

impl Limit {
    /// Of a stacked policy, the limit whose capacity is `capacity` (the one a decision says
    /// answered it; the first such when two share one); `None` for a single limit.
    pub fn answering(&self, capacity: u64) -> Option<&Stacked> {
        self.stacked
            .iter()
            .find(|s| s.params.capacity() == capacity)
    }
}

/// The tier slot of a check naming no tier, and of one naming a tier the policy does not have.
pub const NO_TIER_SLOT: usize = 0;
pub const OTHER_TIER_SLOT: usize = 1;
/// The endpoint slot of a check naming no endpoint, and of one naming an unlisted endpoint.
pub const NO_ENDPOINT_SLOT: usize = 0;
pub const OTHER_ENDPOINT_SLOT: usize = 1;

/// One compiled policy, with its runtime's [`Meters`].
#[derive(Debug)]
pub struct Policy<M = ()> {
    pub name: Arc<str>,
    pub window: String,
    /// Shared with every verdict it decides (one reference count, not a copy of each header
    /// value, each with a count of its own).
    pub base: Arc<Limit>,
    pub tiers: Names<Arc<Limit>>,
    pub fail: FailMode,
    pub shadow: bool,
    /// `endpoint` label values recorded as themselves, and their slots in `meters`.
    pub endpoints: Names<(Arc<str>, usize)>,
    /// What this policy's checks are recorded in, by tier and endpoint slot (the daemon: its
    /// metric series).
    pub meters: M,
    pub scope: Scope,
    /// `Some` exactly when `scope` is `Replicated`.
    pub replication: Option<Replication>,
    /// `lease = "auto"`: leases and the denied cache may answer this policy's checks (on the
    /// Redis backends, `scope = "local"`, not shadow: see the limiter's `local` module).
    pub lease: bool,
    /// Some tier (or the base limit) has a candidate: then no check of the policy is answered
    /// from leases or the denied cache, so every check of a candidate's tier is judged.
    pub has_candidate: bool,
    /// `usage = true`: checks ask (cost 0 by default), charges debit after the response.
    /// Such a policy never leases (a lease would hand out what a charge must find); the
    /// denied cache still answers a key in debt until it is back above zero.
    pub usage: bool,
}

/// Label of a tier or endpoint the config does not name.
pub const OTHER: &str = "other";

impl<M> Policy<M> {
    /// The limit for `tier`; an absent or unknown tier gets the policy's base limit.
    pub fn limit_for(&self, tier: Option<&str>) -> &Arc<Limit> {
        tier.and_then(|tier| self.tiers.get(tier))
            .unwrap_or(&self.base)
    }

    /// The limit of the tier named `tier` exactly (`none`: the policy's own limit); `None`
    /// for a tier the policy does not have. The admin API's view of tiers.
    pub fn named_tier(&self, tier: &str) -> Option<&Arc<Limit>> {
        if tier == NO_TIER {
            Some(&self.base)
        } else {
            self.tiers.get(tier)
        }
    }

    /// The limit for `tier` with the slot of its `plan_tier` label: an absent tier is
    /// `none`, an unknown one `other` (both with the base limit).
    pub fn tier(&self, tier: Option<&str>) -> (&Arc<Limit>, usize) {
        match tier {
            None => (&self.base, NO_TIER_SLOT),
            Some(tier) => match self.tiers.get(tier) {
                Some(limit) => (limit, limit.tier_slot),
                None => (&self.base, OTHER_TIER_SLOT),
            },
        }
    }

    /// The `plan_tier` label of a tier slot.
    pub fn tier_label(&self, slot: usize, other: &Arc<str>, none: &Arc<str>) -> Arc<str> {
        match slot {
            NO_TIER_SLOT => none.clone(),
            OTHER_TIER_SLOT => other.clone(),
            _ => self
                .tiers
                .values()
                .find(|limit| limit.tier_slot == slot)
                .map_or_else(|| other.clone(), |limit| limit.tier_label.clone()),
        }
    }

    /// The slot of the `endpoint` label of `endpoint`.
    pub fn endpoint_slot(&self, endpoint: Option<&str>) -> usize {
        match endpoint {
            None => NO_ENDPOINT_SLOT,
            Some(endpoint) => self
                .endpoints
                .get(endpoint)
                .map_or(OTHER_ENDPOINT_SLOT, |(_, slot)| *slot),
        }
    }

    /// The `endpoint` label of an endpoint slot.
    pub fn endpoint_label(&self, slot: usize, other: &Arc<str>, none: &Arc<str>) -> Arc<str> {
        match slot {
            NO_ENDPOINT_SLOT => none.clone(),
            OTHER_ENDPOINT_SLOT => other.clone(),
            _ => self
                .endpoints
                .values()
                .find(|(_, s)| *s == slot)
                .map_or_else(|| other.clone(), |(label, _)| label.clone()),
        }
    }
}

/// Every policy by name. Immutable once built.
#[derive(Debug)]
pub struct PolicySet<M = ()> {
    policies: Names<Arc<Policy<M>>>,
}

/// A copy shares every compiled policy (no `M: Clone` needed): the settings writer publishes
/// the same policies with a new version of the stored settings.
impl<M> Clone for PolicySet<M> {
    fn clone(&self) -> Self {
        PolicySet {
            policies: self.policies.clone(),
        }
    }
}

impl<M> PolicySet<M> {
    /// Whether `other` holds the very policies this set holds (a copy of it, as a publish of
    /// a new settings version alone makes), not merely equal ones.
    pub fn same_as(&self, other: &Self) -> bool {
        self.policies.len() == other.policies.len()
            && self.policies.iter().all(|(name, policy)| {
                other
                    .policies
                    .get(name)
                    .is_some_and(|theirs| Arc::ptr_eq(policy, theirs))
            })
    }
}

impl<M> Default for PolicySet<M> {
    fn default() -> Self {
        PolicySet {
            policies: Names::default(),
        }
    }
}

impl<M: Meters> PolicySet<M> {
    /// Compiles `[policies.*]`, reporting every bad value.
    pub fn compile(configs: &BTreeMap<String, PolicyConfig>) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut policies = Names::with_capacity_and_hasher(configs.len(), RandomState::new());
        for (name, config) in configs {
            if let Some(policy) = compile_policy(name, config, &mut errors) {
                policies.insert(name.as_str().into(), Arc::new(policy));
            }
        }
        if errors.is_empty() {
            Ok(PolicySet { policies })
        } else {
            Err(errors)
        }
    }
}

impl<M> PolicySet<M> {
    pub fn get(&self, name: &str) -> Option<&Arc<Policy<M>>> {
        self.policies.get(name)
    }

    /// Every policy.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Policy<M>>> {
        self.policies.values()
    }

    /// The replication settings of every replicated policy.
    pub fn replicated(&self) -> HashMap<Box<str>, Replication> {
        self.policies
            .values()
            .filter_map(|p| p.replication.map(|r| (Box::from(&*p.name), r)))
            .collect()
    }

    /// Every policy name.
    pub fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.policies.values().map(|policy| &policy.name)
    }

    pub fn len(&self) -> usize {
        self.policies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// `GET /v1/policies`.
    pub fn view(&self) -> PoliciesResponse {
        let policies = self
            .policies
            .values()
            .map(|policy| {
                let base = policy.base.params;
                let tiers = policy
                    .tiers
                    .iter()
                    .map(|(tier, limit)| {
                        (
                            tier.to_string(),
                            LimitView {
                                limit: limit.params.limit,
                                window_ms: limit.params.window_ms,
                                burst: limit.params.burst,
                                candidate: limit.candidate.as_ref().map(params_view),
                            },
                        )
                    })
                    .collect();
                let view = PolicyView {
                    algorithm: base.algorithm.as_str().to_owned(),
                    limit: base.limit,
                    window: policy.window.clone(),
                    window_ms: base.window_ms,
                    burst: base.burst,
                    fail: policy.fail.as_str().to_owned(),
                    shadow: policy.shadow,
                    tiers,
                    scope: policy.scope.as_str().to_owned(),
                    candidate: policy.base.candidate.as_ref().map(params_view),
                    calendar: base.calendar.map(|c| c.zone.name().to_owned()),
                    limits: policy
                        .base
                        .stacked
                        .iter()
                        .map(|s| params_view(&s.params))
                        .collect(),
                };
                (policy.name.to_string(), view)
            })
            .collect();
        PoliciesResponse { policies }
    }
}

/// Every parameter of a limit, as the API shows it.
pub fn params_view(params: &Params) -> ParamsView {
    ParamsView {
        algorithm: params.algorithm.as_str().to_owned(),
        limit: params.limit,
        window: format_duration_ms(params.window_ms),
        window_ms: params.window_ms,
        burst: params.burst,
    }
}

fn compile_policy<M: Meters>(
    name: &str,
    config: &PolicyConfig,
    errors: &mut Vec<FieldError>,
) -> Option<Policy<M>> {
    let before = errors.len();
    if !is_valid_name(name) {
        errors.push(FieldError::new(
            format!("policies.{name}"),
            "a policy name is 1 to 64 of A-Z a-z 0-9 _ . -",
        ));
    }
    // A stacked policy is compiled as one of its first limit, its stack beside.
    let single = stack::as_single(name, config, errors);
    let config = single.as_ref().unwrap_or(config);
    let algorithm = compile_algorithm(name, config, errors);
    let limit = compile_limit(name, config, errors);
    let (window_ms, calendar) = compile_window(name, config, algorithm, errors);
    if config.burst == Some(0) {
        errors.push(FieldError::new(
            field(name, "burst"),
            "burst must be at least 1",
        ));
    }
    let fail = compile_fail(name, config, errors);
    check_labels(name, config, errors);
    let (scope, replication) = compile_scope(name, config, errors);
    check_stack_fits(name, config, scope == Scope::Replicated, errors);
    if calendar.is_some() && scope == Scope::Replicated {
        errors.push(FieldError::new(
            field(name, "scope"),
            "a calendar window cannot be replicated (its regions would need one calendar's edges); use scope = \"global\" or \"local\"",
        ));
    }
    let lease = match config.lease.as_str() {
        "auto" => true,
        "off" => false,
        other => {
            errors.push(FieldError::new(
                field(name, "lease"),
                format!("unknown lease mode {other:?}; expected auto or off"),
            ));
            false
        }
    };
    // Zero values are reported above; what is left to check is how the values combine.
    let (Some(algorithm), Some(limit), Some(window_ms)) = (algorithm, limit, window_ms) else {
        return None;
    };
    let base_params = Params {
        algorithm,
        limit,
        window_ms,
        burst: config.burst.unwrap_or(limit).max(1),
        counting: config.counting,
        calendar,
    };
    if let Err(why) = base_params.validate() {
        errors.push(FieldError::new(field(name, "limit"), why.to_string()));
    }
    let candidates = match &config.candidate {
        Some(candidate) => compile_candidates(name, config, candidate, &base_params, errors),
        None => Candidates::default(),
    };
    let mut stacked = match &config.limits {
        Some(limits) => compile_stack(
            name,
            &field(name, "limits"),
            limits,
            config,
            &base_params,
            errors,
        ),
        None => Vec::new(),
    };
    if stacked.len() < 2 {
        stacked.clear();
    }
    let mut base = make_limit(name, base_params, stacked.clone(), NO_TIER, NO_TIER_SLOT);
    base.candidate = candidates.base;
    let base = Arc::new(base);
    let mut tiers = compile_tiers(name, config, &base_params, &stacked, errors);
    for (tier, params) in candidates.tiers {
        if let Some(limit) = tiers.get_mut(tier.as_str()) {
            Arc::make_mut(limit).candidate = Some(params);
        }
    }
    if errors.len() > before {
        return None;
    }
    let has_candidate =
        base.candidate.is_some() || tiers.values().any(|limit| limit.candidate.is_some());
    if config.usage {
        check_usage(
            name,
            base.params.algorithm,
            tiers
                .iter()
                .map(|(tier, limit)| (&**tier, limit.params.algorithm)),
            scope == Scope::Replicated,
            errors,
        );
        if errors.len() > before {
            return None;
        }
    }
    Some(Policy {
        name: name.into(),
        window: config.window.clone().unwrap_or_default(),
        base,
        tiers,
        fail,
        shadow: config.shadow,
        endpoints: config
            .endpoints
            .iter()
            .enumerate()
            .map(|(at, e)| {
                let slot = OTHER_ENDPOINT_SLOT + 1 + at;
                (e.as_str().into(), (Arc::from(e.as_str()), slot))
            })
            .collect(),
        meters: M::new(
            OTHER_TIER_SLOT + 1 + config.tiers.len(),
            OTHER_ENDPOINT_SLOT + 1 + config.endpoints.len(),
        ),
        scope,
        replication,
        lease,
        has_candidate,
        usage: config.usage,
    })
}

/// `algorithm`: required, one of the six.
fn compile_algorithm(
    name: &str,
    config: &PolicyConfig,
    errors: &mut Vec<FieldError>,
) -> Option<Algorithm> {
    let Some(text) = config.algorithm.as_deref() else {
        errors.push(FieldError::new(field(name, "algorithm"), "is required"));
        return None;
    };
    fields::algorithm(&field(name, "algorithm"), text, errors)
}

/// `limit`: required, at least 1.
fn compile_limit(name: &str, config: &PolicyConfig, errors: &mut Vec<FieldError>) -> Option<u64> {
    match config.limit {
        None => {
            errors.push(FieldError::new(field(name, "limit"), "is required"));
            None
        }
        Some(0) => {
            errors.push(FieldError::new(
                field(name, "limit"),
                "limit must be at least 1",
            ));
            None
        }
        Some(limit) => Some(limit),
    }
}

/// `fail`: open or closed.
fn compile_fail(name: &str, config: &PolicyConfig, errors: &mut Vec<FieldError>) -> FailMode {
    match config.fail.as_str() {
        "open" => FailMode::Open,
        "closed" => FailMode::Closed,
        other => {
            errors.push(FieldError::new(
                field(name, "fail"),
                format!("unknown fail mode {other:?}; expected open or closed"),
            ));
            FailMode::Open
        }
    }
}

/// The metric labels a policy names: its endpoints and its tiers (names, and no zero limit
/// or burst).
fn check_labels(name: &str, config: &PolicyConfig, errors: &mut Vec<FieldError>) {
    for endpoint in &config.endpoints {
        if endpoint.is_empty() || endpoint.len() > 256 {
            errors.push(FieldError::new(
                field(name, "endpoints"),
                "an endpoint label is 1 to 256 bytes",
            ));
        }
    }
    for (tier, tier_config) in &config.tiers {
        if !is_valid_name(tier) {
            errors.push(FieldError::new(
                field(name, &format!("tiers.{tier}")),
                "a tier name is 1 to 64 of A-Z a-z 0-9 _ . -",
            ));
        } else if matches!(tier.as_str(), NO_TIER | OTHER) {
            // `none` and `other` are `plan_tier` labels of their own (no tier, a tier the
            // policy does not name), and `none` is the policy's own limit in the admin API.
            errors.push(FieldError::new(
                field(name, &format!("tiers.{tier}")),
                "none and other are reserved: none is the policy's own limit, other the label of tiers a policy does not name",
            ));
        }
        if tier_config.limit == Some(0) {
            errors.push(FieldError::new(
                field(name, &format!("tiers.{tier}.limit")),
                "limit must be at least 1",
            ));
        }
        if tier_config.burst == Some(0) {
            errors.push(FieldError::new(
                field(name, &format!("tiers.{tier}.burst")),
                "burst must be at least 1",
            ));
        }
    }
}

/// Each tier's limit: the policy's algorithm and window with the tier's limit and burst
/// (defaults: the policy's limit, and the tier's own limit), or the tier's own stacked
/// `limits` (a tier giving neither takes the policy's), in its metric slot.
fn compile_tiers(
    name: &str,
    config: &PolicyConfig,
    base: &Params,
    base_stack: &[Stacked],
    errors: &mut Vec<FieldError>,
) -> Names<Arc<Limit>> {
    let mut tiers = Names::with_capacity_and_hasher(config.tiers.len(), RandomState::new());
    for (at, (tier, tier_config)) in config.tiers.iter().enumerate() {
        let slot = OTHER_TIER_SLOT + 1 + at;
        let single = tier_config.limit.is_some() || tier_config.burst.is_some();
        let (params, stacked) = match &tier_config.limits {
            Some(limits) => {
                let here = field(name, &format!("tiers.{tier}.limits"));
                if single {
                    errors.push(FieldError::new(
                        &here,
                        "`limits` replaces limit and burst: give one or the other",
                    ));
                }
                let mut stacked = compile_stack(name, &here, limits, config, base, errors);
                let Some(first) = stacked.first().map(|s| s.params) else {
                    continue;
                };
                if stacked.len() < 2 {
                    stacked.clear();
                }
                (first, stacked)
            }
            None if !base_stack.is_empty() && single => {
                errors.push(FieldError::new(
                    field(name, &format!("tiers.{tier}.limit")),
                    "the policy stacks `limits`: a tier gives its own `limits` (or nothing, to take the policy's)",
                ));
                continue;
            }
            None if !base_stack.is_empty() => (*base, base_stack.to_vec()),
            None => {
                let tier_limit = tier_config.limit.unwrap_or(base.limit).max(1);
                let params = Params {
                    limit: tier_limit,
                    burst: tier_config.burst.unwrap_or(tier_limit).max(1),
                    ..*base
                };
                if let Err(why) = params.validate() {
                    errors.push(FieldError::new(
                        field(name, &format!("tiers.{tier}.limit")),
                        why.to_string(),
                    ));
                    continue;
                }
                (params, Vec::new())
            }
        };
        tiers.insert(
            tier.as_str().into(),
            Arc::new(make_limit(name, params, stacked, tier, slot)),
        );
    }
    tiers
}

fn make_limit(
    policy: &str,
    params: Params,
    stacked: Vec<Stacked>,
    tier: &str,
    tier_slot: usize,
) -> Limit {
    Limit {
        params,
        policy_header: policy_header(policy, &params, &stacked),
        tier_label: tier.into(),
        limit_header: HeaderValue::from(params.capacity()),
        tier_slot,
        candidate: None,
        stacked,
    }
}
