//! How the CLI asks the daemon and reports its answers: the admin token and its header,
//! escaping of names in paths and queries, the span of a top list, `--json`'s raw body, and a
//! refusal on stderr. Shared by every command.

use std::process::ExitCode;

use sluice_client::RawResponse;
use sluice_client::api::ErrorBody;

/// Which of a policy's top lists to ask `/v1/top` for (`sluice top`, `sluice candidate show`).
#[derive(Debug, clap::Args)]
pub struct TopSpan {
    /// How many keys (1 to 100).
    #[arg(short, long, default_value_t = 20)]
    pub n: u64,
    /// `5m` or `60m`.
    #[arg(long, default_value = "5m")]
    pub period: String,
}

/// The variable the daemon reads its admin token from; the CLI reads it too.
pub const TOKEN_VAR: &str = "SLUICE_ADMIN__TOKEN";
/// The name earlier versions of the CLI read, still honoured.
pub const TOKEN_VAR_ALIAS: &str = "SLUICE_ADMIN_TOKEN";

/// `--token`, else the daemon's variable (clap has read it), else the older alias.
pub fn admin_token(given: Option<String>) -> Option<String> {
    given
        .or_else(|| std::env::var(TOKEN_VAR_ALIAS).ok())
        .filter(|token| !token.is_empty())
}

/// Percent-encodes a query value or path segment (the characters that would change its meaning).
pub fn query_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// With `--json`, the answer as sluiced gave it (exit 0 on a 200, 2 otherwise); without, a
/// refusal reported on stderr (exit 2). `None`: a 200 for the caller to render as a table.
pub fn printed_raw(raw: &RawResponse, json: bool) -> Option<ExitCode> {
    if json {
        println!("{}", String::from_utf8_lossy(&raw.body));
        return Some(ExitCode::from(if raw.status == 200 { 0 } else { 2 }));
    }
    if raw.status != 200 {
        report_error(raw);
        return Some(ExitCode::from(2));
    }
    None
}

/// A refusal on stderr: the daemon's error code and message.
pub fn report_error(raw: &RawResponse) {
    match raw.json::<ErrorBody>() {
        Ok(error) => eprintln!("sluice: {} {}: {}", raw.status, error.error, error.message),
        Err(_) => eprintln!(
            "sluice: {}: {}",
            raw.status,
            String::from_utf8_lossy(&raw.body)
        ),
    }
}

/// The `Authorization` value of `token`, if any.
pub fn bearer(token: Option<&str>) -> Option<String> {
    token.map(|token| format!("Bearer {token}"))
}

/// The request headers carrying `auth` (none without it).
pub fn authorization(auth: Option<&str>) -> Vec<(&str, &str)> {
    auth.map(|auth| ("authorization", auth))
        .into_iter()
        .collect()
}

/// A refused admin request reported on stderr, with how to pass the token when it was missing;
/// exit 2.
pub fn refused(raw: &RawResponse, token: Option<&str>) -> ExitCode {
    report_error(raw);
    if raw.status == 401 && token.is_none() {
        eprintln!("sluice: pass --token or set {TOKEN_VAR}");
    }
    ExitCode::from(2)
}
