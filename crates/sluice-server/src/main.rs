//! `sluiced`: parses arguments, loads the config, binds the listeners and turns signals into
//! reloads and a graceful stop. Everything else lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use sluice_server::App;
use sluice_server::clock::SystemClock;
use sluice_server::config::{self, ConfigSource, ListenAddr, Settings};
use sluice_server::server::{self, Listeners};
use sluice_server::stores::Stores;
use sluice_server::telemetry::{self, Telemetry};
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
            Ok(settings) => {
                println!(
                    "{}: valid, {} policies",
                    path.display(),
                    settings.policies.len()
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
    let settings = match config::load(&source) {
        Ok(settings) => settings,
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
    let telemetry = match runtime.block_on(async { telemetry::init(&settings.telemetry) }) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("sluiced: {err}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(run(source, settings, &telemetry)) {
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

async fn run(source: ConfigSource, settings: Settings, telemetry: &Telemetry) -> Result<()> {
    let stores = Stores::build(&settings.backend, &settings.region, Arc::new(SystemClock))
        .context("cannot start the backend")?;
    let listen = settings.listen.clone();
    let backend = settings.backend.kind();
    let address = settings.backend.address();
    let sample_ratio = settings.telemetry.sample_ratio;
    let mut policies: Vec<String> = settings.policies.names().map(|n| n.to_string()).collect();
    policies.sort_unstable();
    let policies = policies.join(",");
    let app = App::new(settings, stores, Arc::new(SystemClock));

    let mut listeners = Listeners::default();
    let mut described = Vec::new();
    if let Some(addr) = listen.http {
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        described.push(format!("http:{}", tcp.local_addr()?));
        listeners.http = Some(tcp);
    }
    if let Some(addr) = listen.metrics {
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        described.push(format!("metrics:{}", tcp.local_addr()?));
        listeners.metrics = Some(tcp);
    }
    if let Some(ListenAddr::Tcp(addr)) = &listen.grpc {
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        described.push(format!("grpc:{}", tcp.local_addr()?));
        listeners.grpc = Some(tcp);
    }
    // The sockets last: a failure above leaves no socket file behind.
    if let Some(path) = &listen.unix {
        listeners.unix = Some(
            server::bind_unix(path, listen.unix_mode)
                .with_context(|| format!("cannot listen on {}", path.display()))?,
        );
        described.push(format!("unix:{}", path.display()));
    }
    if let Some(ListenAddr::Unix(path)) = &listen.grpc {
        match server::bind_unix(path, listen.unix_mode) {
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

    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;

    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        config = %source.name(),
        backend = %backend,
        address = %address,
        listeners = %described.join(" "),
        %policies,
        admin_api = if app.admin_token.is_some() { "on" } else { "off" },
        traces = telemetry.endpoint().unwrap_or("off"),
        sample_ratio,
        "sluiced started"
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (drop_tx, drop_rx) = tokio::sync::oneshot::channel::<()>();
    let reload_app = app.clone();
    let shutdown_timeout = listen.shutdown_timeout;
    let signals = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = terminate.recv() => break,
                _ = interrupt.recv() => break,
                _ = hangup.recv() => reload(&reload_app, &source),
            }
        }
        tracing::info!(
            deadline = ?shutdown_timeout,
            "stopping: finishing in-flight requests (a second SIGTERM or SIGINT stops at once)"
        );
        let _ = stop_tx.send(());
        tokio::select! {
            () = tokio::time::sleep(shutdown_timeout) => {
                tracing::warn!("listen.shutdown_timeout passed");
            }
            _ = terminate.recv() => tracing::warn!("second signal: stopping now"),
            _ = interrupt.recv() => tracing::warn!("second signal: stopping now"),
        }
        let _ = drop_tx.send(());
    });
    server::serve_until(
        app,
        listeners,
        async move {
            let _ = stop_rx.await;
        },
        async move {
            let _ = drop_rx.await;
        },
    )
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
        .and_then(|settings| {
            if settings.region != *app.region {
                return Err("[region] changed: it is read at start, restart to apply it".into());
            }
            let (rls, forward_auth) = (settings.rls, settings.forward_auth);
            app.limits
                .replace_file(settings.policy_configs)
                .map(|policies| (policies, rls, forward_auth))
                .map_err(|errors| {
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
        });
    match compiled {
        Ok((policies, rls, forward_auth)) => {
            let count = policies.len();
            app.limiter.replace_policies(policies);
            app.rls.store(Arc::new(rls));
            app.forward_auth.store(Arc::new(forward_auth));
            metrics.reloaded(true);
            tracing::info!(policies = count, "config reloaded");
        }
        Err(why) => {
            metrics.reloaded(false);
            tracing::error!("config reload failed, keeping the running config:\n{why}");
        }
    }
}
