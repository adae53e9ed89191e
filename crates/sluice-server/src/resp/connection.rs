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
//! The vector of a read's commands is the connection's, kept from one read to the next: a
//! read allocates nothing for its commands once the connection is warm.
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

/// The commands of one read, borrowing its buffer.
type Commands<'a> = Vec<Result<Command<'a>, CommandError>>;

/// `commands` emptied, for commands borrowing another buffer: the same allocation (a
/// collect from a vector's own iterator into a vector of a type of the same layout reuses
/// the source's memory), so that a connection reads every pipeline into one vector.
// `filter` would keep the type: the point is the other lifetime.
#[allow(clippy::unnecessary_filter_map)]
fn recycle<'b>(mut commands: Commands<'_>) -> Commands<'b> {
    commands.clear();
    commands.into_iter().filter_map(|_| None).collect()
}

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
#[cfg(test)]
pub fn frames(buf: &[u8]) -> Frames<'_> {
    frames_in(buf, Vec::new())
}

/// Reads every complete frame at the front of `buf`, its commands into `commands` (empty: a
/// vector kept from an earlier read, see [`recycle`]).
fn frames_in<'a>(buf: &'a [u8], commands: Commands<'a>) -> Frames<'a> {
    let mut read = Frames {
        commands,
        ..Frames::default()
    };
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
    let mut spare: Commands<'static> = Vec::new();
    let mut deadline = Instant::now() + limits.header_timeout;
    // One timer for the connection's life, moved to each read's deadline: a deadline later
    // than the one registered is moved without the timer wheel's lock, where a timeout per
    // read registered and removed a timer for every pipeline.
    let expired = tokio::time::sleep_until(deadline);
    tokio::pin!(expired);
    loop {
        input.reserve(READ_CHUNK);
        let was_empty = input.is_empty();
        expired.as_mut().reset(deadline);
        tokio::select! {
            biased;
            () = stop.stopped() => return,
            read = stream.read_buf(&mut input) => match read {
                Ok(0) => return,
                Ok(_) => {}
                Err(err) => {
                    tracing::debug!(error = %err, "RESP connection read failed");
                    return;
                }
            },
            () = &mut expired => {
                tracing::debug!(
                    phase = if was_empty { "idle" } else { "command frame" },
                    "RESP connection timed out"
                );
                return;
            }
        }
        let read = frames_in(&input, recycle(std::mem::take(&mut spare)));
        answer_all(&app, &mut session, &read.commands, &mut output).await;
        if let Some(err) = &read.protocol_error {
            reply::error(&mut output, &format!("ERR {err}"));
        }
        let (consumed, close) = (read.consumed, read.close);
        spare = recycle(read.commands);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_reads_every_pipeline_into_one_vector() {
        let first = b"*1\r\n$4\r\nPING\r\n".repeat(20);
        let read = frames_in(&first, Vec::new());
        assert_eq!(read.commands.len(), 20);
        let (memory, capacity) = (read.commands.as_ptr() as usize, read.commands.capacity());
        let spare: Commands<'static> = recycle(read.commands);
        assert_eq!(
            (spare.as_ptr() as usize, spare.capacity()),
            (memory, capacity)
        );
        let second = b"*1\r\n$4\r\nQUIT\r\n".to_vec();
        let read = frames_in(&second, recycle(spare));
        assert_eq!(read.commands, [Ok(Command::Quit)]);
        assert_eq!(read.commands.as_ptr() as usize, memory);
    }
}
