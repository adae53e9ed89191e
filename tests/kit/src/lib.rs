//! Test support: starts real servers (redis-server, a 6-node Redis Cluster, Envoy, nginx,
//! Caddy, Traefik) for tests.
//!
//! Every server listens on a free loopback port in its own temporary directory, without
//! persistence, and is killed when its handle is dropped. Nothing here assumes a server on
//! 6379, and nothing skips: when `redis-server` is not installed the helpers panic with the
//! command that installs it.
//!
//! Inspection goes through `redis-cli` (`cli`, `cluster_cli`), so this crate needs no Redis
//! client library of its own.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tempfile::TempDir;

mod proxies;
pub use proxies::{Caddy, Envoy, Nginx, Traefik};
pub mod certs;
mod cluster;
mod proxy;
mod sentinel;
pub use cluster::{CLUSTER_NODE_TIMEOUT_MS, RedisCluster};
mod tls_server;
pub use proxy::{LatencyProxy, Partition};
pub use sentinel::{RedisSentinels, SentinelSetup};

const INSTALL_HINT: &str = "redis-server / redis-cli not found: install them with \
    `apt-get install -y redis-server redis-tools` (Debian/Ubuntu); the Redis tests never skip";

/// Ports handed out by this process, each with its lock file held (and locked) until the
/// process exits: two servers started concurrently never race for one, in this process or in
/// another test process on the machine (test binaries run side by side).
static TAKEN: Mutex<Vec<(u16, std::fs::File)>> = Mutex::new(Vec::new());

/// Claims `port` for this process: its lock file under the temporary directory, locked
/// (`flock`) until the process exits, which the kernel releases even after a crash.
fn claim(port: u16) -> Option<std::fs::File> {
    let dir = std::env::temp_dir().join("sluice-test-ports");
    std::fs::create_dir_all(&dir).ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
        .ok()?;
    file.try_lock().ok()?;
    Some(file)
}

/// `promtool check metrics` on `text`: `Err` with its output when it refuses the exposition.
///
/// # Panics
/// When promtool (Debian package `prometheus`) cannot run: the tests that call this need it.
pub fn promtool_check_metrics(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) is needed by the tests");
    if let Some(mut stdin) = promtool.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .expect("promtool reads the exposition");
    }
    let out = promtool
        .wait_with_output()
        .expect("promtool check metrics ends");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr))
    }
}

/// Whether `program` runs (`program ARGS`, e.g. `--version`). A test that needs a missing
/// tool fails when `CI` is set, naming how to install it (`install`): CI never counts a
/// skipped check as passed; elsewhere it says it is skipped.
pub fn tool_available(program: &str, args: &[&str], install: &str) -> bool {
    let found = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is missing ({install})"
        );
        eprintln!("skipped: {program} is missing ({install})");
    }
    found
}

fn require_tools() {
    for tool in ["redis-server", "redis-cli"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(found, "{INSTALL_HINT}");
    }
}

fn port_free(port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// A free loopback port whose cluster bus port (`port + 10000`) is free as well.
pub fn free_port() -> u16 {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let port = match TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)) {
            Ok(listener) => match listener.local_addr() {
                Ok(addr) => addr.port(),
                Err(_) => continue,
            },
            Err(_) => continue,
        };
        if port >= 55_000
            || taken.iter().any(|(held, _)| *held == port)
            || !port_free(port + 10_000)
        {
            continue;
        }
        let Some(lock) = claim(port) else { continue };
        taken.push((port, lock));
        return port;
    }
    panic!("no free loopback port found");
}

/// Runs `redis-cli -p PORT ARGS…` and returns its stdout (trimmed of the final newline).
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = cli_output(port, false, args);
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// Like [`cli`] but following cluster redirections (`redis-cli -c`).
pub fn cluster_cli(port: u16, args: &[&str]) -> String {
    let out = cli_output(port, true, args);
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

fn cli_output(port: u16, follow: bool, args: &[&str]) -> Output {
    let mut cmd = Command::new("redis-cli");
    cmd.arg("-h")
        .arg("127.0.0.1")
        .arg("-p")
        .arg(port.to_string());
    if follow {
        cmd.arg("-c");
    }
    cmd.args(args);
    match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("running redis-cli failed ({e}). {INSTALL_HINT}"),
    }
}

/// The value of `field` in an `INFO` answer (`field:value` lines).
pub fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        line.trim()
            .strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::to_owned)
    })
}

pub(crate) fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `redis-server` process (a standalone server or a cluster node).
#[derive(Debug)]
struct Node {
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    /// What `redis-cli` needs to reach it besides the port (`--tls`, certificates).
    cli_args: Vec<String>,
    /// A sentinel's config file (which it rewrites): the node is `redis-sentinel` on it.
    sentinel_conf: Option<PathBuf>,
    child: Option<Child>,
}

impl Node {
    fn new(port: u16, dir: PathBuf, extra: Vec<String>) -> Node {
        Node {
            port,
            dir,
            extra,
            cli_args: Vec::new(),
            sentinel_conf: None,
            child: None,
        }
    }

    fn spawn(&mut self) {
        let mut cmd = match &self.sentinel_conf {
            Some(conf) => {
                let mut cmd = Command::new("redis-sentinel");
                cmd.arg(conf);
                cmd
            }
            None => {
                let mut cmd = Command::new("redis-server");
                cmd.arg("--save").arg("").arg("--appendonly").arg("no");
                cmd
            }
        };
        cmd.current_dir(&self.dir)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--daemonize")
            .arg("no")
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => panic!(
                "starting {} failed ({e}). {INSTALL_HINT}",
                if self.sentinel_conf.is_some() {
                    "redis-sentinel (apt-get install -y redis-sentinel)"
                } else {
                    "redis-server"
                }
            ),
        };
        self.child = Some(child);
        let port = self.port;
        let log = self.dir.join("redis.log");
        wait_until(
            &format!("redis-server on port {port} to answer PING"),
            Duration::from_secs(10),
            || {
                if let Some(child) = self.child.as_mut()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    let log = std::fs::read_to_string(&log).unwrap_or_default();
                    panic!("redis-server on port {port} exited ({status}):\n{log}");
                }
                self.cli(&["PING"]) == "PONG"
            },
        );
    }

    fn cli(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = self.cli_args.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        cli(self.port, &all)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL: the process gets no chance to say goodbye to its clients.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` with `kill`; whether it was delivered.
    fn signal(&self, signal: &str) -> bool {
        self.child.as_ref().is_some_and(|child| {
            Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(child.id().to_string())
                .status()
                .is_ok_and(|s| s.success())
        })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.signal("CONT");
        self.kill();
    }
}

/// A standalone `redis-server` on a free loopback port, without persistence.
#[derive(Debug)]
pub struct RedisServer {
    node: Node,
    _dir: TempDir,
}

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        RedisServer::start_on(free_port())
    }

    /// Starts a server on `port` (one a daemon was pointed at before Redis was up) and waits
    /// until it answers `PING`.
    pub fn start_on(port: u16) -> RedisServer {
        require_tools();
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => panic!("cannot create a temporary directory: {e}"),
        };
        let mut node = Node::new(port, dir.path().to_owned(), Vec::new());
        node.spawn();
        RedisServer { node, _dir: dir }
    }

    pub fn port(&self) -> u16 {
        self.node.port
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.node.port)
    }

    /// `redis-cli` against this server.
    pub fn cli(&self, args: &[&str]) -> String {
        self.node.cli(args)
    }

    /// `kill -9` the server: its data and script cache are gone.
    pub fn kill(&mut self) {
        self.node.kill();
    }

    /// Starts the server again on the same port (empty, after [`kill`](Self::kill)).
    pub fn restart(&mut self) {
        self.node.kill();
        self.node.spawn();
    }

    /// `kill -STOP`: the server keeps its sockets open but answers nothing (a hung server).
    pub fn pause(&self) {
        assert!(self.node.signal("STOP"), "kill -STOP failed");
    }

    /// `kill -CONT` after [`pause`](Self::pause).
    pub fn resume(&self) {
        assert!(self.node.signal("CONT"), "kill -CONT failed");
    }
}
