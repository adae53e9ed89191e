//! Just enough HTTP/1.1 response parsing to find where one response ends on a keep-alive
//! connection: the status line, `Content-Length` or `Transfer-Encoding: chunked`, and whether
//! the server will close the connection. Bodies are skipped, never copied.

/// A response head larger than this is refused (no server under test sends one).
pub const MAX_HEAD: usize = 64 * 1024;

/// One complete response found at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The status code of the status line.
    pub status: u16,
    /// Bytes of the buffer this response occupies (head and body).
    pub len: usize,
    /// The server closes the connection after it (`Connection: close`, or HTTP/1.0 without
    /// keep-alive).
    pub close: bool,
}

/// Why bytes from the server are not an HTTP/1.x response we can frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed status line")]
    StatusLine,
    #[error("malformed header line")]
    Header,
    #[error("malformed Content-Length")]
    ContentLength,
    #[error("malformed chunked body")]
    Chunk,
    #[error(
        "response without Content-Length or chunked encoding (read-until-close is not supported)"
    )]
    NoLength,
    #[error("response head over {MAX_HEAD} bytes")]
    HeadTooLarge,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end.max(start)]
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|part| trim(part).eq_ignore_ascii_case(token))
}

/// Looks for one complete response at the start of `buf`.
///
/// `Ok(None)`: not complete yet, read more. `Ok(Some(r))`: the first `r.len` bytes are one
/// response. `Err`: the connection cannot be framed any further and must be dropped.
pub fn parse_response(buf: &[u8]) -> Result<Option<Response>, ParseError> {
    let Some(head_len) = find(buf, b"\r\n\r\n") else {
        if buf.len() > MAX_HEAD {
            return Err(ParseError::HeadTooLarge);
        }
        // A status line already seen to be wrong need not wait for the rest of the head.
        if buf.len() >= 5 && !buf.starts_with(b"HTTP/") {
            return Err(ParseError::StatusLine);
        }
        return Ok(None);
    };
    let head = &buf[..head_len];
    let body_start = head_len + 4;
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let status_line = lines.next().ok_or(ParseError::StatusLine)?;
    let (status, http10) = parse_status_line(status_line)?;

    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut close = http10;
    for line in lines {
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(ParseError::Header)?;
        let name = trim(&line[..colon]);
        let value = trim(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"content-length") {
            let text = std::str::from_utf8(value).map_err(|_| ParseError::ContentLength)?;
            let n: usize = text.parse().map_err(|_| ParseError::ContentLength)?;
            if content_length.is_some_and(|m| m != n) {
                return Err(ParseError::ContentLength);
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = contains_token(value, b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            if contains_token(value, b"close") {
                close = true;
            } else if contains_token(value, b"keep-alive") {
                close = false;
            }
        }
    }

    // Responses that never carry a body, whatever their headers say.
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Some(Response {
            status,
            len: body_start,
            close,
        }));
    }
    let end = if chunked {
        match chunked_end(buf, body_start)? {
            Some(end) => end,
            None => return Ok(None),
        }
    } else if let Some(n) = content_length {
        let end = body_start.checked_add(n).ok_or(ParseError::ContentLength)?;
        if buf.len() < end {
            return Ok(None);
        }
        end
    } else {
        return Err(ParseError::NoLength);
    };
    Ok(Some(Response {
        status,
        len: end,
        close,
    }))
}

/// `HTTP/1.x SSS reason`: the status and whether the version is 1.0.
fn parse_status_line(line: &[u8]) -> Result<(u16, bool), ParseError> {
    let rest = line
        .strip_prefix(b"HTTP/1.")
        .ok_or(ParseError::StatusLine)?;
    let (&minor, rest) = rest.split_first().ok_or(ParseError::StatusLine)?;
    if !minor.is_ascii_digit() {
        return Err(ParseError::StatusLine);
    }
    let rest = rest.strip_prefix(b" ").ok_or(ParseError::StatusLine)?;
    let code = rest.get(..3).ok_or(ParseError::StatusLine)?;
    if !code.iter().all(u8::is_ascii_digit) || rest.get(3).is_some_and(|&b| b != b' ') {
        return Err(ParseError::StatusLine);
    }
    let status = code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    Ok((status, minor == b'0'))
}

/// The end of a chunked body starting at `at`, or `None` when not all of it is in `buf`.
fn chunked_end(buf: &[u8], mut at: usize) -> Result<Option<usize>, ParseError> {
    loop {
        let Some(line_len) = find(&buf[at..], b"\r\n") else {
            return if buf.len() - at > 1024 {
                Err(ParseError::Chunk)
            } else {
                Ok(None)
            };
        };
        let line = &buf[at..at + line_len];
        // Chunk extensions (`;name=value`) are ignored.
        let size_text = trim(line.split(|&b| b == b';').next().unwrap_or(line));
        if size_text.is_empty() || size_text.len() > 15 {
            return Err(ParseError::Chunk);
        }
        let text = std::str::from_utf8(size_text).map_err(|_| ParseError::Chunk)?;
        let size = usize::from_str_radix(text, 16).map_err(|_| ParseError::Chunk)?;
        at += line_len + 2;
        if size == 0 {
            // Optional trailers, then the empty line.
            if buf.len() < at + 2 {
                return Ok(None);
            }
            if &buf[at..at + 2] == b"\r\n" {
                return Ok(Some(at + 2));
            }
            return Ok(find(&buf[at..], b"\r\n\r\n").map(|i| at + i + 4));
        }
        let data_end = at + size;
        if buf.len() < data_end + 2 {
            return Ok(None);
        }
        if &buf[data_end..data_end + 2] != b"\r\n" {
            return Err(ParseError::Chunk);
        }
        at = data_end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(buf: &[u8]) -> Response {
        match parse_response(buf) {
            Ok(Some(r)) => r,
            other => panic!("expected a response, got {other:?}"),
        }
    }

    #[test]
    fn content_length_frames_the_body() {
        let raw = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\nhelloHTTP/1.1";
        let r = ok(raw);
        assert_eq!(r.status, 200);
        assert_eq!(&raw[..r.len], &raw[..raw.len() - 8]);
        assert!(!r.close);
    }

    #[test]
    fn every_prefix_of_a_response_is_incomplete() {
        let raw = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 11\r\nRetry-After: 3\r\n\r\n{\"a\":false}";
        for cut in 0..raw.len() {
            assert_eq!(parse_response(&raw[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(ok(raw).status, 429);
        assert_eq!(ok(raw).len, raw.len());
    }

    #[test]
    fn chunked_bodies_with_extensions_and_trailers() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n";
        assert_eq!(ok(raw).len, raw.len());
        for cut in 0..raw.len() {
            assert_eq!(parse_response(&raw[..cut]), Ok(None), "cut at {cut}");
        }
        let trailers = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n1\r\na\r\n0\r\nX-T: 1\r\n\r\nnext";
        assert_eq!(ok(trailers).len, trailers.len() - 4);
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(parse_response(bad), Err(ParseError::Chunk));
        let overrun = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n";
        assert_eq!(parse_response(overrun), Err(ParseError::Chunk));
    }

    #[test]
    fn connection_close_and_http10() {
        let close =
            b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(ok(close).close);
        assert_eq!(ok(close).status, 503);
        let old = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(ok(old).close);
        let kept = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n";
        assert!(!ok(kept).close);
    }

    #[test]
    fn bodiless_statuses_ignore_length() {
        let raw = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(ok(raw).len, raw.len());
        let not_modified = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(ok(not_modified).len, not_modified.len());
    }

    #[test]
    fn malformed_responses_are_errors() {
        assert_eq!(
            parse_response(b"SSH-2.0-OpenSSH\r\n"),
            Err(ParseError::StatusLine)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 2x0 OK\r\n\r\n"),
            Err(ParseError::StatusLine)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"),
            Err(ParseError::Header)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
            Err(ParseError::ContentLength)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(ParseError::ContentLength)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\n\r\n"),
            Err(ParseError::NoLength)
        );
        let huge = vec![b'a'; MAX_HEAD + 1];
        let mut head = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        head.extend_from_slice(&huge);
        assert_eq!(parse_response(&head), Err(ParseError::HeadTooLarge));
    }

    #[test]
    fn a_status_line_without_reason_phrase() {
        assert_eq!(ok(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n").status, 200);
    }
}
