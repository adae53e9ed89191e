//! A request head read with `httparse` (the parser hyper uses, with hyper's settings), sorted
//! into a plain check [`super`] answers itself and everything else, which hyper answers.
//!
//! A plain check is `POST /v1/check` over HTTP/1.0 or 1.1 with one `Content-Length` of
//! digits within the direct path's limit ([`crate::http::is_direct_length`]), and no
//! `Transfer-Encoding`, `Expect` or `Upgrade`: hyper reads such a request exactly as this
//! does, and gives it to the same handler. Anything else, valid or not (another route or
//! method, a chunked body, a `100-continue`, the HTTP/2 preface, a head that does not parse
//! or is larger than [`MAX_HEAD`]), is [`Head::Other`], for hyper to answer as ever.

use std::mem::MaybeUninit;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::telemetry::TraceParent;

/// The most headers a plain check's head has here; a head with more is hyper's (which takes
/// up to 100).
const MAX_HEADERS: usize = 32;

/// The longest head read here; a longer one is hyper's, with its own bound.
pub(super) const MAX_HEAD: usize = 16 * 1024;

/// What the bytes at the front of a connection's buffer are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Head {
    /// The start of a head: more bytes are needed.
    Partial,
    /// A plain check's head.
    Check(CheckHead),
    /// Anything else.
    Other,
}

/// A plain check's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CheckHead {
    /// The head's length in bytes; its body follows.
    pub len: usize,
    /// The body's declared length.
    pub body: usize,
    /// The request is HTTP/1.0 (its answer too).
    pub http10: bool,
    /// The client keeps the connection open after the answer: HTTP/1.1 without
    /// `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`, as hyper decides it.
    pub keep_alive: bool,
    /// The head carries a `traceparent` header.
    pub traced: bool,
}

/// The head at the front of `buf`.
pub(super) fn parse(buf: &[u8]) -> Head {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut request,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => classify(&request, len),
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => Head::Partial,
        // Too long, too many headers, or not a head: hyper's to answer.
        _ => Head::Other,
    }
}

fn classify(request: &httparse::Request<'_, '_>, len: usize) -> Head {
    if request.method != Some("POST") || request.path != Some("/v1/check") {
        return Head::Other;
    }
    let http10 = match request.version {
        Some(1) => false,
        Some(0) => true,
        _ => return Head::Other,
    };
    let mut body = None;
    let mut keep_alive = !http10;
    let mut saw_close = false;
    let mut traced = false;
    for header in request.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            match (body, digits(header.value)) {
                (None, Some(length)) if crate::http::is_direct_length(length) => {
                    body = Some(length);
                }
                // A second length, one that is not plain digits, or one over the limit.
                _ => return Head::Other,
            }
        } else if name.eq_ignore_ascii_case("connection") {
            // hyper's reading: a `close` in any of them closes; otherwise HTTP/1.0 keeps the
            // connection open when one says `keep-alive`.
            if saw_close || has_token(header.value, b"close") {
                saw_close = true;
                keep_alive = false;
            } else if !keep_alive {
                keep_alive = has_token(header.value, b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || name.eq_ignore_ascii_case("expect")
            || name.eq_ignore_ascii_case("upgrade")
        {
            return Head::Other;
        } else if name.eq_ignore_ascii_case("traceparent") {
            traced = true;
        }
    }
    match body {
        Some(body) => Head::Check(CheckHead {
            len,
            body,
            http10,
            keep_alive,
            traced,
        }),
        // No declared length: the router's (it reads no body, or names the error).
        None => Head::Other,
    }
}

/// A length of plain decimal digits (no sign, no spaces), as hyper reads `Content-Length`.
fn digits(value: &[u8]) -> Option<usize> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0usize, |n, d| {
        n.saturating_mul(10).saturating_add(usize::from(d - b'0'))
    }))
}

/// Whether a `Connection` value lists `token`: hyper's `connection_has` (a value that is not
/// visible ASCII lists nothing).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    if !value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return false;
    }
    value
        .split(|&b| b == b',')
        .any(|item| item.trim_ascii().eq_ignore_ascii_case(token))
}

/// The caller's trace of a head that carries a `traceparent` ([`CheckHead::traced`]): its
/// trace headers read again into a map for [`TraceParent::from_headers`], as hyper's path
/// reads them from the request's.
pub(super) fn trace_parent(head: &[u8]) -> TraceParent {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let mut map = HeaderMap::new();
    if httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut request, head, &mut headers)
        .is_ok()
    {
        for header in request.headers.iter() {
            let name = if header.name.eq_ignore_ascii_case("traceparent") {
                HeaderName::from_static("traceparent")
            } else if header.name.eq_ignore_ascii_case("tracestate") {
                HeaderName::from_static("tracestate")
            } else {
                continue;
            };
            if let Ok(value) = HeaderValue::from_bytes(header.value) {
                map.append(name, value);
            }
        }
    }
    TraceParent::from_headers(&map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(head: &str) -> CheckHead {
        match parse(head.as_bytes()) {
            Head::Check(check) => check,
            other => panic!("{other:?} for {head:?}"),
        }
    }

    #[test]
    fn a_plain_check_is_read_with_its_length_and_keep_alive() {
        let head = "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n";
        assert_eq!(
            check(&format!("{head}{{\"policy\"")),
            CheckHead {
                len: head.len(),
                body: 40,
                http10: false,
                keep_alive: true,
                traced: false,
            }
        );
        let closing = check(
            "POST /v1/check HTTP/1.1\r\ncontent-length: 2\r\nConnection: Keep-Alive, CLOSE\r\n\r\n",
        );
        assert!(!closing.keep_alive);
        let old = check("POST /v1/check HTTP/1.0\r\nContent-Length: 2\r\n\r\n");
        assert!(old.http10 && !old.keep_alive);
        let kept =
            check("POST /v1/check HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n");
        assert!(kept.http10 && kept.keep_alive);
        // A close on any line wins over a later keep-alive, as in hyper.
        let closed = check(
            "POST /v1/check HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n",
        );
        assert!(!closed.keep_alive);
        assert!(
            check("POST /v1/check HTTP/1.1\r\ntraceparent: x\r\nContent-Length: 0\r\n\r\n").traced
        );
    }

    #[test]
    fn everything_else_is_hypers() {
        let limit = sluice_api::MAX_BODY_BYTES;
        for head in [
            "GET /v1/check HTTP/1.1\r\nContent-Length: 2\r\n\r\n".to_owned(),
            "POST /v1/check?x=1 HTTP/1.1\r\nContent-Length: 2\r\n\r\n".to_owned(),
            "POST /v1/checks HTTP/1.1\r\nContent-Length: 2\r\n\r\n".to_owned(),
            "post /v1/check HTTP/1.1\r\nContent-Length: 2\r\n\r\n".to_owned(),
            "POST /v1/check HTTP/1.1\r\n\r\n".to_owned(),
            "POST /v1/check HTTP/1.1\r\nContent-Length: +2\r\n\r\n".to_owned(),
            "POST /v1/check HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n".to_owned(),
            format!(
                "POST /v1/check HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                limit + 1
            ),
            "POST /v1/check HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n".to_owned(),
            "POST /v1/check HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned(),
            "POST /v1/check HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
                .to_owned(),
            "POST /v1/check HTTP/1.1\r\nContent-Length: 2\r\nUpgrade: h2c\r\n\r\n".to_owned(),
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_owned(),
            "POST /v1/check HTTP/1.1\r\nBad Header: 1\r\n\r\n".to_owned(),
            format!(
                "POST /v1/check HTTP/1.1\r\n{}\r\n",
                "a: b\r\n".repeat(MAX_HEADERS + 1)
            ),
            format!("POST /v1/check HTTP/1.1\r\nx: {}", "a".repeat(MAX_HEAD)),
        ] {
            assert_eq!(parse(head.as_bytes()), Head::Other, "{head:?}");
        }
        for head in [
            "",
            "POST /v1/ch",
            "POST /v1/check HTTP/1.1\r\nContent-Length: 2\r\n",
        ] {
            assert_eq!(parse(head.as_bytes()), Head::Partial, "{head:?}");
        }
        assert_eq!(
            check(&format!(
                "POST /v1/check HTTP/1.1\r\nContent-Length: {limit}\r\n\r\n"
            ))
            .body,
            limit
        );
    }
}
