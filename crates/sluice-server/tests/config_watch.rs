//! The real `sluiced` picks up a changed config file without a signal: an edit in place, and
//! the `..data` symlink swap kubelet does on a ConfigMap volume; a bad edit keeps the running
//! config and says why.

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sluice_api::CheckRequest;
use sluice_client::Client;

mod common;

use common::{BIN, limit_of, metrics, wait_for_socket};

const ONE: &str = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\n";
const THREE: &str = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1h\"\n";
const FIVE: &str = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1h\"\n";
const BAD: &str = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"1h\"\n";

/// A bound on a hang, far above the watch's debounce: no claim on how fast a reload is.
const PATIENCE: Duration = Duration::from_secs(30);

/// A `sluiced` started on `config` (a path that may be a symlink), its log kept, killed on drop.
struct Running {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Running {
    fn start(dir: &Path, config: &Path) -> Running {
        let socket = dir.join("d.sock");
        let log = dir.join("sluiced.log");
        let child = Command::new(BIN)
            .arg("--config")
            .arg(config)
            .env_remove("SLUICE_SOCKET")
            .stdout(File::create(dir.join("stdout.log")).unwrap())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap();
        wait_for_socket(&socket);
        Running { child, socket, log }
    }

    fn client(&self) -> Client {
        Client::unix(&self.socket).with_timeout(Duration::from_secs(5))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config text: a socket in `dir` and `policies`.
fn config_text(dir: &Path, policies: &str) -> String {
    format!(
        "[listen]\nunix = {:?}\nhttp = \"\"\nunix_mode = \"0600\"\n\n{policies}",
        dir.join("d.sock").display().to_string()
    )
}

/// Replaces `path` as an editor or `kubectl cp` does: a temp file renamed over it.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("swp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Polls until policy `p` has `limit`.
async fn until_limit(client: &Client, limit: u64) {
    let started = Instant::now();
    while limit_of(client).await != limit {
        assert!(
            started.elapsed() < PATIENCE,
            "the limit never became {limit}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls until `/metrics` contains `line`.
async fn until_metric(client: &Client, line: &str) {
    let started = Instant::now();
    while !metrics(client).await.contains(line) {
        assert!(started.elapsed() < PATIENCE, "/metrics never showed {line}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_edited_file_applies_its_limit_and_a_bad_edit_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, config_text(dir.path(), ONE)).unwrap();
    let d = Running::start(dir.path(), &config);
    let c = d.client();
    let check = CheckRequest::new("p", "k");
    assert_eq!(c.check(&check).await.unwrap().status, 200);
    assert_eq!(c.check(&check).await.unwrap().status, 429);

    // An edit in place (truncate and write), no signal.
    std::fs::write(&config, config_text(dir.path(), THREE)).unwrap();
    until_limit(&c, 3).await;
    until_metric(&c, r#"rate_limit_config_reloads_total{result="ok"} 1"#).await;
    // The counter survived the reload: one used of three.
    let out = c.check(&check).await.unwrap();
    assert_eq!((out.status, out.body.remaining), (200, 1));

    // A bad edit: counted as an error, logged with the field, the running limit kept.
    replace(&config, &config_text(dir.path(), BAD));
    until_metric(&c, r#"rate_limit_config_reloads_total{result="error"} 1"#).await;
    assert_eq!(limit_of(&c).await, 3);
    assert_eq!(c.check(&check).await.unwrap().status, 200);
    assert_eq!(c.check(&check).await.unwrap().status, 429);
    let log = d.log();
    assert!(
        log.contains("config reload failed, keeping the running config")
            && log.contains("policies.p")
            && log.contains("limit"),
        "{log}"
    );

    // Fixed again: applied.
    replace(&config, &config_text(dir.path(), FIVE));
    until_limit(&c, 5).await;
    until_metric(&c, r#"rate_limit_config_reloads_total{result="ok"} 2"#).await;
}

/// kubelet's atomic writer: `sluice.toml` → `..data/sluice.toml`, `..data` → a timestamped
/// directory; an update writes a new directory, renames a new `..data` link over the old one
/// and removes the old directory.
struct ConfigMapVolume {
    dir: PathBuf,
    generation: u32,
}

impl ConfigMapVolume {
    fn new(dir: &Path, text: &str) -> ConfigMapVolume {
        let mut volume = ConfigMapVolume {
            dir: dir.to_path_buf(),
            generation: 0,
        };
        let first = volume.write_generation(text);
        symlink(&first, dir.join("..data")).unwrap();
        symlink("..data/sluice.toml", dir.join("sluice.toml")).unwrap();
        volume
    }

    fn write_generation(&mut self, text: &str) -> String {
        self.generation += 1;
        let name = format!(
            "..2026_01_01_00_00_0{}.{}",
            self.generation,
            1000 + self.generation
        );
        std::fs::create_dir(self.dir.join(&name)).unwrap();
        std::fs::write(self.dir.join(&name).join("sluice.toml"), text).unwrap();
        name
    }

    fn update(&mut self, text: &str) {
        let old = std::fs::read_link(self.dir.join("..data")).unwrap();
        let new = self.write_generation(text);
        symlink(&new, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
        std::fs::remove_dir_all(self.dir.join(old)).unwrap();
    }
}

#[tokio::test]
async fn a_configmap_symlink_swap_applies_its_limit_and_the_same_content_reloads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The socket beside the volume, as in a pod: the volume holds only kubelet's files.
    let volume_dir = dir.path().join("config");
    std::fs::create_dir(&volume_dir).unwrap();
    let mut volume = ConfigMapVolume::new(&volume_dir, &config_text(dir.path(), ONE));
    let d = Running::start(dir.path(), &volume_dir.join("sluice.toml"));
    let c = d.client();
    assert_eq!(limit_of(&c).await, 1);

    volume.update(&config_text(dir.path(), THREE));
    until_limit(&c, 3).await;

    // kubelet rewrites on a resync too, with the same content: no reload. Then a real change.
    // The pause only separates the two updates (a slow machine weakens the test, never fails it).
    volume.update(&config_text(dir.path(), THREE));
    tokio::time::sleep(Duration::from_secs(1)).await;
    volume.update(&config_text(dir.path(), FIVE));
    until_limit(&c, 5).await;
    let text = metrics(&c).await;
    assert!(
        text.contains(r#"rate_limit_config_reloads_total{result="ok"} 2"#),
        "{text}"
    );

    // A bad ConfigMap: the running limit stays.
    volume.update(&config_text(dir.path(), BAD));
    until_metric(&c, r#"rate_limit_config_reloads_total{result="error"} 1"#).await;
    assert_eq!(limit_of(&c).await, 5);
}

/// An envoyproxy/ratelimit YAML file whose one limit is named `p` (its policy's name).
fn yaml(limit: u32) -> String {
    format!(
        "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      name: p\n      unit: hour\n      requests_per_unit: {limit}\n"
    )
}

#[tokio::test]
async fn an_edited_envoy_yaml_directory_applies_its_limits_and_a_bad_edit_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let yaml_dir = dir.path().join("ratelimit");
    std::fs::create_dir(&yaml_dir).unwrap();
    let file = yaml_dir.join("edge.yaml");
    std::fs::write(&file, yaml(1)).unwrap();
    let config = dir.path().join("sluice.toml");
    let rls = format!(
        "[rls]\nenvoy_config = {:?}\n",
        yaml_dir.display().to_string()
    );
    std::fs::write(&config, config_text(dir.path(), &rls)).unwrap();
    let d = Running::start(dir.path(), &config);
    let c = d.client();
    assert_eq!(limit_of(&c).await, 1);

    // An edit of a YAML file of the directory, no signal: applied.
    replace(&file, &yaml(3));
    until_limit(&c, 3).await;
    until_metric(&c, r#"rate_limit_config_reloads_total{result="ok"} 1"#).await;

    // A bad edit: counted as an error, logged naming the file and the path, the limit kept.
    replace(&file, &yaml(3).replace("unit: hour", "unit: hours"));
    until_metric(&c, r#"rate_limit_config_reloads_total{result="error"} 1"#).await;
    assert_eq!(limit_of(&c).await, 3);
    let log = d.log();
    assert!(
        log.contains("edge.yaml") && log.contains("descriptors[0].rate_limit.unit"),
        "{log}"
    );

    // A file added to the directory counts as a change too.
    replace(&file, &yaml(5));
    std::fs::write(yaml_dir.join("other.yaml"), "domain: other\n").unwrap();
    until_limit(&c, 5).await;
}
