//! The crate graph's rules, read from cargo itself: no crate of the workspace depends, in any
//! kind (normal, dev or build) and under any feature, on a crate that depends on it; the
//! client library links nothing of the daemon, of Redis or of gRPC and stays small; the
//! configuration crate links no async runtime, server or Redis client.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use crate::assets::root;

/// Crates the client library must never pull in, under any of its features.
const NOT_IN_CLIENT: [&str; 4] = ["sluice-server", "fred", "redis", "tonic"];
/// Crates the configuration crate must never pull in.
const NOT_IN_CONFIG: [&str; 6] = ["tokio", "axum", "tonic", "fred", "redis", "sluice-store"];
/// Most crates `sluice-client`'s default tree may list (itself included).
const CLIENT_TREE_MAX: usize = 100;

/// Runs cargo in the repository with `args`, its standard output.
fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every workspace crate and the workspace crates it names as a dependency of any kind
/// (`dev` and `build` included, optional ones too), from `cargo metadata`.
fn workspace_graph(metadata: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let packages = metadata["packages"].as_array().unwrap();
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|name| members.contains(name))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// Every pair `(a, b)` where `a` depends on `b` and `b` reaches `a` again (a crate naming
/// itself included), with the way back.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    for (from, deps) in graph {
        for to in deps {
            if let Some(back) = path(graph, to, from) {
                found.push(format!("{from} -> {}", back.join(" -> ")));
            }
        }
    }
    found
}

/// A way from `from` to `to` along the graph's edges (`[from, …, to]`), if any.
fn path(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    let mut seen = BTreeSet::from([from]);
    while let Some(at) = queue.pop_front() {
        if at == to {
            let mut way = vec![at.to_owned()];
            let mut step = at;
            while let Some(prev) = came_from.get(step) {
                way.push((*prev).to_owned());
                step = prev;
            }
            way.reverse();
            return Some(way);
        }
        for next in graph.get(at).into_iter().flatten() {
            if seen.insert(next.as_str()) {
                came_from.insert(next.as_str(), at);
                queue.push_back(next.as_str());
            }
        }
    }
    None
}

/// The distinct crates of `package`'s normal dependency tree (itself included).
fn normal_tree(package: &str, features: &[&str]) -> BTreeSet<String> {
    let mut args = vec![
        "tree", "--locked", "-p", package, "-e", "normal", "--prefix", "none",
    ];
    args.extend_from_slice(features);
    cargo(&args)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn no_crate_depends_on_a_crate_that_depends_on_it() {
    let metadata: Value = serde_json::from_str(&cargo(&[
        "metadata",
        "--locked",
        "--no-deps",
        "--format-version",
        "1",
    ]))
    .unwrap();
    let graph = workspace_graph(&metadata);
    assert!(
        graph.contains_key("sluice-cli") && graph["sluice-cli"].contains("sluice-client"),
        "the workspace graph was not read: {graph:?}"
    );
    let found = cycles(&graph);
    assert!(found.is_empty(), "crate cycles:\n{}", found.join("\n"));
}

#[test]
fn the_client_library_links_nothing_of_the_daemon_and_stays_small() {
    let default = normal_tree("sluice-client", &[]);
    assert!(
        default.len() <= CLIENT_TREE_MAX,
        "sluice-client's normal tree lists {} crates (at most {CLIENT_TREE_MAX}): {default:?}",
        default.len()
    );
    let every = normal_tree("sluice-client", &["--all-features"]);
    for name in NOT_IN_CLIENT {
        assert!(
            !every.contains(name),
            "sluice-client (all features) depends on {name}"
        );
    }
}

#[test]
fn the_configuration_crate_links_no_runtime_server_or_redis_client() {
    let tree = normal_tree("sluice-config", &["--all-features"]);
    for name in NOT_IN_CONFIG {
        assert!(!tree.contains(name), "sluice-config depends on {name}");
    }
}

#[test]
fn the_cycle_finder_sees_a_cycle_and_a_self_dependency() {
    let graph = |edges: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            graph
                .entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned());
        }
        graph
    };
    // client -> api, server -> client, client -(dev)-> server: one cycle, seen from both ends.
    let found = cycles(&graph(&[
        ("client", "api"),
        ("server", "client"),
        ("client", "server"),
    ]));
    assert_eq!(
        found,
        ["client -> server -> client", "server -> client -> server"]
    );
    assert_eq!(cycles(&graph(&[("core", "core")])), ["core -> core"]);
    assert!(cycles(&graph(&[("cli", "client"), ("server", "client")])).is_empty());
}
