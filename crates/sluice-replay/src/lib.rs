//! The engine of `sluice replay`: access logs replayed, each request at its own time, through
//! the same `sluice-core` algorithms the daemon enforces, to tell per policy and tier what a
//! limit would have done to real traffic and what limit the traffic suggests.
//!
//! [`replay`] takes the policies ([`ReplayPolicy`], built by the caller from its compiled
//! config), the log files and the [`ReplayOptions`], and answers a [`Report`]: serialized
//! with serde it is the `--json` document; [`render_text`] is the default summary and
//! [`render_html`] the `--report` page. [`scan`] parses without replaying.
//!
//! # Semantics
//!
//! **Input.** Formats: nginx (`combined`, or any `log_format` string: literal separators
//! between `$variables`, the time from `$msec`, else `$time_iso8601`, else `$time_local`),
//! Envoy's default text format, JSON lines, CSV `timestamp,key[,policy,tier,cost]`. A gzip
//! file is recognised by its magic bytes and read directly (several gzip members, as `cat
//! a.gz b.gz` makes, are read in turn). Several files are merged in time order, each read on
//! a thread of its own. A line longer than 256 KiB is unparsed.
//!
//! **Expressions.** `--key`, `--tier` and `--cost` are templates of `$name` / `${name}` variables and
//! literal text. Variables: the nginx format's variable names; for Envoy `$start_time`,
//! `$method`, `$path`, `$protocol`, `$response_code`, `$response_flags`, `$bytes_received`,
//! `$bytes_sent`, `$duration`, `$upstream_service_time`, `$x_forwarded_for`, `$user_agent`,
//! `$request_id`, `$authority`, `$upstream_host`; JSON field names (a dotted name, or one
//! joined with `_`, reaches into nested objects: `${usage.total_tokens}`,
//! `$usage_total_tokens`); the CSV column names `timestamp`, `key`, `policy`, `tier`, `cost`.
//! A variable the format does not have is refused before reading. `--key` defaults to
//! `ip:$remote_addr` (nginx and JSON), `ip:$x_forwarded_for` (Envoy), `$key` (CSV). nginx
//! and Envoy write `-` for an empty value, and it is read as empty.
//!
//! **An empty key.** A line whose `--key` expression has an empty (or missing) variable is
//! unparsed, with the reason naming the variable: keying it on the literal rest (`ip:`) would
//! pile every such request onto one key and report rejections no client would see.
//!
//! **Policy.** The CSV `policy` column when the line has a value there; else `--policy P`;
//! else every policy (each policy's report then answers "what would this policy do to all
//! of this traffic"). A CSV line naming a policy that is not configured is unparsed
//! (`unknown policy "x"`).
//!
//! **Tier.** The CSV `tier` column when the line has a value there, else `--tier EXPR`
//! (an expression with an empty variable gives no tier). No tier is reported as tier
//! `none`; a tier the policy does not have is judged against the policy's own limit and
//! reported as tier `other`, as the daemon does and labels its metrics (`plan_tier`). The
//! candidate of `none` (the policy's own) also judges `other`.
//!
//! **Cost.** The `--cost` expression (e.g. `$usage_total_tokens`: JSON's
//! `usage.total_tokens`, the tokens an LLM answer used), a whole number ≥ 0, a line whose
//! value is empty or not one being unparsed; else the CSV `cost` column (a whole number ≥ 1);
//! else 1. A cost above a limit's capacity (its burst for the bucket algorithms, its limit for
//! the window ones) is a rejection: the core refuses it.
//!
//! **Stacked limits.** A (policy, tier) with stacked limits ([`ReplayPolicy::stacks`]) is
//! decided as the daemon decides it: each limit on its own state per key, allowed only when
//! every one allows, all or none consuming. Its report counts, per limit, the requests it
//! denied (a request two limits denied counts under both), so it says which limit bound
//! most, and each limit's peak rates and suggestion in its own windows (`limits`); the row's
//! own are the first limit's.
//!
//! **Usage policies.** A line of a usage policy ([`ReplayPolicy::usage`]) is a check that asks
//! (allowed while every limit has at least 1 left, consuming nothing) and, when allowed, a
//! charge of its cost after the response, the balance going into debt when it must; a key in
//! debt is denied until its refill or window end repays it. Peak rates count what was asked,
//! in cost units: with `--cost` they are tokens per window, and the suggestion a token budget.
//!
//! **Calendar windows.** A calendar limit (a day, week or month of a zone) is decided by the
//! core on its calendar; peak rates count per calendar window.
//!
//! **Time.** Each line's own timestamp, in milliseconds. State is per (policy, key), as the
//! daemon keeps it. nginx logs a request when it ends, so a line slightly earlier than the
//! one before it is normal: it is replayed at the latest time seen for its key, so a key's
//! state never moves backwards (and no quota is granted by going back in time).
//!
//! **Candidates.** With `--candidate`, each (policy, tier)'s candidate limit is decided
//! beside the limit on a state of its own per (policy, key), consumed whenever the candidate
//! alone would allow (what the daemon's stores do), and reported under `candidate` with the
//! same counts.
//!
//! **Figures.** Per (policy, tier): requests, would-reject count, keys seen, keys rejected at
//! least once, the 20 keys with most rejections, and each key's peak rate (its highest count
//! in one aligned window of the limit's window; counts are in cost units) as p50/p90/p99/max
//! over keys (nearest rank). The suggested limit is `Lk` over each key's counts per aligned
//! window, the smallest `L` with at most `floor(1 % of keys)` keys whose peak exceeds `L` (the
//! keys rule: a handful of abusive keys never raise it); with `--max-reject` given it is
//! `max(Lk, Lr)`, `Lr` the smallest `L` with `Σ max(0, count − L) ≤ floor(max_reject ×
//! requests)` (requests in cost units). Window counts are kept in a histogram exact below 2 048
//! and within 0.1 % above, filled as each key's window closes. A (policy, tier) with no
//! traffic is left out, except a policy's own (`none`) when the policy saw no traffic at
//! all; its suggested limit is then `null`.
//!
//! **Lines.** `lines` counts every line read except blank ones and a CSV header (a first
//! line whose first field is `timestamp`); `unparsed` those that could not be replayed,
//! never fatal and never silent: the first five are kept with file, line number and reason.
//!
//! **Bounds.** Memory grows with keys (at most [`ReplayOptions::max_keys`]; a line with a new
//! key past it is unparsed), never with lines: the 429 timeline keeps at most
//! [`stats::MAX_BUCKETS`] buckets, doubling their width as the log goes on.

mod batch;
mod decide;
mod engine;
mod error;
mod formats;
pub mod generate;
mod input;
mod keys;
mod merge;
mod parse;
mod progress;
mod replay;
mod report;
mod source;
pub mod stats;
mod template;
mod time;

pub use error::Error;
pub use formats::csv::COLUMNS as CSV_COLUMNS;
pub use formats::json::DEFAULT_TIME_FIELDS;
pub use formats::pattern::{ENVOY_DEFAULT, NGINX_COMBINED};
pub use input::{
    DEFAULT_MAX_KEYS, Format, LimitSpec, MAX_STACKED, NO_TIER, OTHER_TIER, ReplayOptions,
    ReplayPolicy, StackedLimit,
};
pub use replay::{ScanSummary, replay, scan};
pub use report::format::{limit_text, thousands, window_text};
pub use report::model::{
    CandidateReport, PeakRate, PolicyReport, Report, ReportDetails, StackedReport, TOP_KEYS,
    TopKey, UNPARSED_TEXT_CHARS, UnparsedLine,
};
pub use report::{render_html, render_text};
pub use time::{format_nginx_time, format_rfc3339_millis, format_utc_seconds};
