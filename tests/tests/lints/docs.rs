//! The docs against themselves: the README stays short and its contents list names every
//! section; every section the README once held has a page of the book holding it; every page of
//! the book is in its table of contents; every link between the repository's Markdown files
//! reaches a file and a heading that exist; and the sizing figures of the operator's guide are
//! the ones the performance page measured. A renamed heading, a moved section or a re-measured
//! figure fails here instead of leaving a dead link or two numbers.

use std::path::{Path, PathBuf};

use crate::assets;

/// Where the book's pages live.
pub const BOOK_SRC: &str = "docs/src";

/// The README's size bound: the way in, not the manual.
const README_MAX_LINES: usize = 300;

/// Each `##`/`###` section of the README before the book existed, and the page of the book that
/// holds it now under a heading of the same title. A section is never dropped: moving one again
/// means changing its page here.
const OLD_README_SECTIONS: [(&str, &str); 26] = [
    ("Quick start", "getting-started.md"),
    ("Install", "getting-started.md"),
    ("Kubernetes", "guides/kubernetes.md"),
    ("Choosing an algorithm", "concepts/algorithms.md"),
    ("Check API", "reference/http-api.md"),
    ("Configuration", "reference/config.md"),
    ("Candidate limits", "concepts/candidates.md"),
    ("Backends", "concepts/backends.md"),
    ("Token leases", "concepts/leases.md"),
    ("Changing limits at run time", "guides/changing-limits.md"),
    ("Finding who is limited", "guides/who-is-limited.md"),
    ("Tuning limits", "guides/tuning.md"),
    ("Operating sluice", "guides/operating.md"),
    ("SLOs and status", "guides/slos.md"),
    ("Integrations", "guides/envoy.md"),
    ("Envoy (rate-limit service, gRPC)", "guides/envoy.md"),
    ("nginx (`auth_request`)", "guides/proxies.md"),
    (
        "Traefik and Caddy (`forwardAuth` / `forward_auth`)",
        "guides/proxies.md",
    ),
    ("Rust services (tower layer)", "guides/clients.md"),
    ("Redis clients (RESP)", "reference/resp.md"),
    ("Clients", "guides/clients.md"),
    ("Multi-region", "guides/multi-region.md"),
    ("Performance", "internals/performance.md"),
    ("CLI", "reference/cli.md"),
    ("Layout", "internals/layout.md"),
    (
        "Decisions made where nothing else decides",
        "reference/decisions.md",
    ),
];

/// The anchor GitHub (and mdBook) gives a Markdown heading: lower case, spaces as `-`, other
/// punctuation dropped.
pub fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Whether `line` opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// The lines of `text` outside fenced code blocks (a `#` comment in a shell block is no heading).
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if is_fence(line) {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// A fenced code block: its info string (`toml`, `go`, `toml,standalone`), its body (without the
/// indentation of its fence, as in a list item) and the line of its opening fence (1-based).
#[derive(Debug, Clone)]
pub struct Fence {
    pub info: String,
    pub body: String,
    pub line: usize,
}

impl Fence {
    /// The language: the info string up to the first `,` or space.
    pub fn lang(&self) -> &str {
        self.info.split([',', ' ']).next().unwrap_or_default()
    }

    /// Whether the info string carries `flag` after the language (`toml,standalone`).
    pub fn has(&self, flag: &str) -> bool {
        self.info.split([',', ' ']).skip(1).any(|f| f == flag)
    }
}

/// Every fenced code block of `text`, in order.
pub fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Fence)> = None;
    for (i, line) in text.lines().enumerate() {
        if is_fence(line) {
            match open.take() {
                Some((_, fence)) => out.push(fence),
                None => {
                    let indent = line.len() - line.trim_start().len();
                    open = Some((
                        indent,
                        Fence {
                            info: line.trim_start().trim_start_matches('`').trim().to_owned(),
                            body: String::new(),
                            line: i + 1,
                        },
                    ));
                }
            }
        } else if let Some((indent, fence)) = open.as_mut() {
            let cut = line.len() - line.trim_start().len();
            fence.body.push_str(&line[cut.min(*indent)..]);
            fence.body.push('\n');
        }
    }
    out
}

/// (level, title) of every heading of `text`.
fn headings(text: &str) -> Vec<(usize, String)> {
    prose(text)
        .into_iter()
        .filter_map(|line| {
            let level = line.chars().take_while(|&c| c == '#').count();
            let title = line[level..].strip_prefix(' ')?;
            (level > 0).then(|| (level, title.trim().to_owned()))
        })
        .collect()
}

/// The anchors of every heading of `text`.
fn anchors(text: &str) -> Vec<String> {
    headings(text)
        .iter()
        .map(|(_, title)| github_anchor(title))
        .collect()
}

/// (text, target) of every inline link `[text](target)` in `lines`.
fn links(lines: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in lines {
        let mut rest = *line;
        while let Some(open) = rest.find("](") {
            let label_start = rest[..open].rfind('[').map_or(0, |i| i + 1);
            let after = &rest[open + 2..];
            let Some(close) = after.find(')') else { break };
            found.push((
                rest[label_start..open].to_owned(),
                after[..close].to_owned(),
            ));
            rest = &after[close..];
        }
    }
    found
}

/// The lines of the section under the heading `title`, up to the next heading of its level or
/// above.
fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    let lines = prose(text);
    let level_of = |line: &str| {
        let level = line.chars().take_while(|&c| c == '#').count();
        (level > 0 && line[level..].starts_with(' ')).then_some(level)
    };
    let start = lines
        .iter()
        .position(|line| level_of(line).is_some() && line.trim_start_matches('#').trim() == title)
        .unwrap_or_else(|| panic!("no heading {title:?}"));
    let level = level_of(lines[start]).unwrap();
    lines[start + 1..]
        .iter()
        .take_while(|line| level_of(line).is_none_or(|l| l > level))
        .copied()
        .collect()
}

pub fn read(path: &str) -> String {
    std::fs::read_to_string(assets::root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `.md` files under `dir` (relative to the root), recursively, sorted.
fn markdown_under(dir: &str) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = assets::root();
    let mut found = Vec::new();
    walk(&root.join(dir), &mut found);
    let mut names: Vec<String> = found
        .iter()
        .map(|p| {
            p.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Every Markdown document a reader meets: the README, the project's own documents, the
/// clients' READMEs and every page of the book.
pub fn documents() -> Vec<String> {
    let mut docs: Vec<String> = [
        "README.md",
        "CHANGELOG.md",
        "CONTRIBUTING.md",
        "SECURITY.md",
        "clients/go/README.md",
        "clients/python/README.md",
        "clients/node/README.md",
    ]
    .iter()
    .filter(|doc| assets::root().join(doc).exists())
    .map(|doc| (*doc).to_owned())
    .collect();
    docs.extend(markdown_under(BOOK_SRC));
    docs
}

#[test]
fn the_readme_is_short_and_its_contents_list_every_section_in_order() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}: move the detail into the book"
    );
    let sections: Vec<(String, String)> = headings(&readme)
        .into_iter()
        .filter(|(level, _)| *level == 2)
        .map(|(_, title)| {
            let anchor = format!("#{}", github_anchor(&title));
            (title, anchor)
        })
        .collect();
    let prose_lines = prose(&readme);
    let start = prose_lines
        .iter()
        .position(|line| line.starts_with("**Contents:**"))
        .expect("README.md: no **Contents:** list");
    let contents_lines: Vec<&str> = prose_lines[start..]
        .iter()
        .take_while(|line| !line.trim().is_empty())
        .copied()
        .collect();
    let contents = links(&contents_lines);
    assert!(sections.len() >= 4, "{sections:?}");
    assert_eq!(
        contents, sections,
        "the README's contents list, against its `##` headings"
    );
}

#[test]
fn every_section_the_readme_held_is_a_heading_of_a_book_page() {
    for (title, page) in OLD_README_SECTIONS {
        let path = format!("{BOOK_SRC}/{page}");
        let text = read(&path);
        assert!(
            headings(&text).iter().any(|(_, t)| t == title),
            "{path}: no heading {title:?}, the README section it is said to hold"
        );
    }
}

#[test]
fn every_page_of_the_book_is_in_its_summary_and_every_entry_exists() {
    let summary_path = format!("{BOOK_SRC}/SUMMARY.md");
    let summary = read(&summary_path);
    let listed: Vec<String> = links(&prose(&summary))
        .into_iter()
        .map(|(_, target)| format!("{BOOK_SRC}/{target}"))
        .collect();
    for page in &listed {
        assert!(
            assets::root().join(page).exists(),
            "{summary_path}: {page} does not exist"
        );
    }
    for page in markdown_under(BOOK_SRC) {
        if page != summary_path {
            assert!(
                listed.contains(&page),
                "{page} is not in {summary_path}: a page no reader finds"
            );
        }
    }
}

#[test]
fn every_link_between_the_docs_reaches_a_file_and_a_heading() {
    let mut checked = 0;
    for doc in documents() {
        let text = read(&doc);
        let dir = Path::new(&doc).parent().unwrap_or(Path::new(""));
        for (label, target) in links(&prose(&text)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                PathBuf::from(&doc)
            } else {
                normalize(&dir.join(path))
                    .unwrap_or_else(|| panic!("{doc}: [{label}]({target}): leaves the repository"))
            };
            let file = file.to_string_lossy().into_owned();
            assert!(
                assets::root().join(&file).exists(),
                "{doc}: [{label}]({target}): no file {file}"
            );
            if !anchor.is_empty() {
                assert!(
                    file.ends_with(".md") && anchors(&read(&file)).iter().any(|a| a == anchor),
                    "{doc}: [{label}]({target}): no heading with anchor #{anchor} in {file}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 100, "{checked} links");
}

/// `path` with `.` and `..` resolved lexically; `None` when it climbs above its start.
pub fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

#[test]
fn the_sizing_figures_of_the_operating_guide_are_the_performance_table() {
    let table = section(&read("docs/src/internals/performance.md"), "For operators").join("\n");
    let sizing = section(&read("docs/src/guides/operating.md"), "Sizing").join(" ");
    // Bold spans holding a figure: `**92 B of RSS per tracked key**`.
    let figures: Vec<&str> = sizing
        .split("**")
        .skip(1)
        .step_by(2)
        .filter(|span| span.chars().any(|c| c.is_ascii_digit()))
        .collect();
    assert!(figures.len() >= 4, "{figures:?}");
    for figure in figures {
        assert!(
            table.contains(figure),
            "the operating guide's Sizing: **{figure}** is not in the performance page's operator table"
        );
    }
}
