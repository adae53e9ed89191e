//! The `sluiced` process as the binary tests drive it: signals, waiting for its exit and for
//! its socket. Shared by the test files that start the real binary, so each keeps only its own
//! set-up.

// Test code: a failed set-up should panic the test.
#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Sends signal `name` (`TERM`, `HUP`, …) to `child`.
pub fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` to exit, up to `within` (a bound on a hang, not a timing claim).
pub fn exit_within(child: &mut Child, within: Duration) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < within,
            "sluiced still running {within:?} after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls until something accepts on `socket` (readiness, not timing: no assertion on how long).
pub fn wait_for_socket(socket: &Path) {
    for _ in 0..500 {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("sluiced did not start on {}", socket.display());
}

/// The daemon under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_sluiced");

/// Starts `command` (sluiced, or a wrapper that runs it) on `config`, its output discarded.
pub fn spawn_on(mut command: Command, config: &Path) -> Child {
    command
        .arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `sluiced --check-config path` (no `SLUICE_SOCKET` from the environment), run to its end.
pub fn check_config(path: &Path) -> Output {
    Command::new(BIN)
        .arg("--check-config")
        .arg(path)
        .env_remove("SLUICE_SOCKET")
        .output()
        .unwrap()
}

/// `sluiced --check-config` on a file `sluice.toml` of `dir` holding `toml`.
pub fn check_config_text(dir: &Path, toml: &str) -> Output {
    let path = dir.join("sluice.toml");
    std::fs::write(&path, toml).unwrap();
    check_config(&path)
}

/// What `--check-config` printed, stdout then stderr.
pub fn printed(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A config at `path` serving `policies` on the Unix socket `socket` only.
pub fn write_config(path: &Path, socket: &Path, policies: &str) {
    write_config_with(path, socket, "", policies);
}

/// [`write_config`] with more `[listen]` lines.
pub fn write_config_with(path: &Path, socket: &Path, listen: &str, policies: &str) {
    let text = format!(
        "[listen]\nunix = {:?}\nhttp = \"\"\nunix_mode = \"0600\"\n{listen}\n\n{policies}",
        socket.display().to_string()
    );
    std::fs::write(path, text).unwrap();
}

/// Runs a second sluiced on the `config` of one that is serving, and returns what it printed:
/// it must have been refused (its socket is taken).
pub fn second_daemon_refused(config: &Path) -> String {
    let second = Command::new(BIN)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr).into_owned();
    assert!(stderr.contains("already listening"), "{stderr}");
    stderr
}

/// The limit of policy `p` as the daemon behind `client` serves it (`/v1/policies`).
pub async fn limit_of(client: &sluice_client::Client) -> u64 {
    let raw = client
        .send(http::Method::GET, "/v1/policies", &[], "")
        .await
        .unwrap();
    raw.json::<sluice_api::PoliciesResponse>().unwrap().policies["p"].limit
}

/// The `/metrics` text of the daemon behind `client`.
pub async fn metrics(client: &sluice_client::Client) -> String {
    let raw = client
        .send(http::Method::GET, "/metrics", &[], "")
        .await
        .unwrap();
    String::from_utf8(raw.body.to_vec()).unwrap()
}
pub mod daemon;
