//! The layout rule every crate keeps: no source file imports from a file that (directly or
//! through others) imports from it, and no top-level module of a crate (`config`, `service`,
//! `http`, `server`…) imports from one that imports from it, which the file rule cannot see
//! (two modules can each have files importing the other's without any file cycle). Modules
//! compiled only for tests (`#[cfg(test)] mod properties;`) are left out of both. Each file's `use` trees and inline `crate::` / `super::`
//! paths are resolved to the file that defines the item, following the `pub use` re-exports
//! of `mod.rs` / `lib.rs` (a module file that only declares and re-exports its children is
//! the way in, not a party to a cycle). Generated code and `#[cfg(test)] mod tests` are left
//! out: a test module may use anything of its file's parents.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::assets::root;

/// A crate's source files by module path (`["config", "compile"]`; the crate root is `[]`).
pub(crate) struct Crate {
    pub(crate) files: BTreeMap<Vec<String>, Source>,
}

/// The modules a file declares under `#[cfg(test)]` (`mod properties;`): test code, which
/// may use anything of the crate.
fn test_modules(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if *line != "#[cfg(test)]" {
            continue;
        }
        let declared = lines[i + 1..]
            .iter()
            .find(|next| !next.starts_with("#["))
            .and_then(|next| next.trim_start_matches("pub ").strip_prefix("mod "))
            .and_then(|rest| rest.strip_suffix(';'));
        if let Some(name) = declared {
            found.push(name.trim().to_owned());
        }
    }
    found
}

pub(crate) struct Source {
    pub(crate) path: PathBuf,
    /// The text, without whole-line comments and without the trailing test module.
    pub(crate) code: String,
    /// Whether this is a `mod.rs`, `lib.rs` or `main.rs`: a module of its own directory.
    dir_module: bool,
}

pub(crate) fn read_crate(src: &Path) -> Crate {
    let mut files = BTreeMap::new();
    let mut tests_only: Vec<Vec<String>> = Vec::new();
    let mut stack = vec![src.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "generated") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let dir_module = matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            );
            if dir_module {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let parent = if dir_module {
                module.clone()
            } else {
                module[..module.len() - 1].to_vec()
            };
            for name in test_modules(&text) {
                if dir_module || module.last().is_some_and(|own| *own != name) {
                    tests_only.push([&parent[..], std::slice::from_ref(&name)].concat());
                }
            }
            files.insert(
                module,
                Source {
                    path,
                    code: code_of(&text),
                    dir_module,
                },
            );
        }
    }
    files.retain(|module: &Vec<String>, _| !tests_only.iter().any(|test| module.starts_with(test)));
    Crate { files }
}

/// `text` without whole-line comments and without its `#[cfg(test)] mod tests { … }` (always
/// the last item of a file here).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]" {
            // Attributes may stand between it and the module.
            let mut ahead = lines.clone();
            let module = ahead.find(|next| !next.trim_start().starts_with("#["));
            if module.is_some_and(|m| m.trim_start().starts_with("mod tests")) {
                break;
            }
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The paths of a use tree: `a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    expand_into(&[], tree.trim(), &mut out);
    out
}

fn expand_into(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let mut depth = 0;
        let mut start = 0;
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_into(prefix, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_into(prefix, &inner[start..], out);
        return;
    }
    if let Some(at) = tree.find("::{") {
        let mut next = prefix.to_vec();
        next.extend(tree[..at].split("::").map(|s| s.trim().to_owned()));
        expand_into(&next, &tree[at + 2..], out);
        return;
    }
    let tree = tree.split(" as ").next().unwrap_or(tree);
    let mut path = prefix.to_vec();
    path.extend(
        tree.split("::")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()),
    );
    if !path.is_empty() {
        out.push(path);
    }
}

/// Every `use` tree of `code` (`pub use` included), as paths.
pub(crate) fn use_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        paths.extend(expand(&after[..end]));
        rest = &after[end..];
    }
    paths
}

/// Every inline `crate::…` / `super::…` path of `code`.
pub(crate) fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for word in ["crate", "super"] {
        let mut rest = code;
        while let Some(at) = find_word(rest, word) {
            let tail = &rest[at..];
            let len = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            let path: Vec<String> = tail[..len]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if path.len() > 1 {
                paths.push(path);
            }
            rest = &rest[at + word.len()..];
        }
    }
    paths
}

/// Where `word` stands as a whole word in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        // `$crate` counts: a macro's paths are its file's imports.
        if boundary(before.filter(|c| *c != '$')) && boundary(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

impl Crate {
    /// `path` as written in the file of `module`, made absolute (`None`: another crate).
    pub(crate) fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([module, rest].concat()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                Some([&base[..], rest].concat())
            }
            _ => {
                let child = [module, &path[..1]].concat();
                self.files
                    .contains_key(&child)
                    .then(|| [module, path].concat())
            }
        }
    }

    /// The file defining the item `path` names (following re-exports of module files).
    fn target(&self, path: &[String], depth: usize) -> Option<&Vec<String>> {
        for i in (1..=path.len()).rev() {
            let Some((module, source)) = self.files.get_key_value(&path[..i]) else {
                continue;
            };
            if i < path.len() && source.dir_module && depth < 8 {
                let name = &path[i];
                if source.code.contains(&format!("mod {name};")) {
                    // A child module left out of the reading (generated code).
                    return None;
                }
                if !defines(&source.code, name)
                    && let Some(reexport) = self.reexport(module, source, name)
                {
                    let followed = [&reexport[..], &path[i + 1..]].concat();
                    return self.target(&followed, depth + 1);
                }
            }
            return Some(module);
        }
        None
    }

    /// The absolute path a module file's `pub use` gives `name`.
    fn reexport(&self, module: &[String], source: &Source, name: &str) -> Option<Vec<String>> {
        let mut rest = source.code.as_str();
        while let Some(at) = rest.find("pub") {
            let after = rest[at + 3..].trim_start();
            let after = if after.starts_with('(') {
                after[after.find(')')? + 1..].trim_start()
            } else {
                after
            };
            rest = &rest[at + 3..];
            let Some(tree) = after.strip_prefix("use ") else {
                continue;
            };
            let tree = &tree[..tree.find(';')?];
            for path in expand(tree) {
                if path.last().is_some_and(|last| last == name)
                    && let Some(absolute) = self.absolute(module, &path)
                {
                    return Some(absolute);
                }
            }
        }
        None
    }

    /// File → the files it imports from.
    fn imports(&self) -> BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> {
        let mut edges = BTreeMap::new();
        for (module, source) in &self.files {
            let mut targets = BTreeSet::new();
            let paths = use_paths(&source.code)
                .into_iter()
                .chain(inline_paths(&source.code));
            for path in paths {
                let Some(absolute) = self.absolute(module, &path) else {
                    continue;
                };
                if let Some(target) = self.target(&absolute, 0)
                    && target != module
                {
                    targets.insert(target);
                }
            }
            edges.insert(module, targets);
        }
        edges
    }
}

/// Top-level module → the top-level modules its files import from (the crate root left out:
/// `lib.rs` and `main.rs` only declare and wire the modules).
fn module_imports(
    file_edges: &BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>>,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, targets) in file_edges {
        let Some(from) = from.first() else { continue };
        let entry = edges.entry(vec![from.clone()]).or_default();
        for to in targets {
            if let Some(to) = to.first()
                && to != from
            {
                entry.insert(vec![to.clone()]);
            }
        }
    }
    edges
}

/// The groups of top-level modules of `krate` that import each other.
fn module_cycles(krate: &Crate) -> Vec<Vec<String>> {
    let owned = module_imports(&krate.imports());
    let edges: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = owned
        .iter()
        .map(|(from, targets)| (from, targets.iter().collect()))
        .collect();
    cycles(&edges)
        .into_iter()
        .map(|group| {
            let mut names: Vec<String> = group.iter().map(|m| m.join("::")).collect();
            names.sort();
            names
        })
        .collect()
}

fn defines(code: &str, name: &str) -> bool {
    [
        "struct", "enum", "fn", "trait", "type", "const", "static", "mod",
    ]
    .iter()
    .any(|kind| {
        code.match_indices(&format!("{kind} {name}"))
            .any(|(at, m)| {
                let after = code[at + m.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
    }) || code.contains(&format!("macro_rules! {name}"))
}

/// The groups of files that import each other (strongly connected, more than one file).
fn cycles<'a>(
    edges: &BTreeMap<&'a Vec<String>, BTreeSet<&'a Vec<String>>>,
) -> Vec<Vec<&'a Vec<String>>> {
    // Kosaraju: order by finish time on the graph, then collect on the reversed graph.
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for &start in edges.keys() {
        if seen.contains(start) {
            continue;
        }
        let mut stack = vec![(start, false)];
        while let Some((node, done)) = stack.pop() {
            if done {
                order.push(node);
                continue;
            }
            if !seen.insert(node) {
                continue;
            }
            stack.push((node, true));
            for &next in edges.get(node).into_iter().flatten() {
                if !seen.contains(next) {
                    stack.push((next, false));
                }
            }
        }
    }
    let mut reversed: BTreeMap<&Vec<String>, Vec<&Vec<String>>> = BTreeMap::new();
    for (&from, targets) in edges {
        for &to in targets {
            reversed.entry(to).or_default().push(from);
        }
    }
    let mut assigned = BTreeSet::new();
    let mut groups = Vec::new();
    for &node in order.iter().rev() {
        if assigned.contains(node) {
            continue;
        }
        let mut group = Vec::new();
        let mut stack = vec![node];
        assigned.insert(node);
        while let Some(n) = stack.pop() {
            group.push(n);
            for &prev in reversed.get(n).into_iter().flatten() {
                if assigned.insert(prev) {
                    stack.push(prev);
                }
            }
        }
        if group.len() > 1 {
            groups.push(group);
        }
    }
    groups
}

#[test]
fn no_file_imports_a_file_that_imports_it() {
    let mut found = Vec::new();
    let crates = root().join("crates");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    names.sort();
    assert!(
        names.len() >= 5,
        "crates not found under {}",
        crates.display()
    );
    for src in names {
        let krate = read_crate(&src);
        let edges = krate.imports();
        for group in cycles(&edges) {
            let files: Vec<String> = group
                .iter()
                .map(|m| krate.files[*m].path.display().to_string())
                .collect();
            found.push(files.join(" <-> "));
        }
        for group in module_cycles(&krate) {
            found.push(format!(
                "modules of {}: {}",
                src.display(),
                group.join(" <-> ")
            ));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_module_cycle_finder_sees_a_cycle_no_file_cycle_shows() {
    // config/load.rs imports service/policy.rs, service/app.rs imports config/schema.rs: no
    // file imports a file that imports it, but the modules import each other. A test-only
    // module importing anything is left out.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    for module in ["config", "service"] {
        std::fs::create_dir(src.join(module)).unwrap();
    }
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
    write(
        "lib.rs",
        "pub mod config;\npub mod service;\npub mod server;\n",
    );
    write("config/mod.rs", "pub mod load;\npub mod schema;\n");
    write("config/schema.rs", "pub struct Schema;\n");
    write(
        "config/load.rs",
        "use crate::service::policy::Policy;\npub fn load(_: Policy) {}\n",
    );
    write(
        "service/mod.rs",
        "pub mod app;\npub mod policy;\n#[cfg(test)]\nmod props;\n",
    );
    write("service/policy.rs", "pub struct Policy;\n");
    write(
        "service/app.rs",
        "use crate::config::schema::Schema;\npub struct App(Schema);\n",
    );
    write("service/props.rs", "use crate::server::Thing;\n");
    write(
        "server.rs",
        "use crate::service::app::App;\npub struct Thing(App);\n",
    );
    let krate = read_crate(src);
    assert!(cycles(&krate.imports()).is_empty(), "no file cycle");
    assert_eq!(
        module_cycles(&krate),
        vec![vec!["config".to_owned(), "service".to_owned()]]
    );
    // Without config's import of the service, no module cycle either (service/props.rs, a
    // test module importing server, which imports service, does not count).
    write("config/load.rs", "pub fn load() {}\n");
    assert!(module_cycles(&read_crate(src)).is_empty());
}

#[test]
fn the_cycle_finder_sees_a_cycle() {
    // Two sibling files importing each other, and one through its parent's re-export.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod x;\npub use x::X;\n").unwrap();
    std::fs::write(
        src.join("a/x.rs"),
        "use crate::b::Y;\npub struct X(Y);\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("b.rs"),
        "use crate::a::X;\npub struct Y;\nfn f(_: X) {}\n",
    )
    .unwrap();
    let krate = read_crate(src);
    let edges = krate.imports();
    let found = cycles(&edges);
    assert_eq!(found.len(), 1);
    let mut names: Vec<&Vec<String>> = found[0].clone();
    names.sort();
    assert_eq!(
        names,
        [&vec!["a".to_owned(), "x".to_owned()], &vec!["b".to_owned()]]
    );
    // Without b's import of X there is none.
    std::fs::write(src.join("b.rs"), "pub struct Y;\n").unwrap();
    let krate = read_crate(src);
    assert!(cycles(&krate.imports()).is_empty());
}
