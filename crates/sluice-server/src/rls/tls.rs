//! The gRPC listener over TLS: tonic serves the streams the listener's TLS
//! ([`ListenerTls`]) has shaken hands with. Each handshake runs in its own task (bounded by
//! the handshake timeout), so a slow client never holds up the next; the streams queue for
//! tonic in a bounded channel, and the accept loop ends with the server.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::server::tls::{Alpn, ListenerTls};

/// Streams shaken hands with but not yet taken by tonic.
const QUEUED: usize = 64;

/// The pause after an accept error, so the loop cannot spin.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// A TLS stream of the gRPC listener, with the TCP peer's addresses for tonic.
#[derive(Debug)]
pub struct GrpcTls(TlsStream<TcpStream>);

impl Connected for GrpcTls {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.0.get_ref().0.connect_info()
    }
}

impl AsyncRead for GrpcTls {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for GrpcTls {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// The TLS streams of `listener`, for tonic's `serve_with_incoming_shutdown`.
pub fn tls_incoming(
    listener: TcpListener,
    tls: ListenerTls,
) -> ReceiverStream<io::Result<GrpcTls>> {
    let (streams, incoming) = mpsc::channel(QUEUED);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = streams.closed() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let (tls, streams) = (tls.clone(), streams.clone());
                    tokio::spawn(async move {
                        if let Some(stream) = tls.accept(stream, "grpc", Alpn::Grpc).await {
                            let _ = streams.send(Ok(GrpcTls(stream))).await;
                        }
                    });
                }
                // One client that left before it was accepted, or out of descriptors: the
                // next accept may do better; tonic is never handed the error (it would stop).
                Err(err) => {
                    tracing::debug!(error = %err, "gRPC accept error");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    });
    ReceiverStream::new(incoming)
}
