//! `sluice`: ask a running sluiced from the shell.
//!
//! Exit codes: 0 allowed, 1 denied, 2 any error (daemon unreachable, bad input).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use sluice_client::api::{CheckRequest, ErrorBody};
use sluice_client::{Client, RawResponse};

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
    /// Talk to the daemon over TCP at HOST:PORT instead of the socket.
    #[arg(long, global = true)]
    http: Option<String>,
    /// Give up after this many milliseconds.
    #[arg(long, global = true, default_value_t = 5000)]
    timeout_ms: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// May KEY make a request under POLICY? Consumes COST when allowed.
    Check {
        policy: String,
        key: String,
        #[arg(long)]
        cost: Option<u64>,
        #[arg(long)]
        tier: Option<String>,
        #[arg(long)]
        endpoint: Option<String>,
        /// Print the daemon's JSON body as it came.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let client = match &cli.target.http {
        Some(addr) => Client::tcp(addr.clone()),
        None => Client::unix(cli.target.socket.clone()),
    }
    .with_timeout(Duration::from_millis(cli.target.timeout_ms));
    runtime.block_on(async {
        match cli.command {
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
        status => {
            if !json {
                match raw.json::<ErrorBody>() {
                    Ok(error) => eprintln!("sluice: {status} {}: {}", error.error, error.message),
                    Err(_) => eprintln!("sluice: {status}: {}", String::from_utf8_lossy(&raw.body)),
                }
            }
            Ok(ExitCode::from(2))
        }
    }
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
