//! Frames off the wire: the arguments of a command, as Redis takes them: an array of bulk
//! strings. A frame of the common form is read by [`scan`](super::scan) in one pass; any
//! other goes to the RESP2 codec of the `redis-protocol` crate, which decodes it as ranges
//! into the read buffer (nothing is copied) and names what is wrong with it.
//!
//! Two bounds live here, so that no client can make a connection hold more:
//! - [`MAX_FRAME`]: a frame still incomplete at that size is refused (as the HTTP body limit).
//! - [`MAX_ARRAY_HEADERS`]: the codec recurses once per nested array, so it is only ever shown
//!   a window of the buffer holding at most that many array headers. Every frame element
//!   starts right after a CRLF, so an array header (`*`) inside a frame is always preceded by
//!   `\n`: counting `\n*` bounds the codec's depth whatever a client sends. A command never
//!   nests arrays; the bound only refuses frames whose payload holds many `\n*` too.

use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;

use super::scan::{self, Args};

/// Largest frame (one command) the listener reads.
pub const MAX_FRAME: usize = sluice_api::MAX_BODY_BYTES;

/// Most array headers the codec is shown at once (see the module docs).
pub const MAX_ARRAY_HEADERS: usize = 8;

/// What the front of the read buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// A command's arguments (its name first) and the bytes its frame took.
    Command { args: Args<'a>, len: usize },
    /// A frame that is no command (an empty or null array), skipped as Redis does.
    Skip(usize),
    /// The frame is not complete yet: read more.
    Incomplete,
    /// The stream cannot be read on: answer this and close the connection.
    Invalid(ProtocolError),
}

/// Why the stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("Protocol error: a command over {MAX_FRAME} bytes is not read")]
    TooLarge,
    #[error(
        "Protocol error: a command is one array of bulk strings; this frame nests arrays \
         (or holds more than {MAX_ARRAY_HEADERS} CRLF-star sequences)"
    )]
    Nested,
    #[error(
        "Protocol error: expected an array of bulk strings (inline commands are not supported)"
    )]
    NotAnArray,
    #[error("Protocol error: every argument of a command is a bulk string")]
    NotABulkString,
    #[error("Protocol error: {0}")]
    Codec(String),
}

/// Decodes the frame at the front of `buf`.
pub fn next(buf: &[u8]) -> Next<'_> {
    match buf.first() {
        None => return Next::Incomplete,
        // Whatever else it is (an inline command, a reply), it is not a command.
        Some(&first) if first != b'*' => return Next::Invalid(ProtocolError::NotAnArray),
        Some(_) => {}
    }
    match scan::flat(buf) {
        Some((args, len)) if len <= MAX_FRAME && within_window(&buf[..len]) => {
            Next::Command { args, len }
        }
        _ => by_codec(buf),
    }
}

/// Whether the codec's window would hold `frame` whole (see [`window`]).
fn within_window(frame: &[u8]) -> bool {
    !window(frame).1
}

/// Decodes the frame at the front of `buf`, which starts with `*`, through the codec.
pub(super) fn by_codec(buf: &[u8]) -> Next<'_> {
    let (window, cut) = window(buf);
    let (frame, len) = match decode_range(window) {
        Ok(Some(decoded)) => decoded,
        Ok(None) if cut => return Next::Invalid(ProtocolError::Nested),
        Ok(None) if buf.len() >= MAX_FRAME => return Next::Invalid(ProtocolError::TooLarge),
        Ok(None) => return Next::Incomplete,
        Err(err) => return Next::Invalid(ProtocolError::Codec(err.to_string())),
    };
    if len > MAX_FRAME {
        return Next::Invalid(ProtocolError::TooLarge);
    }
    let elements = match frame {
        RangeFrame::Array(elements) => elements,
        RangeFrame::Null => return Next::Skip(len),
        _ => return Next::Invalid(ProtocolError::NotAnArray),
    };
    if elements.is_empty() {
        return Next::Skip(len);
    }
    let mut args = Vec::with_capacity(elements.len());
    for element in &elements {
        match element {
            RangeFrame::BulkString((start, end)) => match buf.get(*start..*end) {
                Some(arg) => args.push(arg),
                None => return Next::Invalid(ProtocolError::NotABulkString),
            },
            _ => return Next::Invalid(ProtocolError::NotABulkString),
        }
    }
    Next::Command {
        args: Args::Heap(args),
        len,
    }
}

/// The front of `buf` holding at most [`MAX_ARRAY_HEADERS`] array headers, and whether it
/// stops short of the end of `buf`.
fn window(buf: &[u8]) -> (&[u8], bool) {
    // The frame's own first byte is a header; every later one follows a `\n`. A command
    // whose arguments hold no `*` is passed over at memchr's pace.
    let mut headers = 1;
    for star in memchr::memchr_iter(b'*', buf.get(1..).unwrap_or_default()).map(|i| i + 1) {
        if buf[star - 1] == b'\n' {
            headers += 1;
            if headers > MAX_ARRAY_HEADERS {
                return (&buf[..star], true);
            }
        }
    }
    (buf, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(buf: &[u8]) -> (Vec<&[u8]>, usize) {
        match next(buf) {
            Next::Command { args, len } => (args.to_vec(), len),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_command_is_an_array_of_bulk_strings_borrowed_from_the_buffer() {
        let buf = b"*3\r\n$12\r\nSLUICE.CHECK\r\n$3\r\napi\r\n$4\r\nu:*1\r\n*1\r\n$4\r\nPING\r\n";
        let (args, len) = command(buf);
        assert_eq!(args, [&b"SLUICE.CHECK"[..], b"api", b"u:*1"]);
        let (args, _) = command(&buf[len..]);
        assert_eq!(args, [&b"PING"[..]]);
    }

    #[test]
    fn every_prefix_of_a_frame_waits_for_more() {
        let buf = b"*2\r\n$4\r\nECHO\r\n$5\r\nhe\r\no\r\n";
        for cut in 0..buf.len() {
            assert_eq!(next(&buf[..cut]), Next::Incomplete, "{cut}");
        }
        assert_eq!(command(buf).0, [&b"ECHO"[..], b"he\r\no"]);
    }

    #[test]
    fn empty_and_null_arrays_are_skipped() {
        assert_eq!(next(b"*0\r\n"), Next::Skip(4));
        assert_eq!(next(b"*-1\r\n"), Next::Skip(5));
    }

    #[test]
    fn what_is_not_a_command_closes_the_stream() {
        for (buf, err) in [
            (&b"PING\r\n"[..], ProtocolError::NotAnArray),
            (b"+OK\r\n", ProtocolError::NotAnArray),
            (b"*1\r\n:1\r\n", ProtocolError::NotABulkString),
            (b"*1\r\n$-1\r\n", ProtocolError::NotABulkString),
            (
                b"*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n",
                ProtocolError::NotABulkString,
            ),
        ] {
            assert_eq!(next(buf), Next::Invalid(err), "{buf:?}");
        }
        assert!(matches!(
            next(b"*x\r\n"),
            Next::Invalid(ProtocolError::Codec(_))
        ));
    }

    #[test]
    fn deep_nesting_never_reaches_the_codec() {
        let deep = b"*1\r\n".repeat(100_000);
        assert_eq!(next(&deep), Next::Invalid(ProtocolError::Nested));
        // A pipeline of flat commands is not nesting, however long.
        let pipeline = b"*1\r\n$4\r\nPING\r\n".repeat(1000);
        assert_eq!(command(&pipeline).1, 14);
    }

    #[test]
    fn a_frame_the_codecs_window_would_cut_is_refused_whatever_reads_it() {
        let payload = "\n*".repeat(MAX_ARRAY_HEADERS - 1);
        let under = format!("*1\r\n${}\r\n{payload}\r\n", payload.len());
        assert_eq!(command(under.as_bytes()).1, under.len());
        let payload = "\n*".repeat(MAX_ARRAY_HEADERS);
        let over = format!("*1\r\n${}\r\n{payload}\r\n", payload.len());
        assert_eq!(next(over.as_bytes()), Next::Invalid(ProtocolError::Nested));
    }

    #[test]
    fn a_frame_past_the_bound_is_refused() {
        let mut big = format!("*1\r\n${}\r\n", MAX_FRAME * 2).into_bytes();
        big.resize(MAX_FRAME, b'a');
        assert_eq!(next(&big), Next::Invalid(ProtocolError::TooLarge));
        assert_eq!(next(&big[..MAX_FRAME - 1]), Next::Incomplete);
    }
}
