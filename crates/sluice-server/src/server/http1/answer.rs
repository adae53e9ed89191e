//! A check's answer written as HTTP/1 bytes into the connection's output buffer, in place: the
//! bytes hyper writes for the same `Response` to the same request (its status line, the
//! answer's headers in their order, the `connection` header hyper adds, `content-length`,
//! `date`, the body), so a client cannot tell which of the two answered.

use std::pin::Pin;

use axum::response::Response;
use http::StatusCode;
use http::header::{CONTENT_LENGTH, DATE};
use hyper::body::Body;

use super::date;

/// How the answer is framed for its request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Framing {
    /// The request was HTTP/1.0: so is the answer.
    pub http10: bool,
    /// The connection stays open after this answer.
    pub keep_alive: bool,
}

/// Appends the answer `response` to `out`, framed for its request; `date` is `date`'s value.
pub(super) async fn write(
    out: &mut Vec<u8>,
    response: Response,
    framing: Framing,
    date: &[u8; date::DATE_LENGTH],
) {
    let (parts, mut body) = response.into_parts();
    let status = parts.status;
    if !framing.http10 && status == StatusCode::OK {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(if framing.http10 {
            b"HTTP/1.0 "
        } else {
            b"HTTP/1.1 "
        });
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let mut wrote_length = false;
    let mut wrote_date = false;
    for (name, value) in &parts.headers {
        // The handler sets neither; were one set, hyper would write it in place of its own.
        wrote_length |= name == CONTENT_LENGTH;
        wrote_date |= name == DATE;
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // hyper's, after the answer's own headers: an HTTP/1.1 connection that closes says so;
    // an HTTP/1.0 one that stays open says that.
    match (framing.http10, framing.keep_alive) {
        (false, false) => out.extend_from_slice(b"connection: close\r\n"),
        (true, true) => out.extend_from_slice(b"connection: keep-alive\r\n"),
        _ => {}
    }
    // Every answer of the check's handler is a body of known length, whole in memory: its
    // frames go straight after the head. Another body is read whole first, for its length.
    if let Some(length) = body.size_hint().exact() {
        end_head(out, (!wrote_length).then_some(length), wrote_date, date);
        while let Some(data) = next_data(&mut body).await {
            out.extend_from_slice(&data);
        }
    } else {
        let mut whole = Vec::new();
        while let Some(data) = next_data(&mut body).await {
            whole.extend_from_slice(&data);
        }
        end_head(
            out,
            (!wrote_length).then_some(whole.len() as u64),
            wrote_date,
            date,
        );
        out.extend_from_slice(&whole);
    }
}

/// The end of the head: `content-length` (unless the answer set it), `date` (unless the
/// answer set it), the blank line.
fn end_head(out: &mut Vec<u8>, length: Option<u64>, wrote_date: bool, date: &[u8]) {
    if let Some(length) = length {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if wrote_date {
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n\r\n");
    }
}

/// The body's next data frame (trailers skipped); `None` at its end or on an error.
async fn next_data(body: &mut axum::body::Body) -> Option<bytes::Bytes> {
    loop {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await?;
        if let Ok(data) = frame.ok()?.into_data() {
            return Some(data);
        }
    }
}
