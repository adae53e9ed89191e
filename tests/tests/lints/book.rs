//! The book builds, and every link in it lands. `mdbook build docs` runs into a temporary
//! directory and must succeed without a warning; then every `href` and `src` of every page is
//! followed: within the book to a file that exists and, for a `#fragment`, to an element with
//! that `id` (a heading renamed on one page fails on the pages linking to it); out of the book
//! (the repository's own files, `../../../examples/…`) to a file of the repository, resolved
//! from the page's Markdown source. mdBook is a requirement of the tests (`scripts/test`
//! installs it with `cargo install --locked mdbook`): this never skips.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::assets;
use crate::docs::{BOOK_SRC, normalize};

const INSTALL: &str = "mdbook not found: `cargo install --locked mdbook` (scripts/test does it \
    when missing), or set MDBOOK to its path; the book tests never skip";

/// The mdbook to run: `$MDBOOK`, else `mdbook` on the PATH, else cargo's bin directory.
fn mdbook() -> PathBuf {
    if let Some(path) = std::env::var_os("MDBOOK") {
        return PathBuf::from(path);
    }
    let on_path = Command::new("mdbook").arg("--version").output();
    if on_path.is_ok_and(|out| out.status.success()) {
        return PathBuf::from("mdbook");
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let candidate = home.map(|h| h.join("bin/mdbook"));
    candidate.filter(|p| p.exists()).expect(INSTALL)
}

/// The values of every `attr="…"` in `html`.
fn attribute_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!(" {attr}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        let after = &rest[at + needle.len()..];
        let Some(end) = after.find('"') else { break };
        out.push(&after[..end]);
        rest = &after[end..];
    }
    out
}

/// The `id`s of the elements of the HTML file `file`.
fn ids(file: &Path) -> BTreeSet<String> {
    let html = std::fs::read_to_string(file).unwrap();
    attribute_values(&html, "id")
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The HTML files under `dir`, recursively.
fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

/// Decodes the `%20`-style escapes of a URL path.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn the_book_builds_without_a_warning_and_every_link_lands() {
    let root = assets::root();
    let dest = tempfile::tempdir().unwrap();
    let out = Command::new(mdbook())
        .arg("build")
        .arg(root.join("docs"))
        .arg("--dest-dir")
        .arg(dest.path())
        .output()
        .expect(INSTALL);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mdbook build docs failed:\n{log}");
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(warnings.is_empty(), "mdbook build docs warned:\n{log}");

    let mut pages = Vec::new();
    html_files(dest.path(), &mut pages);
    assert!(pages.len() >= 20, "{} pages built", pages.len());
    let mut ids_of: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut broken = Vec::new();
    let mut followed = 0;
    for page in &pages {
        let rel = page.strip_prefix(dest.path()).unwrap();
        // 404.html is served from the site's root whatever the URL: its links are absolute.
        if rel == Path::new("404.html") {
            continue;
        }
        let html = std::fs::read_to_string(page).unwrap();
        let mut targets = attribute_values(&html, "href");
        targets.extend(attribute_values(&html, "src"));
        for target in targets {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            followed += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let path = percent_decode(path);
            let file = if path.is_empty() {
                page.clone()
            } else {
                let inside = normalize(&rel.parent().unwrap().join(&path));
                match inside {
                    Some(inside) => dest.path().join(inside),
                    None => {
                        // Out of the book: a file of the repository, from the page's source.
                        let source = Path::new(BOOK_SRC).join(rel.parent().unwrap());
                        match normalize(&source.join(&path)) {
                            Some(file) if root.join(&file).exists() => continue,
                            _ => {
                                broken.push(format!("{}: {target}: no such file", rel.display()));
                                continue;
                            }
                        }
                    }
                }
            };
            if !file.exists() {
                broken.push(format!("{}: {target}: no such file", rel.display()));
            } else if !fragment.is_empty()
                && file.extension().is_some_and(|e| e == "html")
                && !ids_of
                    .entry(file.clone())
                    .or_insert_with(|| ids(&file))
                    .contains(fragment)
            {
                broken.push(format!("{}: {target}: no id {fragment:?}", rel.display()));
            }
        }
    }
    assert!(followed >= 200, "{followed} links followed");
    assert!(
        broken.is_empty(),
        "broken links in the built book:\n{}",
        broken.join("\n")
    );
}
