//! `sluice replay`: access logs replayed through the policies of a config file (compiled by
//! the daemon's own compile, so what the daemon would enforce is what is replayed), printed
//! as a table per policy, as the `--json` document, or drawn in a `--report` HTML page. The
//! engine and its semantics are `sluice-replay`'s.
//!
//! Exit codes: 0 replayed, 2 a bad config, an unreadable log or a bad flag.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use sluice_config::policy::{Limit, PolicySet};
use sluice_config::{Compiled, ConfigSource};
use sluice_replay::{
    Format, ReplayOptions, ReplayPolicy, Report, StackedLimit, render_html, render_text, replay,
};

/// `sluice replay`'s flags.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The sluiced config whose policies to replay through (`SLUICE_` variables apply over
    /// it, as for the daemon).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Access logs (gzip is read directly); several are merged in time order.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// The logs' format.
    #[arg(long, value_enum, default_value_t = LogFormat::Nginx)]
    format: LogFormat,
    /// nginx: the `log_format` string the logs were written with (default: `combined`).
    #[arg(long, value_name = "NGINX FORMAT")]
    log_format: Option<String>,
    /// JSON: the field holding each line's time (default: `time`, else `timestamp`).
    #[arg(long, value_name = "FIELD")]
    time_field: Option<String>,
    /// Each request's key, a template of `$variables` and text (default: `ip:$remote_addr`
    /// for nginx and JSON, `ip:$x_forwarded_for` for Envoy, `$key` for CSV).
    #[arg(long, value_name = "EXPR")]
    key: Option<String>,
    /// Replay every line through this policy only (default: every policy, unless a CSV line
    /// names its own).
    #[arg(long, value_name = "POLICY")]
    policy: Option<String>,
    /// Each request's tier, a template as for --key (a CSV `tier` column wins).
    #[arg(long, value_name = "EXPR")]
    tier: Option<String>,
    /// Judge each tier's candidate limit (`[policies.P.candidate]`) beside its limit.
    #[arg(long)]
    candidate: bool,
    /// Each request's cost, a template as for --key giving a whole number (e.g.
    /// `$usage_total_tokens`: the tokens a JSON log's `usage.total_tokens` says the answer
    /// used); a line without one is unparsed. Default: a CSV `cost` column, else 1.
    #[arg(long, value_name = "EXPR")]
    cost: Option<String>,
    /// Let the suggested limit reject up to this share of requests too (0.01 = 1 %): it is
    /// then the larger of the keys rule's and this rule's. Default: the keys rule alone (at
    /// most 1 % of keys exceed it), which a few abusive keys cannot raise.
    #[arg(long, value_name = "SHARE")]
    max_reject: Option<f64>,
    /// Also write a self-contained HTML report (charts inline, nothing fetched) to FILE.
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
    /// Print the JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Nginx,
    Envoy,
    Json,
    Csv,
}

/// Runs `sluice replay`.
pub fn run(args: ReplayArgs) -> ExitCode {
    match replay_and_print(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sluice replay: {message}");
            ExitCode::from(2)
        }
    }
}

fn replay_and_print(args: ReplayArgs) -> Result<(), String> {
    let options = options(&args)?;
    // The daemon's own compile; the backend is never connected to, so no Redis client is asked
    // about its URL.
    let compiled: Compiled = sluice_config::load(&ConfigSource::File(args.config.clone()), None)
        .map_err(|error| error.to_string())?;
    let policies = replay_policies(&compiled.policies);
    let report = replay(&policies, &args.logs, &options).map_err(|error| error.to_string())?;
    print_unparsed(&report);
    if let Some(path) = &args.report {
        let page = render_html(&report).map_err(|error| error.to_string())?;
        std::fs::write(path, page)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        eprintln!("sluice replay: report written to {}", path.display());
    }
    if args.json {
        let document = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{document}");
    } else {
        print!("{}", render_text(&report));
    }
    Ok(())
}

/// The replay options of the flags; a flag that does not fit the format is refused.
fn options(args: &ReplayArgs) -> Result<ReplayOptions, String> {
    if args.log_format.is_some() && args.format != LogFormat::Nginx {
        return Err("--log-format is for --format nginx".to_owned());
    }
    if args.time_field.is_some() && args.format != LogFormat::Json {
        return Err("--time-field is for --format json".to_owned());
    }
    let format = match args.format {
        LogFormat::Nginx => Format::Nginx {
            log_format: args.log_format.clone(),
        },
        LogFormat::Envoy => Format::Envoy,
        LogFormat::Json => Format::Json {
            time_field: args.time_field.clone(),
        },
        LogFormat::Csv => Format::Csv,
    };
    let mut options = ReplayOptions::new(format);
    options.key = args.key.clone();
    options.policy = args.policy.clone();
    options.tier = args.tier.clone();
    options.cost = args.cost.clone();
    options.candidate = args.candidate;
    options.max_reject = args.max_reject;
    // Drawn only when stderr is a terminal.
    options.progress = true;
    Ok(options)
}

/// The compiled policies as the replay takes them, by name: each tier's limit, stacked
/// limits and candidate exactly as the daemon resolved them (`none` = the policy's own), and
/// whether it is a usage policy.
fn replay_policies(policies: &PolicySet) -> Vec<ReplayPolicy> {
    let mut replayed: Vec<ReplayPolicy> = policies
        .iter()
        .map(|policy| {
            let mut replay_policy = ReplayPolicy::new(policy.name.as_ref(), policy.base.params);
            replay_policy.usage = policy.usage;
            add_tier(&mut replay_policy, sluice_replay::NO_TIER, &policy.base);
            for (tier, limit) in &policy.tiers {
                replay_policy.tiers.insert(tier.to_string(), limit.params);
                add_tier(&mut replay_policy, tier, limit);
            }
            replay_policy
        })
        .collect();
    replayed.sort_by(|a, b| a.name.cmp(&b.name));
    replayed
}

/// The candidate and the stacked limits of `tier` (`none`: the policy's own).
fn add_tier(replay_policy: &mut ReplayPolicy, tier: &str, limit: &Limit) {
    if let Some(candidate) = limit.candidate {
        replay_policy.candidates.insert(tier.to_owned(), candidate);
    }
    if !limit.stacked.is_empty() {
        let stack = limit
            .stacked
            .iter()
            .map(|stacked| StackedLimit {
                label: stacked.label.to_string(),
                params: stacked.params,
            })
            .collect();
        replay_policy.stacks.insert(tier.to_owned(), stack);
    }
}

/// The unparsed count and the first lines that could not be replayed, on stderr.
fn print_unparsed(report: &Report) {
    if report.unparsed == 0 {
        return;
    }
    eprintln!(
        "sluice replay: {} of {} lines could not be replayed; the first:",
        report.unparsed, report.lines
    );
    for example in &report.details.unparsed_examples {
        eprintln!(
            "  {}:{}: {}: {}",
            example.file.display(),
            example.line,
            example.reason,
            example.text
        );
    }
}
