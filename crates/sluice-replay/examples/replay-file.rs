//! Replays log files through two policies and prints the summary and the throughput: what
//! `scripts/bench-replay` times until the `sluice replay` command does the same.
//!
//! usage: replay-file [--scan] [--candidate] [--format nginx|envoy|json|csv] [--report OUT.html] FILE...
//!   policies: `public` token_bucket 100 per 60s (burst 100), `strict` fixed_window 30 per 60s.
//!   --scan       parse and merge only (no replay): the reading share of the time.
//!   --candidate  judge candidates beside the limits: `public` 150, `strict` 60.
//!   --report     also write the HTML report.

use std::path::PathBuf;
use std::time::Instant;

use sluice_core::{Algorithm, Params};
use sluice_replay::{Format, ReplayOptions, ReplayPolicy, render_html, render_text, replay, scan};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut scan_only = false;
    let mut candidate = false;
    let mut html = None;
    let mut format = Format::nginx_combined();
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--scan" => scan_only = true,
            "--candidate" => candidate = true,
            "--report" => html = args.next(),
            "--format" => {
                format = match args.next().as_deref() {
                    Some("nginx") => Format::nginx_combined(),
                    Some("envoy") => Format::Envoy,
                    Some("json") => Format::Json { time_field: None },
                    Some("csv") => Format::Csv,
                    other => return Err(format!("unknown format {other:?}").into()),
                }
            }
            _ => files.push(PathBuf::from(arg)),
        }
    }
    let mut public = ReplayPolicy::new(
        "public",
        Params::new(Algorithm::TokenBucket, 100, 60_000, 100)?,
    );
    public.candidates.insert(
        "none".to_owned(),
        Params::new(Algorithm::TokenBucket, 150, 60_000, 150)?,
    );
    let mut strict = ReplayPolicy::new(
        "strict",
        Params::new(Algorithm::FixedWindow, 30, 60_000, 30)?,
    );
    strict.candidates.insert(
        "none".to_owned(),
        Params::new(Algorithm::FixedWindow, 60, 60_000, 60)?,
    );
    let policies = [public, strict];
    let mut options = ReplayOptions::new(format);
    options.candidate = candidate;
    options.progress = true;
    let started = Instant::now();
    let lines = if scan_only {
        let summary = scan(&policies, &files, &options)?;
        println!("{} lines, {} unparsed", summary.lines, summary.unparsed);
        summary.lines
    } else {
        let report = replay(&policies, &files, &options)?;
        print!("{}", render_text(&report));
        if let Some(path) = &html {
            std::fs::write(path, render_html(&report)?)?;
        }
        report.lines
    };
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "{} {lines} lines in {elapsed:.3} s: {:.0} lines/s",
        if scan_only { "scanned" } else { "replayed" },
        lines as f64 / elapsed
    );
    Ok(())
}
