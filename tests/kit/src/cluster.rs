//! A Redis Cluster of 3 masters and 3 replicas (and a spare master to reshard onto) on free
//! loopback ports, plain TCP or TLS only (`--tls-cluster yes`), with the failovers and
//! reshards the cluster tests make.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::certs::Certs;
use crate::tls_server::{tls_cli_args, tls_node_args};
use crate::{INSTALL_HINT, Node, cluster_cli, free_port, info_field, require_tools, wait_until};

/// The hash tag of a Redis key (`{…}`), or the whole key when it has none.
fn hash_tag(key: &str) -> &str {
    key.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key)
}

/// A started cluster-enabled node `i` in its own folder under `dir`, TLS only (bus and
/// replication included) with `tls`.
fn cluster_node(dir: &Path, i: usize, tls: Option<&Certs>) -> Node {
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
    .collect::<Vec<_>>();
    let port = free_port();
    let mut extra = extra;
    if let Some(certs) = tls {
        extra.extend(tls_node_args(certs, port));
        extra.extend(["--tls-cluster".into(), "yes".into()]);
    }
    let mut node = Node::new(port, node_dir, extra);
    if let Some(certs) = tls {
        node.cli_args = tls_cli_args(certs);
    }
    node.spawn();
    node
}

/// A Redis Cluster of 3 masters and 3 replicas (`cluster-node-timeout` 2000 ms).
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    /// TLS only: the `redis-cli` arguments that reach the nodes (`--tls`, the certificates);
    /// the nodes' URLs are `rediss://`.
    tls: Option<Vec<String>>,
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

    /// A cluster that speaks TLS only (clients, bus, replication), requiring client
    /// certificates of `certs`' CA.
    pub fn start_tls(certs: &Certs) -> RedisCluster {
        RedisCluster::start_nodes_with(false, Some(certs))
    }

    /// [`start_with_spare`](Self::start_with_spare) over TLS only, as
    /// [`start_tls`](Self::start_tls): the spare master too, and `redis-cli --cluster` (add-node,
    /// reshard) speaks TLS to every node.
    pub fn start_tls_with_spare(certs: &Certs) -> RedisCluster {
        RedisCluster::start_nodes_with(true, Some(certs))
    }

    fn start_nodes(spare: bool) -> RedisCluster {
        RedisCluster::start_nodes_with(spare, None)
    }

    fn start_nodes_with(spare: bool, tls: Option<&Certs>) -> RedisCluster {
        require_tools();
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => panic!("cannot create a temporary directory: {e}"),
        };
        let mut nodes = Vec::new();
        for i in 0..6 {
            nodes.push(cluster_node(dir.path(), i, tls));
        }
        let mut create = Command::new("redis-cli");
        if let Some(certs) = tls {
            create.args(tls_cli_args(certs));
        }
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
        let mut cluster = RedisCluster {
            nodes,
            tls: tls.map(tls_cli_args),
            _dir: dir,
        };
        cluster.wait_healthy(Duration::from_secs(30));
        if spare {
            // Started only now: a node outside the cluster is not healthy.
            let node = cluster_node(cluster._dir.path(), Self::SPARE, tls);
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
                        n.cli(&["CLUSTER", "NODES"])
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
            .args(self.tls.iter().flatten())
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
        self.nodes[index].cli(&["CLUSTER", "MYID"])
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
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let slot_arg = slot.to_string();
        let ok = |answer: String, what: &str| assert_eq!(answer, "OK", "{what}");
        ok(
            dst.cli(&["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from_id]),
            "SETSLOT IMPORTING",
        );
        ok(
            src.cli(&["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to_id]),
            "SETSLOT MIGRATING",
        );
        let mut moved = 0;
        loop {
            // The keys of one hash tag (all the keys of one limit) go in one MIGRATE: a
            // script over keys split between two nodes would get TRYAGAIN meanwhile.
            let keys = src.cli(&["CLUSTER", "GETKEYSINSLOT", &slot_arg, "1000"]);
            let Some(first) = keys.lines().find(|k| !k.is_empty()) else {
                break;
            };
            let tag = hash_tag(first);
            let group: Vec<&str> = if by_tag {
                keys.lines().filter(|k| hash_tag(k) == tag).collect()
            } else {
                vec![first]
            };
            let port = dst.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(&group);
            let answer = src.cli(&args);
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
            dst.cli(&["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]),
            "SETSLOT NODE on the target",
        );
        ok(
            src.cli(&["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]),
            "SETSLOT NODE on the source",
        );
        for (i, node) in self.nodes.iter().enumerate() {
            if i != from && i != to && node.child.is_some() {
                let role = info_field(&node.cli(&["INFO", "replication"]), "role");
                if role.as_deref() == Some("master") {
                    node.cli(&["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]);
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
        let nodes = self.nodes[index].cli(&["CLUSTER", "NODES"]);
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
        let node = &self.nodes[index];
        wait_until("replicas to catch up with their master", limit, || {
            let info = node.cli(&["INFO", "replication"]);
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
            let info = node.cli(&["CLUSTER", "INFO"]);
            if info_field(&info, "cluster_state").as_deref() != Some("ok")
                || info_field(&info, "cluster_slots_ok").as_deref() != Some("16384")
            {
                return false;
            }
            let repl = node.cli(&["INFO", "replication"]);
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

    /// Seed URLs of every node (`redis://127.0.0.1:PORT`, `rediss://` when TLS only).
    pub fn urls(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        self.nodes
            .iter()
            .map(|n| format!("{scheme}://127.0.0.1:{}", n.port))
            .collect()
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// A port of a running node.
    pub fn any_port(&self) -> u16 {
        self.any_node().port
    }

    fn any_node(&self) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.child.is_some())
            .unwrap_or_else(|| panic!("no cluster node is running"))
    }

    /// `redis-cli -c` against a running node (follows redirections).
    pub fn cli(&self, args: &[&str]) -> String {
        let node = self.any_node();
        let mut all: Vec<&str> = node.cli_args.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        cluster_cli(node.port, &all)
    }

    /// `CLUSTER KEYSLOT key`, as the server computes it.
    pub fn keyslot(&self, key: &str) -> u16 {
        let answer = self.any_node().cli(&["CLUSTER", "KEYSLOT", key]);
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
            let repl = node.cli(&["INFO", "replication"]);
            if info_field(&repl, "role").as_deref() != Some("master") {
                continue;
            }
            let nodes = node.cli(&["CLUSTER", "NODES"]);
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
