//! One RESP connection: read what the client sent, answer every complete command in it with
//! one write, read again. A pipeline of N commands thus costs one read, one limiter pass and
//! one write, not N of each.
//!
//! The deadlines are the HTTP connection's, `[listen]`'s:
//! - `header_timeout`: from accept, or from the first byte of a command, to the end of that
//!   command's frame: a client sending a frame a byte at a time is closed then.
//! - `idle_timeout`: from the last answer to the next byte; and for writing an answer, so a
//!   client that never reads cannot hold the connection.
//!
//! On the stop, commands already read are answered and written, then the connection closes;
//! an idle one closes at once.
//!
//! A connection closed after `QUIT` or a protocol error may still hold bytes the client sent
//! (a pipeline behind the bad frame): it closes lingering ([`crate::server::linger`]), so
//! that the client reads the error rather than a reset.

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::answer::{Session, answer_all};
use super::command::{self, Command};
use super::error::CommandError;
use super::frame::{self, Next};
use super::reply;
use crate::server::linger::Lingering;
use crate::server::stop::Stop;
use crate::service::app::App;
use sluice_config::ConnectionSettings;

/// Room made in the read buffer before each read.
const READ_CHUNK: usize = 16 * 1024;

/// What one read's complete frames hold.
#[derive(Debug, Default)]
pub struct Frames<'a> {
    /// The commands, in order (stopping after `QUIT`).
    pub commands: Vec<Result<Command<'a>, CommandError>>,
    /// The bytes of the buffer they took.
    pub consumed: usize,
    /// The connection closes after the answers: `QUIT`, or this protocol error (answered
    /// last).
    pub close: bool,
    pub protocol_error: Option<frame::ProtocolError>,
}

/// Reads every complete frame at the front of `buf`.
pub fn frames(buf: &[u8]) -> Frames<'_> {
    let mut read = Frames::default();
    loop {
        match frame::next(&buf[read.consumed..]) {
            Next::Command { args, len } => {
                read.consumed += len;
                let parsed = command::parse(&args);
                let quit = matches!(parsed, Ok(Command::Quit));
                read.commands.push(parsed);
                if quit {
                    read.close = true;
                    return read;
                }
            }
            Next::Skip(len) => read.consumed += len,
            Next::Incomplete => return read,
            Next::Invalid(err) => {
                read.close = true;
                read.protocol_error = Some(err);
                return read;
            }
        }
    }
}

/// Serves RESP on `stream` until the client leaves, a deadline passes, a protocol error, or
/// the stop.
pub async fn serve_resp<S>(
    mut stream: S,
    app: App,
    limits: ConnectionSettings,
    lingering: Lingering,
    mut stop: Stop,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut output = BytesMut::with_capacity(READ_CHUNK);
    let mut session = Session::new();
    let mut deadline = Instant::now() + limits.header_timeout;
    loop {
        input.reserve(READ_CHUNK);
        let was_empty = input.is_empty();
        tokio::select! {
            biased;
            () = stop.stopped() => return,
            read = tokio::time::timeout_at(deadline, stream.read_buf(&mut input)) => match read {
                Ok(Ok(0)) => return,
                Ok(Ok(_)) => {}
                Ok(Err(err)) => {
                    tracing::debug!(error = %err, "RESP connection read failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(
                        phase = if was_empty { "idle" } else { "command frame" },
                        "RESP connection timed out"
                    );
                    return;
                }
            },
        }
        let read = frames(&input);
        answer_all(&app, &mut session, &read.commands, &mut output).await;
        if let Some(err) = &read.protocol_error {
            reply::error(&mut output, &format!("ERR {err}"));
        }
        let (consumed, close) = (read.consumed, read.close);
        drop(read);
        input.advance(consumed);
        if !output.is_empty() {
            let write = stream.write_all(&output);
            match tokio::time::timeout(limits.idle_timeout, write).await {
                Ok(Ok(())) => output.clear(),
                Ok(Err(_)) | Err(_) => return,
            }
        }
        if close {
            lingering.close(stream, b"");
            return;
        }
        let now = Instant::now();
        if input.is_empty() {
            deadline = now + limits.idle_timeout;
        } else if was_empty || consumed > 0 {
            // A new frame began in this read.
            deadline = now + limits.header_timeout;
        }
        // Shrinks a buffer a large frame grew, so an idle connection holds little.
        if input.is_empty() && input.capacity() > 4 * READ_CHUNK {
            input = BytesMut::with_capacity(READ_CHUNK);
        }
        if output.capacity() > 4 * READ_CHUNK {
            output = BytesMut::with_capacity(READ_CHUNK);
        }
    }
}
