//! The real `sluiced` serving `listen.resp`: on a Unix socket and on TCP, replacing a stale
//! socket file, handed over by the service manager (`systemd-socket-activate`, fd name
//! `resp`), refusing past `listen.max_connections` with Redis' own error, closing slow and idle
//! connections at the `[listen]` deadlines, and stopping on SIGTERM with RESP clients
//! connected: the command in flight is answered, every connection closed, the socket removed.
//! The bounds on time are generous ones (a hang, not a measurement).

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_testkit::RedisServer;

mod common;

use common::{BIN, second_daemon_refused, spawn_on, wait_for_socket};

const POLICIES: &str = r#"
[policies.p]
algorithm = "fixed_window"
limit = 3
window = "1h"

[policies.open]
algorithm = "fixed_window"
limit = 1000
window = "1h"
fail = "open"
"#;

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const CHECK_OPEN: &[u8] = b"*3\r\n$12\r\nSLUICE.CHECK\r\n$4\r\nopen\r\n$1\r\nk\r\n";

/// A `sluiced` with `listen.resp` on `dir/resp.sock`, killed when dropped.
struct Running {
    child: Child,
    http_socket: PathBuf,
    resp_socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Running {
    /// Started with more `[listen]` keys and the rest of the config after `[listen]`.
    fn start(listen: &str, rest: &str) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let (config, http_socket, resp_socket) = write_config(dir.path(), listen, rest);
        let child = spawn(&config);
        wait_for_socket(&resp_socket);
        Running {
            child,
            http_socket,
            resp_socket,
            _dir: dir,
        }
    }

    fn connect(&self) -> UnixStream {
        let stream = UnixStream::connect(&self.resp_socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    }

    fn signal(&self, name: &str) {
        common::signal(&self.child, name);
    }

    fn exit_within(&mut self, within: Duration) -> std::process::ExitStatus {
        common::exit_within(&mut self.child, within)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config file: HTTP on `dir/d.sock`, RESP on `dir/resp.sock`, then `listen` and `rest`.
fn write_config(dir: &Path, listen: &str, rest: &str) -> (PathBuf, PathBuf, PathBuf) {
    let resp_socket = dir.join("resp.sock");
    let resp = format!("unix:{}", resp_socket.display());
    let (config, http_socket) = write_config_on(dir, &resp, listen, rest);
    (config, http_socket, resp_socket)
}

/// The config file with `listen.resp = resp`; the file and the HTTP socket.
fn write_config_on(dir: &Path, resp: &str, listen: &str, rest: &str) -> (PathBuf, PathBuf) {
    let http_socket = dir.join("d.sock");
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[listen]\nunix = {:?}\nhttp = \"\"\nresp = {resp:?}\nunix_mode = \"0600\"\n\
             {listen}\n{rest}\n{POLICIES}",
            http_socket.display().to_string(),
        ),
    )
    .unwrap();
    (config, http_socket)
}

fn spawn(config: &Path) -> Child {
    spawn_on(Command::new(BIN), config)
}

/// Sends `request` and reads one reply of `len` bytes.
fn exchange(stream: &mut UnixStream, request: &[u8], len: usize) -> String {
    stream.write_all(request).unwrap();
    let mut reply = vec![0u8; len];
    stream.read_exact(&mut reply).unwrap();
    String::from_utf8(reply).unwrap()
}

/// Whether the daemon closed `stream` (an end, or a reset), waiting up to 10 s.
fn closed(stream: &mut UnixStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(err) => !matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

fn redis_cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli").args(args).output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn resp_replaces_a_stale_socket_keeps_its_file_mode_and_refuses_a_second_daemon() {
    let dir = tempfile::tempdir().unwrap();
    // A socket file nobody listens on, as a crashed daemon leaves it.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let resp = format!("unix:{}", stale.display());
    let (config, _) = write_config_on(dir.path(), &resp, "", "");
    let mut child = spawn(&config);
    wait_for_socket(&stale);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&stale).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let sock = stale.display().to_string();
    // [allowed, limit, remaining, reset, retry_after, delay_ms, degraded]; reset is the
    // wall clock's.
    let answer = redis_cli(&["-s", &sock, "SLUICE.CHECK", "p", "u"]);
    let fields: Vec<&str> = answer.lines().collect();
    assert_eq!(
        (&fields[..3], &fields[4..]),
        (&["1", "3", "2"][..], &["0", "0", "0"][..]),
        "{answer}"
    );
    // A second daemon on the same RESP socket is refused, and leaves it serving.
    second_daemon_refused(&config);
    assert_eq!(redis_cli(&["-s", &sock, "PING"]).trim(), "PONG");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn resp_serves_on_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (config, http_socket) = write_config_on(dir.path(), &format!("127.0.0.1:{port}"), "", "");
    let mut child = spawn(&config);
    wait_for_socket(&http_socket);
    let port = port.to_string();
    assert_eq!(
        redis_cli(&["-p", &port, "CL.THROTTLE", "user123", "15", "30", "60", "1"]),
        "0\n16\n15\n-1\n2\n"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn check_config_names_a_bad_listen_resp() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _, _) = write_config(dir.path(), "", "");
    let text = std::fs::read_to_string(&config).unwrap();
    let bad = dir.path().join("bad.toml");
    let resp_line = text.lines().find(|l| l.starts_with("resp = ")).unwrap();
    std::fs::write(&bad, text.replace(resp_line, "resp = \"localhost\"")).unwrap();
    let out = common::check_config(&bad);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("listen.resp"), "{stderr}");
    let good = common::check_config(&config);
    assert_eq!(good.status.code(), Some(0));
}

#[test]
fn a_handed_over_socket_named_resp_is_served_and_left_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _, _) = write_config(dir.path(), "", "");
    let handed = dir.path().join("handed.sock");
    let mut activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&handed)
        .arg("--fdname=resp")
        .arg(BIN)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate (apt-get install -y systemd)");
    wait_for_socket(&handed);
    let sock = handed.display().to_string();
    let mut answer = String::new();
    for _ in 0..250 {
        answer = redis_cli(&["-s", &sock, "PING"]);
        if answer.trim() == "PONG" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(answer.trim(), "PONG");
    // The configured RESP socket is not bound: the handed-over one replaces it.
    assert!(!dir.path().join("resp.sock").exists());
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(activator.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let _ = activator.wait();
    assert!(handed.exists(), "the manager's socket stays");
}

#[test]
fn past_max_connections_a_resp_client_gets_redis_error_and_is_closed() {
    let d = Running::start("max_connections = 2", "");
    // Admitted once the start-up probe's connection is gone.
    let _first = admitted(&d);
    let _second = admitted(&d);
    let mut third = d.connect();
    let mut refused = String::new();
    third.read_to_string(&mut refused).unwrap();
    assert_eq!(refused, "-ERR max number of clients reached\r\n");
    drop(_first);
    // A freed slot admits again.
    admitted(&d);
}

/// A connection that got past the bound (it answers PING), retried while the daemon
/// still counts a connection just closed.
fn admitted(d: &Running) -> UnixStream {
    for _ in 0..100 {
        let mut stream = d.connect();
        stream.write_all(PING).unwrap();
        let mut reply = [0u8; 7];
        if stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n" {
            return stream;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no connection admitted");
}

#[test]
fn a_slow_frame_is_closed_at_the_header_timeout_and_an_idle_client_at_the_idle_timeout() {
    let d = Running::start("header_timeout = \"1s\"\nidle_timeout = \"2s\"", "");
    let started = Instant::now();
    let mut slow = d.connect();
    slow.write_all(b"*3\r\n$12\r\nSLUICE.CH").unwrap();
    let mut idle = d.connect();
    assert_eq!(exchange(&mut idle, PING, 7), "+PONG\r\n");
    assert!(closed(&mut slow));
    let slow_after = started.elapsed();
    assert!(closed(&mut idle));
    let idle_after = started.elapsed();
    assert!(
        slow_after < Duration::from_secs(6) && idle_after < Duration::from_secs(8),
        "{slow_after:?} {idle_after:?}"
    );
    assert!(idle_after >= Duration::from_secs(1), "{idle_after:?}");
}

#[test]
fn sigterm_answers_the_command_in_flight_then_closes_every_resp_client() {
    let redis = RedisServer::start();
    let d = Running::start(
        "",
        &format!(
            "[backend]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"2s\"\n",
            redis.url()
        ),
    );
    let mut d = d;
    let mut idle = d.connect();
    assert_eq!(exchange(&mut idle, PING, 7), "+PONG\r\n");
    let mut partial = d.connect();
    partial.write_all(b"*2\r\n$4\r\nECHO").unwrap();
    let mut busy = d.connect();
    // Warm the Redis connection, then hang Redis: the next check waits for the timeout.
    busy.write_all(CHECK_OPEN).unwrap();
    // One array of 7 integers: 8 lines.
    let mut warm = Vec::new();
    let mut byte = [0u8; 1];
    while warm.iter().filter(|&&b| b == b'\n').count() < 8 {
        busy.read_exact(&mut byte).unwrap();
        warm.push(byte[0]);
    }
    redis.pause();
    busy.write_all(CHECK_OPEN).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    d.signal("TERM");
    // The check in flight is answered (degraded: the backend timed out), then the close.
    let mut answer = String::new();
    busy.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("*7\r\n:1\r\n") && answer.ends_with(":1\r\n"),
        "{answer}"
    );
    assert!(closed(&mut idle));
    assert!(closed(&mut partial));
    let status = d.exit_within(Duration::from_secs(10));
    redis.resume();
    assert!(status.success(), "{status}");
    assert!(!d.resp_socket.exists());
    assert!(!d.http_socket.exists());
}
