//! Names the build in `sluiced --version`: the crate version and, when the source is a git
//! checkout, the commit of HEAD. `SLUICE_GIT_COMMIT` overrides it,
//! for builds from a source tarball; without git or a commit the version stands alone.

use std::process::Command;

fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rerun-if-env-changed=SLUICE_GIT_COMMIT");
    let commit = match std::env::var("SLUICE_GIT_COMMIT") {
        Ok(commit) if !commit.is_empty() => Some(commit),
        _ => git_commit(),
    };
    let full = match commit {
        Some(commit) => format!("{version} (commit {commit})"),
        None => version,
    };
    println!("cargo:rustc-env=SLUICE_VERSION={full}");
}

/// The commit of HEAD, and the files to watch so a new commit rebuilds; `None` without git.
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    // HEAD moves on a checkout, the branch's ref (or packed-refs) on a commit.
    for path in ["HEAD", "packed-refs"] {
        if let Some(file) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={file}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(file) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={file}");
    }
    Some(commit)
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
