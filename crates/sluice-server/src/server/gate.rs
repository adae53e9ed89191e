//! The bound on open connections (`listen.max_connections`), one for every listener of the
//! daemon whatever its protocol. A connection past the bound is not left in the kernel's
//! backlog, where a client would hang: it is accepted, given the protocol's "overloaded"
//! answer and closed with a lingering close ([`super::linger`]), so that the client reads the
//! answer rather than a reset, and counted in `rate_limit_connections_refused_total`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::fd_limit;
use super::linger::Lingering;
use crate::metrics::ListenerLabels;

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
    /// Refused connections and early closes linger in these slots.
    lingering: Lingering,
    max: usize,
    refused: AtomicU64,
    /// `rate_limit_connections_refused_total`, when the gate counts into the metrics.
    refused_metric: Option<Family<ListenerLabels, Counter>>,
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
    /// A gate letting `max` connections be open at once (at least one), with as many
    /// lingering closes as the spare file descriptors allow ([`fd_limit::lingering_slots`]).
    pub fn new(max: usize) -> ConnectionGate {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        ConnectionGate::with_lingering(max, Lingering::new(fd_limit::lingering_slots(max)), None)
    }

    /// A gate letting `max` connections be open at once, closing into `lingering`, counting
    /// refusals into `refused_metric` when given.
    pub fn with_lingering(
        max: usize,
        lingering: Lingering,
        refused_metric: Option<Family<ListenerLabels, Counter>>,
    ) -> ConnectionGate {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        ConnectionGate {
            inner: Arc::new(Inner {
                open: Arc::new(Semaphore::new(max)),
                lingering,
                max,
                refused: AtomicU64::new(0),
                refused_metric,
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

    /// The lingering closes, shared with the connections the gate admits.
    pub fn lingering(&self) -> &Lingering {
        &self.inner.lingering
    }

    /// Creates the zero series of `listener` in `rate_limit_connections_refused_total`, so
    /// `rate()` has a starting point before the first refusal.
    pub fn listening(&self, listener: &'static str) {
        if let Some(metric) = &self.inner.refused_metric {
            drop(metric.get_or_create(&ListenerLabels { listener }));
        }
    }

    /// Lets `stream` in with the permit it must hold while open, or, past the bound, answers
    /// it with `overloaded` and closes it in the background.
    pub fn admit<S>(
        &self,
        stream: S,
        overloaded: &'static [u8],
        listener: &'static str,
    ) -> Option<(S, ConnectionPermit)>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        match self.inner.open.clone().try_acquire_owned() {
            Ok(permit) => Some((stream, ConnectionPermit { _permit: permit })),
            Err(_) => {
                self.refuse(stream, overloaded, listener);
                None
            }
        }
    }

    /// Answers `stream` of `listener` with `overloaded` and closes it lingering, in a task of
    /// its own: a client that does not read cannot stall the listener.
    pub fn refuse<S>(&self, stream: S, overloaded: &'static [u8], listener: &'static str)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let refused = self.inner.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(metric) = &self.inner.refused_metric {
            metric.get_or_create(&ListenerLabels { listener }).inc();
        }
        self.log_refusal(refused);
        self.inner.lingering.close(stream, overloaded);
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
                lingering = self.inner.lingering.in_use(),
                lingering_max = self.inner.lingering.capacity(),
                "listen.max_connections reached: refusing new connections with 503 overloaded"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

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
    async fn past_the_bound_a_connection_is_answered_counted_and_a_freed_slot_admits_again() {
        let metric = Family::<ListenerLabels, Counter>::default();
        let gate = ConnectionGate::with_lingering(1, Lingering::new(4), Some(metric.clone()));
        gate.listening("http");
        let (ours, _theirs) = tokio::io::duplex(64);
        let (_kept, permit) = gate.admit(ours, HTTP_OVERLOADED, "http").unwrap();
        let (ours, mut theirs) = tokio::io::duplex(4096);
        assert!(gate.admit(ours, HTTP_OVERLOADED, "http").is_none());
        let mut answer = Vec::new();
        theirs.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, HTTP_OVERLOADED);
        assert_eq!((gate.open(), gate.refused()), (1, 1));
        let http = ListenerLabels { listener: "http" };
        assert_eq!(metric.get_or_create(&http).get(), 1);
        drop(permit);
        let (ours, _theirs) = tokio::io::duplex(64);
        assert!(gate.admit(ours, HTTP_OVERLOADED, "http").is_some());
    }
}
