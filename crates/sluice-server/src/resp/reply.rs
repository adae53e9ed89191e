//! Replies onto the wire: RESP2 replies written in place at the end of the connection's
//! output buffer, so that every reply of a pipeline leaves in one write. The replies of a
//! check (integers, arrays of them, lines, bulk strings) are written byte by byte, with no
//! frame built first: they are most of what the listener writes. `HELLO`'s nested reply goes
//! through the `redis-protocol` crate's encoder ([`frame`]). RESP3 writes every reply sluiced
//! gives the same way but two, the null and `HELLO`'s map, whose RESP3 forms ([`null`],
//! [`map`]) are one fixed header each.
//!
//! Error lines quote what a client sent (a command or policy name); [`shown`] makes such text
//! safe in a one-line error: control characters cannot end the line early and inject a reply.

use bytes::BytesMut;
use redis_protocol::resp2::encode::extend_encode_borrowed;
use redis_protocol::resp2::types::BorrowedFrame;

/// Most characters of client text an error quotes.
const SHOWN_CHARS: usize = 64;

/// Appends `frame` to `out`.
pub fn frame(out: &mut BytesMut, frame: &BorrowedFrame<'_>) {
    let before = out.len();
    // The buffer is extended to the frame's length first, so encoding cannot run out of room;
    // should it fail all the same, the partial frame is taken back rather than sent.
    if let Err(err) = extend_encode_borrowed(out, frame, false) {
        tracing::warn!(error = %err, "cannot encode a RESP reply");
        out.truncate(before);
    }
}

/// `prefix`, the decimal `value`, CRLF: an integer reply, or the header of an array or a
/// bulk string.
fn line_of(out: &mut BytesMut, prefix: u8, value: impl itoa::Integer) {
    out.extend_from_slice(&[prefix]);
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A line reply, `+text` or `-text`: `text` holds no CR or LF (the callers' are constants, or
/// flattened by [`error`]).
fn line(out: &mut BytesMut, prefix: u8, text: &str) {
    out.extend_from_slice(&[prefix]);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The header of an array of `len` replies, which the caller writes next.
pub fn array_header(out: &mut BytesMut, len: usize) {
    line_of(out, b'*', len);
}

pub fn simple(out: &mut BytesMut, text: &str) {
    line(out, b'+', text);
}

pub fn ok(out: &mut BytesMut) {
    simple(out, "OK");
}

pub fn bulk(out: &mut BytesMut, bytes: &[u8]) {
    line_of(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// The null reply: `$-1` on RESP2, `_` on RESP3.
pub fn null(out: &mut BytesMut, resp3: bool) {
    out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" });
}

/// A RESP3 map of `fields` (key, value, key, value, ...): its header, then the frames.
pub fn map(out: &mut BytesMut, fields: &[BorrowedFrame<'_>]) {
    out.extend_from_slice(b"%");
    out.extend_from_slice(itoa::Buffer::new().format(fields.len() / 2).as_bytes());
    out.extend_from_slice(b"\r\n");
    for field in fields {
        frame(out, field);
    }
}

pub fn integer(out: &mut BytesMut, value: i64) {
    line_of(out, b':', value);
}

pub fn empty_array(out: &mut BytesMut) {
    array_header(out, 0);
}

/// Longest reply [`integers`] writes at once: the header of an array of 9, and 9 integers of
/// 19 digits and a sign.
const INTEGERS_AT_ONCE: usize = 4 + 9 * 23;

/// An array of integers, as `SLUICE.CHECK` and `CL.THROTTLE` answer: written on the stack,
/// then into `out` in one copy.
pub fn integers(out: &mut BytesMut, values: &[i64]) {
    if values.len() > 9 {
        array_header(out, values.len());
        for &value in values {
            integer(out, value);
        }
        return;
    }
    let mut reply = Staged {
        bytes: [0; INTEGERS_AT_ONCE],
        len: 0,
    };
    reply.line(b'*', values.len() as i64);
    for &value in values {
        reply.line(b':', value);
    }
    out.extend_from_slice(&reply.bytes[..reply.len]);
}

/// A reply built on the stack: no copy call per CRLF, and a one-digit number (most of a
/// check's reply: allowed, retry after, delay, degraded) written as one byte.
struct Staged {
    bytes: [u8; INTEGERS_AT_ONCE],
    len: usize,
}

impl Staged {
    /// `prefix`, the decimal `value`, CRLF. The caller keeps to [`INTEGERS_AT_ONCE`].
    #[inline(always)]
    fn line(&mut self, prefix: u8, value: i64) {
        let at = self.len;
        if let Ok(digit @ 0..=9) = u8::try_from(value) {
            self.bytes[at..at + 4].copy_from_slice(&[prefix, b'0' + digit, b'\r', b'\n']);
            self.len = at + 4;
            return;
        }
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(value).as_bytes();
        let end = at + 1 + digits.len();
        self.bytes[at] = prefix;
        self.bytes[at + 1..end].copy_from_slice(digits);
        self.bytes[end..end + 2].copy_from_slice(b"\r\n");
        self.len = end + 2;
    }
}

/// An error reply: `line` starts with its code (`ERR`, `UNAVAILABLE`, ...), one line.
pub fn error(out: &mut BytesMut, text_line: &str) {
    if text_line.contains(['\r', '\n']) {
        line(out, b'-', &text_line.replace(['\r', '\n'], " "));
    } else {
        line(out, b'-', text_line);
    }
}

/// A counter as a RESP integer (saturating: RESP integers are signed 64-bit).
pub fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Client bytes as an error may quote them: UTF-8 (lossy), control characters escaped,
/// at most [`SHOWN_CHARS`] characters.
pub fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len().min(SHOWN_CHARS + 3));
    for (i, c) in text.chars().enumerate() {
        if i == SHOWN_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_resp2_frames() {
        let mut out = BytesMut::new();
        ok(&mut out);
        integers(&mut out, &[1, -1, 0]);
        bulk(&mut out, b"hi");
        null(&mut out, false);
        null(&mut out, true);
        map(
            &mut out,
            &[BorrowedFrame::BulkString(b"k"), BorrowedFrame::Integer(1)],
        );
        error(&mut out, "ERR bad\r\n+OK");
        empty_array(&mut out);
        integer(&mut out, i64::MIN);
        simple(&mut out, "PONG");
        bulk(&mut out, b"");
        assert_eq!(
            &out[..],
            b"+OK\r\n*3\r\n:1\r\n:-1\r\n:0\r\n$2\r\nhi\r\n$-1\r\n_\r\n%1\r\n$1\r\nk\r\n:1\r\n\
              -ERR bad  +OK\r\n*0\r\n:-9223372036854775808\r\n+PONG\r\n$0\r\n\r\n"
        );
    }

    /// A reply written into a buffer.
    type Write = fn(&mut BytesMut);

    /// What is written in place is what the `redis-protocol` crate encodes.
    #[test]
    fn replies_written_in_place_are_the_codecs_frames() {
        let cases: [(Write, BorrowedFrame<'_>); 7] = [
            (|o| integer(o, -42), BorrowedFrame::Integer(-42)),
            (|o| integer(o, i64::MAX), BorrowedFrame::Integer(i64::MAX)),
            (|o| simple(o, "OK"), BorrowedFrame::SimpleString(b"OK")),
            (|o| bulk(o, b"a\r\nb"), BorrowedFrame::BulkString(b"a\r\nb")),
            (|o| null(o, false), BorrowedFrame::Null),
            (|o| error(o, "ERR x"), BorrowedFrame::Error("ERR x")),
            (|o| empty_array(o), BorrowedFrame::Array(&[])),
        ];
        for (write, expected) in cases {
            let (mut ours, mut codecs) = (BytesMut::new(), BytesMut::new());
            write(&mut ours);
            frame(&mut codecs, &expected);
            assert_eq!(ours, codecs, "{expected:?}");
        }
        // On the stack (up to 9), and one by one.
        for values in [
            &[0, 1, -1, 1_800_000_000, i64::MIN][..],
            &[i64::MIN; 9],
            &[7; 10],
            // Every count of digits, either side of a power of ten.
            &[9, 10, 99, 100, 999, 1_000, 99_999, 100_000, -10][..],
            &[9_999_999_999, 10_000_000_000, i64::MAX, -99, -100][..],
        ] {
            let (mut ours, mut codecs) = (BytesMut::new(), BytesMut::new());
            integers(&mut ours, values);
            let frames: Vec<_> = values.iter().map(|&v| BorrowedFrame::Integer(v)).collect();
            frame(&mut codecs, &BorrowedFrame::Array(&frames));
            assert_eq!(ours, codecs);
        }
    }

    #[test]
    fn quoted_client_text_stays_on_one_short_line() {
        assert_eq!(shown(b"a\r\nb"), "a\\r\\nb");
        assert_eq!(shown(&[b'x'; 100]).len(), SHOWN_CHARS + 3);
        assert_eq!(shown(&[0xff, b'a']), "\u{fffd}a");
    }
}
