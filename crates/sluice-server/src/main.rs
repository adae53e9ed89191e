//! `sluiced`: parses arguments, loads the config, binds the listeners and turns signals into
//! reloads and a graceful stop. Everything else lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use sluice_server::clock::SystemClock;
use sluice_server::config::{self, Config, ConfigSource};
use sluice_server::server::{self, Listeners};
use sluice_server::telemetry::{self, Telemetry};
use sluice_server::{App, backend};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

/// mimalloc rather than the system allocator: a check allocates a few small buffers (the
/// answer body, header values), and glibc malloc spent ~4.7k instructions per request on them
/// (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "sluiced", version, about = "The sluice rate-limiter daemon")]
struct Args {
    /// TOML config file (default: the built-in policies of examples/sluice.toml).
    #[arg(long, value_name = "FILE", conflicts_with = "check_config")]
    config: Option<PathBuf>,
    /// Validate FILE and exit: 0 valid, 2 invalid.
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = args.check_config {
        return match config::load(&ConfigSource::File(path.clone())) {
            Ok(config) => {
                println!(
                    "{}: valid, {} policies",
                    path.display(),
                    config.policies.len()
                );
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("{err}");
                ExitCode::from(2)
            }
        };
    }
    let source = args
        .config
        .map_or(ConfigSource::Builtin, ConfigSource::File);
    let config = match config::load(&source) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("sluiced: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Inside the runtime: the trace exporter's gRPC channel lives on it.
    let telemetry = match runtime.block_on(async { telemetry::init(&config.telemetry) }) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("sluiced: {err}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(run(source, config, &telemetry)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    };
    // The last spans leave while the runtime still drives the exporter's channel.
    let flushed = runtime
        .block_on(async move { tokio::task::spawn_blocking(move || telemetry.shutdown()).await });
    if let Err(err) = flushed {
        tracing::warn!("trace exporter shutdown: {err}");
    }
    code
}

async fn run(source: ConfigSource, config: Config, telemetry: &Telemetry) -> Result<()> {
    let store = backend::build_store(&config.backend).context("cannot start the backend")?;
    let app = App::new(&config, store, Arc::new(SystemClock))
        .map_err(|errors| anyhow::anyhow!("invalid policies: {errors:?}"))?;

    let mut listeners = Listeners::default();
    let mut described = Vec::new();
    if !config.listen.http.is_empty() {
        let tcp = TcpListener::bind(&config.listen.http)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen.http))?;
        described.push(format!("http:{}", tcp.local_addr()?));
        listeners.http = Some(tcp);
    }
    if !config.listen.metrics.is_empty() {
        let tcp = TcpListener::bind(&config.listen.metrics)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen.metrics))?;
        described.push(format!("metrics:{}", tcp.local_addr()?));
        listeners.metrics = Some(tcp);
    }
    if !config.listen.grpc.is_empty() && config.listen.grpc_unix_path().is_none() {
        let tcp = TcpListener::bind(&config.listen.grpc)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen.grpc))?;
        described.push(format!("grpc:{}", tcp.local_addr()?));
        listeners.grpc = Some(tcp);
    }
    // The sockets last: a failure above leaves no socket file behind.
    if let Some(path) = config.listen.unix_path() {
        listeners.unix = Some(
            server::bind_unix(path, config.listen.mode())
                .with_context(|| format!("cannot listen on {}", path.display()))?,
        );
        described.push(format!("unix:{}", path.display()));
    }
    if let Some(path) = config.listen.grpc_unix_path() {
        match server::bind_unix(path, config.listen.mode()) {
            Ok(bound) => listeners.grpc_unix = Some(bound),
            Err(err) => {
                if let Some(unix) = &listeners.unix {
                    let _ = std::fs::remove_file(&unix.path);
                }
                return Err(err).with_context(|| format!("cannot listen on {}", path.display()));
            }
        }
        described.push(format!("grpc:unix:{}", path.display()));
    }
    anyhow::ensure!(
        listeners.unix.is_some() || listeners.http.is_some(),
        "listen.unix and listen.http are both disabled: nothing to serve"
    );

    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;

    tracing::info!(
        backend = %config.backend.kind,
        listeners = %described.join(" "),
        policies = config.policies.len(),
        traces = telemetry.endpoint().unwrap_or("off"),
        sample_ratio = config.telemetry.sample_ratio,
        "sluiced started"
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let reload_app = app.clone();
    let signals = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = terminate.recv() => break,
                _ = interrupt.recv() => break,
                _ = hangup.recv() => reload(&reload_app, &source),
            }
        }
        tracing::info!("stopping: finishing in-flight requests");
        let _ = stop_tx.send(());
    });
    server::serve(app, listeners, async move {
        let _ = stop_rx.await;
    })
    .await
    .context("serving failed")?;
    signals.abort();
    tracing::info!("sluiced stopped");
    Ok(())
}

/// SIGHUP: new policies from the same source, or the running ones kept if invalid.
fn reload(app: &App, source: &ConfigSource) {
    let metrics = app.limiter.metrics();
    let compiled = config::load(source)
        .map_err(|err| err.to_string())
        .and_then(|config| {
            if config.region != *app.region {
                return Err("[region] changed: it is read at start, restart to apply it".into());
            }
            let rls = sluice_server::rls::Rules::compile(&config.rls, &config.policies)
                .map_err(|errors| format!("{errors:?}"))?;
            app.limits
                .replace_file(config.policies)
                .map(|policies| (policies, rls))
                .map_err(|errors| format!("{errors:?}"))
        });
    match compiled {
        Ok((policies, rls)) => {
            let count = policies.len();
            app.limiter.replace_policies(policies);
            app.rls.store(Arc::new(rls));
            metrics.reloaded(true);
            tracing::info!(policies = count, "config reloaded");
        }
        Err(why) => {
            metrics.reloaded(false);
            tracing::error!("config reload failed, keeping the running config:\n{why}");
        }
    }
}
