//! A `rediss://` URL pointed at a plain Redis port, told apart from a server that is slow.
//!
//! The TLS hello reaches a server that reads it as an inline command, a line of text: when
//! the hello's random bytes hold a newline, Redis answers an error, which the handshake names
//! (the answer is not TLS); otherwise it waits for the rest of the line, answers nothing, and
//! the handshake would hang until a timeout ended it as a bare timeout. So a call over TLS
//! that has not answered after a short while (on a client whose last call failed: a healthy
//! connection pays nothing) asks the port in plain text (`PING\r\n`): a RESP answer
//! (`+PONG`, `-NOAUTH …`) is a plain port, and the call ends with the message that says so,
//! within its timeout (the calls after it at once). A port that speaks TLS answers the probe
//! with an alert or closes it: the call goes on waiting for its own answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// At most this long after a call started without an answer, the probe asks (sooner on a
/// short timeout: a third of it).
const ASK_AFTER: Duration = Duration::from_millis(250);

/// A verdict is this fresh at most; an older one still answers while a new probe runs (one
/// probe connection per this long at most).
const VERDICT_FOR: Duration = Duration::from_secs(5);

/// A probe's verdict (whether the port speaks plain RESP) and when it was reached.
type Verdict = Option<(Instant, bool)>;

/// The plain-text probe of one `rediss://` address.
#[derive(Debug)]
pub(crate) struct PlainProbe {
    host: String,
    port: u16,
    /// How long a call waits for its own answer before the probe asks.
    after: Duration,
    /// The probe's bound (connect, write, first byte).
    limit: Duration,
    /// The last verdict, for every call waiting on one.
    verdict: watch::Sender<Verdict>,
    /// A probe runs (one at a time; it outlives the call that started it).
    probing: AtomicBool,
}

impl PlainProbe {
    /// The probe of `info` when it is a TLS address: it asks a third of `timeout` (a call's
    /// bound, the shorter of the call and connect timeouts) after a call started, and waits
    /// `connect_timeout` for the answer.
    pub(crate) fn of(
        info: &::redis::ConnectionInfo,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Option<Arc<PlainProbe>> {
        match info.addr() {
            ::redis::ConnectionAddr::TcpTls { host, port, .. } => Some(Arc::new(PlainProbe {
                host: host.clone(),
                port: *port,
                after: ASK_AFTER.min(timeout.min(connect_timeout) / 3),
                limit: connect_timeout,
                verdict: watch::Sender::new(None),
                probing: AtomicBool::new(false),
            })),
            _ => None,
        }
    }

    /// Resolves when the port speaks plain RESP: at once on a verdict already reached (a
    /// stale one asks again meanwhile), else once a call waited `after` and the probe
    /// answered. Never otherwise: the call's own answer or bound ends the race.
    pub(crate) async fn plain_port(self: &Arc<Self>) {
        let mut seen = self.verdict.subscribe();
        let known = *seen.borrow_and_update();
        match known {
            Some((at, plain)) => {
                if at.elapsed() >= VERDICT_FOR {
                    self.ask();
                }
                if plain {
                    return;
                }
            }
            None => {
                tokio::time::sleep(self.after).await;
                self.ask();
                loop {
                    if let Some((_, plain)) = *seen.borrow_and_update() {
                        if plain {
                            return;
                        }
                        break;
                    }
                    if seen.changed().await.is_err() {
                        break;
                    }
                }
            }
        }
        std::future::pending::<()>().await
    }

    /// Starts a probe unless one runs; it records its verdict even when the call that
    /// started it is gone.
    fn ask(self: &Arc<Self>) {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let probe = Arc::clone(self);
        tokio::spawn(async move {
            let plain = answers_plain_resp(&probe.host, probe.port, probe.limit).await;
            probe.verdict.send_replace(Some((Instant::now(), plain)));
            probe.probing.store(false, Ordering::Release);
        });
    }
}

/// Whether `host:port` answers `PING` in plain RESP within `limit`: its first byte a simple
/// string or an error (a server requiring a password answers `-NOAUTH`). A TLS port answers
/// with an alert (`0x15`) or closes.
async fn answers_plain_resp(host: &str, port: u16, limit: Duration) -> bool {
    let ask = async {
        let mut stream = TcpStream::connect((host, port)).await.ok()?;
        stream.write_all(b"PING\r\n").await.ok()?;
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).await.ok()?;
        Some(matches!(first[0], b'+' | b'-'))
    };
    matches!(tokio::time::timeout(limit, ask).await, Ok(Some(true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_plain_redis_port_answers_in_resp_and_a_closed_one_does_not() {
        let server = sluice_testkit::RedisServer::start();
        let limit = Duration::from_secs(2);
        assert!(answers_plain_resp("127.0.0.1", server.port(), limit).await);
        let nobody = sluice_testkit::free_port();
        assert!(!answers_plain_resp("127.0.0.1", nobody, limit).await);
    }

    #[tokio::test]
    async fn a_tls_port_does_not_answer_in_resp() {
        let certs = sluice_testkit::certs::Certs::new();
        let server = sluice_testkit::RedisServer::start_tls(&certs);
        let limit = Duration::from_secs(2);
        assert!(!answers_plain_resp("127.0.0.1", server.port(), limit).await);
    }
}
