//! The docs against themselves: the README's contents list names every section, every link
//! between the repository's Markdown files reaches a file and a heading that exist, and the
//! sizing figures of the operator's guide are the ones the performance page measured. A renamed
//! heading or a re-measured figure fails here instead of leaving a dead link or two numbers.

use std::path::Path;

use crate::assets;

/// The Markdown files whose links are checked.
const DOCS: [&str; 3] = ["README.md", "docs/OPERATING.md", "docs/PERFORMANCE.md"];

/// The anchor GitHub gives a Markdown heading: lower case, spaces as `-`, other punctuation
/// dropped.
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

/// The lines of `text` outside fenced code blocks (a `#` comment in a shell block is no heading).
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
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

fn read(path: &str) -> String {
    std::fs::read_to_string(assets::root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_readme_contents_list_every_section_in_order() {
    let readme = read("README.md");
    let sections: Vec<(String, String)> = headings(&readme)
        .into_iter()
        .filter(|(level, _)| *level == 2)
        .map(|(_, title)| {
            let anchor = format!("#{}", github_anchor(&title));
            (title, anchor)
        })
        .collect();
    let lines = prose(&readme);
    let start = lines
        .iter()
        .position(|line| line.starts_with("**Contents:**"))
        .expect("README.md: no **Contents:** list");
    let contents_lines: Vec<&str> = lines[start..]
        .iter()
        .take_while(|line| !line.trim().is_empty())
        .copied()
        .collect();
    let contents = links(&contents_lines);
    assert!(sections.len() >= 10, "{sections:?}");
    assert_eq!(
        contents, sections,
        "the README's contents list, against its `##` headings"
    );
}

#[test]
fn every_link_between_the_docs_reaches_a_file_and_a_heading() {
    let mut checked = 0;
    for doc in DOCS {
        let text = read(doc);
        let dir = Path::new(doc).parent().unwrap_or(Path::new(""));
        for (label, target) in links(&prose(&text)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                doc.to_owned()
            } else {
                dir.join(path).to_string_lossy().into_owned()
            };
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
    assert!(checked >= 20, "{checked} links");
}

#[test]
fn the_sizing_figures_of_the_operating_guide_are_the_performance_table() {
    let table = section(&read("docs/PERFORMANCE.md"), "For operators").join("\n");
    let sizing = section(&read("docs/OPERATING.md"), "Sizing").join(" ");
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
            "docs/OPERATING.md, Sizing: **{figure}** is not in docs/PERFORMANCE.md's operator table"
        );
    }
}
