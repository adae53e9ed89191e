//! `sluice candidate show|set|promote|clear POLICY [--tier T]`: a (policy, tier)'s candidate
//! limit through the admin API, and what `show` measures of it on the daemon it asks: the 429
//! rate of the limit in force beside the candidate's would-be rate (from `/metrics`:
//! `rate_limit_requests_total` by `status` against `rate_limit_candidate_decisions_total` by
//! `outcome`), and the keys that would change side (`/v1/top` by `rejected` against
//! `by=candidate_rejected`).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde::Serialize;
use sluice_client::api::{
    CandidateRemoved, CandidateRequest, CandidateView, ParamsView, PromotedView, TopResponse,
};
use sluice_client::{Client, RawResponse};

use crate::ask::{TopSpan, authorization, bearer, query_escape, refused, report_error};
use crate::metrics_text::{Sample, samples};

/// The tier naming the policy's own limit.
const NO_TIER: &str = "none";

#[derive(Debug, Subcommand)]
pub enum CandidateAction {
    /// The candidate of TIER of POLICY, its would-be 429 rate beside the limit's, and the keys
    /// that would change side (this daemon's view).
    Show {
        /// The policy, as named in the daemon's config.
        policy: String,
        /// The tier (`none`: the policy's own limit, and the tiers the policy does not name).
        #[arg(long, default_value = NO_TIER)]
        tier: String,
        /// Rates over this many seconds from now (two scrapes of /metrics); default: the
        /// counters since the daemon started.
        #[arg(long)]
        over: Option<u64>,
        /// The top lists to compare.
        #[command(flatten)]
        span: TopSpan,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Judge LIMIT (and BURST, WINDOW, ALGORITHM) beside TIER of POLICY on every daemon
    /// sharing the backend; it replaces the config file's candidate of that tier.
    Set {
        policy: String,
        #[arg(long, default_value = NO_TIER)]
        tier: String,
        /// Requests per window.
        #[arg(long)]
        limit: u64,
        /// Bucket capacity; default: the candidate's limit.
        #[arg(long)]
        burst: Option<u64>,
        /// A duration such as `60s`; default: the policy's window.
        #[arg(long)]
        window: Option<String>,
        /// Default: the policy's algorithm.
        #[arg(long)]
        algorithm: Option<String>,
    },
    /// Make the candidate of TIER the limit (an override of limit and burst) and clear it.
    Promote {
        policy: String,
        #[arg(long, default_value = NO_TIER)]
        tier: String,
    },
    /// Remove the candidate set at run time: the config file's, if any, is in force again.
    Clear {
        policy: String,
        #[arg(long, default_value = NO_TIER)]
        tier: String,
    },
}

/// Runs `action` against the daemon behind `client` with the admin `token`.
pub async fn run(
    client: &Client,
    token: Option<&str>,
    action: CandidateAction,
) -> anyhow::Result<ExitCode> {
    let auth = bearer(token);
    let headers = authorization(auth.as_deref());
    let ask = Ask {
        client,
        headers: &headers,
        token,
    };
    match action {
        CandidateAction::Show {
            policy,
            tier,
            over,
            span,
            json,
        } => {
            let query = ShowQuery {
                policy: &policy,
                tier: &tier,
                over: over.map(Duration::from_secs),
                n: span.n,
                period: &span.period,
            };
            show(&ask, &query, json).await
        }
        CandidateAction::Set {
            policy,
            tier,
            limit,
            burst,
            window,
            algorithm,
        } => {
            let body = serde_json::to_vec(&CandidateRequest {
                limit,
                burst,
                window,
                algorithm,
            })?;
            let raw = ask
                .send(http::Method::PUT, &path(&policy, &tier, ""), body)
                .await?;
            let Some(view) = ask.answer::<CandidateView>(&raw)? else {
                return Ok(refused(&raw, token));
            };
            println!("{}", describe(&view));
            Ok(ExitCode::SUCCESS)
        }
        CandidateAction::Promote { policy, tier } => {
            let raw = ask
                .send(
                    http::Method::POST,
                    &path(&policy, &tier, "/promote"),
                    Vec::new(),
                )
                .await?;
            let Some(done) = ask.answer::<PromotedView>(&raw)? else {
                return Ok(refused(&raw, token));
            };
            let after = if done.source == "file" {
                "the config file still names the candidate: it stays judged until you remove it from the file"
            } else {
                "the run-time candidate is cleared (the config file's of the tier, if any, is judged again)"
            };
            println!(
                "{policy}/{tier}: limit {}→{} burst {}→{} (promoted candidate); {after}",
                done.previous.limit, done.limit.limit, done.previous.burst, done.limit.burst
            );
            Ok(ExitCode::SUCCESS)
        }
        CandidateAction::Clear { policy, tier } => {
            let raw = ask
                .send(http::Method::DELETE, &path(&policy, &tier, ""), Vec::new())
                .await?;
            let Some(removed) = ask.answer::<CandidateRemoved>(&raw)? else {
                return Ok(refused(&raw, token));
            };
            match removed.in_force {
                Some(file) => println!(
                    "{policy}/{tier}: run-time candidate removed; the config file's is in force again: {}",
                    params(&file.candidate)
                ),
                None => println!("{policy}/{tier}: candidate removed; none is judged now"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The daemon and how to authorize to it.
struct Ask<'a> {
    client: &'a Client,
    headers: &'a [(&'a str, &'a str)],
    token: Option<&'a str>,
}

impl Ask<'_> {
    async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Vec<u8>,
    ) -> anyhow::Result<RawResponse> {
        Ok(self.client.send(method, path, self.headers, body).await?)
    }

    async fn get(&self, path: &str) -> anyhow::Result<RawResponse> {
        self.send(http::Method::GET, path, Vec::new()).await
    }

    /// A 200's body; `None` for any other answer, left to the caller to report.
    fn answer<T: serde::de::DeserializeOwned>(
        &self,
        raw: &RawResponse,
    ) -> anyhow::Result<Option<T>> {
        if raw.status != 200 {
            return Ok(None);
        }
        Ok(Some(raw.json()?))
    }
}

fn path(policy: &str, tier: &str, rest: &str) -> String {
    format!(
        "/v1/admin/policies/{}/tiers/{}/candidate{rest}",
        query_escape(policy),
        query_escape(tier)
    )
}

/// `150 per 60s, burst 150, fixed_window`.
fn params(p: &ParamsView) -> String {
    format!(
        "{} per {}, burst {}, {}",
        p.limit, p.window, p.burst, p.algorithm
    )
}

/// The candidate, where it comes from and the limit it is judged beside.
fn describe(view: &CandidateView) -> String {
    let source = match view.source.as_str() {
        "admin" => "set through the admin API",
        _ => "from the config file",
    };
    let promotable = if view.promotable {
        "yes"
    } else {
        "no: its window or algorithm is not the policy's; change the config file"
    };
    format!(
        "{}/{}: candidate {} ({source})\n  limit in force: {}\n  promotable: {promotable}",
        view.policy,
        view.tier,
        params(&view.candidate),
        params(&view.current)
    )
}

/// What `show` measures.
struct ShowQuery<'a> {
    policy: &'a str,
    tier: &'a str,
    over: Option<Duration>,
    n: u64,
    period: &'a str,
}

/// `sluice candidate show --json`.
#[derive(Debug, Serialize)]
struct Shown {
    candidate: CandidateView,
    rates: Rates,
    change_side: ChangeSide,
}

/// The 429 rate of the limit in force and the candidate's would-be rate, over the same span.
#[derive(Debug, Serialize)]
struct Rates {
    /// `since_start` (the counters as they are), or the seconds between two scrapes.
    over: String,
    limit: Rate,
    candidate: Rate,
}

#[derive(Debug, Default, Serialize, PartialEq)]
struct Rate {
    checks: u64,
    rejected: u64,
    /// `rejected / checks`; `null` without checks.
    ratio: Option<f64>,
}

impl Rate {
    fn of(checks: f64, rejected: f64) -> Rate {
        // Counters are integers; the text format writes them as floats.
        let (checks, rejected) = (checks.max(0.0) as u64, rejected.max(0.0) as u64);
        Rate {
            checks,
            rejected,
            ratio: (checks > 0).then(|| rejected as f64 / checks as f64),
        }
    }
}

/// Keys ranked among one top list and not the other (the lists are per policy, every tier).
#[derive(Debug, Serialize)]
struct ChangeSide {
    period: String,
    /// Among the candidate's most rejected keys and not the limit's: it would refuse them.
    would_be_rejected: Vec<KeyCounts>,
    /// Among the limit's most rejected keys and not the candidate's: it would let them pass.
    would_be_allowed: Vec<KeyCounts>,
}

#[derive(Debug, Serialize)]
struct KeyCounts {
    key: String,
    rejected: u64,
    candidate_rejected: u64,
}

async fn show(ask: &Ask<'_>, query: &ShowQuery<'_>, json: bool) -> anyhow::Result<ExitCode> {
    let raw = ask.get(&path(query.policy, query.tier, "")).await?;
    let Some(candidate) = ask.answer::<CandidateView>(&raw)? else {
        if json {
            println!("{}", String::from_utf8_lossy(&raw.body));
            return Ok(ExitCode::from(2));
        }
        return Ok(refused(&raw, ask.token));
    };
    let rates = match rates(ask, query).await? {
        Ok(rates) => rates,
        Err(raw) => {
            report_error(&raw);
            return Ok(ExitCode::from(2));
        }
    };
    let change_side = match change_side(ask, query).await? {
        Ok(side) => side,
        Err(raw) => return Ok(refused(&raw, ask.token)),
    };
    let shown = Shown {
        candidate,
        rates,
        change_side,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&shown)?);
    } else {
        print!("{}", text(&shown, query));
    }
    Ok(ExitCode::SUCCESS)
}

/// Both rates from `/metrics`: as they are, or the difference over `query.over`. `Err`: the
/// daemon's refusal.
async fn rates(ask: &Ask<'_>, query: &ShowQuery<'_>) -> anyhow::Result<Result<Rates, RawResponse>> {
    let scrape = || async {
        let raw = ask.get("/metrics").await?;
        anyhow::Ok(if raw.status == 200 {
            Ok(Counts::read(
                &String::from_utf8_lossy(&raw.body),
                query.policy,
                query.tier,
            ))
        } else {
            Err(raw)
        })
    };
    let first = match scrape().await? {
        Ok(counts) => counts,
        Err(raw) => return Ok(Err(raw)),
    };
    let (counts, over) = match query.over {
        None => (first, "since_start".to_owned()),
        Some(span) => {
            tokio::time::sleep(span).await;
            match scrape().await? {
                Ok(second) => (second.minus(&first), format!("{}s", span.as_secs())),
                Err(raw) => return Ok(Err(raw)),
            }
        }
    };
    Ok(Ok(Rates {
        over,
        limit: Rate::of(counts.allowed + counts.rejected, counts.rejected),
        candidate: Rate::of(
            counts.would_allow + counts.would_reject,
            counts.would_reject,
        ),
    }))
}

/// The counters of one (policy, tier) in a scrape.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Counts {
    allowed: f64,
    rejected: f64,
    would_allow: f64,
    would_reject: f64,
}

impl Counts {
    /// The counts of `policy` and `tier` in `text`. Tier `none` is the policy's own limit,
    /// which also decides (and its candidate judges) the checks naming a tier the policy does
    /// not have: `plan_tier` `none` and `other` both.
    fn read(text: &str, policy: &str, tier: &str) -> Counts {
        let tiers: &[&str] = if tier == NO_TIER {
            &[NO_TIER, "other"]
        } else {
            &[tier]
        };
        let mine = |sample: &Sample| {
            sample.label("policy") == Some(policy)
                && sample
                    .label("plan_tier")
                    .is_some_and(|t| tiers.contains(&t))
        };
        let [allowed, rejected] = split(
            text,
            "rate_limit_requests_total",
            ("status", ["allowed", "rejected"]),
            mine,
        );
        let [would_allow, would_reject] = split(
            text,
            "rate_limit_candidate_decisions_total",
            ("outcome", ["would_allow", "would_reject"]),
            mine,
        );
        Counts {
            allowed,
            rejected,
            would_allow,
            would_reject,
        }
    }

    fn minus(&self, earlier: &Counts) -> Counts {
        Counts {
            allowed: self.allowed - earlier.allowed,
            rejected: self.rejected - earlier.rejected,
            would_allow: self.would_allow - earlier.would_allow,
            would_reject: self.would_reject - earlier.would_reject,
        }
    }
}

/// The sums of the samples of `metric` that are `mine`, by the two values of `label`.
fn split(
    text: &str,
    metric: &str,
    (label, values): (&str, [&str; 2]),
    mine: impl Fn(&Sample) -> bool,
) -> [f64; 2] {
    let mut sums = [0.0; 2];
    for sample in samples(text, metric).iter().filter(|s| mine(s)) {
        if let Some(at) = values.iter().position(|v| sample.label(label) == Some(v)) {
            sums[at] += sample.value;
        }
    }
    sums
}

/// The keys in one of the two top lists and not the other. `Err`: the daemon's refusal.
async fn change_side(
    ask: &Ask<'_>,
    query: &ShowQuery<'_>,
) -> anyhow::Result<Result<ChangeSide, RawResponse>> {
    let mut lists = Vec::with_capacity(2);
    for by in ["rejected", "candidate_rejected"] {
        let at = format!(
            "/v1/top?policy={}&by={by}&n={}&period={}",
            query_escape(query.policy),
            query.n,
            query_escape(query.period)
        );
        let raw = ask.get(&at).await?;
        let Some(top) = ask.answer::<TopResponse>(&raw)? else {
            return Ok(Err(raw));
        };
        let counts: BTreeMap<String, u64> = top
            .keys
            .into_iter()
            .filter(|k| k.rejected > 0)
            .map(|k| (k.key, k.rejected))
            .collect();
        lists.push(counts);
    }
    let (limit, candidate) = (&lists[0], &lists[1]);
    let only = |of: &BTreeMap<String, u64>, not: &BTreeMap<String, u64>, of_candidate: bool| {
        let mut keys: Vec<KeyCounts> = of
            .iter()
            .filter(|(key, _)| !not.contains_key(*key))
            .map(|(key, &count)| KeyCounts {
                key: key.clone(),
                rejected: if of_candidate { 0 } else { count },
                candidate_rejected: if of_candidate { count } else { 0 },
            })
            .collect();
        keys.sort_by(|a, b| {
            (b.rejected + b.candidate_rejected).cmp(&(a.rejected + a.candidate_rejected))
        });
        keys
    };
    Ok(Ok(ChangeSide {
        period: query.period.to_owned(),
        would_be_rejected: only(candidate, limit, true),
        would_be_allowed: only(limit, candidate, false),
    }))
}

/// `show` as text.
fn text(shown: &Shown, query: &ShowQuery<'_>) -> String {
    use std::fmt::Write as _;
    let mut out = describe(&shown.candidate);
    let rate = |r: &Rate| match r.ratio {
        Some(ratio) => format!("{:.2} % ({} of {})", ratio * 100.0, r.rejected, r.checks),
        None => "no checks".to_owned(),
    };
    let over = match shown.rates.over.as_str() {
        "since_start" => "since the daemon started (the candidate's since it was set)".to_owned(),
        span => format!("over {span}"),
    };
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        "\n429 rate, {over}:\n  limit      {}\n  candidate  {}\n",
        rate(&shown.rates.limit),
        rate(&shown.rates.candidate)
    );
    let side = &shown.change_side;
    let _ = writeln!(
        out,
        "keys that would change side (top {} of policy {} by rejected and by candidate_rejected, last {}; every tier):",
        query.n, query.policy, side.period
    );
    if side.would_be_rejected.is_empty() && side.would_be_allowed.is_empty() {
        out.push_str("  none\n");
        return out;
    }
    let width = side
        .would_be_rejected
        .iter()
        .chain(&side.would_be_allowed)
        .map(|k| k.key.len())
        .max()
        .unwrap_or(3)
        .max(3);
    let _ = writeln!(
        out,
        "  {:<width$}  {:>10}  {:>10}  side",
        "key", "rejected", "candidate"
    );
    for (keys, verdict) in [
        (&side.would_be_rejected, "would be rejected"),
        (&side.would_be_allowed, "would be allowed"),
    ] {
        for k in keys {
            let _ = writeln!(
                out,
                "  {:<width$}  {:>10}  {:>10}  {verdict}",
                k.key, k.rejected, k.candidate_rejected
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
rate_limit_requests_total{status=\"allowed\",policy=\"p\",endpoint=\"none\",plan_tier=\"none\"} 8\n\
rate_limit_requests_total{status=\"allowed\",policy=\"p\",endpoint=\"other\",plan_tier=\"none\"} 2\n\
rate_limit_requests_total{status=\"rejected\",policy=\"p\",endpoint=\"none\",plan_tier=\"other\"} 5\n\
rate_limit_requests_total{status=\"rejected\",policy=\"p\",endpoint=\"none\",plan_tier=\"pro\"} 7\n\
rate_limit_requests_total{status=\"rejected\",policy=\"q\",endpoint=\"none\",plan_tier=\"none\"} 9\n\
rate_limit_candidate_decisions_total{policy=\"p\",plan_tier=\"none\",outcome=\"would_allow\"} 12\n\
rate_limit_candidate_decisions_total{policy=\"p\",plan_tier=\"none\",outcome=\"would_reject\"} 3\n\
rate_limit_candidate_decisions_total{policy=\"p\",plan_tier=\"pro\",outcome=\"would_reject\"} 1\n";

    #[test]
    fn counts_sum_every_endpoint_and_tier_none_takes_the_unknown_tiers() {
        let none = Counts::read(SCRAPE, "p", "none");
        assert_eq!(
            none,
            Counts {
                allowed: 10.0,
                rejected: 5.0,
                would_allow: 12.0,
                would_reject: 3.0
            }
        );
        let pro = Counts::read(SCRAPE, "p", "pro");
        assert_eq!((pro.rejected, pro.would_reject), (7.0, 1.0));
        assert_eq!(
            Rate::of(none.allowed + none.rejected, none.rejected),
            Rate {
                checks: 15,
                rejected: 5,
                ratio: Some(5.0 / 15.0)
            }
        );
        assert_eq!(Rate::of(0.0, 0.0).ratio, None);
    }
}
