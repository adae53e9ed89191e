//! `rls-load`: a ghz-like load generator for `ShouldRateLimit`, for `scripts/bench-peers`.
//! CONNECTIONS HTTP/2 connections carry CONCURRENCY calls in flight in all (each slot sends
//! its next call when the last is answered), on one thread like `sluice-bench`, so the driver
//! takes about one core and the server under test the rest. Every call asks DESCRIPTORS
//! descriptors of domain `bench` (`user`, then `tenant`, then `ip`, one entry each), their
//! values drawn uniformly from KEYS. The last stdout line is the JSON report of
//! `sluice-bench` (`allowed` = calls answered `OK`, `rejected` = `OVER_LIMIT`).
//!
//! `rls-load --grpc 127.0.0.1:8081 --descriptors 3 --concurrency 64 --duration 5s`

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use sluice_bench::Report;
use sluice_bench::tally::{Outcome, Tally};
use sluice_core::SplitMix;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use sluice_server::rls::pb::RateLimitRequest;
use sluice_server::rls::pb::rate_limit_response::Code;
use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::{Channel, Endpoint};

/// The entry key of each descriptor, in order.
const ENTRY_KEYS: [&str; 3] = ["user", "tenant", "ip"];

#[derive(Debug, Parser)]
#[command(
    name = "rls-load",
    about = "Load generator for the Envoy RLS ShouldRateLimit (gRPC, TCP)"
)]
struct Args {
    /// TCP address of the server.
    #[arg(long, value_name = "HOST:PORT")]
    grpc: String,
    /// Descriptors per call, 1 to 3.
    #[arg(long, value_name = "N", default_value_t = 1)]
    descriptors: usize,
    /// Distinct values of each descriptor entry.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    keys: u64,
    /// Calls in flight in all.
    #[arg(long, value_name = "C", default_value_t = 64)]
    concurrency: usize,
    /// HTTP/2 connections the calls share.
    #[arg(long, value_name = "N", default_value_t = 2)]
    connections: usize,
    /// Measured time.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    duration: Duration,
    /// Unmeasured time before it.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    warmup: Duration,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(1..=ENTRY_KEYS.len()).contains(&args.descriptors) {
        bail!("--descriptors must be 1 to {}", ENTRY_KEYS.len());
    }
    if args.concurrency == 0 || args.connections == 0 || args.keys == 0 {
        bail!("--concurrency, --connections and --keys must be at least 1");
    }
    if args.duration.is_zero() {
        bail!("--duration must be above zero");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let report = runtime.block_on(drive(&args))?;
    println!(
        "{}",
        serde_json::to_string(&report).context("cannot encode the report")?
    );
    Ok(())
}

async fn drive(args: &Args) -> Result<Report> {
    let endpoint = Endpoint::from_shared(format!("http://{}", args.grpc))
        .with_context(|| format!("--grpc {}", args.grpc))?
        .tcp_nodelay(true);
    let mut channels = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        channels.push(
            endpoint
                .connect()
                .await
                .with_context(|| format!("cannot connect to {}", args.grpc))?,
        );
    }
    let stats = Rc::new(RefCell::new(Tally::new()?));
    let start = Instant::now();
    let measure_from = start + args.warmup;
    let end = measure_from + args.duration;
    let local = tokio::task::LocalSet::new();
    for slot in 0..args.concurrency {
        let client = RateLimitServiceClient::new(channels[slot % channels.len()].clone());
        local.spawn_local(slot_loop(
            client,
            SplitMix(slot as u64 + 1),
            args.descriptors,
            args.keys,
            Rc::clone(&stats),
            (measure_from, end),
        ));
    }
    local.await;
    let report = stats.borrow().report(args.duration.as_secs_f64());
    Ok(report)
}

/// One call in flight at a time until `end`; only calls sent and answered in the measured
/// window count.
async fn slot_loop(
    mut client: RateLimitServiceClient<Channel>,
    mut rng: SplitMix,
    descriptors: usize,
    keys: u64,
    stats: Rc<RefCell<Tally>>,
    (measure_from, end): (Instant, Instant),
) {
    loop {
        let sent = Instant::now();
        if sent >= end {
            return;
        }
        let request = RateLimitRequest {
            domain: "bench".to_owned(),
            descriptors: ENTRY_KEYS[..descriptors]
                .iter()
                .map(|key| RateLimitDescriptor {
                    entries: vec![Entry {
                        key: (*key).to_owned(),
                        value: rng.below(keys).to_string(),
                    }],
                    ..RateLimitDescriptor::default()
                })
                .collect(),
            hits_addend: 1,
        };
        let answer = client.should_rate_limit(request).await;
        let done = Instant::now();
        if sent < measure_from || done >= end {
            continue;
        }
        let outcome = match answer.map(|a| a.into_inner().overall_code) {
            Ok(code) if code == Code::Ok as i32 => Outcome::Allowed,
            Ok(code) if code == Code::OverLimit as i32 => Outcome::Rejected,
            _ => Outcome::Error,
        };
        stats.borrow_mut().measured(outcome, done - sent);
    }
}
