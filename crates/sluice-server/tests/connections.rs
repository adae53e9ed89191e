//! The real `sluiced` under connections that do not behave: heads sent a byte at a time,
//! more idle connections than `listen.max_connections`, more than its fd limit allows. Each
//! runs on the Unix socket and on TCP. The bounds on time are the generous ones a client
//! would notice (an answer within 1-2 s), not measurements.
//!
//! Clients turned away at the bound, or answered early and closed (413, 404 with a body),
//! read their answer, never a reset: the tests count what each client read (answers, resets)
//! and assert the counts. A client that never stops sending is cut within the bounds of
//! `server::linger` (1 MiB, 10 s).

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
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
    if !sluice_testkit::tool_available("prlimit", &["--version"], "apt-get install util-linux") {
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

/// What a client read: its answer, or how the connection failed.
#[derive(Debug, Default)]
struct Tally {
    /// The JSON 503 of `listen.max_connections` (or the RESP error).
    overloaded: usize,
    /// Other answers, by status.
    answered: Vec<u16>,
    /// `Connection reset by peer`, or a write refused because the daemon had closed (EPIPE).
    resets: usize,
    /// Anything else (an end before the answer, a hang).
    failures: Vec<String>,
}

impl Tally {
    fn count(&mut self, read: std::io::Result<(u16, String)>) {
        match read {
            Ok((503, body)) if body.contains("\"error\":\"overloaded\"") => self.overloaded += 1,
            Ok((status, _)) => self.answered.push(status),
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                ) =>
            {
                self.resets += 1;
            }
            Err(err) => self.failures.push(err.to_string()),
        }
    }
}

/// `request` on a new connection to `endpoint`, its answer read (a hang of 10 s is an error).
async fn answer_on(endpoint: Endpoint, request: Vec<u8>) -> std::io::Result<(u16, String)> {
    let mut stream = endpoint.connect().await;
    tokio::time::timeout(Duration::from_secs(10), exchange(&mut *stream, &request))
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// `count` clients at once, each sending `request` on a new connection to `endpoint`.
async fn clients_at_once(endpoint: &Endpoint, count: usize, request: &[u8]) -> Tally {
    let clients: Vec<_> = (0..count)
        .map(|_| tokio::spawn(answer_on(endpoint.clone(), request.to_vec())))
        .collect();
    let mut tally = Tally::default();
    for client in clients {
        tally.count(client.await.unwrap());
    }
    tally
}

/// Opens `count` connections, each sending a health check and reading its answer (200, or the
/// 503 past the bound), and keeps every one open without reading further.
async fn hold_connections(d: &Running, count: usize) -> (Vec<Box<dyn Stream>>, Tally) {
    let mut held = Vec::new();
    let mut tally = Tally::default();
    for i in 0..count {
        let mut stream = d.endpoints()[i % 2].connect().await;
        let read = tokio::time::timeout(Duration::from_secs(10), exchange(&mut *stream, HEALTH))
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()));
        tally.count(read);
        held.push(stream);
    }
    (held, tally)
}

/// Fills the bound: opens connections until `count` of them were served (a 503 meanwhile is
/// a probe connection the daemon has not seen closed yet), and keeps them open.
async fn hold_served(d: &Running, count: usize) -> Vec<Box<dyn Stream>> {
    let mut held = Vec::new();
    for i in 0..100 * count {
        if held.len() == count {
            return held;
        }
        let mut stream = d.endpoints()[i % 2].connect().await;
        if let Ok(Ok((200, _))) =
            tokio::time::timeout(Duration::from_secs(10), exchange(&mut *stream, HEALTH)).await
        {
            held.push(stream);
        }
    }
    panic!("{count} connections were not served");
}

/// A RESP client's check on a new connection: the first reply line.
async fn resp_reply(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"*3\r\n$12\r\nSLUICE.CHECK\r\n$1\r\np\r\n$1\r\nk\r\n")
        .await?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 256];
    while !reply.ends_with(b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        reply.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_fd_limit_every_client_turned_away_reads_its_answer_not_a_reset() {
    if !sluice_testkit::tool_available("prlimit", &["--version"], "apt-get install util-linux") {
        return;
    }
    let resp: SocketAddr = format!("127.0.0.1:{}", sluice_testkit::free_port())
        .parse()
        .unwrap();
    let d = Running::start(
        &format!("resp = \"{resp}\"\nheader_timeout = \"60s\""),
        &["prlimit", "--nofile=256", "--"],
    );
    let (held, idle) = hold_connections(&d, 300).await;
    println!(
        "nofile 256, 300 connections held: {} served, {} refused with the 503, {} resets",
        idle.answered.len(),
        idle.overloaded,
        idle.resets
    );
    assert_eq!((idle.resets, idle.failures.len()), (0, 0), "{idle:?}");
    assert!(idle.overloaded > 0 && idle.answered.iter().all(|&s| s == 200));

    // 50 new clients at once on each listener, each sending a whole check.
    let (unix, tcp, resp_replies) = tokio::join!(
        clients_at_once(&d.unix, 50, CHECK),
        clients_at_once(&d.tcp, 50, CHECK),
        async {
            let clients: Vec<_> = (0..10).map(|_| tokio::spawn(resp_reply(resp))).collect();
            let mut replies = Vec::new();
            for client in clients {
                replies.push(client.await.unwrap());
            }
            replies
        }
    );
    for (name, tally) in [("unix", &unix), ("tcp", &tcp)] {
        println!(
            "{name}: 50 new clients: {} read the 503, {} resets, {} other answers, {} failures",
            tally.overloaded,
            tally.resets,
            tally.answered.len(),
            tally.failures.len()
        );
        assert_eq!(tally.overloaded, 50, "{name}: {tally:?}");
    }
    let errors = resp_replies
        .iter()
        .filter(|reply| {
            reply
                .as_ref()
                .is_ok_and(|line| line == "-ERR max number of clients reached\r\n")
        })
        .count();
    println!("resp: 10 new clients: {errors} read -ERR max number of clients reached");
    assert_eq!(errors, 10, "{resp_replies:?}");
    drop(held);
}

/// A check whose body is `len` bytes of JSON padding: whole, but over the API's 64 KiB.
fn large_check(len: usize) -> Vec<u8> {
    let body = format!(
        "{{\"policy\":\"p\",\"key\":\"user1\",\"pad\":\"{}\"}}",
        "x".repeat(len - 40)
    );
    let mut request = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body.as_bytes());
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_reads_its_503_at_the_bound() {
    let d = Running::start("max_connections = 2", &[]);
    let held = hold_served(&d, 2).await;
    let large = large_check(256 * 1024);
    for endpoint in d.endpoints() {
        let tally = clients_at_once(&endpoint, 20, &large).await;
        println!("{endpoint:?}: 20 clients sending 256 KiB at the bound: {tally:?}");
        assert_eq!(tally.overloaded, 20, "{endpoint:?}: {tally:?}");
    }
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_that_closes_is_read_not_reset() {
    let d = Running::start("", &[]);
    // The 413 comes before the body is read, and is read all the same; so is the 404 of an
    // unknown route sent a body.
    let large = large_check(256 * 1024);
    let mut unknown =
        b"POST /v1/nothing HTTP/1.1\r\nHost: x\r\ncontent-length: 32768\r\n\r\n".to_vec();
    unknown.resize(unknown.len() + 32_768, b'x');
    for endpoint in d.endpoints() {
        for (request, status) in [(&large, 413), (&unknown, 404)] {
            let tally = clients_at_once(&endpoint, 20, request).await;
            println!("{endpoint:?}: 20 clients expecting {status}: {tally:?}");
            assert_eq!(tally.answered, [status; 20], "{endpoint:?}: {tally:?}");
        }
    }
}

/// At the bound, sends a head declaring a huge body, then bytes (`chunk` every `every`) until
/// a write fails; what it sent, and what a reader of the same connection read meanwhile.
async fn send_until_cut(
    endpoint: Endpoint,
    chunk: usize,
    every: Duration,
) -> (u64, Duration, String) {
    let stream = endpoint.connect().await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let read = tokio::spawn(async move {
        let mut answer = Vec::new();
        let _ = reader.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    });
    let started = Instant::now();
    let mut sent = 0u64;
    let head = b"POST /v1/check HTTP/1.1\r\nHost: x\r\ncontent-length: 10000000000\r\n\r\n";
    if writer.write_all(head).await.is_ok() {
        let bytes = vec![b'x'; chunk];
        // A hang bound, not a measurement: the daemon cuts the client long before.
        while started.elapsed() < Duration::from_secs(60) {
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
            sent += chunk as u64;
            tokio::time::sleep(every).await;
        }
    }
    let took = started.elapsed();
    drop(writer);
    (sent, took, read.await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_stops_sending_is_cut_within_the_bounds() {
    let d = Running::start("max_connections = 1", &[]);
    let held = hold_served(&d, 1).await;
    for endpoint in d.endpoints() {
        let (fast, slow) = tokio::join!(
            send_until_cut(endpoint.clone(), 64 * 1024, Duration::ZERO),
            send_until_cut(endpoint.clone(), 1, Duration::from_millis(200)),
        );
        println!(
            "{endpoint:?}: a flood was cut after {} bytes ({:?}); a trickle after {} bytes ({:?})",
            fast.0, fast.1, slow.0, slow.1
        );
        for (sent, took, answer) in [&fast, &slow] {
            assert!(
                answer.contains("\"error\":\"overloaded\""),
                "{endpoint:?}: read {answer:?}"
            );
            assert!(*took < Duration::from_secs(60), "{endpoint:?}: never cut");
            // 1 MiB read, plus what the kernel buffers on both sides.
            assert!(*sent < 32 << 20, "{endpoint:?}: {sent} bytes sent");
        }
    }
    drop(held);
}
