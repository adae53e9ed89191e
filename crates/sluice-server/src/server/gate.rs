//! The bound on open connections (`listen.max_connections`), one for every listener of the
//! daemon whatever its protocol. A connection past the bound is not left in the kernel's
//! backlog, where a client would hang: it is accepted, given the protocol's "overloaded"
//! answer and closed, by a bounded number of short tasks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections being refused at once, on top of the bound. Past it a connection is closed
/// without an answer: the client still learns at once, and the fds stay bounded.
pub const MAX_REFUSING: usize = 64;

/// How long a refused client has to read the answer before its connection is closed.
const REFUSE_WITHIN: Duration = Duration::from_secs(1);

/// What a refused connection may send before it is closed (read so the close does not reset
/// the connection before the client has read the answer).
const REFUSED_READ_BOUND: usize = 64 * 1024;

/// How often, at most, a refusal is logged.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The HTTP answer past the bound: a JSON 503, then the connection closes.
pub const HTTP_OVERLOADED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 92\r\n\
\r\n\
{\"error\":\"overloaded\",\"message\":\"listen.max_connections reached; retry on a new connection\"}";

/// The shared bound on open connections: clone it into every listener.
#[derive(Debug, Clone)]
pub struct ConnectionGate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    open: Arc<Semaphore>,
    refusing: Arc<Semaphore>,
    max: usize,
    refused: AtomicU64,
    started: Instant,
    /// Milliseconds after `started` of the last refusal logged.
    logged_ms: AtomicU64,
}

/// Holds one of the open connections the gate allows; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnectionPermit {
    _permit: OwnedSemaphorePermit,
}

impl ConnectionGate {
    /// A gate letting `max` connections be open at once (at least one).
    pub fn new(max: usize) -> ConnectionGate {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        ConnectionGate {
            inner: Arc::new(Inner {
                open: Arc::new(Semaphore::new(max)),
                refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
                max,
                refused: AtomicU64::new(0),
                started: Instant::now(),
                logged_ms: AtomicU64::new(0),
            }),
        }
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.inner.max - self.inner.open.available_permits()
    }

    /// Connections refused since start.
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Lets `stream` in with the permit it must hold while open, or, past the bound, answers
    /// it with `overloaded` and closes it in the background.
    pub fn admit<S>(&self, stream: S, overloaded: &'static [u8]) -> Option<(S, ConnectionPermit)>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        match self.inner.open.clone().try_acquire_owned() {
            Ok(permit) => Some((stream, ConnectionPermit { _permit: permit })),
            Err(_) => {
                self.refuse(stream, overloaded);
                None
            }
        }
    }

    /// Answers `stream` with `overloaded` and closes it, in a task of its own: a client that
    /// does not read cannot stall the listener.
    pub fn refuse<S>(&self, stream: S, overloaded: &'static [u8])
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let refused = self.inner.refused.fetch_add(1, Ordering::Relaxed) + 1;
        self.log_refusal(refused);
        // Past MAX_REFUSING the stream drops here: closed at once, without an answer.
        if let Ok(permit) = self.inner.refusing.clone().try_acquire_owned() {
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(REFUSE_WITHIN, answer_and_close(stream, overloaded)).await;
                drop(permit);
            });
        }
    }

    fn log_refusal(&self, refused: u64) {
        let now_ms = u64::try_from(self.inner.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.inner.logged_ms.load(Ordering::Relaxed);
        let every = u64::try_from(LOG_EVERY.as_millis()).unwrap_or(u64::MAX);
        if (refused == 1 || now_ms.saturating_sub(last) >= every)
            && self
                .inner
                .logged_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                max_connections = self.inner.max,
                refused_total = refused,
                "listen.max_connections reached: refusing new connections with 503 overloaded"
            );
        }
    }
}

/// Writes the answer, half-closes, and reads what the client still sends until it closes, so
/// that the answer is not lost to a reset.
async fn answer_and_close<S>(mut stream: S, answer: &[u8])
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if stream.write_all(answer).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    let mut read = 0;
    while read < REFUSED_READ_BOUND {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => read += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overloaded_answer_declares_its_body_length() {
        let text = std::str::from_utf8(HTTP_OVERLOADED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.lines()
                .any(|line| line == format!("content-length: {}", body.len()))
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"], "overloaded");
    }

    #[tokio::test]
    async fn past_the_bound_a_connection_is_answered_and_a_freed_slot_admits_again() {
        let gate = ConnectionGate::new(1);
        let (ours, _theirs) = tokio::io::duplex(64);
        let (_kept, permit) = gate.admit(ours, HTTP_OVERLOADED).unwrap();
        let (ours, mut theirs) = tokio::io::duplex(4096);
        assert!(gate.admit(ours, HTTP_OVERLOADED).is_none());
        let mut answer = Vec::new();
        theirs.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, HTTP_OVERLOADED);
        assert_eq!((gate.open(), gate.refused()), (1, 1));
        drop(permit);
        let (ours, _theirs) = tokio::io::duplex(64);
        assert!(gate.admit(ours, HTTP_OVERLOADED).is_some());
    }
}
