//! One HTTP connection (HTTP/1.1, or HTTP/2 with prior knowledge) served with hyper, with the
//! two deadlines of `[listen]`. A connection of a listener serving checks begins in
//! [`super::http1`], which answers plain checks itself and hands the connection here (with the
//! bytes it read and its [`Activity`]) at the first request that is anything else.
//!
//!
//! - `header_timeout`: from accept, or from the first byte of a later request, to the end of
//!   that request's head. A client sending its head a byte at a time is closed then.
//! - `idle_timeout`: from the end of an answer to the first byte of the next request.
//!
//! hyper's own `header_read_timeout` starts as soon as an answer is written, so an idle
//! keep-alive connection would be cut at the header timeout; the phases are tracked here
//! instead: the stream wrapper sees the first byte after an idle spell, the service sees a
//! whole head (hyper calls it then) and the end of the answer.
//!
//! A phase change is a few atomic stores and never wakes the connection's task: on the hot
//! path of a keep-alive connection (one phase change per request each way) a wake-up and a
//! timer reset per request cost more than the check itself. Instead, outside the request-head
//! phase the deadline is re-read at least every `header_timeout`, so a head that begins
//! during an idle spell is still cut at exactly its own deadline.
//!
//! A connection hyper ends itself before the client closed (after a 413 sent before the body
//! is read, a 404 to an unknown route with a body, a request answered while stopping) may
//! still hold bytes the client sent: it closes lingering ([`super::linger`]), so that the
//! client reads the answer rather than a reset. One cut at a deadline, or whose client
//! closed or failed, closes at once.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use sluice_config::ConnectionSettings;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::accept::ServeConnection;
use super::linger::Lingering;
use super::stop::Stop;
use crate::http::Api;

/// Serves the API on the connections of a listener, whatever their stream type.
#[derive(Debug, Clone)]
pub struct Http {
    api: Api,
    limits: ConnectionSettings,
    lingering: Lingering,
}

impl Http {
    pub fn new(api: Api, limits: ConnectionSettings, lingering: Lingering) -> Http {
        Http {
            api,
            limits,
            lingering,
        }
    }
}

impl<S> ServeConnection<S> for Http
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn serve(&self, stream: S, stop: Stop) -> impl Future<Output = ()> + Send + 'static {
        super::http1::serve(
            stream,
            self.api.clone(),
            self.limits,
            self.lingering.clone(),
            stop,
        )
    }
}

/// Serves `api` on `stream` until the client leaves, a deadline passes, or, after `stop`,
/// the request in flight is answered; `activity` tracks the deadlines from accept on (by
/// [`super::http1`] before its hand-off, when it began there).
pub(super) async fn serve_hyper<S>(
    stream: S,
    api: Api,
    limits: ConnectionSettings,
    lingering: Lingering,
    mut stop: Stop,
    activity: Arc<Activity>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let busy = activity.request_started();
            let api = api.clone();
            async move {
                let answer = api.answer(request).await;
                drop(busy);
                Ok::<_, std::convert::Infallible>(answer)
            }
        })
    };
    let watched = Watched {
        inner: Some(stream),
        activity: activity.clone(),
        lingering,
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Answers to pipelined requests go out together: one write (over TLS, one record) for
    // the requests read at once, not one per answer.
    builder.http1().pipeline_flush(true);
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(watched), service);
    tokio::pin!(connection);
    let deadline = tokio::time::sleep(limits.header_timeout);
    tokio::pin!(deadline);
    let mut stopping = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!(error = %err, "connection ended with an error");
                }
                return;
            }
            () = stop.stopped(), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
            () = deadline.as_mut() => {
                if activity.expired(&limits, deadline.as_mut()) {
                    // A client that missed its deadline gets no more time to linger.
                    activity.close_at_once.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}

/// Where a connection is between requests, shared by the stream wrapper, the service and the
/// deadline.
#[derive(Debug)]
pub(super) struct Activity {
    started: Instant,
    phase: AtomicU8,
    /// Requests being answered (several on HTTP/2).
    in_flight: AtomicU32,
    /// Milliseconds after `started` at which the current phase began.
    since_ms: AtomicU64,
    /// The stream closes without lingering: the client closed or failed, or missed a deadline.
    close_at_once: AtomicBool,
}

/// Waiting for a request head: since accept, or since its first byte.
pub(super) const HEAD: u8 = 0;
/// A request is being answered.
pub(super) const BUSY: u8 = 1;
/// Between an answer and the first byte of the next request.
pub(super) const IDLE: u8 = 2;

impl Activity {
    pub(super) fn new() -> Activity {
        Activity {
            started: Instant::now(),
            phase: AtomicU8::new(HEAD),
            in_flight: AtomicU32::new(0),
            since_ms: AtomicU64::new(0),
            close_at_once: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn enter(&self, phase: u8) {
        self.since_ms.store(self.now_ms(), Ordering::Relaxed);
        self.phase.store(phase, Ordering::Release);
    }

    /// Bytes arrived: after an idle spell, a new request head has begun.
    pub(super) fn bytes_read(&self) {
        if self.phase.load(Ordering::Acquire) == IDLE
            && self
                .phase
                .compare_exchange(IDLE, HEAD, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.since_ms.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    fn request_started(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.busy();
        Busy(self.clone())
    }

    /// A request head is whole: the request is being answered (no deadline of ours meanwhile).
    /// Only the phase changes: its start matters to no deadline.
    pub(super) fn busy(&self) {
        self.phase.store(BUSY, Ordering::Release);
    }

    /// At a wake-up of `deadline`: whether the current phase's deadline has passed (the
    /// connection is cut, logged here); else `deadline` is set to the next look.
    pub(super) fn expired(
        &self,
        limits: &ConnectionSettings,
        deadline: Pin<&mut tokio::time::Sleep>,
    ) -> bool {
        let now = Instant::now();
        match self.deadline(limits) {
            Some(at) if at <= now => {
                tracing::debug!(phase = self.phase_name(), "connection timed out");
                true
            }
            Some(at) => {
                deadline.reset(self.next_look(at, now, limits));
                false
            }
            // Busy: no deadline of ours while the router works; look again later.
            None => {
                deadline.reset(now + limits.header_timeout);
                false
            }
        }
    }

    /// When the current phase times out; `None` while a request is answered.
    fn deadline(&self, limits: &ConnectionSettings) -> Option<Instant> {
        let limit = match self.phase.load(Ordering::Acquire) {
            HEAD => limits.header_timeout,
            IDLE => limits.idle_timeout,
            _ => return None,
        };
        let since = Duration::from_millis(self.since_ms.load(Ordering::Relaxed));
        Some(self.started + since + limit)
    }

    /// When to look again at a phase whose deadline is `at`: then, in the head phase; else
    /// no later than one header timeout from `now`, as a head may begin meanwhile (and
    /// nothing wakes the deadline when it does).
    fn next_look(&self, at: Instant, now: Instant, limits: &ConnectionSettings) -> Instant {
        if self.phase.load(Ordering::Acquire) == HEAD {
            at
        } else {
            at.min(now + limits.header_timeout)
        }
    }

    fn phase_name(&self) -> &'static str {
        match self.phase.load(Ordering::Acquire) {
            HEAD => "request head",
            IDLE => "idle",
            _ => "busy",
        }
    }
}

/// A request being answered; the connection turns idle when the last one is dropped.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.enter(IDLE);
            // An HTTP/2 request that began meanwhile keeps the connection busy.
            if self.0.in_flight.load(Ordering::Acquire) > 0 {
                self.0.phase.store(BUSY, Ordering::Release);
            }
        }
    }
}

/// The client's stream, telling [`Activity`] when bytes arrive, and closed lingering when
/// hyper drops it before the client closed.
struct Watched<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    /// `None` only once dropped.
    inner: Option<S>,
    activity: Arc<Activity>,
    lingering: Lingering,
}

impl<S> Watched<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn inner(&mut self) -> std::io::Result<Pin<&mut S>> {
        self.inner
            .as_mut()
            .map(Pin::new)
            .ok_or_else(|| std::io::ErrorKind::NotConnected.into())
    }
}

impl<S> Drop for Watched<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn drop(&mut self) {
        if let Some(stream) = self.inner.take()
            && !self.activity.close_at_once.load(Ordering::Relaxed)
        {
            self.lingering.close(stream, b"");
        }
    }
}

impl<S> AsyncRead for Watched<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        let polled = match self.inner() {
            Ok(inner) => inner.poll_read(cx, buf),
            Err(err) => return Poll::Ready(Err(err)),
        };
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() > before => self.activity.bytes_read(),
            // The client closed its side, or the stream failed: nothing to linger for.
            Poll::Ready(Ok(())) if room => {
                self.activity.close_at_once.store(true, Ordering::Relaxed);
            }
            Poll::Ready(Err(_)) => self.activity.close_at_once.store(true, Ordering::Relaxed),
            _ => {}
        }
        polled
    }
}

impl<S> AsyncWrite for Watched<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.inner() {
            Ok(inner) => inner.poll_write(cx, buf),
            Err(err) => Poll::Ready(Err(err)),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.inner() {
            Ok(inner) => inner.poll_flush(cx),
            Err(err) => Poll::Ready(Err(err)),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.inner() {
            Ok(inner) => inner.poll_shutdown(cx),
            Err(err) => Poll::Ready(Err(err)),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.inner() {
            Ok(inner) => inner.poll_write_vectored(cx, bufs),
            Err(err) => Poll::Ready(Err(err)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(S::is_write_vectored)
    }
}
