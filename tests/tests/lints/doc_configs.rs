//! Every TOML config the docs show is one the daemon accepts. A ```` ```toml ```` block of the
//! README or of a book page is a part of a config: it is laid over the built-in config
//! (`examples/sluice.toml`, tables merged, the block's keys winning) and compiled by the daemon's
//! own load, the one `sluiced --check-config` runs. A ```` ```toml,standalone ```` block is a
//! whole file and compiled alone. A ```` ```toml,envoy-yaml ```` block names an
//! envoyproxy/ratelimit YAML directory of the reader's machine in `rls.envoy_config`: the
//! repository's example directory (`examples/envoy-ratelimit/config`) is read in its place, so
//! the YAML is loaded too. A renamed key or a value the daemon now refuses fails here, with
//! the page and the line of the block, instead of in a reader's terminal.

use sluice_config::ConfigSource;
use sluice_server::service;

use crate::assets;
use crate::docs::{self, Fence};

/// `over` laid onto `base`: tables merge key by key, anything else in `over` replaces.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(into)), toml::Value::Table(from)) => merge(into, from),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Where a block marked `tls-files` finds the certificates it names under
/// `/etc/sluice/tls/` (`ca.pem`, `redis-ca.pem`, `tls.crt`, `tls.key`, `client.crt`,
/// `client.key`): made once for the test run.
fn tls_files() -> &'static str {
    static DIR: std::sync::OnceLock<(sluice_testkit::certs::Certs, String)> =
        std::sync::OnceLock::new();
    &DIR.get_or_init(|| {
        let certs = sluice_testkit::certs::Certs::new();
        // A directory of its own: the certificates' own files have some of these names.
        let dir = certs.dir().join("etc-sluice-tls");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, from) in [
            ("ca.pem", &certs.ca_file),
            ("redis-ca.pem", &certs.ca_file),
            ("tls.crt", &certs.server.cert),
            ("tls.key", &certs.server.key),
            ("client.crt", &certs.client.cert),
            ("client.key", &certs.client.key),
        ] {
            std::fs::copy(from, dir.join(name)).unwrap();
        }
        let dir = format!("{}/", dir.display());
        (certs, dir)
    })
    .1
}

/// The config a block stands for, as TOML text.
fn config_of(fence: &Fence, where_: &str) -> String {
    if fence.has("tls-files") {
        return fence.body.replace("/etc/sluice/tls/", tls_files());
    }
    if fence.has("standalone") {
        return fence.body.clone();
    }
    let mut over: toml::Table = toml::from_str(&fence.body)
        .unwrap_or_else(|e| panic!("{where_}: the block is not TOML: {e}"));
    if fence.has("envoy-yaml") {
        let example = assets::root().join("examples/envoy-ratelimit/config");
        let rls = over.get_mut("rls").and_then(toml::Value::as_table_mut);
        let Some(rls) = rls.filter(|rls| rls.contains_key("envoy_config")) else {
            panic!("{where_}: an envoy-yaml block sets no rls.envoy_config");
        };
        rls.insert("envoy_config".into(), example.display().to_string().into());
    }
    let mut base: toml::Table = toml::from_str(&docs::read("examples/sluice.toml")).unwrap();
    merge(&mut base, over);
    toml::to_string(&base).unwrap()
}

/// (where, block) of every TOML block of the docs.
pub fn toml_blocks() -> Vec<(String, Fence)> {
    docs::documents()
        .into_iter()
        .flat_map(|doc| {
            docs::fences(&docs::read(&doc))
                .into_iter()
                .filter(|f| f.lang() == "toml")
                .map(move |f| (format!("{doc}:{}", f.line), f))
        })
        .collect()
}

#[test]
fn every_toml_block_of_the_docs_is_a_config_the_daemon_accepts() {
    let blocks = toml_blocks();
    assert!(blocks.len() >= 10, "{} TOML blocks", blocks.len());
    let mut refused = Vec::new();
    for (where_, fence) in &blocks {
        let source = ConfigSource::Text {
            name: where_.clone(),
            toml: config_of(fence, where_),
        };
        if let Err(err) = service::load(&source) {
            refused.push(format!("{err}"));
        }
    }
    assert!(
        refused.is_empty(),
        "TOML blocks the daemon refuses:\n{}",
        refused.join("\n")
    );
}
