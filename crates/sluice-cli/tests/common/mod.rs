//! What the CLI's test files share: running the `sluice` binary against a daemon's socket.

// Test code: a failed run should panic the test.
#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::process::Output;

/// `sluice --socket SOCKET ARGS…`, its output.
pub async fn sluice(socket: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .await
        .unwrap()
}
