//! `sluiced --check-config` on `[rls] envoy_config`: the example YAML directory is accepted,
//! and every kind of file envoyproxy/ratelimit refuses is refused (exit 2), each problem naming
//! the file and its YAML path, all of them in one run.

#![allow(clippy::unwrap_used)] // test code: a failed set-up should panic the test

use std::path::Path;

mod common;

use common::check_config;

/// A config whose only policies are the YAML at `yaml`.
fn config_with(dir: &Path, yaml: &Path, extra: &str) -> std::path::PathBuf {
    let path = dir.join("sluice.toml");
    std::fs::write(
        &path,
        format!(
            "[rls]\nenvoy_config = {:?}\n{extra}",
            yaml.display().to_string()
        ),
    )
    .unwrap();
    path
}

#[test]
fn the_example_directory_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy-ratelimit/config");
    let out = check_config(&config_with(dir.path(), &yaml, ""));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each refusal: the file's text, the YAML path named, and a part of the message.
const REFUSED: &[(&str, &str, &str)] = &[
    (
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minutes, requests_per_unit: 1}\n",
        "descriptors[0].rate_limit.unit",
        "invalid unit \"minutes\"",
    ),
    ("domain: d\ndescriptors: [\n", "", "not valid YAML (line"),
    (
        "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
        "descriptors[1]",
        "key \"a\" is already at this level",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    value: v\n  - key: a\n    value: v\n",
        "descriptors[1]",
        "key \"a\" with value \"v\" is already at this level",
    ),
    ("descriptors: []\n", "domain", "non-empty domain"),
    (
        "domain: d\ndescriptors:\n  - value: v\n",
        "descriptors[0].key",
        "non-empty key",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    rate_limt: {unit: second}\n",
        "descriptors[0].rate_limt",
        "unknown field",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: [unit, second]\n",
        "descriptors[0].rate_limit",
        "must be a map",
    ),
    (
        "domain: d\ndescriptors:\n  - [key, a]\n",
        "descriptors[0]",
        "must be a map",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    7: x\n",
        "descriptors[0]",
        "a key must be a string",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: \"\"}]\n",
        "descriptors[0].rate_limit.replaces[0].name",
        "non-empty name",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: me}]\n",
        "descriptors[0].rate_limit.replaces[0].name",
        "cannot replace itself",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n",
        "descriptors[0].rate_limit.unit",
        "unlimited rate_limit takes no unit",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, unit_multiplier: 0, requests_per_unit: 1}\n",
        "descriptors[0].rate_limit.unit_multiplier",
        "at least 1",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    value: exact\n    share_threshold: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
        "descriptors[0].share_threshold",
        "wildcard",
    ),
    (
        "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
        "descriptors[0].descriptors[0].rate_limit.unit",
        "invalid unit",
    ),
];

#[test]
fn every_refusal_exits_2_naming_the_file_and_the_yaml_path() {
    for (i, (text, path, message)) in REFUSED.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = dir.path().join(format!("case{i}.yaml"));
        std::fs::write(&yaml, text).unwrap();
        let out = check_config(&config_with(dir.path(), &yaml, ""));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {stderr}");
        let named = if path.is_empty() {
            format!("{}: ", yaml.display())
        } else {
            format!("{}: {path}: ", yaml.display())
        };
        assert!(
            stderr
                .lines()
                .any(|line| line.contains(&named) && line.contains(message)),
            "case {i}: {named:?} with {message:?} not in:\n{stderr}"
        );
        assert!(stderr.contains("rls.envoy_config"), "case {i}: {stderr}");
    }
}

#[test]
fn a_directory_reports_every_problem_of_every_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("config");
    std::fs::create_dir(&yaml).unwrap();
    std::fs::write(
        yaml.join("a.yaml"),
        "domain: same\ndescriptors:\n  - key: a\n    rate_limit: {unit: sec, requests_per_unit: 1}\n  - key: b\n    colour: red\n",
    )
    .unwrap();
    std::fs::write(yaml.join("b.yml"), "domain: same\n").unwrap();
    std::fs::write(
        yaml.join("c.yaml"),
        "domain: other\ndescriptors: {key: a}\n",
    )
    .unwrap();
    // Not YAML by its name, and hidden: neither is read.
    std::fs::write(yaml.join("README.md"), "# not read\n").unwrap();
    std::fs::create_dir(yaml.join("..data")).unwrap();
    std::fs::write(yaml.join("..data/x.yaml"), "not: [valid\n").unwrap();
    let out = check_config(&config_with(dir.path(), &yaml, ""));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let a = yaml.join("a.yaml").display().to_string();
    let b = yaml.join("b.yml").display().to_string();
    let c = yaml.join("c.yaml").display().to_string();
    for expected in [
        format!("{a}: descriptors[0].rate_limit.unit: invalid unit \"sec\""),
        format!("{a}: descriptors[1].colour: unknown field"),
        format!("{b}: domain: \"same\" is already the domain of {a}"),
        format!("{c}: descriptors: must be a list of descriptors, not a map"),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} not in:\n{stderr}");
    }
    assert!(
        !stderr.contains("README") && !stderr.contains("..data"),
        "{stderr}"
    );
}

#[test]
fn a_domain_served_by_both_rls_descriptors_and_the_yaml_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("edge.yaml");
    std::fs::write(
        &yaml,
        "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    )
    .unwrap();
    let extra = r#"
[policies.per_ip]
algorithm = "gcra"
limit = 5
window = "60s"

[[rls.descriptors]]
domain = "edge"
keys = ["remote_address"]
policy = "per_ip"
key = "ip:{remote_address}"
"#;
    let out = check_config(&config_with(dir.path(), &yaml, extra));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("domain \"edge\" is also served by [[rls.descriptors]]"),
        "{stderr}"
    );
    assert!(stderr.contains(&yaml.display().to_string()), "{stderr}");
}
