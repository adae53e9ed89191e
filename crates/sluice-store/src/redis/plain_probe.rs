//! A `rediss://` URL pointed at a plain Redis port, told apart from a server that is slow.
//!
//! The TLS hello reaches a server that reads it as an inline command, a line of text: when
//! the hello's random bytes hold a newline, Redis answers an error, which the handshake names
//! (the answer is not TLS); otherwise it waits for the rest of the line, answers nothing, and
//! the handshake would hang until the connect timeout ended it as a bare timeout. So a ping
//! over TLS that has not answered after a short while asks the port in plain text
//! (`PING\r\n`): a RESP answer (`+PONG`, `-NOAUTH …`) is a plain port, and the ping ends with
//! the message that says so, within the connect timeout. A port that speaks TLS answers the
//! probe with an alert or closes it: the ping goes on waiting for its own answer.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// At most this long after a ping started, the probe asks (sooner on a short connect
/// timeout: a third of it).
const ASK_AFTER: Duration = Duration::from_millis(250);

/// A verdict is reused this long: a slow server over TLS costs one probe connection per
/// this long at most.
const VERDICT_FOR: Duration = Duration::from_secs(5);

/// The plain-text probe of one `rediss://` address.
#[derive(Debug)]
pub(crate) struct PlainProbe {
    host: String,
    port: u16,
    /// How long a ping waits for its own answer before the probe asks.
    after: Duration,
    /// The probe's bound (connect, write, first byte).
    limit: Duration,
    /// The last verdict (whether the port speaks plain RESP) and when it was reached.
    last: Mutex<Option<(Instant, bool)>>,
}

impl PlainProbe {
    /// The probe of `info` when it is a TLS address, asking within `connect_timeout`.
    pub(crate) fn of(
        info: &::redis::ConnectionInfo,
        connect_timeout: Duration,
    ) -> Option<PlainProbe> {
        match info.addr() {
            ::redis::ConnectionAddr::TcpTls { host, port, .. } => {
                let after = ASK_AFTER.min(connect_timeout / 3);
                Some(PlainProbe {
                    host: host.clone(),
                    port: *port,
                    after,
                    limit: after,
                    last: Mutex::new(None),
                })
            }
            _ => None,
        }
    }

    /// Resolves when the port turns out to speak plain RESP, once a ping waited `after` for
    /// its own answer; never otherwise (the ping's own answer or timeout ends the race).
    pub(crate) async fn plain_port(&self) {
        tokio::time::sleep(self.after).await;
        if !self.verdict().await {
            std::future::pending::<()>().await;
        }
    }

    /// The recent verdict, or a fresh one.
    async fn verdict(&self) -> bool {
        let recent = |last: &Option<(Instant, bool)>| {
            last.filter(|(at, _)| at.elapsed() < VERDICT_FOR)
                .map(|(_, plain)| plain)
        };
        if let Some(plain) = recent(&self.last.lock().unwrap_or_else(|e| e.into_inner())) {
            return plain;
        }
        let plain = answers_plain_resp(&self.host, self.port, self.limit).await;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), plain));
        plain
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
