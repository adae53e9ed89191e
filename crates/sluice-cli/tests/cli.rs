//! The `sluice` binary against a real daemon (in-process `serve` on a temp socket and a
//! loopback port): exit codes 0 allowed, 1 denied, 2 error, and what it prints.
#![allow(clippy::unwrap_used)] // set-up helpers outside #[test] fns may unwrap too

use std::path::Path;
use std::process::Output;

use sluice_server::testing::Daemon;

mod common;

use common::sluice;

const CONFIG: &str = r#"
[admin]
token = "t0k3n"

[policies.cli]
algorithm = "fixed_window"
limit = 2
window = "1h"
"#;

async fn daemon() -> Daemon {
    Daemon::start(CONFIG).await
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn check_exits_0_while_allowed_then_1_when_denied() {
    let d = daemon().await;
    for remaining in ["1", "0"] {
        let out = sluice(&d.socket, &["check", "cli", "user:1"]).await;
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(stdout(&out).starts_with("allowed:"), "{out:?}");
        assert!(
            stdout(&out).contains(&format!("remaining={remaining}")),
            "{out:?}"
        );
    }
    let out = sluice(&d.socket, &["check", "cli", "user:1"]).await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stdout(&out).starts_with("denied:"), "{out:?}");
    assert!(stdout(&out).contains("retry_after="), "{out:?}");
}

#[tokio::test]
async fn json_prints_the_daemons_body() {
    let d = daemon().await;
    let out = sluice(
        &d.socket,
        &["check", "cli", "user:json", "--cost", "2", "--json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let body: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(body["allowed"], true);
    assert_eq!(body["remaining"], 0);
    assert_eq!(body["policy"], "cli");
}

#[tokio::test]
async fn http_reaches_the_same_daemon() {
    let d = daemon().await;
    let out = sluice(
        &d.socket,
        &["--http", &d.tcp.to_string(), "check", "cli", "user:tcp"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("remaining=1"), "{out:?}");
}

#[tokio::test]
async fn errors_exit_2_with_the_reason() {
    let d = daemon().await;
    let out = sluice(&d.socket, &["check", "nope", "user:1"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown_policy"),
        "{out:?}"
    );

    let out = sluice(&d.socket, &["check", "cli", "user:1", "--cost", "3"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cost_exceeds_capacity"),
        "{out:?}"
    );

    let missing = d.socket.with_file_name("absent.sock");
    let out = sluice(&missing, &["check", "cli", "user:1"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot connect"),
        "{out:?}"
    );
}

#[tokio::test]
async fn top_prints_the_limited_keys_as_a_table() {
    let d = daemon().await;
    for _ in 0..4 {
        sluice(&d.socket, &["check", "cli", "user:noisy"]).await;
    }
    let out = sluice(&d.socket, &["top", "cli", "--token", "t0k3n"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    let row = text.lines().find(|l| l.starts_with("user:noisy")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..3], ["2", "4"], "2 rejected of 4 checked: {text}");
    assert!(text.contains("approximate"), "{text}");

    let out = sluice(
        &d.socket,
        &["top", "cli", "--by", "often", "--token", "t0k3n"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad_request"),
        "{out:?}"
    );
}

async fn sluice_env(socket: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn admin_sets_lists_and_removes_overrides() {
    let d = daemon().await;
    let token = [("SLUICE_ADMIN_TOKEN", "t0k3n")];
    let out = sluice_env(
        &d.socket,
        &token,
        &["admin", "set", "cli", "gold", "--limit", "9"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("cli/gold: limit 9"), "{out:?}");

    let out = sluice(
        &d.socket,
        &["check", "cli", "u", "--tier", "gold", "--json"],
    )
    .await;
    let body: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(body["limit"], 9, "the override is in force");

    let out = sluice(&d.socket, &["admin", "--token", "t0k3n", "ls"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let row = stdout(&out)
        .lines()
        .find(|l| l.starts_with("cli "))
        .map(str::to_owned);
    let cells: Vec<String> = row.unwrap().split_whitespace().map(str::to_owned).collect();
    assert_eq!(cells, ["cli", "gold", "9", "-"]);

    let out = sluice_env(&d.socket, &token, &["admin", "rm", "cli", "gold"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = sluice(
        &d.socket,
        &["check", "cli", "u", "--tier", "gold", "--json"],
    )
    .await;
    let body: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(body["limit"], 2, "back to the file's limit");

    let out = sluice(&d.socket, &["admin", "--token", "wrong", "ls"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unauthorized"),
        "{out:?}"
    );
}

#[tokio::test]
async fn admin_reads_the_daemons_token_variable_and_says_when_the_api_is_off() {
    let d = daemon().await;
    // The variable the daemon reads its token from works for the CLI too.
    let out = sluice_env(
        &d.socket,
        &[("SLUICE_ADMIN__TOKEN", "t0k3n")],
        &["admin", "ls"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let off =
        Daemon::start("[policies.cli]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow = \"1h\"\n")
            .await;
    let out = sluice_env(&off.socket, &[], &["admin", "ls"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("admin_disabled: the admin API is off: set admin.token"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_unreachable_socket_names_its_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = sluice(&dir.path().join("absent.sock"), &["check", "cli", "u"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
}
