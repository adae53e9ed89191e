//! `sluice-bench` run for about a second against a real in-process sluiced (the library's
//! `serve` with the real router and memory store, on a temp-dir socket and a loopback port)
//! and against the axum baseline. Checks the JSON line's fields, never timings.

// Test helpers: a failed set-up should panic the test that asked for it.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use sluice_bench::Report;
use sluice_server::testing::Daemon;

const LIMIT: u64 = 50;
const KEYS: u64 = 10;

async fn daemon() -> Daemon {
    let toml = format!(
        "[policies.bench]\nalgorithm = \"fixed_window\"\nlimit = {LIMIT}\nwindow = \"1h\"\n"
    );
    Daemon::start(&toml).await
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
