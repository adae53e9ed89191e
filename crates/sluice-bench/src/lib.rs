//! `sluice-bench`: a load generator for sluiced (see the README).
//!
//! It drives `POST /v1/check` (or any `--path`) over keep-alive HTTP/1.1 connections on a
//! Unix socket or TCP, one connection per concurrency slot, all on one thread. Requests are
//! built once per connection and only their key digits are rewritten per request
//! ([`request`]); responses are framed by a minimal parser ([`http1`]) that never copies a
//! body. Latency goes into an HDR histogram; warm-up is not measured.
//!
//! Because nothing here is specific to sluiced beyond the JSON body it sends, the same load can
//! be aimed at any HTTP/1.1 server, such as the `baseline-axum` binary of this crate.

pub mod dist;
pub mod http1;
pub mod request;
pub mod run;
pub mod tally;

pub use dist::{Dist, DistKind};
pub use run::{BenchConfig, BenchError, Target, run};
pub use tally::Report;

/// CPU seconds (user + system) this process has used so far, from `/proc/self/stat`; `None`
/// where that file is not readable.
pub fn process_cpu_seconds() -> Option<f64> {
    cpu_seconds_of("self")
}

/// CPU seconds (user + system) of process `pid` (`"self"` or a number) from `/proc`.
pub fn cpu_seconds_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat).map(|(_, seconds)| seconds)
}

/// The name and CPU seconds (user + system) of every thread of this process, from
/// `/proc/self/task/*/stat`: a bench whose load generator runs in its process tells the
/// server's CPU from its own by thread name. A thread that ends meanwhile is left out.
pub fn thread_cpu_seconds() -> Vec<(String, f64)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter_map(|stat| parse_stat(&stat).map(|(name, seconds)| (name.to_owned(), seconds)))
        .collect()
}

/// The command name and CPU seconds of a `/proc/…/stat` line.
fn parse_stat(stat: &str) -> Option<(&str, f64)> {
    // The command name (field 2) is in parentheses and may hold spaces; the fields after its
    // closing paren are plain.
    let (head, after) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // Linux reports both in USER_HZ ticks, which is 100 on every supported architecture.
    #[allow(clippy::cast_precision_loss)]
    let seconds = (utime + stime) as f64 / 100.0;
    Some((name, seconds))
}
