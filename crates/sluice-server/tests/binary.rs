//! The real `sluiced` binary: `--check-config`, SIGHUP reloads, SIGTERM, socket ownership,
//! the Envoy RLS on `listen.grpc` (what it logs: `logs.rs`).

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use sluice_api::CheckRequest;
use sluice_client::Client;

mod common;

use common::{
    BIN, check_config, limit_of, metrics, second_daemon_refused, spawn_on, wait_for_socket,
    write_config, write_config_with,
};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sluice.toml")
}

#[test]
fn check_config_accepts_the_example() {
    let out = check_config(&examples());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_config_names_the_file_and_every_bad_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        r#"
[backend]
kind = "postgres"
timeout = "fast"

[telemetry]
log_format = "xml"
sample_ratio = 2.0

[listen]
unix_mode = "999"

[policies.zero]
algorithm = "fixed_window"
limit = 0
window = "1s"

[policies.algo]
algorithm = "magic"
limit = 1
window = "1s"

[policies.short]
algorithm = "token_bucket"
limit = 1
window = "0ms"
burst = 0

[policies.dur]
algorithm = "gcra"
limit = 1
window = "10 parsecs"
fail = "maybe"
"#,
    )
    .unwrap();
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for field in [
        "backend.kind",
        "backend.timeout",
        "telemetry.log_format",
        "telemetry.sample_ratio",
        "listen.unix_mode",
        "policies.zero.limit",
        "policies.algo.algorithm",
        "policies.short.window",
        "policies.short.burst",
        "policies.dur.window",
        "policies.dur.fail",
    ] {
        let line = format!("{}: {field}: ", path.display());
        assert!(stderr.contains(&line), "{line} missing from:\n{stderr}");
    }
}

#[test]
fn check_config_names_an_unknown_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.toml");
    std::fs::write(
        &path,
        "[policies.p]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\nlimmit = 2\n",
    )
    .unwrap();
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("policies.p") && stderr.contains("limmit"),
        "{stderr}"
    );
}

/// A `sluiced` on a temp socket, killed when dropped.
struct Running {
    child: Child,
    socket: PathBuf,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Running {
    fn start(policies: &str) -> Running {
        Running::start_with("", policies)
    }

    /// As [`start`](Self::start), with more `[listen]` keys (`grpc = "…"`).
    fn start_with(listen: &str, policies: &str) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("d.sock");
        let config = dir.path().join("sluice.toml");
        write_config_with(&config, &socket, listen, policies);
        let child = spawn_on(Command::new(BIN), &config);
        let running = Running {
            child,
            socket,
            config,
            _dir: dir,
        };
        running.wait_until_serving();
        running
    }

    fn client(&self) -> Client {
        Client::unix(&self.socket).with_timeout(Duration::from_secs(5))
    }

    fn wait_until_serving(&self) {
        wait_for_socket(&self.socket);
    }

    fn signal(&self, name: &str) {
        common::signal(&self.child, name);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const ONE: &str = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\n";
const THREE: &str = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1h\"\n";

#[tokio::test]
async fn sighup_applies_a_new_limit_and_a_bad_reload_keeps_it() {
    let d = Running::start(ONE);
    let c = d.client();
    let check = CheckRequest::new("p", "k");
    assert_eq!(c.check(&check).await.unwrap().status, 200);
    assert_eq!(c.check(&check).await.unwrap().status, 429);

    write_config(&d.config, &d.socket, THREE);
    d.signal("HUP");
    while limit_of(&c).await != 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The counter survived the reload: one used of three.
    let out = c.check(&check).await.unwrap();
    assert_eq!((out.status, out.body.remaining), (200, 1));

    write_config(
        &d.config,
        &d.socket,
        "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"1h\"\n",
    );
    d.signal("HUP");
    while !metrics(&c)
        .await
        .contains(r#"rate_limit_config_reloads_total{result="error"} 1"#)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        metrics(&c)
            .await
            .contains(r#"rate_limit_config_reloads_total{result="ok"} 1"#)
    );
    assert_eq!(limit_of(&c).await, 3);
    assert_eq!(c.check(&check).await.unwrap().status, 200);
    assert_eq!(c.check(&check).await.unwrap().status, 429);
}

#[test]
fn sigterm_stops_and_removes_the_socket() {
    let mut d = Running::start(ONE);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&d.socket).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    d.signal("TERM");
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!d.socket.exists());
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("stale.sock");
    // A socket file nobody listens on, as a crashed daemon leaves it.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let config = dir.path().join("c.toml");
    write_config(&config, &socket, ONE);
    let mut first = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_socket(&socket);

    second_daemon_refused(&config);
    // The refused daemon left the live socket alone.
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
    let _ = first.kill();
    let _ = first.wait();
}

const RLS: &str = "[[rls.descriptors]]\ndomain = \"edge\"\nkeys = [\"remote_address\"]\npolicy = \"p\"\nkey = \"ip:{remote_address}\"\n";

#[test]
fn check_config_names_every_bad_rls_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rls.toml");
    std::fs::write(
        &path,
        format!(
            "{ONE}\n[[rls.descriptors]]\ndomain = \"edge\"\nkeys = [\"a\"]\npolicy = \"nope\"\nkey = \"x:{{b}}\"\n\n[[rls.descriptors]]\nkeys = [\"a\"]\npolicy = \"p\"\nkey = \"{{a}}\"\n"
        ),
    )
    .unwrap();
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (field, why) in [
        ("rls.descriptors[0].policy", "unknown policy \"nope\""),
        (
            "rls.descriptors[0].key",
            "placeholder {b} is not one of keys",
        ),
        ("rls.descriptors[1].domain", "required"),
    ] {
        let line = format!("{}: {field}: ", path.display());
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&line) && l.contains(why)),
            "{line} … {why} missing from:\n{stderr}"
        );
    }
}

#[tokio::test]
async fn the_binary_serves_the_rls_on_listen_grpc_and_reloads_its_descriptors() {
    use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::{
        RateLimitDescriptor, rate_limit_descriptor::Entry,
    };
    use sluice_server::rls::pb::RateLimitRequest;
    use sluice_server::rls::pb::rate_limit_response::Code;
    use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("grpc = \"127.0.0.1:{port}\"");
    let d = Running::start_with(&listen, &format!("{ONE}\n{RLS}"));
    let mut rls = RateLimitServiceClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    let ask = || RateLimitRequest {
        domain: "edge".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "remote_address".to_owned(),
                value: "10.0.0.1".to_owned(),
            }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    };
    let code = |answer: tonic::Response<sluice_server::rls::pb::RateLimitResponse>| {
        answer.into_inner().overall_code
    };
    assert_eq!(
        code(rls.should_rate_limit(ask()).await.unwrap()),
        i32::from(Code::Ok)
    );
    assert_eq!(
        code(rls.should_rate_limit(ask()).await.unwrap()),
        i32::from(Code::OverLimit)
    );
    // The same key over HTTP: RLS and HTTP checks share the limiter.
    let http = d
        .client()
        .check(&CheckRequest::new("p", "ip:10.0.0.1"))
        .await
        .unwrap();
    assert_eq!(http.status, 429);

    // A reload that drops the descriptor: the address is no longer limited.
    write_config_with(&d.config, &d.socket, &listen, ONE);
    d.signal("HUP");
    let c = d.client();
    while !metrics(&c)
        .await
        .contains(r#"rate_limit_config_reloads_total{result="ok"} 1"#)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let answer = rls.should_rate_limit(ask()).await.unwrap().into_inner();
    assert_eq!(answer.overall_code, i32::from(Code::Ok));
    assert!(answer.statuses[0].current_limit.is_none());
}

#[tokio::test]
async fn the_binary_serves_the_rls_on_a_unix_socket_and_removes_it_on_stop() {
    use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::{
        RateLimitDescriptor, rate_limit_descriptor::Entry,
    };
    use sluice_server::rls::pb::RateLimitRequest;
    use sluice_server::rls::pb::rate_limit_response::Code;
    use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;

    let dir = tempfile::tempdir().unwrap();
    let rls_socket = dir.path().join("rls.sock");
    let listen = format!("grpc = \"unix:{}\"", rls_socket.display());
    let mut d = Running::start_with(&listen, &format!("{ONE}\n{RLS}"));
    wait_for_socket(&rls_socket);
    let path = rls_socket.clone();
    // The URI is a placeholder: the connector below dials the socket.
    let channel = tonic::transport::Endpoint::from_static("http://[::1]:1")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .unwrap();
    let mut rls = RateLimitServiceClient::new(channel);
    let ask = RateLimitRequest {
        domain: "edge".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "remote_address".to_owned(),
                value: "10.0.0.3".to_owned(),
            }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    };
    let first = rls
        .should_rate_limit(ask.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.overall_code, i32::from(Code::Ok));
    let second = rls.should_rate_limit(ask).await.unwrap().into_inner();
    assert_eq!(second.overall_code, i32::from(Code::OverLimit));
    drop(rls);

    d.signal("TERM");
    // Waited for without blocking this runtime, which drives the client's connection.
    let status = loop {
        if let Some(status) = d.child.try_wait().unwrap() {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
    assert!(!rls_socket.exists());
    assert!(!d.socket.exists());
}

#[test]
fn a_grpc_client_that_never_answers_does_not_hold_the_stop() {
    use std::io::Write;

    let dir = tempfile::tempdir().unwrap();
    let rls_socket = dir.path().join("rls.sock");
    let listen = format!("grpc = \"unix:{}\"", rls_socket.display());
    let mut d = Running::start_with(&listen, &format!("{ONE}\n{RLS}"));
    wait_for_socket(&rls_socket);
    // An HTTP/2 client that opens a connection and then never reads: a graceful close waits
    // for its acknowledgement forever.
    let mut mute = std::os::unix::net::UnixStream::connect(&rls_socket).unwrap();
    mute.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    d.signal("TERM");
    let started = std::time::Instant::now();
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status}");
    // The drain bound is 5 s; never a hang.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    drop(mute);
}

/// `sluiced --config path`, run to its exit (it must refuse the config, not serve).
fn start_refusing(path: &Path) -> Output {
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(path)
        .env_remove("SLUICE_SOCKET")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    panic!("sluiced --config {} kept running", path.display());
}

#[test]
fn check_config_refuses_exactly_what_start_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let policy = "[policies.p]\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\n";
    for (section, field) in [
        (
            "[backend]\nkind = \"redis\"\nurl = \"redis://:hunter22@host:notaport/0\"",
            "backend.url",
        ),
        (
            "[backend]\nkind = \"cluster\"\nnodes = [\"redis://127.0.0.1:7000\", \"redis://:hunter22@h:x\"]",
            "backend.nodes[1]",
        ),
        (
            "[backend]\nkind = \"redis\"\nurl = \"http://h:1\"",
            "backend.url",
        ),
        (
            "[telemetry]\notlp_endpoint = \"grpc://collector:4317\"",
            "telemetry.otlp_endpoint",
        ),
        (
            "[telemetry]\notlp_endpoint = \"collector:4317\"",
            "telemetry.otlp_endpoint",
        ),
        (
            "[region]\nname = \"us-east\"\n\
             global = { kind = \"redis\", url = \"redis://:hunter22@10.0.0.5:notaport\" }",
            "region.global.url",
        ),
        (
            "[region]\nname = \"us-east\"\n\
             peers = [ { name = \"ap\", kind = \"redis\", url = \"redis://u:hunter22@h:x/0\" } ]",
            "region.peers[0].url",
        ),
    ] {
        let path = dir.path().join("backend.toml");
        std::fs::write(
            &path,
            format!(
                "[listen]\nunix = {socket:?}\nhttp = \"\"\n{section}\n{policy}",
                socket = socket.display().to_string()
            ),
        )
        .unwrap();
        let checked = check_config(&path);
        let started = start_refusing(&path);
        for out in [&checked, &started] {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{section}: {stderr}");
            assert!(
                stderr.contains(&format!("{}: {field}: ", path.display())),
                "{section}: {stderr}"
            );
            assert!(!stderr.contains("hunter22"), "{stderr}");
        }
        assert!(!socket.exists());
    }
}

#[tokio::test]
async fn a_config_without_policies_is_refused_at_start_check_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    for text in ["", "# policies are written elsewhere\n"] {
        let path = dir.path().join("empty.toml");
        std::fs::write(&path, text).unwrap();
        for out in [check_config(&path), start_refusing(&path)] {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains(": policies: no policies"), "{stderr}");
        }
    }
    let d = Running::start(ONE);
    let c = d.client();
    std::fs::write(&d.config, "# truncated by a racing writer\n").unwrap();
    d.signal("HUP");
    while !metrics(&c)
        .await
        .contains(r#"rate_limit_config_reloads_total{result="error"} 1"#)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let out = c.check(&CheckRequest::new("p", "k")).await.unwrap();
    assert_eq!(out.status, 200, "the running policies stay");
}

/// Waits for the daemon to exit, up to `within` (a bound on a hang, not a timing claim).
fn exit_within(d: &mut Running, within: Duration) -> std::process::ExitStatus {
    common::exit_within(&mut d.child, within)
}

/// A client that sent half a request and waits: today's graceful stop would wait for it.
fn half_a_request(socket: &Path) -> std::os::unix::net::UnixStream {
    use std::io::Write;
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream
        .write_all(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pol")
        .unwrap();
    stream
}

#[test]
fn sigterm_drops_a_half_sent_request_at_the_shutdown_timeout() {
    let mut d = Running::start_with("shutdown_timeout = \"1s\"", ONE);
    let _client = half_a_request(&d.socket);
    std::thread::sleep(Duration::from_millis(100));
    d.signal("TERM");
    let status = exit_within(&mut d, Duration::from_secs(8));
    assert!(status.success(), "{status}");
    assert!(!d.socket.exists());
}

#[test]
fn a_second_sigterm_stops_at_once() {
    // The default deadline (10 s) is far; the second signal must not wait for it.
    let mut d = Running::start(ONE);
    let _client = half_a_request(&d.socket);
    std::thread::sleep(Duration::from_millis(100));
    d.signal("TERM");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "waits for the client"
    );
    d.signal("TERM");
    let status = exit_within(&mut d, Duration::from_secs(5));
    assert!(status.success(), "{status}");
    assert!(!d.socket.exists());
}
