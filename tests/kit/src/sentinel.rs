//! A Redis master, one replica and three `redis-sentinel`s monitoring them (quorum 2), on
//! free loopback ports: the failovers a Sentinel client must follow, made for real
//! (`SENTINEL FAILOVER`, a killed or paused master). Optionally with passwords (the master's,
//! and the sentinels' own) and TLS everywhere (clients, replication, sentinels).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::certs::Certs;
use crate::tls_server::{tls_cli_args, tls_node_args};
use crate::{Node, free_port, require_tools, wait_until};

/// Sentinel's `down-after-milliseconds` here: how long a master must not answer before the
/// sentinels fail it over.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// What the servers and sentinels are started with.
#[derive(Debug, Default, Clone, Copy)]
pub struct SentinelSetup<'a> {
    /// The master's (and replica's) `requirepass`.
    pub password: Option<&'a str>,
    /// The sentinels' own `requirepass`.
    pub sentinel_password: Option<&'a str>,
    /// TLS only, everywhere, with these certificates (client certificates required).
    pub tls: Option<&'a Certs>,
}

/// See the module doc. Everything is killed when dropped.
#[derive(Debug)]
pub struct RedisSentinels {
    /// The name the sentinels monitor the master under.
    pub master_name: String,
    servers: Vec<Node>,
    sentinels: Vec<Node>,
    tls: bool,
    sentinel_password: Option<String>,
    _dir: TempDir,
}

/// `redis-cli`'s arguments for a node: `common` (TLS), and AUTH with `password` if any.
fn cli_args(common: &[String], password: Option<&str>) -> Vec<String> {
    let mut args = common.to_vec();
    if let Some(password) = password {
        args.extend(["-a".into(), password.into(), "--no-auth-warning".into()]);
    }
    args
}

impl RedisSentinels {
    /// Plain TCP, no passwords.
    pub fn start() -> RedisSentinels {
        RedisSentinels::start_with(SentinelSetup::default())
    }

    /// Starts the master, the replica and the sentinels, and waits until every sentinel
    /// knows the replica and the other two sentinels (so a failover can be agreed).
    pub fn start_with(setup: SentinelSetup<'_>) -> RedisSentinels {
        require_tools();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let master_name = "sluicemaster".to_owned();
        let mut common_cli = Vec::new();
        if let Some(certs) = setup.tls {
            common_cli = tls_cli_args(certs);
        }
        let node_dir = |name: &str| -> PathBuf {
            let path = dir.path().join(name);
            std::fs::create_dir_all(&path).expect("a node directory");
            path
        };
        let mut servers = Vec::new();
        let master_port = free_port();
        for i in 0..2 {
            let port = if i == 0 { master_port } else { free_port() };
            let mut extra = Vec::new();
            if let Some(certs) = setup.tls {
                extra.extend(tls_node_args(certs, port));
            }
            if let Some(password) = setup.password {
                extra.extend(["--requirepass".into(), password.into()]);
                extra.extend(["--masterauth".into(), password.into()]);
            }
            if i == 1 {
                extra.extend([
                    "--replicaof".into(),
                    "127.0.0.1".into(),
                    master_port.to_string(),
                ]);
            }
            let mut node = Node::new(port, node_dir(&format!("server{i}")), extra);
            node.cli_args = cli_args(&common_cli, setup.password);
            node.spawn();
            servers.push(node);
        }
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let port = free_port();
            let path = node_dir(&format!("sentinel{i}"));
            let mut conf = format!(
                "sentinel monitor {master_name} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {master_name} {}\n\
                 sentinel failover-timeout {master_name} 10000\n\
                 sentinel parallel-syncs {master_name} 1\n",
                DOWN_AFTER.as_millis()
            );
            if let Some(password) = setup.password {
                conf += &format!("sentinel auth-pass {master_name} {password}\n");
            }
            if let Some(password) = setup.sentinel_password {
                conf += &format!("requirepass {password}\nsentinel sentinel-pass {password}\n");
            }
            let conf_file = path.join("sentinel.conf");
            std::fs::write(&conf_file, conf).expect("writing sentinel.conf");
            let mut extra = Vec::new();
            if let Some(certs) = setup.tls {
                extra.extend(tls_node_args(certs, port));
            }
            let mut node = Node::new(port, path, extra);
            node.sentinel_conf = Some(conf_file);
            node.cli_args = cli_args(&common_cli, setup.sentinel_password);
            node.spawn();
            sentinels.push(node);
        }
        let group = RedisSentinels {
            master_name,
            servers,
            sentinels,
            tls: setup.tls.is_some(),
            sentinel_password: setup.sentinel_password.map(str::to_owned),
            _dir: dir,
        };
        wait_until(
            "every sentinel to know the replica and the other sentinels",
            Duration::from_secs(30),
            || {
                group.sentinels.iter().all(|sentinel| {
                    let info = sentinel.cli(&["SENTINEL", "MASTER", &group.master_name]);
                    let field = |name: &str| {
                        let mut lines = info.lines();
                        lines.find(|line| line.trim() == name)?;
                        lines.next().map(|v| v.trim().to_owned())
                    };
                    field("num-slaves").as_deref() == Some("1")
                        && field("num-other-sentinels").as_deref() == Some("2")
                })
            },
        );
        group.wait_replicated(Duration::from_secs(20));
        group
    }

    /// The sentinels' URLs, each with its password when they have one (`rediss://` with TLS).
    pub fn sentinel_urls(&self) -> Vec<String> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let auth = self
            .sentinel_password
            .as_ref()
            .map(|password| format!(":{password}@"))
            .unwrap_or_default();
        self.sentinels
            .iter()
            .map(|node| format!("{scheme}://{auth}127.0.0.1:{}", node.port))
            .collect()
    }

    /// The port of the master the first sentinel that answers names.
    pub fn master_port(&self) -> u16 {
        self.sentinels
            .iter()
            .filter(|node| node.child.is_some())
            .find_map(|node| {
                let answer = node.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.master_name]);
                answer.lines().nth(1)?.trim().parse().ok()
            })
            .expect("a sentinel names the master")
    }

    fn server(&self, port: u16) -> &Node {
        self.servers
            .iter()
            .find(|node| node.port == port)
            .unwrap_or_else(|| panic!("no server on port {port}"))
    }

    /// `redis-cli` against the server on `port` (with its TLS and password).
    pub fn server_cli(&self, port: u16, args: &[&str]) -> String {
        self.server(port).cli(args)
    }

    /// `redis-cli` against sentinel `index`.
    pub fn sentinel_cli(&self, index: usize, args: &[&str]) -> String {
        self.sentinels[index].cli(args)
    }

    /// Waits until the replica has everything the master wrote (`WAIT 1`).
    pub fn wait_replicated(&self, limit: Duration) {
        let master = self.master_port();
        wait_until("the replica to catch up", limit, || {
            self.server_cli(master, &["WAIT", "1", "500"]).trim() == "1"
        });
    }

    /// `SENTINEL FAILOVER`: the sentinels promote the replica without waiting for agreement.
    pub fn failover(&self) {
        let answer = self.sentinel_cli(0, &["SENTINEL", "FAILOVER", &self.master_name]);
        assert_eq!(answer.trim(), "OK", "SENTINEL FAILOVER answered {answer:?}");
    }

    /// Waits until every running sentinel names a master other than `old`; the new port and
    /// when the last of them switched.
    pub fn wait_master_moved(&self, old: u16, limit: Duration) -> (u16, Instant) {
        let mut new = 0;
        wait_until("the sentinels to name a new master", limit, || {
            let named: Vec<Option<u16>> = self
                .sentinels
                .iter()
                .filter(|node| node.child.is_some())
                .map(|node| {
                    let answer =
                        node.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.master_name]);
                    answer.lines().nth(1)?.trim().parse().ok()
                })
                .collect();
            match named.first() {
                Some(Some(port)) if *port != old && named.iter().all(|n| *n == Some(*port)) => {
                    new = *port;
                    true
                }
                _ => false,
            }
        });
        (new, Instant::now())
    }

    /// SIGKILL of the server on `port`.
    pub fn kill_server(&mut self, port: u16) {
        if let Some(node) = self.servers.iter_mut().find(|node| node.port == port) {
            node.kill();
        }
    }

    /// SIGSTOP of the server on `port` (it keeps its sockets, answers nothing).
    pub fn pause_server(&self, port: u16) {
        assert!(self.server(port).signal("STOP"), "kill -STOP failed");
    }

    /// SIGCONT after [`pause_server`](Self::pause_server).
    pub fn resume_server(&self, port: u16) {
        assert!(self.server(port).signal("CONT"), "kill -CONT failed");
    }

    /// SIGKILL of sentinel `index`.
    pub fn kill_sentinel(&mut self, index: usize) {
        self.sentinels[index].kill();
    }
}
