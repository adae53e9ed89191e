//! Synthetic access logs for tests, benchmarks and examples: `keys` clients with a
//! Zipf-like share of the traffic each (a few heavy keys, a long tail), `lines_per_sec`
//! requests spread evenly over `duration_secs`, written in any input format. Deterministic
//! for a seed, so a benchmark reads the same log every run.

use std::io::{self, Write};

use sluice_core::SplitMix;

use crate::time::{format_nginx_time, format_rfc3339_millis};

/// The format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// nginx `combined` (about 200 bytes a line).
    NginxCombined,
    /// Envoy's default text format, the client in `x_forwarded_for`.
    Envoy,
    /// JSON lines: `time` (RFC 3339), `remote_addr`, `method`, `path`, `status`, `bytes`.
    Json,
    /// CSV `timestamp,key` (unix seconds with milliseconds; key `ip:<address>`).
    Csv,
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSpec {
    pub format: LogFormat,
    /// Distinct clients.
    pub keys: usize,
    /// Requests per second over all clients.
    pub lines_per_sec: u64,
    pub duration_secs: u64,
    /// Time of the first line, unix ms.
    pub start_ms: u64,
    /// Zipf exponent of the clients' shares (1.0: the heaviest client sends about 1/ln(keys)
    /// of the traffic; 0: all equal).
    pub skew: f64,
    pub seed: u64,
}

impl LogSpec {
    /// `lines_per_sec × duration_secs` lines of `keys` clients from 2026-12-06T10:00:00Z,
    /// skew 1.0.
    pub fn new(format: LogFormat, keys: usize, lines_per_sec: u64, duration_secs: u64) -> Self {
        LogSpec {
            format,
            keys,
            lines_per_sec,
            duration_secs,
            start_ms: 1_796_551_200_000,
            skew: 1.0,
            seed: 1,
        }
    }

    /// Lines the spec writes.
    pub fn lines(&self) -> u64 {
        self.lines_per_sec * self.duration_secs
    }
}

/// The address of client `index`: `10.a.b.c`.
pub fn client_address(index: usize) -> String {
    format!(
        "10.{}.{}.{}",
        (index >> 16) & 0xff,
        (index >> 8) & 0xff,
        index & 0xff
    )
}

const PATHS: [&str; 4] = [
    "/api/v1/items",
    "/api/v1/orders",
    "/api/v1/users/me",
    "/static/app.js",
];
const AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";

/// Writes the log of `spec` to `out`; answers the lines written.
pub fn write_log(spec: &LogSpec, out: &mut impl Write) -> io::Result<u64> {
    let keys = spec.keys.max(1);
    // Cumulative Zipf weights: client i has weight 1 / (i + 1)^skew.
    let mut cumulative = Vec::with_capacity(keys);
    let mut total = 0.0;
    for i in 0..keys {
        total += 1.0 / ((i + 1) as f64).powf(spec.skew);
        cumulative.push(total);
    }
    let addresses: Vec<String> = (0..keys).map(client_address).collect();
    let mut random = SplitMix(spec.seed);
    let lines = spec.lines();
    let mut nginx_second = u64::MAX;
    let mut nginx_time = String::new();
    for i in 0..lines {
        let at_ms = spec.start_ms + i * 1000 / spec.lines_per_sec.max(1);
        let pick = random.unit() * total;
        let client = cumulative.partition_point(|&c| c <= pick).min(keys - 1);
        let address = &addresses[client];
        let path = PATHS[random.below(PATHS.len() as u64) as usize];
        let item = random.below(100_000);
        let bytes = 200 + random.below(20_000);
        match spec.format {
            LogFormat::NginxCombined => {
                if at_ms / 1000 != nginx_second {
                    nginx_second = at_ms / 1000;
                    nginx_time = format_nginx_time(at_ms);
                }
                writeln!(
                    out,
                    "{address} - - [{nginx_time}] \"GET {path}/{item}?page=2 HTTP/1.1\" 200 {bytes} \"https://app.example.com/dashboard\" \"{AGENT}\""
                )?;
            }
            LogFormat::Envoy => writeln!(
                out,
                "[{}] \"GET {path}/{item} HTTP/1.1\" 200 - 0 {bytes} 3 2 \"{address}\" \"{AGENT}\" \"{:016x}\" \"api.example.com\" \"10.9.0.1:8080\"",
                format_rfc3339_millis(at_ms),
                random.next_u64()
            )?,
            LogFormat::Json => writeln!(
                out,
                "{{\"time\":\"{}\",\"remote_addr\":\"{address}\",\"method\":\"GET\",\"path\":\"{path}/{item}\",\"status\":200,\"bytes\":{bytes}}}",
                format_rfc3339_millis(at_ms)
            )?,
            LogFormat::Csv => writeln!(out, "{}.{:03},ip:{address}", at_ms / 1000, at_ms % 1000)?,
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_has_the_lines_asked_for_and_a_heavy_client() {
        let spec = LogSpec::new(LogFormat::Csv, 100, 50, 4);
        let mut out = Vec::new();
        assert_eq!(write_log(&spec, &mut out).unwrap(), 200);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 200);
        let heaviest = text.lines().filter(|l| l.ends_with(",ip:10.0.0.0")).count();
        let lightest = text
            .lines()
            .filter(|l| l.ends_with(",ip:10.0.0.99"))
            .count();
        assert!(heaviest > lightest + 10, "{heaviest} vs {lightest}");
        assert!(text.starts_with("1796551200.000,ip:"));
    }

    #[test]
    fn a_combined_line_is_about_200_bytes() {
        let spec = LogSpec::new(LogFormat::NginxCombined, 10, 10, 1);
        let mut out = Vec::new();
        write_log(&spec, &mut out).unwrap();
        let per_line = out.len() / 10;
        assert!((180..240).contains(&per_line), "{per_line}");
    }
}
