//! Why a replay could not run. [`Error::Read`] (a file that cannot be opened or read) is kept
//! apart from everything else, which is a bad option or policy: the CLI answers both with
//! exit code 2, and tells the user which file or which flag.

use std::path::PathBuf;

/// A replay that could not run or could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A log file cannot be opened, read or decompressed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `--log-format` (or the format's built-in one) cannot be compiled.
    #[error("--log-format: {0}")]
    LogFormat(String),
    /// A `--key` / `--tier` expression is malformed or names a variable the format lacks.
    #[error("{flag}: {message}")]
    Expression { flag: &'static str, message: String },
    /// `--policy` names a policy that is not configured.
    #[error("--policy: no policy named {name:?}; configured: {known}")]
    UnknownPolicy { name: String, known: String },
    /// Nothing to replay through.
    #[error("no policies to replay through")]
    NoPolicies,
    /// A policy's limit is invalid (the caller should have refused it when compiling).
    #[error("policy {policy:?}, tier {tier:?}: {source}")]
    Limit {
        policy: String,
        tier: String,
        #[source]
        source: sluice_core::ParamsError,
    },
    /// A policy's stacked limits cannot be replayed as given.
    #[error("policy {policy:?}, tier {tier:?}: {message}")]
    Stack {
        policy: String,
        tier: String,
        message: String,
    },
    /// Another option is out of range.
    #[error("{flag}: {message}")]
    Option { flag: &'static str, message: String },
    /// A chart of the HTML report could not be drawn.
    #[error("drawing the report's charts: {0}")]
    Chart(String),
}

impl Error {
    /// Whether this is a file that could not be read (rather than a bad option or policy).
    pub fn is_read(&self) -> bool {
        matches!(self, Error::Read { .. })
    }
}
