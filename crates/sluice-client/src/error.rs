//! Why a call to the daemon failed.

/// A failed call to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {endpoint}")]
    Connect {
        endpoint: String,
        source: std::io::Error,
    },
    #[error("the daemon did not answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("HTTP error talking to the daemon: {0}")]
    Http(#[from] hyper::Error),
    #[error("invalid request: {0}")]
    Request(#[from] http::Error),
    #[error("unexpected answer (status {status}): {message}")]
    Decode { status: u16, message: String },
}
