//! The check route's own HTTP/1 framing. Every connection of a listener serving checks starts
//! here: request heads are read with `httparse` from the connection's own buffer, and a plain
//! `POST /v1/check` ([`head`]) is decided by the check's handler ([`crate::http::answer_check`],
//! the one hyper's path calls too) and its answer written in place into the connection's
//! output buffer ([`answer`]); the answers of the requests read at once go out in one write.
//!
//! Why: hyper's HTTP/1 (reading the head into a header map, encoding the answer's head, its
//! dispatch loop) was most of what a check cost beyond the check itself
//! (docs/src/internals/performance.md, issue 41), for a route that needs none of its
//! generality.
//!
//! At the first request that is anything else (another route or method, the HTTP/2 preface,
//! a chunked body, `Expect`, a head too large or that does not parse, a request the client
//! closed its side in the middle of) the answers already made are written and the
//! connection, with the bytes read and not answered ([`prefixed`]), goes to hyper
//! ([`super::connection::serve_hyper`]) for the rest of its life: every other behaviour is
//! hyper's, unchanged. One difference, by design: every whole request read is answered, where
//! hyper writes no answer when bytes that end in an error (a request after a closing one,
//! garbage, part of a request and the client's close) follow it (`tests.rs` shows which).
//!
//! What [`super::connection`] keeps for hyper is kept here the same way, with the same
//! [`Activity`]: `header_timeout` from accept or a request's first byte to the end of its head,
//! `idle_timeout` from an answer to the next request's first byte (a write stuck on a client
//! that does not read is cut there too); after the stop the request in flight is answered
//! (with `connection: close`) and the connection closes, right away when none is; a connection
//! closed after an answer (the client's `Connection: close`, HTTP/1.0 without keep-alive, the
//! stop) closes lingering ([`super::linger`]), one whose client left or missed a deadline at
//! once. A request carrying `traceparent` is traced as on hyper's path ([`head::trace_parent`]).

mod answer;
mod date;
mod head;
mod prefixed;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use sluice_config::ConnectionSettings;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use self::answer::Framing;
use self::head::{CheckHead, Head};
use self::prefixed::Prefixed;
use super::connection::{Activity, HEAD, IDLE, serve_hyper};
use super::linger::Lingering;
use super::stop::Stop;
use crate::http::Api;
use crate::service::app::App;
use crate::telemetry::TraceParent;

/// The read buffer's size, and the least room a read is given.
const READ_BUFFER: usize = 8 * 1024;

/// Serves `api` on `stream`: plain checks here, the rest of the connection with hyper from
/// the first request that is not one. A listener without checks is hyper's from the start.
pub async fn serve<S>(
    stream: S,
    api: Api,
    limits: ConnectionSettings,
    lingering: Lingering,
    stop: Stop,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let Some(app) = api.direct_checks().cloned() else {
        return serve_hyper(stream, api, limits, lingering, stop, activity).await;
    };
    let mut connection = Connection {
        stream,
        input: BytesMut::with_capacity(READ_BUFFER),
        output: Vec::with_capacity(1024),
        activity,
    };
    let mut watched = stop.clone();
    match connection.run(&app, &limits, &mut watched).await {
        End::AtOnce => {}
        End::Lingering => lingering.close(connection.stream, b""),
        End::HandOff => {
            let stream = Prefixed::new(connection.input.freeze(), connection.stream);
            serve_hyper(stream, api, limits, lingering, stop, connection.activity).await;
        }
    }
}

/// How a connection's framing here ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The client left or failed, or missed a deadline: close now.
    AtOnce,
    /// Closed after its last answer: linger.
    Lingering,
    /// A request for hyper: hand the connection over.
    HandOff,
}

struct Connection<S> {
    stream: S,
    /// Bytes read and not yet answered.
    input: BytesMut,
    /// Answers made and not yet written.
    output: Vec<u8>,
    activity: Arc<Activity>,
}

impl<S> Connection<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    async fn run(&mut self, app: &App, limits: &ConnectionSettings, stop: &mut Stop) -> End {
        let deadline = tokio::time::sleep(limits.header_timeout);
        tokio::pin!(deadline);
        // One wait for the stop, for the connection's life: polled again only when woken.
        let stopped = stop.stopped();
        tokio::pin!(stopped);
        let mut stopping = false;
        // The head of a check whose body is still arriving.
        let mut pending: Option<CheckHead> = None;
        loop {
            // Answer every request whole in the buffer.
            let now = date::now();
            loop {
                let head = match pending {
                    Some(head) => head,
                    None => match head::parse(&self.input) {
                        Head::Partial => break,
                        Head::Check(head) => head,
                        Head::Other => {
                            return match self.flush(limits, deadline.as_mut()).await {
                                true => End::HandOff,
                                false => End::AtOnce,
                            };
                        }
                    },
                };
                self.activity.busy();
                let whole = head.len + head.body;
                if self.input.len() < whole {
                    self.input.reserve(whole - self.input.len());
                    pending = Some(head);
                    break;
                }
                pending = None;
                let keep_alive = head.keep_alive && !stopping;
                let parent = if head.traced {
                    head::trace_parent(&self.input[..head.len])
                } else {
                    TraceParent::Absent
                };
                let response =
                    crate::http::answer_check(app, &self.input[head.len..whole], &parent).await;
                let framing = Framing {
                    http10: head.http10,
                    keep_alive,
                };
                answer::write(&mut self.output, response, framing, &now).await;
                self.input.advance(whole);
                if !keep_alive {
                    return match self.flush(limits, deadline.as_mut()).await {
                        true => End::Lingering,
                        false => End::AtOnce,
                    };
                }
                // The next request's head has begun when its bytes are here already.
                self.activity
                    .enter(if self.input.is_empty() { IDLE } else { HEAD });
            }
            if !self.flush(limits, deadline.as_mut()).await {
                return End::AtOnce;
            }
            if self.input.capacity() - self.input.len() < READ_BUFFER / 2 {
                self.input.reserve(READ_BUFFER);
            }
            tokio::select! {
                biased;
                read = self.stream.read_buf(&mut self.input) => match read {
                    // The client closed its side between requests, or the stream failed.
                    Ok(0) if self.input.is_empty() => return End::AtOnce,
                    Err(_) => return End::AtOnce,
                    // It closed in the middle of a request: hyper answers that as it would
                    // have (its answer to a body cut short, or none to part of a head).
                    Ok(0) => return End::HandOff,
                    Ok(_) => self.activity.bytes_read(),
                },
                () = stopped.as_mut(), if !stopping => {
                    stopping = true;
                    // Nothing in flight (at most part of a head, as hyper sees it): close.
                    if pending.is_none() {
                        return End::Lingering;
                    }
                }
                () = deadline.as_mut() => {
                    if self.activity.expired(limits, deadline.as_mut()) {
                        return End::AtOnce;
                    }
                }
            }
        }
    }

    /// Writes the answers made; false when the stream failed or the client missed its
    /// deadline meanwhile (a client that does not read its answers is cut at the idle
    /// timeout, as on hyper's path).
    async fn flush(
        &mut self,
        limits: &ConnectionSettings,
        mut deadline: std::pin::Pin<&mut tokio::time::Sleep>,
    ) -> bool {
        if self.output.is_empty() {
            return true;
        }
        let Connection {
            stream,
            output,
            activity,
            ..
        } = self;
        let written = async {
            stream.write_all(output).await?;
            stream.flush().await
        };
        tokio::pin!(written);
        loop {
            tokio::select! {
                biased;
                written = written.as_mut() => {
                    if written.is_err() {
                        return false;
                    }
                    break;
                }
                () = deadline.as_mut() => {
                    if activity.expired(limits, deadline.as_mut()) {
                        return false;
                    }
                }
            }
        }
        output.clear();
        true
    }
}
