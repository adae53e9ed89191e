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
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tempfile::TempDir;

mod proxies;
pub use proxies::{Caddy, Envoy, Nginx, Traefik};
pub mod certs;
mod proxy;
mod sentinel;
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

/// The hash tag of a Redis key (`{…}`), or the whole key when it has none.
fn hash_tag(key: &str) -> &str {
    key.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key)
}

/// A started cluster-enabled node `i` in its own folder under `dir`.
fn cluster_node(dir: &Path, i: usize) -> Node {
    let node_dir = dir.join(format!("node{i}"));
    if let Err(e) = std::fs::create_dir_all(&node_dir) {
        panic!("cannot create {}: {e}", node_dir.display());
    }
    let extra = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        &CLUSTER_NODE_TIMEOUT_MS.to_string(),
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut node = Node::new(free_port(), node_dir, extra);
    node.spawn();
    node
}

/// A Redis Cluster of 3 masters and 3 replicas (`cluster-node-timeout` 2000 ms).
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    _dir: TempDir,
}

/// The cluster node timeout the test cluster runs with.
pub const CLUSTER_NODE_TIMEOUT_MS: u64 = 2000;

impl RedisCluster {
    /// Starts six nodes, creates the cluster and waits until it is fully usable: every node
    /// reports `cluster_state:ok`, agrees on three masters, and every replica has synced.
    pub fn start() -> RedisCluster {
        RedisCluster::start_nodes(false)
    }

    /// Like [`start`](Self::start), plus a seventh node joined as a master that owns no slot
    /// (the target of [`migrate_slot`](Self::migrate_slot) and [`reshard`](Self::reshard));
    /// its index is [`SPARE`](Self::SPARE).
    pub fn start_with_spare() -> RedisCluster {
        RedisCluster::start_nodes(true)
    }

    /// Index of the spare master of [`start_with_spare`](Self::start_with_spare).
    pub const SPARE: usize = 6;

    fn start_nodes(spare: bool) -> RedisCluster {
        require_tools();
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => panic!("cannot create a temporary directory: {e}"),
        };
        let mut nodes = Vec::new();
        for i in 0..6 {
            nodes.push(cluster_node(dir.path(), i));
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        create
            .arg("--cluster-replicas")
            .arg("1")
            .arg("--cluster-yes")
            .stdin(Stdio::null());
        let out = match create.output() {
            Ok(out) => out,
            Err(e) => panic!("redis-cli --cluster create failed to run ({e}). {INSTALL_HINT}"),
        };
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut cluster = RedisCluster { nodes, _dir: dir };
        cluster.wait_healthy(Duration::from_secs(30));
        if spare {
            // Started only now: a node outside the cluster is not healthy.
            let node = cluster_node(cluster._dir.path(), Self::SPARE);
            cluster.nodes.push(node);
            let seed = format!("127.0.0.1:{}", cluster.nodes[0].port);
            let new = format!("127.0.0.1:{}", cluster.nodes[Self::SPARE].port);
            cluster.redis_cli_cluster(&["add-node", &new, &seed]);
            let id = cluster.node_id(Self::SPARE);
            wait_until(
                "every node to know the spare master",
                Duration::from_secs(30),
                || {
                    cluster.nodes.iter().all(|n| {
                        cli(n.port, &["CLUSTER", "NODES"])
                            .lines()
                            .any(|l| l.starts_with(&id) && l.contains("master"))
                    })
                },
            );
            cluster.wait_healthy(Duration::from_secs(30));
        }
        cluster
    }

    /// Runs `redis-cli --cluster ARGS…` and panics with its output unless it succeeds.
    fn redis_cli_cluster(&self, args: &[&str]) -> String {
        let out = match Command::new("redis-cli")
            .arg("--cluster")
            .args(args)
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) => out,
            Err(e) => panic!("redis-cli --cluster failed to run ({e}). {INSTALL_HINT}"),
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "redis-cli --cluster {args:?} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// The cluster node id of node `index` (`CLUSTER MYID`).
    pub fn node_id(&self, index: usize) -> String {
        cli(self.nodes[index].port, &["CLUSTER", "MYID"])
    }

    /// Moves `slot` to node `to` by hand, as `redis-cli --cluster reshard` does, but slowly:
    /// `SETSLOT IMPORTING` on the target and `MIGRATING` on the source, then the slot's keys
    /// one hash tag at a time with `MIGRATE … KEYS` and `pause` after each (clients in that
    /// time get ASK for the keys already moved), then `SETSLOT NODE` on the target, the source and every other
    /// master. Returns how many keys moved.
    pub fn migrate_slot(&self, slot: u16, to: usize, pause: Duration) -> usize {
        self.migrate_slot_in(slot, to, pause, true)
    }

    /// As [`migrate_slot`](Self::migrate_slot), but one key at a time, a hash tag's keys
    /// apart (as `redis-cli --cluster reshard` may, moving ten keys a MIGRATE whatever their
    /// tag): for `pause` after each key, a limit's keys are on two nodes.
    pub fn migrate_slot_key_by_key(&self, slot: u16, to: usize, pause: Duration) -> usize {
        self.migrate_slot_in(slot, to, pause, false)
    }

    fn migrate_slot_in(&self, slot: u16, to: usize, pause: Duration, by_tag: bool) -> usize {
        let from = self.master_of_slot(slot);
        assert_ne!(from, to, "slot {slot} is already on node {to}");
        let (src, dst) = (self.nodes[from].port, self.nodes[to].port);
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let slot_arg = slot.to_string();
        let ok = |answer: String, what: &str| assert_eq!(answer, "OK", "{what}");
        ok(
            cli(
                dst,
                &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from_id],
            ),
            "SETSLOT IMPORTING",
        );
        ok(
            cli(src, &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to_id]),
            "SETSLOT MIGRATING",
        );
        let mut moved = 0;
        loop {
            // The keys of one hash tag (all the keys of one limit) go in one MIGRATE: a
            // script over keys split between two nodes would get TRYAGAIN meanwhile.
            let keys = cli(src, &["CLUSTER", "GETKEYSINSLOT", &slot_arg, "1000"]);
            let Some(first) = keys.lines().find(|k| !k.is_empty()) else {
                break;
            };
            let tag = hash_tag(first);
            let group: Vec<&str> = if by_tag {
                keys.lines().filter(|k| hash_tag(k) == tag).collect()
            } else {
                vec![first]
            };
            let port = dst.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(&group);
            let answer = cli(src, &args);
            assert!(
                answer == "OK" || answer == "NOKEY",
                "MIGRATE {group:?}: {answer}"
            );
            moved += group.len();
            std::thread::sleep(pause);
        }
        // The target first, then the source, as redis-cli does: clients redirected by the
        // source then find the target already owning the slot.
        ok(
            cli(dst, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]),
            "SETSLOT NODE on the target",
        );
        ok(
            cli(src, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]),
            "SETSLOT NODE on the source",
        );
        for (i, node) in self.nodes.iter().enumerate() {
            if i != from && i != to && node.child.is_some() {
                let role = info_field(&cli(node.port, &["INFO", "replication"]), "role");
                if role.as_deref() == Some("master") {
                    cli(
                        node.port,
                        &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id],
                    );
                }
            }
        }
        moved
    }

    /// `redis-cli --cluster reshard` of `slots` slots from the other masters to node `to`,
    /// without asking; returns when it finished.
    pub fn reshard(&self, slots: u32, to: usize) {
        let seed = format!("127.0.0.1:{}", self.any_port());
        self.redis_cli_cluster(&[
            "reshard",
            &seed,
            "--cluster-from",
            "all",
            "--cluster-to",
            &self.node_id(to),
            "--cluster-slots",
            &slots.to_string(),
            "--cluster-yes",
            "--cluster-pipeline",
            "10",
        ]);
    }

    /// How many slots node `index` serves (from its `CLUSTER NODES` line).
    pub fn slots_of(&self, index: usize) -> u32 {
        let nodes = cli(self.nodes[index].port, &["CLUSTER", "NODES"]);
        let Some(myself) = nodes.lines().find(|l| l.contains("myself")) else {
            return 0;
        };
        myself
            .split_whitespace()
            .skip(8)
            .filter(|r| !r.starts_with('['))
            .map(|range| match range.split_once('-') {
                Some((lo, hi)) => match (lo.parse::<u32>(), hi.parse::<u32>()) {
                    (Ok(lo), Ok(hi)) => hi - lo + 1,
                    _ => 0,
                },
                None => u32::from(range.parse::<u32>().is_ok()),
            })
            .sum()
    }

    /// Waits until every replica of master `index` has applied everything the master wrote
    /// (replication is asynchronous: a write acknowledged by a master killed before its replica
    /// received it is lost on failover, as Redis documents).
    pub fn wait_replicated(&self, index: usize, limit: Duration) {
        let port = self.nodes[index].port;
        wait_until("replicas to catch up with their master", limit, || {
            let info = cli(port, &["INFO", "replication"]);
            let Some(offset) = info_field(&info, "master_repl_offset") else {
                return false;
            };
            let replicas: Vec<&str> = info
                .lines()
                .filter(|l| l.starts_with("slave") && l.contains("offset="))
                .collect();
            !replicas.is_empty()
                && replicas
                    .iter()
                    .all(|l| l.contains(&format!("offset={offset},")))
        });
    }

    /// Waits until every running node reports `cluster_state:ok`, sees three masters
    /// covering all slots, and every running replica's link to its master is up.
    pub fn wait_healthy(&self, limit: Duration) {
        wait_until("the cluster to be healthy", limit, || self.healthy());
    }

    fn healthy(&self) -> bool {
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
            let info = cli(node.port, &["CLUSTER", "INFO"]);
            if info_field(&info, "cluster_state").as_deref() != Some("ok")
                || info_field(&info, "cluster_slots_ok").as_deref() != Some("16384")
            {
                return false;
            }
            let repl = cli(node.port, &["INFO", "replication"]);
            match info_field(&repl, "role").as_deref() {
                Some("slave") => {
                    if info_field(&repl, "master_link_status").as_deref() != Some("up") {
                        return false;
                    }
                }
                Some("master") => {}
                _ => return false,
            }
        }
        true
    }

    /// Seed URLs of every node (`redis://127.0.0.1:PORT`).
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// A port of a running node.
    pub fn any_port(&self) -> u16 {
        self.nodes
            .iter()
            .find(|n| n.child.is_some())
            .map(|n| n.port)
            .unwrap_or_else(|| panic!("no cluster node is running"))
    }

    /// `redis-cli -c` against a running node (follows redirections).
    pub fn cli(&self, args: &[&str]) -> String {
        cluster_cli(self.any_port(), args)
    }

    /// `CLUSTER KEYSLOT key`, as the server computes it.
    pub fn keyslot(&self, key: &str) -> u16 {
        let answer = cli(self.any_port(), &["CLUSTER", "KEYSLOT", key]);
        match answer.trim().parse() {
            Ok(slot) => slot,
            Err(_) => panic!("CLUSTER KEYSLOT {key:?} answered {answer:?}"),
        }
    }

    /// Index (into [`ports`](Self::ports)) of the running master serving `slot`.
    pub fn master_of_slot(&self, slot: u16) -> usize {
        for (i, node) in self.nodes.iter().enumerate() {
            if node.child.is_none() {
                continue;
            }
            let repl = cli(node.port, &["INFO", "replication"]);
            if info_field(&repl, "role").as_deref() != Some("master") {
                continue;
            }
            let nodes = cli(node.port, &["CLUSTER", "NODES"]);
            let Some(myself) = nodes.lines().find(|l| l.contains("myself")) else {
                continue;
            };
            for range in myself.split_whitespace().skip(8) {
                let (lo, hi) = match range.split_once('-') {
                    Some((lo, hi)) => (lo.parse::<u16>(), hi.parse::<u16>()),
                    None => (range.parse::<u16>(), range.parse::<u16>()),
                };
                if let (Ok(lo), Ok(hi)) = (lo, hi)
                    && (lo..=hi).contains(&slot)
                {
                    return i;
                }
            }
        }
        panic!("no running master serves slot {slot}");
    }

    /// `kill -9` node `index`.
    pub fn kill(&mut self, index: usize) {
        self.nodes[index].kill();
    }

    /// `kill -STOP` node `index`: it keeps its sockets open but answers nothing. Resume it
    /// before the cluster's node timeout, or its replica takes over.
    pub fn pause(&self, index: usize) {
        assert!(self.nodes[index].signal("STOP"), "kill -STOP failed");
    }

    /// `kill -CONT` node `index` after [`pause`](Self::pause).
    pub fn resume(&self, index: usize) {
        assert!(self.nodes[index].signal("CONT"), "kill -CONT failed");
    }

    /// Starts node `index` again on its port, with its cluster config (it rejoins).
    pub fn restart(&mut self, index: usize) {
        self.nodes[index].kill();
        self.nodes[index].spawn();
    }

    /// Directory of node `index` (its `redis.log` is there).
    pub fn node_dir(&self, index: usize) -> &Path {
        &self.nodes[index].dir
    }
}
