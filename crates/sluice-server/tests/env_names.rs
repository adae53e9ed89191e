//! `SLUICE_POLICIES__…` variables reach the policies and tiers whose names have capitals, `.`
//! or `-`, through the real `sluiced --check-config`: an env var name is upper case with `_`
//! (what a shell can export), and names the file's policy it matches exactly or ignoring case
//! with `_` for `.` and `-`. A value the daemon refuses names the variable and the policy it
//! reached; a name two policies fold to is refused, naming both.

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

mod common;

use common::BIN;

const POLICIES: &str = r#"
[listen]
unix = ""
http = "127.0.0.1:0"

[policies.Public]
algorithm = "fixed_window"
limit = 10
window = "1m"
tiers = { "Pro.Plus" = { limit = 20 } }

[policies."api.v2"]
algorithm = "fixed_window"
limit = 10
window = "1m"

[policies.search-v1]
algorithm = "fixed_window"
limit = 10
window = "1m"
"#;

/// `sluiced --check-config` of `toml` with `vars` set (and no other SLUICE_ variable).
fn check(toml: &str, vars: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("names.toml");
    std::fs::write(&path, toml).unwrap();
    let mut command = Command::new(BIN);
    command.arg("--check-config").arg(&path);
    for (key, _) in std::env::vars() {
        if key.starts_with("SLUICE_") {
            command.env_remove(key);
        }
    }
    command.envs(vars.iter().copied()).output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn each_variable_reaches_the_policy_its_name_folds_to() {
    for (var, field) in [
        ("SLUICE_POLICIES__PUBLIC__LIMIT", "policies.Public.limit"),
        ("SLUICE_POLICIES__API_V2__LIMIT", "policies.api.v2.limit"),
        (
            "SLUICE_POLICIES__SEARCH_V1__LIMIT",
            "policies.search-v1.limit",
        ),
        (
            "SLUICE_POLICIES__PUBLIC__TIERS__PRO_PLUS__LIMIT",
            "policies.Public.tiers.Pro.Plus.limit",
        ),
    ] {
        // 0 is refused: the error says which policy the variable reached.
        let out = check(POLICIES, &[(var, "0")]);
        assert_eq!(out.status.code(), Some(2), "{var}: {}", text(&out));
        let expected = format!("env {var}: {field}: limit must be at least 1");
        assert!(text(&out).contains(&expected), "{var}: {}", text(&out));
        // A good value changes that policy and adds none.
        let out = check(POLICIES, &[(var, "50")]);
        assert_eq!(out.status.code(), Some(0), "{var}: {}", text(&out));
        assert!(
            text(&out).contains("valid, 3 policies"),
            "{var}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_variable_two_names_fold_to_is_refused_naming_both() {
    let toml = format!(
        "{POLICIES}\n[policies.\"search.v1\"]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n"
    );
    let out = check(&toml, &[("SLUICE_POLICIES__SEARCH_V1__LIMIT", "5")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("SLUICE_POLICIES__SEARCH_V1__LIMIT")
            && said.contains("\"search-v1\"")
            && said.contains("\"search.v1\""),
        "{said}"
    );
}

#[test]
fn a_variable_matching_no_policy_is_a_new_lower_case_policy() {
    let out = check(POLICIES, &[("SLUICE_POLICIES__EXTRA__LIMIT", "5")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("policies.extra.algorithm: is required"),
        "{}",
        text(&out)
    );
}
