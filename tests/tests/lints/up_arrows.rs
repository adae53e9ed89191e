//! Imports point down: inside a crate, at most [`MOST_UP_ARROWS`] module arrow runs back up.
//!
//! The arrows are drawn from the paths as written, not resolved through re-exports: a file
//! whose `use` (or inline `crate::…` / `super::…` path) names the module file `B` draws an
//! arrow to `B`, the longest prefix of the path that is a module of the crate (`use
//! crate::Check` in `redis/checks.rs` is an arrow to the crate root `lib.rs`, even though the
//! root only re-exports `Check` from `store.rs`). `mod` declarations are no arrows.
//!
//! An arrow from file `A` to module file `B` (not below `A`) **runs back up** when it closes a
//! loop between branches of the module tree. Let `C` be the deepest common ancestor of `A`
//! and `B`, and `a` the child of `C` that holds `A`:
//! - `B` is `C` itself (an ancestor of `A`, such as `lib.rs` or a `mod.rs` above it) and
//!   `C`'s own file draws an arrow into `a` (typically `pub use a::…`): `A` reaches up into
//!   a module that reaches down into `A`'s branch;
//! - or `B` lies in another child `b` of `C`, and some file under `b` draws an arrow into
//!   `a`: the two branches import each other.
//!
//! Each such `(A, B)` pair counts once. Importing an item from the module that defines it
//! (`crate::store::Check`, `super::lanes::Entry`) runs down or across, never back up.
//! Generated code and test modules are left out, as in [`imports`](super::imports).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::assets::root;
use crate::imports::{Crate, inline_paths, read_crate, use_paths};

/// The most arrows running back up in one crate.
const MOST_UP_ARROWS: usize = 1;

/// File → the module files its paths name as written (its own subtree included: an
/// ancestor's arrows down are what an arrow up to it closes a loop with).
fn literal_arrows(krate: &Crate) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut arrows = BTreeMap::new();
    for (module, source) in &krate.files {
        let mut targets = BTreeSet::new();
        let paths = use_paths(&source.code)
            .into_iter()
            .chain(inline_paths(&source.code));
        for path in paths {
            let Some(absolute) = krate.absolute(module, &path) else {
                continue;
            };
            let named = (0..=absolute.len())
                .rev()
                .map(|i| &absolute[..i])
                .find(|prefix| krate.files.contains_key(*prefix));
            if let Some(named) = named
                && named != module.as_slice()
            {
                targets.insert(named.to_vec());
            }
        }
        arrows.insert(module.clone(), targets);
    }
    arrows
}

/// The arrows of `krate` that run back up, as `(from, to)` module paths.
fn up_arrows(krate: &Crate) -> Vec<(Vec<String>, Vec<String>)> {
    let arrows = literal_arrows(krate);
    let reaches = |from_under: &[String], into: &[String]| {
        arrows
            .iter()
            .filter(|(from, _)| from.starts_with(from_under))
            .any(|(_, targets)| targets.iter().any(|t| t.starts_with(into)))
    };
    let mut found = Vec::new();
    for (a_file, targets) in &arrows {
        for b_file in targets {
            let common = a_file
                .iter()
                .zip(b_file)
                .take_while(|(x, y)| x == y)
                .count();
            let Some(a_branch) = a_file.get(..=common) else {
                continue;
            };
            let up = if b_file.len() == common {
                // B is an ancestor of A: does B's own file draw an arrow into A's branch?
                arrows
                    .get(b_file)
                    .is_some_and(|t| t.iter().any(|t| t.starts_with(a_branch)))
            } else {
                reaches(&b_file[..=common], a_branch)
            };
            if up {
                found.push((a_file.clone(), b_file.clone()));
            }
        }
    }
    found
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

#[test]
fn at_most_one_arrow_runs_back_up_in_any_crate() {
    let crates = root().join("crates");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    sources.sort();
    assert!(
        sources.len() >= 5,
        "crates not found under {}",
        crates.display()
    );
    let mut report = Vec::new();
    for src in sources {
        let found = up_arrows(&read_crate(&src));
        if found.len() > MOST_UP_ARROWS {
            let lines: Vec<String> = found
                .iter()
                .map(|(from, to)| format!("  {} -> {}", name(from), name(to)))
                .collect();
            report.push(format!(
                "{}: {} arrows run back up\n{}",
                src.display(),
                found.len(),
                lines.join("\n")
            ));
        }
    }
    assert!(
        report.is_empty(),
        "import from the module that defines an item, not through an ancestor's re-export:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_up_arrow_finder_sees_a_reach_through_the_root_and_across_branches() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("redis")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
    write(
        "lib.rs",
        "mod redis;\nmod store;\nmod memory;\npub use redis::Single;\npub use store::Check;\n",
    );
    write("store.rs", "pub struct Check;\n");
    write("redis/mod.rs", "mod single;\npub use single::Single;\n");
    // Through the root's re-export: up. From the defining module: not.
    write(
        "redis/single.rs",
        "use crate::Check;\nuse crate::store::Check as Again;\npub struct Single;\n",
    );
    // memory and redis import each other (across, through no ancestor): both arrows count.
    write(
        "memory.rs",
        "use crate::redis::single::Single;\npub struct M;\n",
    );
    let krate = read_crate(src);
    let modules = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        up_arrows(&krate),
        vec![(modules(&["redis", "single"]), modules(&[]))]
    );
    write(
        "redis/single.rs",
        "use crate::store::Check;\nuse crate::memory::M;\npub struct Single;\n",
    );
    let mut found = up_arrows(&read_crate(src));
    found.sort();
    assert_eq!(
        found,
        vec![
            (modules(&["memory"]), modules(&["redis", "single"])),
            (modules(&["redis", "single"]), modules(&["memory"])),
        ]
    );
}
