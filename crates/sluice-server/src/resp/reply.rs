//! Replies onto the wire: RESP2 frames encoded by the `redis-protocol` crate at the end of the
//! connection's output buffer, so that every reply of a pipeline leaves in one write. RESP3
//! writes every reply sluiced gives the same way but two, the null and `HELLO`'s map, whose
//! RESP3 forms ([`null`], [`map`]) are one fixed header each.
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

pub fn simple(out: &mut BytesMut, text: &str) {
    frame(out, &BorrowedFrame::SimpleString(text.as_bytes()));
}

pub fn ok(out: &mut BytesMut) {
    simple(out, "OK");
}

pub fn bulk(out: &mut BytesMut, bytes: &[u8]) {
    frame(out, &BorrowedFrame::BulkString(bytes));
}

/// The null reply: `$-1` on RESP2, `_` on RESP3.
pub fn null(out: &mut BytesMut, resp3: bool) {
    if resp3 {
        out.extend_from_slice(b"_\r\n");
    } else {
        frame(out, &BorrowedFrame::Null);
    }
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
    frame(out, &BorrowedFrame::Integer(value));
}

pub fn empty_array(out: &mut BytesMut) {
    frame(out, &BorrowedFrame::Array(&[]));
}

/// An array of integers, as `SLUICE.CHECK` and `CL.THROTTLE` answer.
pub fn integers<const N: usize>(out: &mut BytesMut, values: [i64; N]) {
    let frames = values.map(BorrowedFrame::Integer);
    frame(out, &BorrowedFrame::Array(&frames));
}

/// An error reply: `line` starts with its code (`ERR`, `UNAVAILABLE`, ...), one line.
pub fn error(out: &mut BytesMut, line: &str) {
    if line.contains(['\r', '\n']) {
        let flat = line.replace(['\r', '\n'], " ");
        frame(out, &BorrowedFrame::Error(&flat));
    } else {
        frame(out, &BorrowedFrame::Error(line));
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
        integers(&mut out, [1, -1, 0]);
        bulk(&mut out, b"hi");
        null(&mut out, false);
        null(&mut out, true);
        map(
            &mut out,
            &[BorrowedFrame::BulkString(b"k"), BorrowedFrame::Integer(1)],
        );
        error(&mut out, "ERR bad\r\n+OK");
        assert_eq!(
            &out[..],
            b"+OK\r\n*3\r\n:1\r\n:-1\r\n:0\r\n$2\r\nhi\r\n$-1\r\n_\r\n%1\r\n$1\r\nk\r\n:1\r\n\
              -ERR bad  +OK\r\n"
        );
    }

    #[test]
    fn quoted_client_text_stays_on_one_short_line() {
        assert_eq!(shown(b"a\r\nb"), "a\\r\\nb");
        assert_eq!(shown(&[b'x'; 100]).len(), SHOWN_CHARS + 3);
        assert_eq!(shown(&[0xff, b'a']), "\u{fffd}a");
    }
}
