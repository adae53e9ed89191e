//! The fast path against hyper's, byte for byte: the same requests on a connection served here
//! and on one served by hyper from the start, each on an app of its own in the same state,
//! must read the same bytes (the `date` value aside) and end alike. Then the connection's
//! deadlines and the stop, which the transcripts alone do not show.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::task::JoinHandle;

use super::*;
use crate::server::stop::{self, StopSender};
use crate::testing;

/// Three checks a second: the fourth of a pipeline is denied.
const CONFIG: &str = "[policies.p]\nalgorithm = \"gcra\"\nlimit = 3\nwindow = \"1s\"\n";

/// The app's time: round, so answers read easily.
const NOW_MS: u64 = 1_800_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// This module's framing (hyper for what it hands over).
    Fast,
    /// hyper from the first byte, as before this module.
    Hyper,
}

/// A connection served by `path` on a new app; the client's end, the stop and the task.
fn connect(path: Path, limits: ConnectionSettings) -> (DuplexStream, StopSender, JoinHandle<()>) {
    let app = testing::memory_app(CONFIG, NOW_MS);
    let api = Api::new(crate::http::router(app.clone()), app);
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (sender, stop) = stop::channel();
    let lingering = Lingering::new(4);
    let task = match path {
        Path::Fast => tokio::spawn(serve(ours, api, limits, lingering, stop)),
        Path::Hyper => tokio::spawn(serve_hyper(
            ours,
            api,
            limits,
            lingering,
            stop,
            Arc::new(Activity::new()),
        )),
    };
    (theirs, sender, task)
}

/// A check of `key` against policy `policy`, with `extra` header lines.
fn check(version: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /v1/check HTTP/{version}\r\nhost: sluiced\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn plain(key: &str) -> Vec<u8> {
    check("1.1", "", &format!(r#"{{"policy":"p","key":"{key}"}}"#))
}

/// How many whole HTTP/1 answers `bytes` holds (bodies framed by `content-length`).
fn count_answers(bytes: &[u8]) -> usize {
    let (mut at, mut count) = (0, 0);
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(len)) = response.parse(&bytes[at..]) else {
            return count;
        };
        let body = response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.parse::<usize>().ok())
            .unwrap_or(0);
        if bytes.len() < at + len + body {
            return count;
        }
        at += len + body;
        count += 1;
    }
}

/// Reads until `bytes` holds `answers` whole answers or the server closes.
async fn read_answers(stream: &mut DuplexStream, bytes: &mut Vec<u8>, answers: usize) {
    let mut buf = [0u8; 8192];
    while count_answers(bytes) < answers {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
            Err(_) => panic!("no answer in 10 s: {:?}", String::from_utf8_lossy(bytes)),
        }
    }
}

/// Reads until the server closes.
async fn read_to_end(stream: &mut DuplexStream, bytes: &mut Vec<u8>) {
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(bytes)).await;
    assert!(read.is_ok(), "not closed in 10 s: {bytes:?}");
}

/// `bytes` as text with every `date` value blanked: the one part of an answer that depends
/// on when it was written.
fn dateless(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .split("\r\n")
        .map(|line| {
            if line.starts_with("date: ") {
                "date: -"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

/// One write of the client, and how many answers it then reads in all.
type Step = (Vec<u8>, usize);

/// What the client of `path` reads for `steps` (with the stop sent after step `stop_after`
/// when set), then (after closing its side, when no stop was sent) every byte until the
/// server closed.
async fn transcript(path: Path, steps: &[Step], stop_after: Option<usize>) -> String {
    let (mut client, stopper, task) = connect(path, ConnectionSettings::default());
    let mut read = Vec::new();
    for (at, (bytes, answers)) in steps.iter().enumerate() {
        if client.write_all(bytes).await.is_err() {
            break;
        }
        if stop_after == Some(at) {
            tokio::task::yield_now().await;
            stopper.stop();
            tokio::task::yield_now().await;
        }
        read_answers(&mut client, &mut read, *answers).await;
    }
    // After the stop the server closes by itself; else once the client closed its side.
    if stop_after.is_none() {
        let _ = client.shutdown().await;
    }
    read_to_end(&mut client, &mut read).await;
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    dateless(&read)
}

async fn same_on_both(name: &str, steps: &[Step], stop_after: Option<usize>) -> String {
    let fast = transcript(Path::Fast, steps, stop_after).await;
    let hyper = transcript(Path::Hyper, steps, stop_after).await;
    assert_eq!(fast, hyper, "{name}");
    fast
}

#[tokio::test]
async fn every_request_reads_what_hyper_answers() {
    let head = |body: &str| {
        let whole = plain("split");
        let at = whole.len() - body.len();
        (whole[..at].to_vec(), whole[at..].to_vec())
    };
    let (split_head, split_body) = head(r#"{"policy":"p","key":"split"}"#);
    let cases: Vec<(&str, Vec<Step>)> = vec![
        ("allowed", vec![(plain("a"), 1)]),
        (
            "pipelined, the fourth denied",
            vec![([plain("b"), plain("b"), plain("b"), plain("b")].concat(), 4)],
        ),
        (
            "bad body",
            vec![(check("1.1", "", r#"{"policy":"p","key":"#), 1)],
        ),
        ("unknown policy", vec![(check("1.1", "", r#"{"policy":"nope","key":"k"}"#), 1)]),
        ("missing key", vec![(check("1.1", "", r#"{"policy":"p"}"#), 1)]),
        (
            "a batch",
            vec![(check("1.1", "", r#"{"checks":[{"policy":"p","key":"x"},{"policy":"p","key":"y","cost":9}]}"#), 1)],
        ),
        ("serde's body", vec![(check("1.1", "", r#"{"policy":"p","key":"caf\u00e9"}"#), 1)]),
        ("head and body apart", vec![(split_head.clone(), 0), (split_body.clone(), 1)]),
        ("HTTP/1.0 closes", vec![(check("1.0", "", r#"{"policy":"p","key":"old"}"#), 1)]),
        (
            "HTTP/1.0 keep-alive",
            vec![(
                [
                    check("1.0", "Connection: keep-alive\r\n", r#"{"policy":"p","key":"old"}"#),
                    check("1.0", "Connection: keep-alive\r\n", r#"{"policy":"p","key":"old"}"#),
                ]
                .concat(),
                2,
            )],
        ),
        (
            "Connection: close",
            vec![(check("1.1", "Connection: keep-alive, close\r\n", r#"{"policy":"p","key":"c"}"#), 1)],
        ),
        (
            "other routes after a check",
            vec![
                (plain("o"), 1),
                (b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(), 2),
                (plain("o"), 3),
            ],
        ),
        (
            "a check then another route in one write",
            vec![([plain("w"), b"GET /v1/policies HTTP/1.1\r\n\r\n".to_vec(), plain("w")].concat(), 3)],
        ),
        ("an unknown route first", vec![(b"GET /nope HTTP/1.1\r\n\r\n".to_vec(), 1), (plain("n"), 2)]),
        ("a traceparent", vec![(check("1.1", "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n", r#"{"policy":"p","key":"t"}"#), 1)]),
        (
            "a body over the limit",
            vec![(format!("POST /v1/check HTTP/1.1\r\ncontent-length: {}\r\n\r\n", sluice_api::MAX_BODY_BYTES + 1).into_bytes(), 1)],
        ),
        (
            "chunked",
            vec![(b"POST /v1/check HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n1c\r\n{\"policy\":\"p\",\"key\":\"chunk\"}\r\n0\r\n\r\n".to_vec(), 1)],
        ),
        ("expect 100-continue", vec![(check("1.1", "expect: 100-continue\r\n", r#"{"policy":"p","key":"e"}"#), 2)]),
        ("no length", vec![(b"POST /v1/check HTTP/1.1\r\n\r\n".to_vec(), 1)]),
        ("garbage", vec![(b"HELLO\r\n\r\n".to_vec(), 1)]),
        ("a body cut short by the client's close", vec![([split_head.clone(), split_body[..5].to_vec()].concat(), 0)]),
        ("a head cut short by the client's close", vec![(split_head[..20].to_vec(), 0)]),
        ("h2 prior knowledge", vec![(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00".to_vec(), 0)]),
    ];
    let mut differ = Vec::new();
    for (name, steps) in &cases {
        let fast = transcript(Path::Fast, steps, None).await;
        let hyper = transcript(Path::Hyper, steps, None).await;
        if fast != hyper {
            differ.push(format!("{name}:\n fast: {fast:?}\nhyper: {hyper:?}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Where the two differ, by design: a request that closes the connection (HTTP/1.0, or
/// `Connection: close`) followed by more bytes, whole requests followed by part of one when
/// the client closes its side, or by bytes that are no request. hyper takes the extra bytes for an error and writes no
/// answer at all; the fast path answers every whole request it read, then closes as hyper
/// does.
#[tokio::test]
async fn whole_requests_are_answered_where_hyper_drops_them() {
    for (bytes, answers) in [
        (
            [
                check("1.0", "", r#"{"policy":"p","key":"old"}"#),
                plain("after"),
            ]
            .concat(),
            1,
        ),
        (
            [
                check(
                    "1.1",
                    "connection: close\r\n",
                    r#"{"policy":"p","key":"c"}"#,
                ),
                plain("after"),
            ]
            .concat(),
            1,
        ),
        // (hyper holds its answer while part of the next request is buffered)
        ([plain("cut"), plain("cut")[..30].to_vec()].concat(), 0),
        ([plain("garbage"), b"\x00\x01\r\n\r\n".to_vec()].concat(), 0),
    ] {
        let steps = [(bytes, answers)];
        let fast = transcript(Path::Fast, &steps, None).await;
        let hyper = transcript(Path::Hyper, &steps, None).await;
        assert_eq!(
            (count_answers(fast.as_bytes()), hyper.as_str()),
            (1, ""),
            "{fast}"
        );
        assert!(
            fast.starts_with("HTTP/1.") && fast.contains(" 200 OK\r\n"),
            "{fast}"
        );
    }
}

#[tokio::test]
async fn the_request_in_flight_at_the_stop_is_answered_then_the_connection_closes() {
    let whole = plain("s");
    let (head, body) = whole.split_at(whole.len() - 8);
    // A body arriving when the stop comes: answered with `connection: close`, then the end.
    let read = same_on_both(
        "stop mid-request",
        &[(head.to_vec(), 0), (body.to_vec(), 1)],
        Some(0),
    )
    .await;
    assert!(
        read.contains("connection: close") && read.starts_with("HTTP/1.1 200 OK"),
        "{read}"
    );
    // Between requests: closed without more.
    let read = same_on_both("stop while idle", &[(plain("i"), 1)], Some(0)).await;
    assert_eq!(count_answers(read.as_bytes()), 1, "{read}");
    assert!(!read.contains("connection: close"), "{read}");
}

/// Opens a fast-path connection with `limits`; how long until the server closed it after
/// `steps` (each a write and the answers then read in all).
async fn open_for(limits: ConnectionSettings, steps: &[(Vec<u8>, usize, Duration)]) -> Duration {
    let (mut client, _stop, _task) = connect(Path::Fast, limits);
    let started = tokio::time::Instant::now();
    let mut read = Vec::new();
    for (bytes, answers, pause) in steps {
        tokio::time::sleep(*pause).await;
        client.write_all(bytes).await.unwrap();
        read_answers(&mut client, &mut read, *answers).await;
    }
    read_to_end(&mut client, &mut read).await;
    started.elapsed()
}

#[tokio::test]
async fn a_head_is_cut_at_the_header_timeout_and_an_idle_connection_at_the_idle_timeout() {
    let limits = ConnectionSettings {
        // Far apart, so that a loaded machine's delays cannot make one pass for the other.
        header_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(4),
        ..ConnectionSettings::default()
    };
    let partial = plain("d")[..20].to_vec();
    // A head begun at accept: cut at the header timeout.
    let open = open_for(limits, &[(partial.clone(), 0, Duration::ZERO)]).await;
    assert!(
        open >= limits.header_timeout && open < limits.idle_timeout,
        "{open:?}"
    );
    // Answered, then idle: the idle timeout, not the header timeout.
    let open = open_for(limits, &[(plain("d"), 1, Duration::ZERO)]).await;
    assert!(open >= limits.idle_timeout, "{open:?}");
    // A head begun after an idle spell: its own header timeout from its first byte.
    let pause = Duration::from_millis(600);
    let open = open_for(
        limits,
        &[(plain("d"), 1, Duration::ZERO), (partial, 1, pause)],
    )
    .await;
    assert!(
        open >= pause + limits.header_timeout && open < pause + limits.idle_timeout,
        "{open:?}"
    );
}

#[tokio::test]
async fn a_closing_answer_over_tcp_is_read_not_reset() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = testing::memory_app(CONFIG, NOW_MS);
    let api = Api::new(crate::http::router(app.clone()), app);
    let (_stopper, stop) = stop::channel();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        serve(
            stream,
            api,
            ConnectionSettings::default(),
            Lingering::new(1),
            stop,
        )
        .await;
    });
    let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
    // The check asks to close; what follows it is still in the server's buffer (and more is
    // sent after): closed lingering, the client reads its answer, then the end.
    let mut request = check(
        "1.1",
        "connection: close\r\n",
        r#"{"policy":"p","key":"l"}"#,
    );
    request.extend_from_slice(&[b'x'; 4096]);
    client.write_all(&request).await.unwrap();
    let _ = client.write_all(&[b'y'; 64 * 1024]).await;
    let mut read = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut read)).await;
    assert!(matches!(ended, Ok(Ok(_))), "{ended:?}");
    let read = dateless(&read);
    assert!(
        read.starts_with("HTTP/1.1 200 OK\r\n") && read.contains("connection: close"),
        "{read}"
    );
}

/// A request of the kinds above, its bytes mutated: a byte changed, bytes cut or repeated.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let bases = vec![
        plain("m"),
        [plain("m"), plain("m")].concat(),
        check(
            "1.0",
            "Connection: keep-alive\r\n",
            r#"{"policy":"p","key":"m","cost":2}"#,
        ),
        check(
            "1.1",
            "connection: close\r\n",
            r#"{"policy":"p","key":"m"}"#,
        ),
        b"GET /healthz HTTP/1.1\r\n\r\n".to_vec(),
    ];
    (
        prop::sample::select(bases),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, byte, kind) in edits {
                let i = at.index(bytes.len());
                match kind {
                    0 => bytes[i] = byte,
                    1 => bytes.truncate(i),
                    _ => {
                        let copy = bytes[i..].to_vec();
                        bytes.extend_from_slice(&copy);
                    }
                }
                if bytes.is_empty() {
                    bytes.push(byte);
                }
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the bytes, the fast path neither panics nor answers otherwise than hyper: the
    /// same answers, or (where hyper drops its answers, above) more, hyper's first.
    #[test]
    fn mutated_requests_read_what_hyper_answers(bytes in mutated()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let steps = [(bytes.clone(), 0)];
            let fast = transcript(Path::Fast, &steps, None).await;
            let hyper = transcript(Path::Hyper, &steps, None).await;
            let shown = String::from_utf8_lossy(&bytes);
            assert!(fast.starts_with(&hyper), "{shown:?}\n fast: {fast:?}\nhyper: {hyper:?}");
            if fast != hyper {
                assert!(hyper.is_empty(), "{shown:?}\n fast: {fast:?}\nhyper: {hyper:?}");
            }
        });
    }
}
