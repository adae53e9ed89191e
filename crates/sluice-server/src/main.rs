//! `sluiced`: parses arguments, loads the config, binds the listeners and turns signals into
//! reloads and a graceful stop. Everything else lives in the library.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use sluice_config::ConfigSource;
use sluice_server::App;
use sluice_server::clock::SystemClock;
use sluice_server::config_watch::ConfigWatch;
use sluice_server::server;
use sluice_server::server::activation::{self, Inherited};
use sluice_server::server::tls::ListenerTls;
use sluice_server::service::stores::Stores;
use sluice_server::service::{self, Compiled};
use sluice_server::telemetry::{self, Telemetry};
use tokio::signal::unix::{SignalKind, signal};

/// mimalloc rather than the system allocator: a check allocates a few small buffers (the
/// answer body, header values), and glibc malloc spent ~4.7k instructions per request on them
/// (docs/src/internals/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The version, and the git commit it was built from when known (see build.rs).
const VERSION: &str = env!("SLUICE_VERSION");

/// What `--help` says beyond the flags: the variables and signals an operator drives it with.
const AFTER_HELP: &str = "\
Environment:
  SLUICE_<SECTION>__<KEY>      any config key, over the file: SLUICE_BACKEND__URL,
                               SLUICE_POLICIES__PUBLIC__LIMIT, SLUICE_ADMIN__TOKEN
  SLUICE_SOCKET                the default of listen.unix (else /tmp/sluiced.sock)
  RUST_LOG                     log filter, default \"info\" (e.g. sluice_server=debug)
  OTEL_EXPORTER_OTLP_ENDPOINT  trace collector when telemetry.otlp_endpoint is empty

Signals:
  SIGHUP           reload the config file; a file that does not compile keeps the running one
                   (a change to the file is also reloaded by itself: its directory is watched)
  SIGTERM, SIGINT  stop: in-flight requests get listen.shutdown_timeout, a second signal
                   stops at once

Exit codes: 0 stopped cleanly, 1 runtime failure, 2 invalid config (file and field named).";

#[derive(Debug, Parser)]
#[command(
    name = "sluiced",
    version = VERSION,
    about = "The sluice rate-limiter daemon",
    after_help = AFTER_HELP
)]
struct Args {
    /// TOML config file (default: the built-in policies of examples/sluice.toml).
    #[arg(long, value_name = "FILE", conflicts_with = "check_config")]
    config: Option<PathBuf>,
    /// Validate FILE and exit: 0 valid, 2 invalid.
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
    /// Print the config file's JSON Schema (draft 2020-12) and exit: for editors and validators.
    #[arg(long, conflicts_with_all = ["config", "check_config"])]
    print_config_schema: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_config_schema {
        return match serde_json::to_string_pretty(&sluice_config::json_schema()) {
            // A closed pipe (`| head`) is the reader's choice, not a failure to report.
            Ok(text) => {
                let _ = writeln!(std::io::stdout(), "{text}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("sluiced: {err}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(path) = args.check_config {
        return match service::load(&ConfigSource::File(path.clone())) {
            Ok(compiled) => {
                println!(
                    "{}: valid, {} policies",
                    path.display(),
                    compiled.policies.len()
                );
                if !server::bind::configures_http(&compiled.settings.listen) {
                    println!(
                        "{}: note: {}",
                        path.display(),
                        server::bind::NEEDS_HANDED_SOCKET
                    );
                }
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
    let compiled = match service::load(&source) {
        Ok(compiled) => compiled,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    // Before any thread: taking the handed-over sockets clears LISTEN_FDS from the environment.
    let inherited = match Inherited::from_env() {
        Ok(inherited) => inherited,
        Err(err) => {
            eprintln!("sluiced: {err}");
            return ExitCode::FAILURE;
        }
    };
    // The config may leave the HTTP addresses to the service manager: judged with what it
    // handed over, a config error when neither gives the API a listener.
    if !server::bind::serves_http(&compiled.settings.listen, &inherited) {
        eprintln!(
            "{}: listen: {}",
            source.name(),
            server::bind::NOTHING_TO_SERVE
        );
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("sluiced: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Inside the runtime: the trace exporter's gRPC channel lives on it.
    let telemetry = match runtime.block_on(async { telemetry::init(&compiled.settings.telemetry) })
    {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("sluiced: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Inside the runtime too: the Redis clients start their connection tasks on it. What
    // fails here is still the config's (a client that cannot be built from it): exit 2 naming
    // the file, as for every config error.
    let stores = match runtime.block_on(async {
        Stores::build(
            &compiled.settings.backend,
            &compiled.settings.region,
            Arc::new(SystemClock),
        )
    }) {
        Ok(stores) => stores,
        Err(err) => {
            eprintln!("{}: backend: {err}", source.name());
            return ExitCode::from(2);
        }
    };
    // Before any listener serves: a check answered while the backend is still connecting would
    // get the fail mode although Redis is healthy.
    runtime.block_on(connect(&stores, &compiled));
    let code = match runtime.block_on(run(source, compiled, stores, inherited, &telemetry)) {
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

/// Waits for the backends (up to `backend.connect_timeout`); one line when the daemon serves
/// without one of them, as it then does by each policy's fail mode.
async fn connect(stores: &Stores, compiled: &Compiled) {
    let settings = &compiled.settings;
    let connected = service::connect::connect(stores, &settings.backend, &settings.region).await;
    if connected.unreached.is_empty() {
        return;
    }
    let backends: Vec<&str> = connected
        .unreached
        .iter()
        .map(|unreached| unreached.backend.as_str())
        .collect();
    let reasons: Vec<&str> = connected
        .unreached
        .iter()
        .map(|unreached| unreached.reason.as_str())
        .collect();
    tracing::warn!(
        backends = %backends.join(", "),
        reason = %reasons.join("; "),
        "sluiced is not connected to its backend after {:?}: serving anyway, each policy by \
         its fail mode, not ready until the backend answers",
        connected.waited_at_most
    );
}

async fn run(
    source: ConfigSource,
    compiled: Compiled,
    stores: Stores,
    inherited: Inherited,
    telemetry: &Telemetry,
) -> Result<()> {
    let settings = &compiled.settings;
    let listen = settings.listen.clone();
    let backend = settings.backend.kind();
    let address = settings.backend.address();
    let sample_ratio = settings.telemetry.sample_ratio;
    let mut policies: Vec<String> = compiled.policies.names().map(|n| n.to_string()).collect();
    policies.sort_unstable();
    let policies = policies.join(",");
    let app = App::new(compiled, stores, Arc::new(SystemClock));

    let budget = server::fd_limit::raise_and_cap(listen.connections.max_connections);
    let (mut listeners, described) = server::bind::listeners(&listen, inherited).await?;
    listeners.connections.max_connections = budget.max_connections;
    if let Some(tls) = &listen.tls {
        let errors = app.limiter.metrics().tls_handshake_errors.clone();
        let handshake_timeout = listen.connections.header_timeout;
        listeners.tls = Some(
            ListenerTls::new(tls.files.clone(), handshake_timeout, errors).context("listen.tls")?,
        );
        listeners.metrics_tls = tls.metrics;
    }
    let listener_tls = listeners.tls.clone();

    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;

    tracing::info!(
        version = VERSION,
        config = %match &source {
            ConfigSource::Builtin => "built-in defaults".to_owned(),
            other => other.name(),
        },
        backend = %backend,
        address = %address,
        listeners = %described.join(" "),
        %policies,
        admin_api = if app.admin_token.is_some() { "on" } else { "off" },
        traces = telemetry.endpoint().unwrap_or("off"),
        sample_ratio,
        fd_limit = %describe_limit(budget.limit),
        fd_limit_at_start = %describe_limit(budget.soft_before),
        max_connections = budget.max_connections,
        max_connections_configured = budget.configured,
        header_timeout = ?listen.connections.header_timeout,
        idle_timeout = ?listen.connections.idle_timeout,
        "sluiced started"
    );
    if budget.max_connections < budget.configured {
        tracing::warn!(
            configured = budget.configured,
            max_connections = budget.max_connections,
            fd_limit = %describe_limit(budget.limit),
            "listen.max_connections lowered to fit the file descriptor limit"
        );
    }
    activation::notify_ready();

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (drop_tx, drop_rx) = tokio::sync::oneshot::channel::<()>();
    let reload_app = app.clone();
    let mut watch = ConfigWatch::for_source(&source);
    // The YAML of `rls.envoy_config` as loaded at start, reloaded like the file when it
    // changes (a new path set by a reload is read on every reload, watched from the next start).
    let mut yaml_watch = match app.limiter.snapshot().rls.envoy.path() {
        Some(path) => ConfigWatch::files(&[path.to_path_buf()], "envoyproxy/ratelimit YAML"),
        None => ConfigWatch::for_source(&ConfigSource::Builtin),
    };
    // The certificate files of the listeners, read again when they change (a rotation).
    let mut tls_watch = match &listener_tls {
        Some(tls) => ConfigWatch::files(&tls.paths(), "listen.tls files"),
        None => ConfigWatch::for_source(&ConfigSource::Builtin),
    };
    let shutdown_timeout = listen.shutdown_timeout;
    let signals = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = terminate.recv() => break,
                _ = interrupt.recv() => break,
                _ = hangup.recv() => {
                    reload_app.reload(&source).await;
                    watch.reloaded();
                    yaml_watch.reloaded();
                    // A rotated client certificate or CA of [backend.tls].
                    if let Some(files) = reload_app.limiter.store().capabilities().tls {
                        files.reload_tls();
                    }
                    if let Some(tls) = &listener_tls {
                        tls.reload_logged();
                        tls_watch.reloaded();
                    }
                }
                () = watch.changed() => reload_app.reload(&source).await,
                () = yaml_watch.changed() => reload_app.reload(&source).await,
                () = tls_watch.changed() => {
                    if let Some(tls) = &listener_tls {
                        tls.reload_logged();
                    }
                }
            }
        }
        activation::notify_stopping();
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
    sluice_server::daemon::serve_until(
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

fn describe_limit(limit: Option<u64>) -> String {
    limit.map_or_else(|| "unlimited".to_owned(), |n| n.to_string())
}
