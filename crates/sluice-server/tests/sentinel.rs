//! sluiced on `backend.kind = "sentinel"` (a master, a replica and three `redis-sentinel`s):
//! exact counts through Sentinel with the master's password from `SLUICE_BACKEND__PASSWORD`,
//! which no log line and no `--check-config` output shows; and a master name no sentinel
//! knows answered by the policy's fail mode, `/readyz` 503, and one log line saying why.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use sluice_testkit::{RedisSentinels, SentinelSetup};

use common::daemon::{Daemon, assert_ready_and_exact, fail_modes, readyz, twelve_checks};

const MASTER_PASSWORD: &str = "m4ster-pw-never-logged";
const SENTINEL_PASSWORD: &str = "s3ntinel-pw-never-logged";

/// The `[backend]` lines of `group`'s master named `master`.
fn backend(group: &RedisSentinels, master: &str) -> String {
    format!(
        "kind = \"sentinel\"\nsentinels = {:?}\nmaster = \"{master}\"\ntimeout = \"500ms\"\nconnect_timeout = \"3s\"",
        group.sentinel_urls()
    )
}

fn group() -> RedisSentinels {
    RedisSentinels::start_with(SentinelSetup {
        password: Some(MASTER_PASSWORD),
        sentinel_password: Some(SENTINEL_PASSWORD),
        tls: None,
    })
}

#[tokio::test]
async fn checks_through_sentinel_are_exact_and_no_password_is_logged() {
    let group = group();
    let lines = backend(&group, &group.master_name);
    let daemon = Daemon::start_with_env(
        &lines,
        "closed",
        &[("SLUICE_BACKEND__PASSWORD", MASTER_PASSWORD)],
    );
    assert_ready_and_exact(&daemon, "sentinel-key").await;
    let log = daemon.log();
    assert!(log.contains("sentinel: master found"), "{log}");
    for secret in [MASTER_PASSWORD, SENTINEL_PASSWORD] {
        assert!(!log.contains(secret), "{secret} logged:\n{log}");
    }

    // --check-config of a file holding both passwords: valid, neither shown; an invalid one
    // names its fields, neither shown either.
    let dir = tempfile::tempdir().unwrap();
    let policy = "[policies.p]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\n";
    for (text, code) in [
        (
            format!("[backend]\n{lines}\npassword = \"{MASTER_PASSWORD}\"\n{policy}"),
            0,
        ),
        (
            format!(
                "[backend]\nkind = \"sentinel\"\nsentinels = [\"redis://:{SENTINEL_PASSWORD}@h:port\"]\npassword = \"{MASTER_PASSWORD}\"\n{policy}"
            ),
            2,
        ),
    ] {
        let out = common::check_config_text(dir.path(), &text);
        let shown = common::printed(&out);
        assert_eq!(out.status.code(), Some(code), "{shown}");
        for secret in [MASTER_PASSWORD, SENTINEL_PASSWORD] {
            assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
        }
        if code == 2 {
            assert!(
                shown.contains("backend.master") && shown.contains("backend.sentinels[0]"),
                "{shown}"
            );
        }
    }
}

#[tokio::test]
async fn a_master_name_no_sentinel_knows_serves_the_fail_mode_and_says_why() {
    let group = group();
    let lines = format!(
        "{}\npassword = \"{MASTER_PASSWORD}\"",
        backend(&group, "no-such-master")
    );
    for (fail, answered) in fail_modes() {
        let daemon = Daemon::start(&lines, fail);
        let client = daemon.client();
        assert_eq!(twelve_checks(&client, "k").await, answered, "{fail}");
        assert_eq!(readyz(&client).await, 503);
        let log = daemon.log();
        let why = "no sentinel knows a master named \\\"no-such-master\\\" (backend.master)";
        let plain = "no sentinel knows a master named \"no-such-master\" (backend.master)";
        assert!(log.contains(why) || log.contains(plain), "{log}");
        for secret in [MASTER_PASSWORD, SENTINEL_PASSWORD] {
            assert!(!log.contains(secret), "{secret} logged:\n{log}");
        }
    }
}
