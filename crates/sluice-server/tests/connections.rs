//! The real `sluiced` under connections that do not behave: heads sent a byte at a time,
//! more idle connections than `listen.max_connections`, more than its fd limit allows. Each
//! runs on the Unix socket and on TCP. The bounds on time are the generous ones a client
//! would notice (an answer within 1-2 s), not measurements.

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

mod common;

use common::{BIN, spawn_on};

const POLICY: &str = "[policies.p]\nalgorithm = \"gcra\"\nlimit = 1000000\nwindow = \"1s\"\n";

/// Where a client connects: the daemon's Unix socket or its TCP listener.
#[derive(Debug, Clone)]
enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl Endpoint {
    async fn connect(&self) -> Box<dyn Stream> {
        match self {
            Endpoint::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await.unwrap()),
            Endpoint::Tcp(addr) => Box::new(tokio::net::TcpStream::connect(addr).await.unwrap()),
        }
    }
}

/// A `sluiced` on a temp socket and a loopback port, killed when dropped.
struct Running {
    child: Child,
    unix: Endpoint,
    tcp: Endpoint,
    _dir: tempfile::TempDir,
}

impl Running {
    /// Started with more `[listen]` keys, through `prefix` (e.g. `prlimit --nofile=256`).
    fn start(listen: &str, prefix: &[&str]) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("d.sock");
        let port = sluice_testkit::free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let config = dir.path().join("sluice.toml");
        std::fs::write(
            &config,
            format!(
                "[listen]\nunix = {:?}\nhttp = \"{addr}\"\nunix_mode = \"0600\"\n{listen}\n\n{POLICY}",
                socket.display().to_string()
            ),
        )
        .unwrap();
        let command = match prefix.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(BIN);
                command
            }
            None => Command::new(BIN),
        };
        let child = spawn_on(command, &config);
        let running = Running {
            child,
            unix: Endpoint::Unix(socket.clone()),
            tcp: Endpoint::Tcp(addr),
            _dir: dir,
        };
        wait_until(|| std::os::unix::net::UnixStream::connect(&socket).is_ok());
        wait_until(|| std::net::TcpStream::connect(addr).is_ok());
        running
    }

    fn endpoints(&self) -> [Endpoint; 2] {
        [self.unix.clone(), self.tcp.clone()]
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls until `ready` (readiness, not timing).
fn wait_until(ready: impl Fn() -> bool) {
    for _ in 0..500 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("sluiced did not start");
}

/// The status and body of one `request` on `stream`, reading exactly one answer.
async fn exchange(stream: &mut dyn Stream, request: &[u8]) -> std::io::Result<(u16, String)> {
    stream.write_all(request).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        if body.len() >= length {
            let status = head
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            return Ok((status, body[..length].to_owned()));
        }
    }
}

const CHECK: &[u8] = b"POST /v1/check HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n\
content-length: 28\r\n\r\n{\"policy\":\"p\",\"key\":\"user1\"}";
const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

/// One check on a new connection: its status, body and how long it took.
async fn check_on(endpoint: &Endpoint) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut stream = endpoint.connect().await;
    let (status, body) =
        tokio::time::timeout(Duration::from_secs(5), exchange(&mut *stream, CHECK))
            .await
            .expect("no answer within 5 s")
            .unwrap();
    (status, body, started.elapsed())
}

/// Sends `head` a byte every `every` until the daemon closes the connection; how long it
/// stayed open.
async fn drip(endpoint: Endpoint, head: &'static [u8], every: Duration) -> Duration {
    let started = Instant::now();
    let mut stream = endpoint.connect().await;
    let mut chunk = [0u8; 256];
    for byte in head.iter().cycle() {
        if stream.write_all(&[*byte]).await.is_err() {
            break;
        }
        // A read that waits the whole pace means still open; an end or an error, closed.
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(every, stream.read(&mut chunk)).await {
            break;
        }
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_are_closed_at_the_header_timeout_while_checks_answer() {
    let d = Running::start("header_timeout = \"1s\"", &[]);
    let mut slow = Vec::new();
    for i in 0..200 {
        let endpoint = d.endpoints()[i % 2].clone();
        slow.push(tokio::spawn(drip(
            endpoint,
            b"POST /v1/check HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            Duration::from_millis(200),
        )));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for endpoint in d.endpoints() {
        for _ in 0..3 {
            let (status, body, took) = check_on(&endpoint).await;
            assert_eq!(status, 200, "{endpoint:?}: {body}");
            assert!(
                took < Duration::from_secs(1),
                "{endpoint:?}: a check took {took:?}"
            );
        }
    }
    let mut longest = Duration::ZERO;
    for task in slow {
        longest = longest.max(task.await.unwrap());
    }
    println!("200 slow heads: the last closed after {longest:?}");
    // 1 s of header timeout, plus the drip's own pace and a loaded machine.
    assert!(
        longest < Duration::from_secs(4),
        "a slow head stayed {longest:?}"
    );
    for endpoint in d.endpoints() {
        assert_eq!(check_on(&endpoint).await.0, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_outlives_the_header_timeout_and_closes_at_the_idle_timeout() {
    let d = Running::start("header_timeout = \"1s\"\nidle_timeout = \"3s\"", &[]);
    for endpoint in d.endpoints() {
        let mut stream = endpoint.connect().await;
        assert_eq!(exchange(&mut *stream, HEALTH).await.unwrap().0, 200);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(
            exchange(&mut *stream, HEALTH).await.unwrap().0,
            200,
            "{endpoint:?}: idle past the header timeout, still open"
        );
        let idle = Instant::now();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
            .await
            .expect("not closed 10 s after the idle timeout");
        assert!(read.is_ok_and(|n| n == 0));
        let after = idle.elapsed();
        assert!(
            after >= Duration::from_millis(2_500) && after < Duration::from_secs(6),
            "{endpoint:?}: closed {after:?} after the answer"
        );
    }
}

/// Opens `count` keep-alive connections, each answered once (or refused), and keeps them.
async fn idle_connections(d: &Running, count: usize) -> (Vec<Box<dyn Stream>>, usize) {
    let mut open = Vec::new();
    let mut refused = 0;
    for i in 0..count {
        let mut stream = d.endpoints()[i % 2].connect().await;
        match tokio::time::timeout(Duration::from_secs(5), exchange(&mut *stream, HEALTH)).await {
            Ok(Ok((200, _))) => open.push(stream),
            Ok(Ok((503, body))) => {
                assert!(body.contains("\"error\":\"overloaded\""), "{body}");
                refused += 1;
            }
            other => panic!("connection {i}: {other:?}"),
        }
    }
    (open, refused)
}

/// A new client on each listener gets an answer within 2 s: served, or refused with the JSON
/// 503.
async fn a_new_client_is_answered(d: &Running) {
    for endpoint in d.endpoints() {
        let (status, body, took) = check_on(&endpoint).await;
        println!("{endpoint:?}: a new client got {status} after {took:?}");
        assert!(
            took < Duration::from_secs(2),
            "{endpoint:?}: answered after {took:?}"
        );
        match status {
            200 => {}
            503 => assert!(body.contains("\"error\":\"overloaded\""), "{body}"),
            other => panic!("{endpoint:?}: {other} {body}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_a_new_client_gets_an_answer_not_a_hang() {
    let d = Running::start("max_connections = 64", &[]);
    let (open, refused) = idle_connections(&d, 100).await;
    assert_eq!((open.len(), refused), (64, 36));
    a_new_client_is_answered(&d).await;
    drop(open);
    // The slots free with the connections: served again.
    let mut served = false;
    for _ in 0..50 {
        if check_on(&d.unix).await.0 == 200 && check_on(&d.tcp).await.0 == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "closed connections free their slots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_low_fd_limit_a_new_client_gets_an_answer_not_a_hang() {
    if !Path::new("/usr/bin/prlimit").exists() {
        println!("skipped: prlimit (util-linux) is not installed");
        return;
    }
    let d = Running::start("", &["prlimit", "--nofile=256", "--"]);
    let (open, refused) = idle_connections(&d, 300).await;
    println!(
        "nofile 256: {} connections held, {refused} refused",
        open.len()
    );
    assert!(refused > 0 && open.len() < 256, "{} open", open.len());
    a_new_client_is_answered(&d).await;
    drop(open);
}
