//! The workspace's manifests as a user's cargo reads them: every crate declares the Rust version
//! it is built and tested with (the workspace's `rust-version`), so an older toolchain is told so
//! by cargo instead of failing somewhere in a dependency, and the toolchain running the tests is
//! at least that version (cargo refuses to build otherwise, so every build of the tests is a
//! build with it declared).

use std::process::Command;

use crate::assets;

/// `cargo metadata` of the workspace's own crates, offline.
fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(assets::root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The workspace's `rust-version`, from the root manifest.
fn workspace_rust_version() -> String {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(assets::root().join("Cargo.toml")).unwrap())
            .unwrap();
    manifest["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("Cargo.toml: [workspace.package] rust-version")
        .to_owned()
}

/// `1.95` or `1.95.0` as (major, minor).
fn major_minor(version: &str) -> (u64, u64) {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

#[test]
fn every_crate_declares_the_workspace_rust_version() {
    let declared = workspace_rust_version();
    let metadata = metadata();
    let packages = metadata["packages"].as_array().unwrap();
    assert!(packages.len() >= 8, "{} packages", packages.len());
    for package in packages {
        assert_eq!(
            package["rust_version"].as_str(),
            Some(declared.as_str()),
            "{}: rust-version, against the workspace's {declared} (`rust-version.workspace = true`)",
            package["name"]
        );
    }
}

#[test]
fn the_toolchain_is_at_least_the_declared_rust_version() {
    let declared = major_minor(&workspace_rust_version());
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let version = text.split_whitespace().nth(1).expect("rustc --version");
    let running = major_minor(version.split('-').next().unwrap());
    assert!(
        running >= declared,
        "rustc {version} is older than the declared rust-version {declared:?}"
    );
}

/// The crates others may depend on; the rest (tests, test kit, benches, the example app) keep
/// the workspace's `publish = false`.
const LIBRARIES: [&str; 8] = [
    "sluice-core",
    "sluice-tls",
    "sluice-api",
    "sluice-config",
    "sluice-store",
    "sluice-server",
    "sluice-client",
    "sluice-replay",
];

#[test]
fn the_library_crates_package_and_nothing_else_is_publishable() {
    let metadata = metadata();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        // `publish`: null = anywhere, [] = nowhere.
        let publishable = package["publish"] != serde_json::json!([]);
        assert_eq!(
            publishable,
            LIBRARIES.contains(&name),
            "{name}: publish {}",
            package["publish"]
        );
    }
    let target = tempfile::tempdir().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut package = Command::new(cargo);
    package
        .args(["package", "--no-verify", "--allow-dirty", "--target-dir"])
        .arg(target.path())
        .current_dir(assets::root());
    for name in LIBRARIES {
        package.args(["-p", name]);
    }
    let out = package.output().unwrap();
    assert!(
        out.status.success(),
        "cargo package of the libraries:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let versions: std::collections::HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["version"].as_str().unwrap()))
        .collect();
    for name in LIBRARIES {
        let version = versions[name];
        let crate_file = target
            .path()
            .join(format!("package/{name}-{version}.crate"));
        assert!(crate_file.exists(), "no {}", crate_file.display());
    }
}
