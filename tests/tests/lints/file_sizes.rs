//! Small files: no source file the repository tracks holds more than [`MOST_LINES`] lines, so
//! each keeps one job a reader can hold at once. Generated code (`generated/` directories,
//! the vendored `.proto` files) is left out: nobody reads it to change it.

use std::process::Command;

use crate::assets::root;

/// The most lines of one source file.
const MOST_LINES: usize = 700;

/// The endings of the files that count as source.
const SOURCE: [&str; 8] = [".rs", ".lua", ".py", ".go", ".js", ".ts", ".sh", ".toml"];

#[test]
fn no_source_file_is_longer_than_700_lines() {
    let root = root();
    let listed = Command::new("git")
        .arg("ls-files")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files failed");
    let tracked = String::from_utf8(listed.stdout).unwrap();
    let mut long = Vec::new();
    for path in tracked.lines() {
        if !SOURCE.iter().any(|end| path.ends_with(end)) || path.contains("/generated/") {
            continue;
        }
        // A file of the index missing from the work tree (deleted, not yet committed) is no
        // source any more.
        let Ok(text) = std::fs::read_to_string(root.join(path)) else {
            continue;
        };
        let lines = text.lines().count();
        if lines > MOST_LINES {
            long.push(format!("{path}: {lines} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "source files over {MOST_LINES} lines (split them by job):\n{}",
        long.join("\n")
    );
}
