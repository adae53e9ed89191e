//! `sluice candidate show|set|promote|clear` against a real daemon (in process, on a temp
//! socket): what each prints, its exit code, and what `show` measures — both 429 rates and the
//! keys that would change side — after real checks.
#![allow(clippy::unwrap_used)] // set-up helpers outside #[test] fns may unwrap too

use std::process::Output;

use sluice_api::CheckRequest;
use sluice_server::testing::Daemon;

mod common;

use common::sluice;

/// `strict` gets a stricter candidate at run time; `loose` has a looser one in the file.
const CONFIG: &str = r#"
[admin]
token = "t0k3n"

[policies.strict]
algorithm = "fixed_window"
limit = 3
window = "1h"

[policies.loose]
algorithm = "fixed_window"
limit = 2
window = "1h"
tiers = { pro = { limit = 20 } }

[policies.loose.candidate]
limit = 6
"#;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `sluice --token t0k3n candidate ARGS…`.
async fn candidate(d: &Daemon, args: &[&str]) -> Output {
    let mut all = vec!["candidate", "--token", "t0k3n"];
    all.extend_from_slice(args);
    sluice(&d.socket, &all).await
}

/// `times` checks of `key` under `policy`.
async fn checks(d: &Daemon, policy: &str, key: &str, times: usize) {
    let client = sluice_client::Client::unix(&d.socket);
    for _ in 0..times {
        let out = client.check(&CheckRequest::new(policy, key)).await.unwrap();
        assert!(out.status == 200 || out.status == 429, "{}", out.status);
    }
}

#[tokio::test]
async fn show_measures_both_rates_and_the_keys_that_would_change_side() {
    let d = Daemon::start(CONFIG).await;
    let out = candidate(&d, &["set", "strict", "--limit", "1"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout(&out).contains(
            "strict/none: candidate 1 per 1h, burst 1, fixed_window (set through the admin API)"
        ),
        "{out:?}"
    );

    // a: 2 checks, all allowed, 1 the candidate would refuse; b: 4, 1 refused, 3 by the
    // candidate. c (loose): 3, 1 refused by the limit, none by its looser candidate.
    checks(&d, "strict", "a", 2).await;
    checks(&d, "strict", "b", 4).await;
    checks(&d, "loose", "c", 3).await;

    let out = candidate(&d, &["show", "strict", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let shown: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(shown["candidate"]["source"], "admin");
    assert_eq!(shown["rates"]["over"], "since_start");
    assert_eq!(shown["rates"]["limit"]["checks"], 6);
    assert_eq!(shown["rates"]["limit"]["rejected"], 1);
    assert_eq!(shown["rates"]["candidate"]["checks"], 6);
    assert_eq!(shown["rates"]["candidate"]["rejected"], 4);
    let side = &shown["change_side"];
    assert_eq!(side["would_be_rejected"][0]["key"], "a", "{side}");
    assert_eq!(side["would_be_rejected"][0]["candidate_rejected"], 1);
    assert_eq!(
        side["would_be_rejected"].as_array().unwrap().len(),
        1,
        "{side}"
    );
    assert!(
        side["would_be_allowed"].as_array().unwrap().is_empty(),
        "{side}"
    );

    let out = candidate(&d, &["show", "strict"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    for line in [
        "limit in force: 3 per 1h, burst 3, fixed_window",
        "promotable: yes",
        "limit      16.67 % (1 of 6)",
        "candidate  66.67 % (4 of 6)",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("a "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row, ["a", "0", "1", "would", "be", "rejected"], "{text}");

    let out = candidate(&d, &["show", "loose", "--json"]).await;
    let shown: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(shown["candidate"]["source"], "file");
    assert_eq!(shown["change_side"]["would_be_allowed"][0]["key"], "c");
    assert_eq!(shown["change_side"]["would_be_allowed"][0]["rejected"], 1);

    // Over a span: two scrapes, the checks between them only (c's three are before both).
    let scrape = tokio::spawn({
        let socket = d.socket.clone();
        async move {
            let args = [
                "candidate",
                "--token",
                "t0k3n",
                "show",
                "loose",
                "--over",
                "2",
                "--json",
            ];
            sluice(&socket, &args).await
        }
    });
    let mut during = 0;
    while !scrape.is_finished() {
        checks(&d, "loose", "d", 1).await;
        during += 1;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let out = scrape.await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let shown: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(shown["rates"]["over"], "2s");
    let counted = shown["rates"]["limit"]["checks"].as_u64().unwrap();
    assert!(
        (1..=during).contains(&counted),
        "{counted} checks counted, {during} made while it measured: {shown}"
    );
}

#[tokio::test]
async fn set_promote_and_clear_say_what_is_in_force() {
    let d = Daemon::start(CONFIG).await;
    let out = candidate(&d, &["set", "strict", "--limit", "2"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = candidate(&d, &["promote", "strict"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout(&out).contains(
            "strict/none: limit 3→2 burst 3→2 (promoted candidate); the run-time candidate is cleared"
        ),
        "{out:?}"
    );
    let out = candidate(&d, &["show", "strict"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("has no candidate"), "{out:?}");

    // The file's candidate: not removable at run time, replaced and back again.
    let out = candidate(&d, &["clear", "loose"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("config file"), "{out:?}");
    let out = candidate(&d, &["set", "loose", "--limit", "8", "--window", "30s"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("promotable: no"), "{out:?}");
    let out = candidate(&d, &["promote", "loose"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("candidate_not_promotable"), "{out:?}");
    let out = candidate(&d, &["clear", "loose"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout(&out).contains("the config file's is in force again: 6 per 1h, burst 6"),
        "{out:?}"
    );

    // Promoting the file's candidate: it stays judged, and the CLI says so.
    let out = candidate(&d, &["promote", "loose"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("stays judged"), "{out:?}");

    let out = candidate(&d, &["set", "loose", "--tier", "gold", "--limit", "5"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains(
            "unknown_tier: policy \"loose\" has no tier \"gold\"; its tiers are none, pro"
        ),
        "{out:?}"
    );
    let out = candidate(&d, &["set", "loose", "--limit", "5", "--algorithm", "fast"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("algorithm"), "{out:?}");

    let out = sluice(&d.socket, &["candidate", "show", "loose"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("pass --token"), "{out:?}");
}
