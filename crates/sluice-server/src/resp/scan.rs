//! The common frame read without the codec: an array of a few bulk strings, every length
//! plain decimal, every CRLF in place, as every client library sends a command. Such a frame
//! is read in one pass over its bytes, its arguments kept on the stack ([`Args`]), where the
//! `redis-protocol` codec builds a vector of ranges and the codec path a vector of
//! arguments for each command.
//!
//! The scan only ever answers for frames it reads whole and well-formed, which the codec reads
//! alike: anything else (an incomplete frame, a sign, a leading zero, a null, a nested array,
//! more than [`INLINE`] arguments) is left to the codec path, whose answers and errors stay the
//! listener's. The frame's bounds (its size, the codec's window) are the caller's to check.

use std::ops::Deref;

/// Most arguments kept on the stack: `SLUICE.CHECK` with every option takes 9.
pub const INLINE: usize = 12;

/// A command's arguments, its name first, borrowed from the read buffer.
#[derive(Debug, Clone)]
pub enum Args<'a> {
    /// Up to [`INLINE`] arguments: the first `len` of `items`.
    Inline {
        items: [&'a [u8]; INLINE],
        len: usize,
    },
    /// More, read by the codec path.
    Heap(Vec<&'a [u8]>),
}

impl<'a> Deref for Args<'a> {
    type Target = [&'a [u8]];

    fn deref(&self) -> &Self::Target {
        match self {
            Args::Inline { items, len } => &items[..*len],
            Args::Heap(args) => args,
        }
    }
}

impl PartialEq for Args<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Args<'_> {}

/// The command frame at the front of `buf` (which starts with `*`) and the bytes it takes, when
/// it is of the common form; `None` leaves it to the codec path.
pub fn flat(buf: &[u8]) -> Option<(Args<'_>, usize)> {
    let (count, mut at) = decimal(buf, 1)?;
    if count == 0 || count > INLINE {
        return None;
    }
    let mut items: [&[u8]; INLINE] = [&[]; INLINE];
    for item in items.iter_mut().take(count) {
        if *buf.get(at)? != b'$' {
            return None;
        }
        let (len, start) = decimal(buf, at + 1)?;
        let end = start.checked_add(len)?;
        if buf.get(end..end.checked_add(2)?)? != b"\r\n" {
            return None;
        }
        *item = &buf[start..end];
        at = end + 2;
    }
    Some((Args::Inline { items, len: count }, at))
}

/// The decimal number at `buf[at..]` ended by CRLF, and where what follows starts: digits
/// only, no leading zero but in `0`, at most 9 of them (more than any frame holds).
#[inline(always)]
fn decimal(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    // One or two digits, as the counts and lengths of a check's arguments mostly are: read
    // with their CRLF at once.
    match buf.get(at..at + 4) {
        Some(&[digit @ b'0'..=b'9', b'\r', b'\n', _]) => {
            return Some((usize::from(digit - b'0'), at + 3));
        }
        Some(&[tens @ b'1'..=b'9', ones @ b'0'..=b'9', b'\r', b'\n']) => {
            return Some((
                usize::from(tens - b'0') * 10 + usize::from(ones - b'0'),
                at + 4,
            ));
        }
        _ => {}
    }
    let mut value = 0usize;
    let mut i = at;
    loop {
        match *buf.get(i)? {
            b'\r' => break,
            digit @ b'0'..=b'9' if i - at < 9 => {
                value = value * 10 + usize::from(digit - b'0');
                i += 1;
            }
            _ => return None,
        }
    }
    let digits = i - at;
    if digits == 0 || (digits > 1 && buf[at] == b'0') || *buf.get(i + 1)? != b'\n' {
        return None;
    }
    Some((value, i + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(buf: &[u8]) -> Option<(Vec<&[u8]>, usize)> {
        flat(buf).map(|(args, len)| (args.to_vec(), len))
    }

    #[test]
    fn a_common_command_is_read_in_one_pass() {
        let buf = b"*3\r\n$12\r\nSLUICE.CHECK\r\n$3\r\napi\r\n$0\r\n\r\n*1\r\n";
        assert_eq!(
            args(buf),
            Some((vec![&b"SLUICE.CHECK"[..], b"api", b""], 38))
        );
        // A payload is taken by its length, whatever bytes it holds.
        assert_eq!(
            args(b"*1\r\n$4\r\n\r\n*\n\r\n"),
            Some((vec![&b"\r\n*\n"[..]], 14))
        );
    }

    #[test]
    fn anything_uncommon_is_left_to_the_codec() {
        for buf in [
            &b""[..],
            b"*",
            b"*1\r\n$4\r\nPIN",
            b"*1\r\n$4\r\nPING\r",
            b"*0\r\n",
            b"*-1\r\n",
            b"*01\r\n$4\r\nPING\r\n",
            b"*1\r\n$04\r\nPING\r\n",
            b"*1\r\n$+4\r\nPING\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$4\r\nPINGx\r\n",
            b"*1\r\n$4\rxPING\r\n",
            b"*1\r\n:4\r\n",
            b"*1\r\n*1\r\n$1\r\na\r\n",
            b"*13\r\n",
            b"*1\r\n$9999999999\r\n",
        ] {
            assert_eq!(args(buf), None, "{:?}", String::from_utf8_lossy(buf));
        }
    }
}
