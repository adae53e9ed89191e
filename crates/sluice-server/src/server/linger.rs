//! Closing a connection the daemon ends on its own without resetting it: one refused at
//! `listen.max_connections`, or one closed after an early answer (a 413 before the body is
//! read, a 404 to an unknown route with a body, a RESP protocol error).
//!
//! Closing a socket that still holds bytes the client sent makes the kernel reset it (a TCP
//! RST; a Unix peer's next write or read fails), and the client may never read the answer.
//! A client, a proxy's `auth_request` or a load balancer that sees a reset cannot tell
//! "sluiced is full, back off" from "sluiced crashed". So, as nginx's `lingering_close`: the
//! answer is written, the write side shut (the client reads the answer, then an end), and what
//! the client still sends is read and thrown away until it closes too, within bounds in bytes
//! and in time that keep a hostile client from holding the descriptor:
//!
//! - [`FIRST_BYTES_WITHIN`]: a client that has sent nothing yet gets this long for its first
//!   bytes (it connected and is writing its request), then is closed: an idle client costs a
//!   descriptor for no longer.
//! - [`LINGER_QUIET`]: after that, the longest pause between two reads (nginx's
//!   `lingering_timeout`, 5 s there).
//! - [`LINGER_TIME`]: the longest a close lingers in all (nginx's `lingering_time`, 30 s there).
//! - [`LINGER_BYTES`]: the most read (16 times the largest body the API takes); a client still
//!   sending past it is closed, reset.
//!
//! Lingering closes at once are bounded by the spare file descriptors ([`Lingering::new`]);
//! past them a close lingers only briefly ([`BRIEF`]: the first bytes' wait, then 20 ms of
//! quiet, 250 ms in all), so the descriptor comes back soon.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// How long a client that has sent nothing gets for its first bytes.
pub const FIRST_BYTES_WITHIN: Duration = Duration::from_millis(100);
/// The longest pause between two reads of a lingering close.
pub const LINGER_QUIET: Duration = Duration::from_secs(2);
/// The longest a close lingers.
pub const LINGER_TIME: Duration = Duration::from_secs(10);
/// The most bytes a lingering close reads.
pub const LINGER_BYTES: u64 = 16 * sluice_api::MAX_BODY_BYTES as u64;

/// The bounds of one lingering close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub first_bytes: Duration,
    pub quiet: Duration,
    pub total: Duration,
    pub bytes: u64,
}

/// The bounds of a close that holds a lingering slot.
pub const FULL: Bounds = Bounds {
    first_bytes: FIRST_BYTES_WITHIN,
    quiet: LINGER_QUIET,
    total: LINGER_TIME,
    bytes: LINGER_BYTES,
};

/// The bounds of a close past the slots: the request already on its way is read (a client
/// writes it right after connecting), then the descriptor is given back.
pub const BRIEF: Bounds = Bounds {
    first_bytes: FIRST_BYTES_WITHIN,
    quiet: Duration::from_millis(20),
    total: Duration::from_millis(250),
    bytes: LINGER_BYTES,
};

/// The read buffer of a lingering close: bytes are thrown away, so a small one will do.
const DRAIN_CHUNK: usize = 2048;

/// The slots for lingering closes, shared by every listener: clone it.
#[derive(Debug, Clone)]
pub struct Lingering {
    slots: Arc<Semaphore>,
    capacity: usize,
}

impl Lingering {
    /// Room for `slots` lingering closes at once (at least one).
    pub fn new(slots: usize) -> Lingering {
        let capacity = slots.clamp(1, Semaphore::MAX_PERMITS);
        Lingering {
            slots: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    /// How many closes may linger at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Closes lingering now.
    pub fn in_use(&self) -> usize {
        self.capacity - self.slots.available_permits()
    }

    /// Writes `answer` (may be empty: it was written already), shuts the write side, and
    /// reads what the client still sends within the bounds before the descriptor closes, in
    /// a task of its own; with [`FULL`] bounds when a slot is free, else [`BRIEF`] ones.
    /// Outside a runtime (it is shutting down) the stream is closed at once.
    pub fn close<S>(&self, stream: S, answer: &'static [u8])
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        match self.slots.clone().try_acquire_owned() {
            Ok(slot) => {
                runtime.spawn(async move {
                    linger(stream, answer, FULL).await;
                    drop(slot);
                });
            }
            Err(_) => {
                runtime.spawn(linger(stream, answer, BRIEF));
            }
        }
    }
}

/// What a lingering close read, and why it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lingered {
    pub read: u64,
    pub end: End,
}

/// Why a lingering close ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The client closed its side: nothing is left unread.
    ClientClosed,
    /// Nothing came within the wait: nothing was left unread when the descriptor closed.
    Quiet,
    /// A bound in bytes or in total time was reached while the client was still sending.
    Bound,
    /// Writing the answer or reading failed (the client reset or went away).
    Failed,
}

/// Writes `answer`, shuts the write side, then reads and discards until the client closes or
/// a bound is reached. The stream closes when it is dropped, on return.
pub async fn linger<S>(mut stream: S, answer: &'static [u8], bounds: Bounds) -> Lingered
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let deadline = Instant::now() + bounds.total;
    let mut lingered = Lingered {
        read: 0,
        end: End::Failed,
    };
    let written = async {
        stream.write_all(answer).await?;
        stream.shutdown().await
    };
    match tokio::time::timeout_at(deadline, written).await {
        Ok(Ok(())) => {}
        // A write side already shut is no failure: the answer went out before it.
        Ok(Err(err)) if err.kind() == std::io::ErrorKind::NotConnected && answer.is_empty() => {}
        Ok(Err(_)) | Err(_) => return lingered,
    }
    let mut buf = [0u8; DRAIN_CHUNK];
    loop {
        let wait = if lingered.read == 0 {
            bounds.first_bytes
        } else {
            bounds.quiet
        };
        let until = (Instant::now() + wait).min(deadline);
        match tokio::time::timeout_at(until, stream.read(&mut buf)).await {
            Ok(Ok(0)) => {
                lingered.end = End::ClientClosed;
                return lingered;
            }
            Ok(Ok(n)) => {
                lingered.read += n as u64;
                if lingered.read >= bounds.bytes {
                    lingered.end = End::Bound;
                    return lingered;
                }
            }
            Ok(Err(_)) => return lingered,
            Err(_) => {
                lingered.end = if Instant::now() >= deadline {
                    End::Bound
                } else {
                    End::Quiet
                };
                return lingered;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_answer_is_read_then_an_end_and_what_the_client_sent_is_drained() {
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        theirs.write_all(&[b'x'; 40_000]).await.unwrap();
        let closing = tokio::spawn(linger(ours, b"refused", FULL));
        let mut answer = Vec::new();
        theirs.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"refused");
        drop(theirs);
        let lingered = closing.await.unwrap();
        assert_eq!(
            lingered,
            Lingered {
                read: 40_000,
                end: End::ClientClosed
            }
        );
    }

    #[tokio::test]
    async fn a_client_that_sends_nothing_is_closed_after_the_first_bytes_wait() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let lingered = linger(ours, b"refused", FULL).await;
        assert_eq!(
            lingered,
            Lingered {
                read: 0,
                end: End::Quiet
            }
        );
        let mut answer = Vec::new();
        theirs.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"refused");
    }

    #[tokio::test]
    async fn a_client_that_never_stops_sending_is_cut_at_the_byte_bound() {
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        let sender = tokio::spawn(async move {
            let chunk = [b'x'; 8192];
            let mut sent = 0u64;
            while theirs.write_all(&chunk).await.is_ok() {
                sent += chunk.len() as u64;
            }
            sent
        });
        let lingered = linger(ours, b"", FULL).await;
        assert_eq!(lingered.end, End::Bound);
        assert!(
            lingered.read >= LINGER_BYTES && lingered.read < LINGER_BYTES + DRAIN_CHUNK as u64,
            "{lingered:?}"
        );
        let sent = sender.await.unwrap();
        assert!(sent < LINGER_BYTES + 128 * 1024, "{sent}");
    }

    #[tokio::test]
    async fn a_client_that_trickles_is_cut_at_the_time_bound() {
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        let sender = tokio::spawn(async move {
            while theirs.write_all(b"x").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        // Shorter bounds than FULL's, same rules: a pause never reaches `quiet`.
        let bounds = Bounds {
            quiet: Duration::from_secs(5),
            total: Duration::from_millis(300),
            ..FULL
        };
        let lingered = linger(ours, b"", bounds).await;
        assert_eq!(lingered.end, End::Bound);
        assert!(lingered.read > 0 && lingered.read < 1000, "{lingered:?}");
        sender.await.unwrap();
    }

    #[tokio::test]
    async fn past_the_slots_a_close_is_brief() {
        let lingering = Lingering::new(1);
        let (first, _held) = tokio::io::duplex(64);
        lingering.close(first, b"a");
        assert_eq!(lingering.in_use(), 1);
        let (second, mut theirs) = tokio::io::duplex(64);
        lingering.close(second, b"b");
        let mut answer = Vec::new();
        theirs.read_to_end(&mut answer).await.unwrap();
        assert_eq!((answer.as_slice(), lingering.in_use()), (&b"b"[..], 1));
    }
}
