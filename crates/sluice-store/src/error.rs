//! Why a store could not decide.

use sluice_core::CheckError;

/// A check the store could not decide. Everything but `Check` is a backend failure, which
/// the daemon answers with the policy's fail mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The check itself is invalid whatever the backend (e.g. cost above capacity).
    #[error(transparent)]
    Check(#[from] CheckError),
    /// The backend did not answer within `backend.timeout`.
    #[error("backend timed out")]
    Timeout,
    /// The backend cannot be reached.
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// The backend answered with an error.
    #[error("backend error: {0}")]
    Backend(String),
}

impl StoreError {
    /// Whether this is a failure of the backend (as opposed to a bad check).
    pub fn is_backend_failure(&self) -> bool {
        !matches!(self, StoreError::Check(_))
    }

    /// A short, bounded label for metrics (`kind` of `rate_limit_backend_errors_total`).
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Check(_) => "check",
            StoreError::Timeout => "timeout",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Backend(_) => "error",
        }
    }
}
