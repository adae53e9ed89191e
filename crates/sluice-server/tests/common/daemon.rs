//! A `sluiced` on a backend of the test's (its `[backend]` lines) and one fixed-window policy
//! `p` of 10 per hour, and what twelve checks of one key are answered: shared by the tests of
//! the daemon's start and of its TLS to Redis.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use http::Method;
use sluice_client::Client;

use super::{BIN, exit_within, signal, wait_for_socket};

/// A `sluiced` process on a config of its own, its stderr kept in a file; stopped when dropped.
pub struct Daemon {
    pub child: Child,
    socket: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts sluiced with `backend` (the `[backend]` table's lines) and one fixed-window
    /// policy `p` of 10 per hour failing `fail`, and waits until its socket accepts.
    pub fn start(backend: &str, fail: &str) -> Daemon {
        Daemon::start_with_env(backend, fail, &[])
    }

    /// As [`start`](Self::start), with the environment variables `env` set (a secret passed
    /// as `SLUICE_BACKEND__PASSWORD`).
    pub fn start_with_env(backend: &str, fail: &str, env: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("d.sock");
        let config = dir.path().join("sluice.toml");
        let log = dir.path().join("stderr.log");
        let text = format!(
            "[listen]\nunix = {:?}\nhttp = \"\"\n\n[backend]\n{backend}\n\n\
             [policies.p]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1h\"\n\
             fail = \"{fail}\"\n",
            socket.display().to_string(),
        );
        std::fs::write(&config, text).unwrap();
        let child = Command::new(BIN)
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        wait_for_socket(&socket);
        Daemon {
            child,
            socket,
            log,
            _dir: dir,
        }
    }

    pub fn client(&self) -> Client {
        Client::unix(&self.socket).with_timeout(Duration::from_secs(5))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            signal(&self.child, "TERM");
            exit_within(&mut self.child, Duration::from_secs(15));
        }
    }
}

/// What twelve checks of `key` were answered.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub admitted: usize,
    pub denied: usize,
    pub degraded: usize,
    pub unavailable: usize,
}

/// Asserts that `daemon` is ready and counts exactly: of twelve checks of `key` (limit 10),
/// ten admitted and two denied.
pub async fn assert_ready_and_exact(daemon: &Daemon, key: &str) {
    let client = daemon.client();
    assert_eq!(readyz(&client).await, 200, "{}", daemon.log());
    assert_eq!(
        twelve_checks(&client, key).await,
        Tally {
            admitted: 10,
            denied: 2,
            ..Tally::default()
        },
        "{}",
        daemon.log()
    );
}

/// Each fail mode, and what twelve checks are answered by it while the backend fails.
pub fn fail_modes() -> [(&'static str, Tally); 2] {
    [
        (
            "closed",
            Tally {
                unavailable: 12,
                ..Tally::default()
            },
        ),
        (
            "open",
            Tally {
                degraded: 12,
                ..Tally::default()
            },
        ),
    ]
}

pub async fn twelve_checks(client: &Client, key: &str) -> Tally {
    let mut tally = Tally::default();
    let body = format!("{{\"policy\":\"p\",\"key\":\"{key}\"}}");
    for _ in 0..12 {
        let raw = client
            .send(Method::POST, "/v1/check", &[], body.clone())
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&raw.body).unwrap();
        match raw.status {
            200 if json["degraded"] == true => tally.degraded += 1,
            200 => tally.admitted += 1,
            429 => tally.denied += 1,
            503 => tally.unavailable += 1,
            other => panic!("unexpected status {other}: {json}"),
        }
    }
    tally
}

pub async fn readyz(client: &Client) -> u16 {
    client
        .send(Method::GET, "/readyz", &[], "")
        .await
        .unwrap()
        .status
}
