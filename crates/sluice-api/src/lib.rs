//! The JSON bodies of the sluice HTTP API, defined once so the daemon and every client
//! serialize the same thing (see docs/src/reference/http-api.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Most checks one batch may carry.
pub const MAX_BATCH: usize = 64;
/// Longest `key`, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 512;
/// Largest request body the daemon reads.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// RFC 9457 problem type of a 429, as the IETF ratelimit-headers draft defines it.
pub const QUOTA_EXCEEDED_TYPE: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// One check: may `key` spend `cost` under `policy`?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRequest {
    pub policy: String,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

impl CheckRequest {
    pub fn new(policy: impl Into<String>, key: impl Into<String>) -> Self {
        CheckRequest {
            policy: policy.into(),
            key: key.into(),
            cost: None,
            tier: None,
            endpoint: None,
        }
    }
}

/// `POST /v1/charge`: what a request used, charged to a usage policy after its response
/// (always debited, into debt if need be; a negative `amount` refunds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChargeRequest {
    pub policy: String,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    pub amount: i64,
}

impl ChargeRequest {
    pub fn new(policy: impl Into<String>, key: impl Into<String>, amount: i64) -> Self {
        ChargeRequest {
            policy: policy.into(),
            key: key.into(),
            tier: None,
            amount,
        }
    }
}

/// All-or-nothing batch: if any check is denied, none consumes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRequest {
    pub checks: Vec<CheckRequest>,
}

/// The answer to one check (200 allowed, 429 denied).
///
/// Serialized by hand (below) into the JSON the derive would give: serde's `flatten` routes a
/// whole answer through its map path, which cost a check a thousand instructions more.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckResponse {
    pub allowed: bool,
    pub policy: String,
    pub limit: u64,
    pub remaining: u64,
    /// Unix seconds when the key is back to full.
    pub reset: u64,
    /// Whole seconds (>= 1) until a request of this cost could pass; only when denied.
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// leaky_bucket: how long to wait before proceeding; 0 for other algorithms.
    #[serde(default)]
    pub delay_ms: u64,
    /// The backend failed and the policy fails open: allowed without counting.
    #[serde(default)]
    pub degraded: bool,
    /// Usage policies (`usage = true`) only: what the key owes beyond its limit after charges
    /// took more than it had (0 when it owes nothing); absent for other policies.
    #[serde(default)]
    pub debt: Option<u64>,
    /// Present on a denial: the documented error fields and the RFC 9457 problem fields.
    #[serde(flatten, default)]
    pub problem: Option<Problem>,
}

impl Serialize for CheckResponse {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = 6
            + usize::from(self.retry_after.is_some())
            + usize::from(self.degraded)
            + usize::from(self.debt.is_some())
            + if self.problem.is_some() { 6 } else { 0 };
        let mut out = serializer.serialize_struct("CheckResponse", fields)?;
        out.serialize_field("allowed", &self.allowed)?;
        out.serialize_field("policy", &self.policy)?;
        out.serialize_field("limit", &self.limit)?;
        out.serialize_field("remaining", &self.remaining)?;
        out.serialize_field("reset", &self.reset)?;
        if let Some(retry_after) = self.retry_after {
            out.serialize_field("retry_after", &retry_after)?;
        }
        out.serialize_field("delay_ms", &self.delay_ms)?;
        if self.degraded {
            out.serialize_field("degraded", &true)?;
        }
        if let Some(debt) = self.debt {
            out.serialize_field("debt", &debt)?;
        }
        if let Some(problem) = &self.problem {
            out.serialize_field("error", &problem.error)?;
            out.serialize_field("message", &problem.message)?;
            out.serialize_field("type", &problem.problem_type)?;
            out.serialize_field("title", &problem.title)?;
            out.serialize_field("status", &problem.status)?;
            out.serialize_field("violated-policies", &problem.violated_policies)?;
        }
        out.end()
    }
}

impl CheckResponse {
    /// Writes the JSON of an answer without a problem document (every allowed answer) into
    /// `out` directly: the very text `serde_json` writes for it (a test compares them), without
    /// escaping six constant field names on every answer. False, with `out` untouched, when
    /// the answer needs the general path: a denial, or a policy name JSON would escape.
    pub fn write_plain_json(&self, out: &mut Vec<u8>) -> bool {
        let plain_name = self
            .policy
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
        if self.problem.is_some() || !plain_name {
            return false;
        }
        let mut number = itoa::Buffer::new();
        out.extend_from_slice(if self.allowed {
            b"{\"allowed\":true,\"policy\":\""
        } else {
            b"{\"allowed\":false,\"policy\":\""
        });
        out.extend_from_slice(self.policy.as_bytes());
        out.extend_from_slice(b"\",\"limit\":");
        out.extend_from_slice(number.format(self.limit).as_bytes());
        out.extend_from_slice(b",\"remaining\":");
        out.extend_from_slice(number.format(self.remaining).as_bytes());
        out.extend_from_slice(b",\"reset\":");
        out.extend_from_slice(number.format(self.reset).as_bytes());
        if let Some(retry_after) = self.retry_after {
            out.extend_from_slice(b",\"retry_after\":");
            out.extend_from_slice(number.format(retry_after).as_bytes());
        }
        out.extend_from_slice(b",\"delay_ms\":");
        out.extend_from_slice(number.format(self.delay_ms).as_bytes());
        if self.degraded {
            out.extend_from_slice(b",\"degraded\":true");
        }
        if let Some(debt) = self.debt {
            out.extend_from_slice(b",\"debt\":");
            out.extend_from_slice(number.format(debt).as_bytes());
        }
        out.push(b'}');
        true
    }
}

/// The fields a 429 adds: `error`/`message` for simple clients, and an RFC 9457 problem
/// document for those that read `application/problem+json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub error: String,
    pub message: String,
    #[serde(rename = "type")]
    pub problem_type: String,
    pub title: String,
    pub status: u16,
    #[serde(rename = "violated-policies")]
    pub violated_policies: Vec<String>,
}

impl Problem {
    /// The problem document of a 429 for the denied `policies`.
    pub fn quota_exceeded(policies: Vec<String>) -> Self {
        Problem {
            error: "rate_limit_exceeded".to_owned(),
            message: "Too many requests. Please retry after the specified time.".to_owned(),
            problem_type: QUOTA_EXCEEDED_TYPE.to_owned(),
            title: "Too Many Requests".to_owned(),
            status: 429,
            violated_policies: policies,
        }
    }
}

/// The answer to a batch: one result per check, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResponse {
    pub allowed: bool,
    pub results: Vec<CheckResponse>,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

/// Every non-decision answer: `{"error": CODE, "message": TEXT}`, plus the offending field
/// when one is to blame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Error codes of [`ErrorBody::error`].
pub mod codes {
    pub const BAD_REQUEST: &str = "bad_request";
    pub const COST_EXCEEDS_CAPACITY: &str = "cost_exceeds_capacity";
    pub const UNKNOWN_POLICY: &str = "unknown_policy";
    pub const NOT_FOUND: &str = "not_found";
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
    pub const BACKEND_UNAVAILABLE: &str = "backend_unavailable";
    pub const UNAUTHORIZED: &str = "unauthorized";
    pub const ADMIN_DISABLED: &str = "admin_disabled";
    pub const UNKNOWN_TIER: &str = "unknown_tier";
    pub const CANDIDATE_NOT_PROMOTABLE: &str = "candidate_not_promotable";
}

/// One limit as `GET /v1/policies` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitView {
    pub limit: u64,
    pub window_ms: u64,
    pub burst: u64,
    /// The candidate judged beside this limit, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<ParamsView>,
}

/// A limit's every parameter: a candidate's, or the limit in force beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamsView {
    pub algorithm: String,
    pub limit: u64,
    /// `window_ms` as the config file writes durations (`"60s"`).
    pub window: String,
    pub window_ms: u64,
    pub burst: u64,
}

/// One effective policy as `GET /v1/policies` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    pub algorithm: String,
    pub limit: u64,
    pub window: String,
    pub window_ms: u64,
    pub burst: u64,
    pub fail: String,
    pub shadow: bool,
    pub tiers: BTreeMap<String, LimitView>,
    /// `local`, `global` or `replicated`; absent from older daemons.
    #[serde(default = "local_scope")]
    pub scope: String,
    /// The candidate of the policy's own limit (tier `none`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<ParamsView>,
    /// The time zone of a calendar window (`1d`, `1w`, `1mo`), when the policy has one;
    /// `window_ms` is then the longest such window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// Stacked limits (`limits = [...]`), the first being `limit`/`window`; absent for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<ParamsView>,
}

fn local_scope() -> String {
    "local".to_owned()
}

/// `GET /v1/policies`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoliciesResponse {
    pub policies: BTreeMap<String, PolicyView>,
}

/// One key of `GET /v1/top`: estimated counts in the period (never below the truth, above it
/// by at most the report's `error_bound`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopEntry {
    pub key: String,
    pub rejected: u64,
    pub checked: u64,
    /// `rejected / checked`.
    pub ratio: f64,
}

/// How far each count of a top list may exceed the truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopErrorBound {
    pub checked: u64,
    pub rejected: u64,
}

/// `GET /v1/top?policy=P&by=rejected|checked&n=20&period=5m|60m`: the heaviest keys this
/// daemon saw for a policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopResponse {
    pub policy: String,
    pub by: String,
    pub period: String,
    /// Counts come from a fixed-memory sketch.
    pub approximate: bool,
    pub error_bound: TopErrorBound,
    pub total_checked: u64,
    pub total_rejected: u64,
    pub keys: Vec<TopEntry>,
}

/// `GET /v1/status`: per policy, the last hour as this daemon saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusResponse {
    pub policies: Vec<PolicyStatus>,
}

/// One policy's last hour: how much it was asked, how much it refused, how healthy it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyStatus {
    pub policy: String,
    /// Checks decided (allowed, denied, or allowed failing open).
    pub checks: u64,
    /// Share of `checks` denied (429).
    pub rejected_ratio: f64,
    /// Checks allowed because the backend failed.
    pub fail_open: u64,
    /// Checks refused (503) because the backend failed; not among `checks`.
    pub fail_closed: u64,
    /// 99th percentile of the check duration, interpolated in its histogram bucket; `null`
    /// without checks.
    pub p99_ms: Option<f64>,
    /// The keys most denied (from the same sketch as `GET /v1/top`, approximate).
    pub top_limited: Vec<LimitedKey>,
    pub burn_rate: BurnRates,
}

/// A key of `top_limited`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitedKey {
    pub key: String,
    pub rejected: u64,
}

/// How fast each SLO's error budget burns: `(1 - SLI) / (1 - objective)`; 1 spends exactly
/// the budget over the SLO's period, 14.4 spends a 30-day budget's 2 % in an hour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BurnRates {
    pub availability_1h: f64,
    pub latency_1h: f64,
}

/// `PUT /v1/admin/policies/{policy}/tiers/{tier}`: the new limit of one tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideRequest {
    pub limit: u64,
    /// Defaults to `limit`, as a tier's burst does in the config file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

/// One run-time override, as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideView {
    pub policy: String,
    pub tier: String,
    pub limit: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

/// `GET /v1/admin/policies`: every override and run-time candidate stored in the backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverridesResponse {
    pub version: u64,
    pub overrides: Vec<OverrideView>,
    /// Candidates set through the admin API (absent from older daemons).
    #[serde(default)]
    pub candidates: Vec<CandidateRequestView>,
}

/// `PUT /v1/admin/policies/{policy}/tiers/{tier}/candidate`: a candidate limit of one tier
/// (`none`: the policy's own limit), judged beside it and never enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateRequest {
    pub limit: u64,
    /// Defaults to the candidate's own `limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// A duration (`"60s"`); defaults to the policy's window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Defaults to the policy's algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
}

/// One run-time candidate as stored: what its `PUT` said, unset fields left to their
/// defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateRequestView {
    pub policy: String,
    pub tier: String,
    #[serde(flatten)]
    pub request: CandidateRequest,
}

/// Where the candidate in force of a (policy, tier) comes from.
pub mod sources {
    /// Set through the admin API (it replaces the file's candidate of the same tier).
    pub const ADMIN: &str = "admin";
    /// `[policies.NAME.candidate]` of the config file.
    pub const FILE: &str = "file";
}

/// `GET /v1/admin/policies/{policy}/tiers/{tier}/candidate` (and the answer to its `PUT`): the
/// candidate in force, where it comes from, and the limit it is judged beside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateView {
    pub policy: String,
    pub tier: String,
    /// [`sources::ADMIN`] or [`sources::FILE`].
    pub source: String,
    pub candidate: ParamsView,
    /// The limit in force of this (policy, tier).
    pub current: ParamsView,
    /// Whether `…/candidate/promote` can make it the limit: its window and algorithm are the
    /// policy's (an override changes limit and burst only).
    pub promotable: bool,
}

/// The answer to `DELETE /v1/admin/policies/{policy}/tiers/{tier}/candidate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateRemoved {
    pub policy: String,
    pub tier: String,
    pub deleted: bool,
    /// The candidate in force now: the config file's of this tier, if it names one.
    pub in_force: Option<CandidateView>,
}

/// The answer to `POST /v1/admin/policies/{policy}/tiers/{tier}/candidate/promote`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromotedView {
    pub policy: String,
    pub tier: String,
    /// The limit in force before.
    pub previous: ParamsView,
    /// The limit in force now (the stored override).
    pub limit: ParamsView,
    /// Where the promoted candidate came from: [`sources::ADMIN`] (it is cleared) or
    /// [`sources::FILE`] (the file still names it, so it stays judged, now equal to the limit,
    /// until the file changes).
    pub source: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_carries_the_problem_fields_beside_the_decision() {
        let body = CheckResponse {
            allowed: false,
            policy: "public".into(),
            limit: 100,
            remaining: 0,
            reset: 1_746_201_600,
            retry_after: Some(30),
            delay_ms: 0,
            degraded: false,
            debt: None,
            problem: Some(Problem::quota_exceeded(vec!["public".into()])),
        };
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["error"], "rate_limit_exceeded");
        assert_eq!(json["type"], QUOTA_EXCEEDED_TYPE);
        assert_eq!(json["status"], 429);
        assert_eq!(json["violated-policies"][0], "public");
        assert_eq!(json["retry_after"], 30);
        assert!(json.get("degraded").is_none());
        let back: CheckResponse = serde_json::from_value(json).unwrap();
        assert_eq!(back, body);
    }

    #[test]
    fn an_allowed_answer_has_no_problem_fields() {
        let body = CheckResponse {
            allowed: true,
            policy: "public".into(),
            limit: 100,
            remaining: 99,
            reset: 1,
            retry_after: None,
            delay_ms: 0,
            degraded: false,
            debt: None,
            problem: None,
        };
        let json = serde_json::to_value(&body).unwrap();
        assert!(json.get("error").is_none());
        assert!(json.get("retry_after").is_none());
        let back: CheckResponse = serde_json::from_value(json).unwrap();
        assert_eq!(back, body);
    }

    #[test]
    fn answers_serialize_to_the_exact_documented_text() {
        let mut body = CheckResponse {
            allowed: true,
            policy: "public".into(),
            limit: 100,
            remaining: 99,
            reset: 1746201600,
            retry_after: None,
            delay_ms: 0,
            degraded: true,
            debt: None,
            problem: None,
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"allowed":true,"policy":"public","limit":100,"remaining":99,"reset":1746201600,"delay_ms":0,"degraded":true}"#
        );
        body.allowed = false;
        body.remaining = 0;
        body.degraded = false;
        body.retry_after = Some(30);
        body.problem = Some(Problem::quota_exceeded(vec!["public".into()]));
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            concat!(
                r#"{"allowed":false,"policy":"public","limit":100,"remaining":0,"reset":1746201600,"#,
                r#""retry_after":30,"delay_ms":0,"error":"rate_limit_exceeded","#,
                r#""message":"Too many requests. Please retry after the specified time.","#,
                r#""type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#,
                r#""title":"Too Many Requests","status":429,"violated-policies":["public"]}"#
            )
        );
    }

    #[test]
    fn the_direct_writer_writes_what_serde_writes() {
        let mut checked = 0;
        for policy in ["public", "a.b-c_9", "x"] {
            for allowed in [true, false] {
                for retry_after in [None, Some(1), Some(u64::MAX)] {
                    for degraded in [false, true] {
                        for n in [0, 7, 1_000_000_007, u64::MAX] {
                            let body = CheckResponse {
                                allowed,
                                policy: policy.into(),
                                limit: n,
                                remaining: n / 2,
                                reset: n ^ 1,
                                retry_after,
                                delay_ms: n / 3,
                                degraded,
                                debt: (n % 2 == 1).then_some(n),
                                problem: None,
                            };
                            let mut out = Vec::new();
                            assert!(body.write_plain_json(&mut out));
                            assert_eq!(
                                String::from_utf8(out).unwrap(),
                                serde_json::to_string(&body).unwrap()
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 3 * 2 * 3 * 2 * 4);
        // Denials and names JSON escapes take the general path.
        let mut body = CheckResponse {
            allowed: false,
            policy: "public".into(),
            limit: 1,
            remaining: 0,
            reset: 0,
            retry_after: Some(1),
            delay_ms: 0,
            degraded: false,
            debt: None,
            problem: Some(Problem::quota_exceeded(vec!["public".into()])),
        };
        let mut out = Vec::new();
        assert!(!body.write_plain_json(&mut out));
        body.problem = None;
        body.policy = "quo\"te".into();
        assert!(!body.write_plain_json(&mut out));
        body.policy = "ünï".into();
        assert!(!body.write_plain_json(&mut out));
        assert!(out.is_empty());
    }
}
