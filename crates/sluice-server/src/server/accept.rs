//! One accept loop for every listener and protocol: each accepted stream passes the
//! [`ConnectionGate`], runs in a task owned by the listener (so dropping the listener's task
//! drops its connections), and after the stop the loop waits for its connections to finish.
//!
//! Running out of file descriptors (EMFILE/ENFILE) must neither spin nor leave clients hanging
//! in the backlog: the loop keeps one spare descriptor, and when accept fails for want of one
//! it frees the spare, accepts the waiting client, refuses it with the overloaded answer, and
//! backs off briefly when even that is not possible.

use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinSet;

use super::gate::ConnectionGate;
use super::stop::Stop;

/// The pause after an accept error that is not about one connection, so the loop cannot spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How long the loop waits for the client it accepts with the spare descriptor.
const SPARE_ACCEPT_WITHIN: Duration = Duration::from_millis(10);

/// A listening socket the daemon accepts streams on.
pub trait Accept: Send + Sync + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection.
    fn accept_stream(&self) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

impl Accept for TcpListener {
    type Io = TcpStream;

    async fn accept_stream(&self) -> io::Result<TcpStream> {
        let (stream, _) = TcpListener::accept(self).await?;
        // Answers are small and written whole: do not hold them back for more.
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

impl Accept for UnixListener {
    type Io = UnixStream;

    async fn accept_stream(&self) -> io::Result<UnixStream> {
        let (stream, _) = UnixListener::accept(self).await?;
        Ok(stream)
    }
}

/// What serves one admitted connection of a protocol, given the stop to finish gracefully.
/// A closure `Fn(Io, Stop) -> impl Future` is one.
pub trait ServeConnection<Io> {
    fn serve(&self, stream: Io, stop: Stop) -> impl Future<Output = ()> + Send + 'static;
}

impl<Io, F, Fut> ServeConnection<Io> for F
where
    F: Fn(Io, Stop) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn serve(&self, stream: Io, stop: Stop) -> impl Future<Output = ()> + Send + 'static {
        self(stream, stop)
    }
}

/// Accepts on `listener` (named `name` in the refusals metric) until `stop`, serving each
/// admitted connection with `serve`; past the gate's bound a client gets `overloaded` (the
/// protocol's answer) and is closed. Returns once the stop came and every connection of this
/// listener has finished.
pub async fn serve_listener<L: Accept>(
    listener: L,
    name: &'static str,
    gate: ConnectionGate,
    overloaded: &'static [u8],
    mut stop: Stop,
    serve: impl ServeConnection<L::Io>,
) {
    gate.listening(name);
    let mut spare = SpareFd::open();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = stop.stopped() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept_stream() => match accepted {
                Ok(stream) => {
                    if let Some((stream, permit)) = gate.admit(stream, overloaded, name) {
                        let connection = serve.serve(stream, stop.clone());
                        connections.spawn(async move {
                            connection.await;
                            drop(permit);
                        });
                    }
                }
                Err(err) if is_out_of_fds(&err) => {
                    tracing::warn!(error = %err, "accept: out of file descriptors");
                    if spare.release() {
                        if let Ok(Ok(stream)) =
                            tokio::time::timeout(SPARE_ACCEPT_WITHIN, listener.accept_stream())
                                .await
                        {
                            gate.refuse(stream, overloaded, name);
                        }
                    } else {
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    spare.refill();
                }
                Err(err) if is_about_one_connection(&err) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "accept error");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

fn is_out_of_fds(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Errors of one connection (it went away before it was accepted): accept the next one.
fn is_about_one_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// One descriptor held back for the moment accept runs out of them.
#[derive(Debug)]
struct SpareFd(Option<std::fs::File>);

impl SpareFd {
    fn open() -> SpareFd {
        SpareFd(std::fs::File::open("/dev/null").ok())
    }

    /// Closes the spare; whether there was one.
    fn release(&mut self) -> bool {
        self.0.take().is_some()
    }

    fn refill(&mut self) {
        if self.0.is_none() {
            self.0 = std::fs::File::open("/dev/null").ok();
        }
    }
}
