//! `sluice-bench` run for about a second against a real in-process sluiced (the library's
//! `serve` with the real router and memory store, on a temp-dir socket and a loopback port)
//! and against the axum baseline. Checks the JSON line's fields, never timings.

// Test helpers: a failed set-up should panic the test that asked for it.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use sluice_bench::Report;
use sluice_server::App;
use sluice_server::clock::ManualClock;
use sluice_server::config::{self, ConfigSource};
use sluice_server::server::{self, Listeners};

/// Aligned to the hour, so the fixed window below never turns during a run.
const T0: u64 = 1_800_000_000_000;
const LIMIT: u64 = 50;
const KEYS: u64 = 10;

struct Daemon {
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    tcp: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn daemon() -> Daemon {
    let toml = format!(
        "[policies.bench]\nalgorithm = \"fixed_window\"\nlimit = {LIMIT}\nwindow = \"1h\"\n"
    );
    let config = config::load(&ConfigSource::Text {
        name: "bench.toml".to_owned(),
        toml,
    })
    .unwrap();
    let store = sluice_server::backend::build_store(&config.backend).unwrap();
    let app = App::new(&config, store, Arc::new(ManualClock::new(T0))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sluiced.sock");
    let unix = server::bind_unix(&socket, 0o600).unwrap();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp = http.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listeners = Listeners {
        unix: Some(unix),
        http: Some(http),
        ..Listeners::default()
    };
    tokio::spawn(server::serve(app, listeners, async move {
        let _ = stopped.await;
    }));
    Daemon {
        _dir: dir,
        socket,
        tcp,
        stop: Some(stop),
    }
}

/// Runs the binary with `args` and returns its parsed last stdout line and its stderr.
async fn bench(args: &[&str]) -> (Report, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(args)
        .args([
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--concurrency",
            "8",
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(last).unwrap();
    for field in [
        "requests", "seconds", "rps", "p50_us", "p99_us", "p999_us", "allowed", "rejected",
        "errors",
    ] {
        assert!(
            json.get(field).is_some_and(serde_json::Value::is_number),
            "{field} in {last}"
        );
    }
    (serde_json::from_value(json).unwrap(), stderr)
}

fn consistent(report: &Report) {
    assert_eq!(
        report.requests,
        report.allowed + report.rejected + report.errors,
        "{report:?}"
    );
    assert!(report.requests > 0, "{report:?}");
    assert!((report.seconds - 1.0).abs() < 1e-9, "{report:?}");
    #[allow(clippy::cast_precision_loss)]
    let rps = report.requests as f64 / report.seconds;
    assert!((report.rps - rps).abs() <= 0.1, "{report:?}");
    assert!(report.p50_us > 0.0, "{report:?}");
    assert!(
        report.p50_us <= report.p99_us && report.p99_us <= report.p999_us,
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_uds_and_tcp_the_counts_add_up_and_stay_within_the_limit() {
    let d = daemon().await;
    let socket = d.socket.to_str().unwrap().to_owned();
    let keys = KEYS.to_string();
    let (uds, stderr) = bench(&[
        "--unix", &socket, "--policy", "bench", "--keys", &keys, "--dist", "uniform",
    ])
    .await;
    consistent(&uds);
    assert_eq!(uds.errors, 0, "{uds:?}");
    // Time stands still: the keys get LIMIT each, warm-up included, and no more.
    assert!(uds.allowed <= LIMIT * KEYS, "{uds:?}");
    assert!(uds.rejected > 0, "{uds:?}");
    assert!(stderr.contains("req/s"), "a progress line: {stderr}");

    let tcp_addr = d.tcp.to_string();
    let (tcp, _) = bench(&[
        "--http", &tcp_addr, "--policy", "bench", "--keys", "1000", "--dist", "zipf",
    ])
    .await;
    consistent(&tcp);
    assert_eq!(tcp.errors, 0, "{tcp:?}");
    assert!(tcp.allowed <= LIMIT * 1000, "{tcp:?}");

    // One hot key (`bench:0`, also a key of the first run): never more than its limit.
    let (hot, _) = bench(&["--unix", &socket, "--policy", "bench", "--dist", "hot"]).await;
    consistent(&hot);
    assert!(hot.allowed <= LIMIT, "{hot:?}");
    assert!(hot.rejected > 0, "{hot:?}");

    // Unknown policy: 404 for every request, all errors, the connection kept.
    let (unknown, _) = bench(&["--unix", &socket, "--policy", "nope"]).await;
    assert_eq!(unknown.requests, unknown.errors);
    assert!(unknown.errors > 0);
}

async fn wait_for(path: &Path) {
    for _ in 0..200 {
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never answered", path.display());
}

#[tokio::test]
async fn the_same_load_runs_against_the_axum_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("base.sock");
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_baseline-axum"))
        .arg("--unix")
        .arg(&socket)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for(&socket).await;
    let (report, _) = bench(&["--unix", socket.to_str().unwrap(), "--dist", "zipf"]).await;
    consistent(&report);
    assert_eq!(report.allowed, report.requests, "{report:?}");
    server.kill().await.unwrap();
}
