//! The configs of the TLS guide (docs/src/guides/tls-and-sentinel.md) work as written: each
//! `toml` block passes `sluiced --check-config`, with the certificate files it names under
//! `/etc/sluice/tls/` made by the test.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::process::Command;

use sluice_testkit::certs::Certs;

const GUIDE: &str = include_str!("../../../docs/src/guides/tls-and-sentinel.md");

/// Every fenced `toml` block of `text`.
fn toml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_config_of_the_tls_guide_passes_check_config() {
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    for (name, from) in [
        ("redis-ca.pem", &certs.ca_file),
        ("ca.pem", &certs.ca_file),
        ("client.crt", &certs.client.cert),
        ("client.key", &certs.client.key),
        ("tls.crt", &certs.server.cert),
        ("tls.key", &certs.server.key),
    ] {
        std::fs::copy(from, dir.path().join(name)).unwrap();
    }
    let blocks = toml_blocks(GUIDE);
    assert!(blocks.len() >= 4, "the guide's configs: {blocks:?}");
    for (index, block) in blocks.iter().enumerate() {
        let text = block.replace("/etc/sluice/tls/", &format!("{}/", dir.path().display()));
        let file = dir.path().join(format!("guide-{index}.toml"));
        std::fs::write(&file, &text).unwrap();
        let out = Command::new(common::BIN)
            .arg("--check-config")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "block {index} of the guide:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
