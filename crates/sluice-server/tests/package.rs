//! The Debian package, as `scripts/package` makes it of the binaries this test build made: the
//! files, the conffile and the maintainer scripts (`dpkg-deb`), the systemd units
//! (`systemd-analyze verify`, and `security --offline` for the service's exposure), and the
//! packaged daemon serving a socket handed over by `systemd-socket-activate`, also with a
//! config whose `listen.unix` and `listen.http` are both empty. A tool that is missing
//! (`scripts/test` installs them) skips the tests that need it with a message, and fails them
//! when `CI` is set: a test never passes by skipping there.

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sluiced");
/// The most `systemd-analyze security` may rate the service: "OK" or better.
const MAX_EXPOSURE: f64 = 2.0;

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The package built once for every test of this binary, and its files extracted.
struct Package {
    deb: PathBuf,
    /// `dpkg-deb -x` of it: the file tree it installs.
    tree: PathBuf,
}

/// The package, or `None` (with a message) when dpkg-deb or cargo-deb is missing.
fn package() -> Option<&'static Package> {
    static PACKAGE: OnceLock<Option<Package>> = OnceLock::new();
    PACKAGE
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            if !sluice_testkit::tool_available("dpkg-deb", &["--version"], "apt-get install dpkg")
                || !sluice_testkit::tool_available(
                    &cargo,
                    &["deb", "--version"],
                    "cargo install --locked cargo-deb",
                )
            {
                return None;
            }
            Some(build(&cargo))
        })
        .as_ref()
}

/// `scripts/package --profile dev --no-build` of the binaries next to `sluiced`: a nested
/// `cargo build` would wait for the lock this test run holds on the build directory.
fn build(cargo: &str) -> Package {
    let profile_dir = Path::new(BIN).parent().unwrap();
    let target = profile_dir.parent().unwrap();
    let cli = profile_dir.join("sluice");
    assert!(
        cli.exists(),
        "{} is missing: build it first (cargo build -p sluice-cli), as \
         `cargo test --workspace` does",
        cli.display()
    );
    let out_dir = target.join("debian-check");
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = Command::new("bash")
        .arg(root().join("scripts/package"))
        .args(["--profile", "dev", "--no-build", "--output"])
        .arg(&out_dir)
        .env("CARGO", cargo)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/package failed:\n{}",
        text(&out)
    );

    let version = env!("CARGO_PKG_VERSION");
    let arch = stdout(Command::new("dpkg").arg("--print-architecture"));
    let deb = out_dir.join(format!("sluice_{version}_{}.deb", arch.trim()));
    assert!(deb.exists(), "no {} after:\n{}", deb.display(), text(&out));
    let tree = out_dir.join("tree");
    stdout(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree));
    Package { deb, tree }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The standard output of a command that must succeed.
fn stdout(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(out.status.success(), "{command:?} failed:\n{}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// `dpkg-deb --info` of the package, or of one of its control files.
fn info(package: &Package, control_file: Option<&str>) -> String {
    let mut command = Command::new("dpkg-deb");
    command.arg("--info").arg(&package.deb);
    command.args(control_file);
    stdout(&mut command)
}

/// The value of `Key=` in a unit file (the last one, as systemd reads it).
fn unit_value(unit: &str, key: &str) -> Option<String> {
    unit.lines()
        .filter_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .next_back()
        .map(|value| value.trim().to_owned())
}

fn unit(package: &Package, name: &str) -> String {
    std::fs::read_to_string(package.tree.join("usr/lib/systemd/system").join(name)).unwrap()
}

#[test]
fn the_package_holds_the_binaries_the_config_the_units_and_the_assets() {
    let Some(package) = package() else { return };
    let listing = stdout(Command::new("dpkg-deb").arg("-c").arg(&package.deb));
    // `-rwxr-xr-x 0/0 4991792 2026-12-04 00:00 ./usr/bin/sluice`: mode and path.
    let files: Vec<(&str, &str)> = listing
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some((fields.next()?, fields.last()?))
        })
        .collect();
    let mode_of = |path: &str| {
        files
            .iter()
            .find(|(_, p)| p.strip_prefix('.') == Some(path))
            .map(|(mode, _)| *mode)
    };
    for binary in ["/usr/bin/sluiced", "/usr/bin/sluice"] {
        assert_eq!(mode_of(binary), Some("-rwxr-xr-x"), "{binary}:\n{listing}");
    }
    let mut expected = vec![
        "/etc/sluice/sluice.toml".to_owned(),
        "/usr/lib/systemd/system/sluiced.service".to_owned(),
        "/usr/lib/systemd/system/sluiced.socket".to_owned(),
        "/usr/share/sluice/alerts/sluice.rules.yml".to_owned(),
        "/usr/share/doc/sluice/copyright".to_owned(),
    ];
    for dashboard in std::fs::read_dir(root().join("dashboards")).unwrap() {
        let name = dashboard.unwrap().file_name();
        expected.push(format!(
            "/usr/share/sluice/dashboards/{}",
            name.to_string_lossy()
        ));
    }
    for path in &expected {
        assert_eq!(mode_of(path), Some("-rw-r--r--"), "{path}:\n{listing}");
    }
    // The promtool tests of the rules are the repository's, not the operator's.
    assert!(!listing.contains(".test.yml"), "{listing}");
    // The copyright file is the workspace license.
    let copyright = std::fs::read_to_string(package.tree.join("usr/share/doc/sluice/copyright"));
    assert!(copyright.unwrap().contains("Apache License"));
}

#[test]
fn the_package_declares_the_conffile_and_maintainer_scripts_that_enable_nothing() {
    let Some(package) = package() else { return };
    let summary = info(package, None);
    for control_file in ["control", "conffiles", "postinst", "prerm", "postrm"] {
        assert!(
            summary
                .lines()
                .any(|line| line.split_whitespace().any(|word| word == control_file)),
            "no {control_file} in:\n{summary}"
        );
    }
    let control = info(package, Some("control"));
    assert!(control.contains("Package: sluice\n"), "{control}");
    assert!(
        control
            .lines()
            .any(|l| l.starts_with("Depends:") && l.contains("adduser"))
    );
    assert_eq!(
        info(package, Some("conffiles")),
        "/etc/sluice/sluice.toml\n"
    );

    let postinst = info(package, Some("postinst"));
    assert!(postinst.contains("addgroup --system sluice"), "{postinst}");
    assert!(
        postinst.contains("adduser --system --ingroup sluice"),
        "{postinst}"
    );
    // Nothing started on install; a running daemon restarted on upgrade, not its socket.
    let maintainer_scripts: String = format!("{postinst}{}", info(package, Some("prerm")))
        .lines()
        .filter(|line| !line.trim_start().starts_with("# "))
        .map(|line| format!("{line}\n"))
        .collect();
    for surprise in [
        "systemctl start",
        "systemctl enable",
        "deb-systemd-invoke start",
        "deb-systemd-invoke restart",
        "try-restart sluiced.service sluiced.socket",
    ] {
        assert!(
            !maintainer_scripts.contains(surprise),
            "{surprise:?} in:\n{maintainer_scripts}"
        );
    }
    assert!(postinst.contains("deb-systemd-invoke try-restart sluiced.service >"));
    // debhelper's enable only re-creates the links of a unit the admin had enabled.
    let lines: Vec<&str> = postinst.lines().map(str::trim).collect();
    for (at, line) in lines.iter().enumerate() {
        if line.starts_with("deb-systemd-helper enable") {
            assert!(
                lines[..at]
                    .iter()
                    .rev()
                    .take(2)
                    .any(|l| l.contains("was-enabled")),
                "an enable not guarded by was-enabled:\n{postinst}"
            );
        }
    }
}

#[test]
fn the_packaged_config_is_the_reference_config_on_the_run_socket() {
    let Some(package) = package() else { return };
    let config_path = package.tree.join("etc/sluice/sluice.toml");
    let config = std::fs::read_to_string(&config_path).unwrap();
    let reference = std::fs::read_to_string(root().join("examples/sluice.toml")).unwrap();
    assert!(
        config.ends_with(&reference),
        "packaging/sluice.toml must end with examples/sluice.toml, verbatim"
    );
    assert!(config.contains("\nunix = \"/run/sluice/sluiced.sock\"\n"));
    let daemon = package.tree.join("usr/bin/sluiced");
    let out = Command::new(&daemon)
        .arg("--check-config")
        .arg(&config_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let version = stdout(Command::new(&daemon).arg("--version"));
    assert!(
        version.starts_with(&format!("sluiced {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
}

#[test]
fn systemd_analyze_verify_accepts_both_units() {
    let Some(package) = package() else { return };
    if !sluice_testkit::tool_available("systemd-analyze", &["--version"], "apt-get install systemd")
    {
        return;
    }
    let socket = unit(package, "sluiced.socket");
    for (key, value) in [
        ("ListenStream", "/run/sluice/sluiced.sock"),
        ("FileDescriptorName", "http"),
        ("SocketMode", "0660"),
        ("SocketGroup", "sluice"),
    ] {
        assert_eq!(unit_value(&socket, key).as_deref(), Some(value), "{key}");
    }
    let service = unit(package, "sluiced.service");
    for (key, value) in [
        ("Type", "notify"),
        ("User", "sluice"),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
        (
            "ExecStart",
            "/usr/bin/sluiced --config /etc/sluice/sluice.toml",
        ),
    ] {
        assert_eq!(unit_value(&service, key).as_deref(), Some(value), "{key}");
    }

    // verify checks that ExecStart exists: point it at the extracted binary, in a copy.
    let dir = tempfile::tempdir().unwrap();
    let daemon = package.tree.join("usr/bin/sluiced");
    let service = service.replace("/usr/bin/sluiced", daemon.to_str().unwrap());
    std::fs::write(dir.path().join("sluiced.service"), service).unwrap();
    std::fs::write(dir.path().join("sluiced.socket"), socket).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join("sluiced.socket"))
        .arg(dir.path().join("sluiced.service"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // Warnings about the units come on stderr with a zero exit.
    let complaints = text(&out);
    assert!(!complaints.contains("sluiced."), "{complaints}");
}

#[test]
fn systemd_analyze_security_rates_the_service_ok_or_safe() {
    let Some(package) = package() else { return };
    if !sluice_testkit::tool_available("systemd-analyze", &["--version"], "apt-get install systemd")
    {
        return;
    }
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(format!("--root={}", package.tree.display()))
        .arg("sluiced.service")
        .output()
        .unwrap();
    let report = text(&out);
    // "→ Overall exposure level for sluiced.service: 1.1 OK 🙂"
    let exposure: f64 = report
        .lines()
        .find_map(|line| {
            line.split("Overall exposure level for sluiced.service:")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"));
    eprintln!("systemd-analyze security: sluiced.service exposure {exposure}");
    assert!(exposure <= MAX_EXPOSURE, "exposure {exposure}:\n{report}");
}

/// Runs the packaged daemon on `config` under `systemd-socket-activate -l dir/sluiced.sock
/// --fdname=http`, checks `key` of `policy` twice (answered with `remaining`), stops it with
/// SIGTERM; its log. The socket is left (it is the manager's).
fn serve_activated(package: &Package, config: &Path, policy: &str, remaining: [u64; 2]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sluiced.sock");
    let log = std::fs::File::create(dir.path().join("sluiced.log")).unwrap();
    let mut activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .arg("--fdname=http")
        .arg(package.tree.join("usr/bin/sluiced"))
        .arg("--config")
        .arg(config)
        .env_remove("SLUICE_SOCKET")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "no socket from systemd-socket-activate"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The first connection makes systemd-socket-activate exec the daemon; it waits in the
    // backlog meanwhile.
    let check = |key: &str| {
        Command::new(package.tree.join("usr/bin/sluice"))
            .arg("--socket")
            .arg(&socket)
            .args(["check", policy, key, "--json"])
            .output()
            .unwrap()
    };
    for remaining in remaining {
        let out = check("user:1");
        let body = text(&out);
        let log = std::fs::read_to_string(dir.path().join("sluiced.log")).unwrap();
        assert!(out.status.success(), "{body}\n{log}");
        assert!(body.contains("\"allowed\":true"), "{body}");
        assert!(
            body.contains(&format!("\"remaining\":{remaining}")),
            "{body}"
        );
    }

    let pid = activator.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = activator.try_wait().unwrap() {
            break exit;
        }
        if Instant::now() > deadline {
            let _ = activator.kill();
            panic!("sluiced still running 20 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = std::fs::read_to_string(dir.path().join("sluiced.log")).unwrap();
    assert!(exit.success(), "{exit}:\n{log}");
    assert!(log.contains("(handed over)"), "{log}");
    let kept = std::fs::symlink_metadata(&socket).unwrap();
    assert!(kept.file_type().is_socket(), "{log}");
    log
}

fn have_socket_activate() -> bool {
    sluice_testkit::tool_available(
        "systemd-socket-activate",
        &["--version"],
        "apt-get install systemd",
    )
}

#[test]
fn the_packaged_daemon_serves_the_handed_over_socket_and_leaves_it() {
    let Some(package) = package() else { return };
    if !have_socket_activate() {
        return;
    }
    let config = package.tree.join("etc/sluice/sluice.toml");
    serve_activated(package, &config, "public", [99, 98]);
}

/// A config that leaves every HTTP address to the service manager, as a socket unit's
/// config may.
const NO_ADDRESSES: &str = "[listen]\nunix = \"\"\nhttp = \"\"\n\n\
[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1h\"\n";

#[test]
fn with_both_addresses_empty_the_packaged_daemon_serves_the_handed_over_socket() {
    let Some(package) = package() else { return };
    if !have_socket_activate() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, NO_ADDRESSES).unwrap();
    let log = serve_activated(package, &config, "p", [4, 3]);
    assert!(log.contains("listeners=http:unix:"), "{log}");
}

#[test]
fn with_both_addresses_empty_check_config_accepts_and_a_start_without_sockets_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, NO_ADDRESSES).unwrap();
    let checked = Command::new(BIN)
        .arg("--check-config")
        .arg(&config)
        .output()
        .unwrap();
    let said = text(&checked);
    assert!(checked.status.success(), "{said}");
    assert!(said.contains("valid, 1 policies"), "{said}");
    assert!(
        said.contains("note: listen.unix and listen.http are both disabled")
            && said.contains("handed over as http"),
        "{said}"
    );

    // Without LISTEN_FDS nothing would serve the API: a config error, exit 2.
    let started = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDNAMES")
        .output()
        .unwrap();
    let said = text(&started);
    assert_eq!(started.status.code(), Some(2), "{said}");
    assert!(said.contains("nothing to serve"), "{said}");
    assert!(said.contains(&config.display().to_string()), "{said}");
}
