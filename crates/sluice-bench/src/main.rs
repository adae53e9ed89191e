//! `sluice-bench`: see the library docs and the README. The last line on stdout is the
//! JSON report; progress and a summary go to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{ArgGroup, Parser};
use sluice_bench::{BenchConfig, DistKind, Target};

#[derive(Debug, Parser)]
#[command(
    name = "sluice-bench",
    version,
    about = "Load generator for sluiced: POST /v1/check over keep-alive HTTP/1.1 (UDS or TCP)",
    group(ArgGroup::new("target").required(true).args(["unix", "http"]))
)]
struct Args {
    /// Unix socket of the server.
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// TCP address of the server.
    #[arg(long, value_name = "HOST:PORT")]
    http: Option<String>,
    /// Policy named in every check.
    #[arg(long, value_name = "NAME", default_value = "public")]
    policy: String,
    /// Distinct keys (`bench:000` ...); `hot` uses one.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    keys: u64,
    /// Key distribution: hot (one key), uniform, zipf (s = 1), sequential (every key in turn).
    #[arg(long, value_name = "uniform|zipf|hot", default_value = "uniform")]
    dist: DistKind,
    /// Connections, one request in flight on each.
    #[arg(long, value_name = "C", default_value_t = 64)]
    concurrency: usize,
    /// Measured time.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    duration: Duration,
    /// Unmeasured time before it.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    warmup: Duration,
    /// Cost of every check.
    #[arg(long, default_value_t = 1)]
    cost: u64,
    /// Request path.
    #[arg(long, default_value = "/v1/check")]
    path: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match bench(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn bench(args: Args) -> Result<()> {
    let target = match (args.unix, args.http) {
        (Some(path), _) => Target::Unix(path),
        (None, Some(addr)) => Target::Tcp(addr),
        // clap's group makes one of them required.
        (None, None) => anyhow::bail!("one of --unix or --http is required"),
    };
    let config = BenchConfig {
        target,
        policy: args.policy,
        keys: args.keys,
        dist: args.dist,
        concurrency: args.concurrency,
        duration: args.duration,
        warmup: args.warmup,
        cost: args.cost,
        path: args.path,
        progress: true,
    };
    let cpu_before = sluice_bench::process_cpu_seconds();
    let report = sluice_bench::run(&config).context("the run failed")?;
    if let (Some(before), Some(after)) = (cpu_before, sluice_bench::process_cpu_seconds()) {
        // Warm-up requests are not counted; scale them in by time, assuming a steady rate.
        let measured = config.duration.as_secs_f64();
        let share = measured / (measured + config.warmup.as_secs_f64());
        #[allow(clippy::cast_precision_loss)]
        let per_request = (after - before) * share * 1e6 / report.requests.max(1) as f64;
        eprintln!(
            "sluice-bench: own cpu {:.2} s over warm-up and run, ~{per_request:.1} µs per request",
            after - before
        );
    }
    println!(
        "{}",
        serde_json::to_string(&report).context("cannot encode the report")?
    );
    Ok(())
}
