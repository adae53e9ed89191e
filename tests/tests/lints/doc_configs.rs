//! Every TOML config the docs show is one the daemon accepts. A ```` ```toml ```` block of the
//! README or of a book page is a part of a config: it is laid over the built-in config
//! (`examples/sluice.toml`, tables merged, the block's keys winning) and compiled by the daemon's
//! own load, the one `sluiced --check-config` runs. A ```` ```toml,standalone ```` block is a
//! whole file and compiled alone. A renamed key or a value the daemon now refuses fails here, with
//! the page and the line of the block, instead of in a reader's terminal.

use sluice_config::ConfigSource;
use sluice_server::service;

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

/// The config a block stands for, as TOML text.
fn config_of(fence: &Fence, where_: &str) -> String {
    if fence.has("standalone") {
        return fence.body.clone();
    }
    let over: toml::Table = toml::from_str(&fence.body)
        .unwrap_or_else(|e| panic!("{where_}: the block is not TOML: {e}"));
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
