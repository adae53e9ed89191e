//! `sluice`: ask a running sluiced from the shell, or replay access logs through a config's
//! policies (`sluice replay`, no daemon needed).
//!
//! Exit codes: 0 allowed (or replayed), 1 denied, 2 any error (daemon unreachable, bad input,
//! bad config, unreadable log).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use sluice_client::api::{
    CheckRequest, OverrideRequest, OverrideView, OverridesResponse, TopResponse,
};
use sluice_client::{Client, RawResponse};

mod ask;
mod candidate;
mod metrics_text;
mod replay;
mod status;

use ask::{
    TOKEN_VAR, TopSpan, admin_token, authorization, bearer, printed_raw, query_escape, refused,
    report_error,
};

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Client of the sluice rate-limiter daemon"
)]
struct Cli {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Target {
    /// The daemon's Unix socket.
    #[arg(
        long,
        global = true,
        env = "SLUICE_SOCKET",
        default_value = "/tmp/sluiced.sock"
    )]
    socket: PathBuf,
    /// Talk to the daemon over TCP at HOST:PORT (or http://HOST:PORT) instead of the socket;
    /// https://HOST:PORT for a listener with TLS (`[listen.tls]`).
    #[arg(long, global = true)]
    http: Option<String>,
    /// With https://: the CA bundle (PEM) the daemon's certificate must chain to (default: the
    /// system's roots).
    #[arg(long, global = true, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// With https://: a client certificate chain (PEM) for a daemon that requires one (mTLS).
    #[arg(long, global = true, value_name = "FILE", requires = "key_file")]
    cert_file: Option<PathBuf>,
    /// The private key (PEM) of --cert-file.
    #[arg(long, global = true, value_name = "FILE", requires = "cert_file")]
    key_file: Option<PathBuf>,
    /// Give up after this many milliseconds.
    #[arg(long, global = true, default_value_t = 5000)]
    timeout_ms: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// May KEY make a request under POLICY? Consumes COST when allowed.
    Check {
        /// The policy to check against, as named in the daemon's config.
        policy: String,
        /// Whose limit: any string of 1 to 512 bytes (`user:123`, `ip:192.0.2.1`).
        key: String,
        /// Units the request consumes (default 1; 0 only peeks).
        #[arg(long)]
        cost: Option<u64>,
        /// The caller's plan tier, when the policy has tiers.
        #[arg(long)]
        tier: Option<String>,
        /// The endpoint, recorded as a metrics label only.
        #[arg(long)]
        endpoint: Option<String>,
        /// Print the daemon's JSON body as it came.
        #[arg(long)]
        json: bool,
    },
    /// Change limits at run time (needs the daemon's admin.token).
    Admin {
        /// The daemon's `admin.token`. Default: $SLUICE_ADMIN__TOKEN (the variable the daemon
        /// reads), else $SLUICE_ADMIN_TOKEN.
        #[arg(long, env = TOKEN_VAR, hide_env_values = true)]
        token: Option<String>,
        #[command(subcommand)]
        action: AdminAction,
    },
    /// A candidate limit of a policy's tier: show how it would do, set it, promote it to
    /// the limit, clear it (needs the daemon's admin.token).
    Candidate {
        /// The daemon's `admin.token`. Default: $SLUICE_ADMIN__TOKEN, else $SLUICE_ADMIN_TOKEN.
        #[arg(long, env = TOKEN_VAR, hide_env_values = true)]
        token: Option<String>,
        #[command(subcommand)]
        action: candidate::CandidateAction,
    },
    /// The keys of POLICY most checked or most rejected recently (this daemon's view).
    Top {
        /// The policy whose keys to show.
        policy: String,
        /// Rank by `rejected`, `checked` or `candidate_rejected` (the candidate limit's would-be
        /// rejections).
        #[arg(long, default_value = "rejected")]
        by: String,
        #[command(flatten)]
        span: TopSpan,
        /// Print the daemon's JSON body as it came.
        #[arg(long)]
        json: bool,
        /// The daemon's `admin.token`: a daemon with one set shows raw keys only to its
        /// holder. Default: $SLUICE_ADMIN__TOKEN, else $SLUICE_ADMIN_TOKEN.
        #[arg(long, env = TOKEN_VAR, hide_env_values = true)]
        token: Option<String>,
    },
    /// Every policy's last hour: checks, 429 ratio, fail-open and fail-closed counts, p99,
    /// the most limited keys and the SLO burn rates (this daemon's view); then the units
    /// charged to each usage policy and tier since the daemon started.
    Status {
        /// Print the daemon's JSON body as it came.
        #[arg(long)]
        json: bool,
        /// The daemon's `admin.token`, as for `top` (the status lists limited keys).
        #[arg(long, env = TOKEN_VAR, hide_env_values = true)]
        token: Option<String>,
    },
    /// Replay access logs through the policies of a config file, each request at its own
    /// time: would-be 429s, peak rates and a suggested limit per policy and tier (no daemon
    /// needed).
    Replay(replay::ReplayArgs),
}

#[derive(Debug, Subcommand)]
enum AdminAction {
    /// Set TIER of POLICY to LIMIT (and BURST) on every daemon sharing the backend.
    Set {
        /// The policy, as named in the daemon's config.
        policy: String,
        /// The tier to change (a tier the config does not name is created).
        tier: String,
        /// Requests per window of the policy.
        #[arg(long)]
        limit: u64,
        /// Bucket capacity (token_bucket, gcra, leaky_bucket); default: the limit.
        #[arg(long)]
        burst: Option<u64>,
    },
    /// Remove the override of TIER of POLICY: back to the config file's limit.
    Rm {
        /// The policy, as named in the daemon's config.
        policy: String,
        /// The tier whose override to remove.
        tier: String,
    },
    /// List the overrides stored in the backend.
    Ls,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        // Local work, no daemon: no runtime and no client.
        Command::Replay(args) => return replay::run(args),
        command => command,
    };
    match run(cli.target, command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(target: Target, command: Command) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let client = match target.http.as_deref() {
        Some(url) => match url.strip_prefix("https://") {
            Some(addr) => Client::https(
                addr.trim_end_matches('/'),
                &sluice_client::TlsFiles {
                    ca_file: target.ca_file.clone(),
                    cert_file: target.cert_file.clone(),
                    key_file: target.key_file.clone(),
                },
            )?,
            None => Client::tcp(
                url.strip_prefix("http://")
                    .unwrap_or(url)
                    .trim_end_matches('/'),
            ),
        },
        None => Client::unix(target.socket.clone()),
    }
    .with_timeout(Duration::from_millis(target.timeout_ms));
    runtime.block_on(async {
        match command {
            Command::Check {
                policy,
                key,
                cost,
                tier,
                endpoint,
                json,
            } => {
                let request = CheckRequest {
                    policy,
                    key,
                    cost,
                    tier,
                    endpoint,
                };
                check(&client, &request, json).await
            }
            Command::Top {
                policy,
                by,
                span,
                json,
                token,
            } => {
                let query = TopQuery {
                    policy: &policy,
                    by: &by,
                    n: span.n,
                    period: &span.period,
                };
                top(&client, &query, admin_token(token).as_deref(), json).await
            }
            Command::Status { json, token } => {
                let auth = bearer(admin_token(token).as_deref());
                let raw = client
                    .send(
                        http::Method::GET,
                        "/v1/status",
                        &authorization(auth.as_deref()),
                        Vec::new(),
                    )
                    .await?;
                if let Some(code) = printed_raw(&raw, json) {
                    return Ok(code);
                }
                print!("{}", status::table(&raw.json()?));
                // Usage policies' units, from the counter on /metrics (not part of the
                // status document); a daemon serving /metrics elsewhere shows none.
                let metrics = client
                    .send(http::Method::GET, "/metrics", &[], Vec::new())
                    .await?;
                if metrics.status == 200 {
                    print!(
                        "{}",
                        status::usage_table(&String::from_utf8_lossy(&metrics.body))
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            Command::Admin { token, action } => {
                admin(&client, admin_token(token).as_deref(), action).await
            }
            Command::Candidate { token, action } => {
                candidate::run(&client, admin_token(token).as_deref(), action).await
            }
            Command::Replay(args) => Ok(replay::run(args)),
        }
    })
}

async fn check(client: &Client, request: &CheckRequest, json: bool) -> anyhow::Result<ExitCode> {
    let body = serde_json::to_vec(request)?;
    let raw = client
        .send(
            http::Method::POST,
            "/v1/check",
            &[("content-type", "application/json")],
            body,
        )
        .await?;
    if json {
        println!("{}", String::from_utf8_lossy(&raw.body));
    }
    match raw.status {
        200 | 429 => {
            if !json {
                print_decision(&raw)?;
            }
            Ok(ExitCode::from(if raw.status == 200 { 0 } else { 1 }))
        }
        _ => {
            if !json {
                report_error(&raw);
            }
            Ok(ExitCode::from(2))
        }
    }
}

/// What `sluice top` asks for.
struct TopQuery<'a> {
    policy: &'a str,
    by: &'a str,
    n: u64,
    period: &'a str,
}

async fn top(
    client: &Client,
    query: &TopQuery<'_>,
    token: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let path = format!(
        "/v1/top?policy={}&by={}&n={}&period={}",
        query_escape(query.policy),
        query_escape(query.by),
        query.n,
        query_escape(query.period)
    );
    let auth = bearer(token);
    let headers = authorization(auth.as_deref());
    let raw = client
        .send(http::Method::GET, &path, &headers, Vec::new())
        .await?;
    if let Some(code) = printed_raw(&raw, json) {
        return Ok(code);
    }
    let report: TopResponse = raw.json()?;
    println!(
        "policy {} by {} over {}: {} checked, {} rejected (counts approximate, +{} checked / +{} rejected at most)",
        report.policy,
        report.by,
        report.period,
        report.total_checked,
        report.total_rejected,
        report.error_bound.checked,
        report.error_bound.rejected
    );
    let width = report
        .keys
        .iter()
        .map(|k| k.key.len())
        .max()
        .unwrap_or(3)
        .max(3);
    println!(
        "{:<width$}  {:>10}  {:>10}  {:>6}",
        "key", "rejected", "checked", "ratio"
    );
    for entry in &report.keys {
        println!(
            "{:<width$}  {:>10}  {:>10}  {:>5.1}%",
            entry.key,
            entry.rejected,
            entry.checked,
            entry.ratio * 100.0
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn admin(
    client: &Client,
    token: Option<&str>,
    action: AdminAction,
) -> anyhow::Result<ExitCode> {
    // Without a token the request still goes: the daemon says whether its admin API is off
    // (404 admin_disabled) or wants a token (401).
    let auth = bearer(token);
    let headers = authorization(auth.as_deref());
    let tier_path = |policy: &str, tier: &str| {
        format!(
            "/v1/admin/policies/{}/tiers/{}",
            query_escape(policy),
            query_escape(tier)
        )
    };
    let raw = match &action {
        AdminAction::Set {
            policy,
            tier,
            limit,
            burst,
        } => {
            let body = serde_json::to_vec(&OverrideRequest {
                limit: *limit,
                burst: *burst,
            })?;
            client
                .send(http::Method::PUT, &tier_path(policy, tier), &headers, body)
                .await?
        }
        AdminAction::Rm { policy, tier } => {
            client
                .send(
                    http::Method::DELETE,
                    &tier_path(policy, tier),
                    &headers,
                    Vec::new(),
                )
                .await?
        }
        AdminAction::Ls => {
            client
                .send(
                    http::Method::GET,
                    "/v1/admin/policies",
                    &headers,
                    Vec::new(),
                )
                .await?
        }
    };
    if raw.status != 200 {
        return Ok(refused(&raw, token));
    }
    match action {
        AdminAction::Set { policy, tier, .. } => {
            let set: OverrideView = raw.json()?;
            let burst = set
                .burst
                .map_or_else(|| "default".to_owned(), |b| b.to_string());
            println!("{policy}/{tier}: limit {} burst {burst}", set.limit);
        }
        AdminAction::Rm { policy, tier } => println!("{policy}/{tier}: override removed"),
        AdminAction::Ls => {
            let list: OverridesResponse = raw.json()?;
            println!(
                "{:<24}  {:<16}  {:>10}  {:>10}",
                "policy", "tier", "limit", "burst"
            );
            for o in list.overrides {
                let burst = o.burst.map_or_else(|| "-".to_owned(), |b| b.to_string());
                println!(
                    "{:<24}  {:<16}  {:>10}  {:>10}",
                    o.policy, o.tier, o.limit, burst
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_decision(raw: &RawResponse) -> anyhow::Result<()> {
    let body: sluice_client::api::CheckResponse = raw.json()?;
    let verdict = if body.allowed { "allowed" } else { "denied" };
    let mut line = format!(
        "{verdict}: policy={} limit={} remaining={} reset={}",
        body.policy, body.limit, body.remaining, body.reset
    );
    if let Some(retry) = body.retry_after {
        line.push_str(&format!(" retry_after={retry}s"));
    }
    if body.delay_ms > 0 {
        line.push_str(&format!(" delay={}ms", body.delay_ms));
    }
    if body.degraded {
        line.push_str(" (degraded: backend unavailable, failing open)");
    }
    println!("{line}");
    Ok(())
}
