//! `[listen.tls]` on the real `sluiced`: checks over HTTPS (curl with the CA) and RESP over
//! TLS (`redis-cli --tls`), mTLS refusing a client without a certificate and one from another
//! CA (counted by reason, never logged per connection), and a certificate swapped on disk
//! served to the next connection while a connection opened before keeps working; requests
//! pipelined over TLS each answered, in order.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use sluice_client::Client;
use sluice_testkit::certs::{Certs, LOCAL_NAMES, Pair};
use sluice_testkit::free_port;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;

use common::{BIN, metrics, wait_for_socket};

const POLICY: &str = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1h\"\n";
const CHECK: &str = r#"{"policy":"p","key":"k"}"#;

/// A bound on a hang, far above the watch's debounce: no claim on how fast a reload is.
const PATIENCE: Duration = Duration::from_secs(30);

/// A `sluiced` with `[listen.tls]`, killed on drop.
struct Tls {
    child: Child,
    dir: tempfile::TempDir,
    http: u16,
    resp: u16,
    cert: PathBuf,
    key: PathBuf,
}

impl Drop for Tls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Tls {
    /// Serves `certs.server` (copied, so a test can swap it), with mTLS when `client_ca`.
    fn start(certs: &Certs, client_ca: Option<&Path>) -> Tls {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::copy(&certs.server.cert, &cert).unwrap();
        std::fs::copy(&certs.server.key, &key).unwrap();
        let (http, resp) = (free_port(), free_port());
        let socket = dir.path().join("d.sock");
        let client_ca = client_ca.map_or(String::new(), |p| p.display().to_string());
        let config = dir.path().join("sluice.toml");
        std::fs::write(
            &config,
            format!(
                "[listen]\nunix = \"{}\"\nhttp = \"127.0.0.1:{http}\"\nresp = \"127.0.0.1:{resp}\"\n\
                 [listen.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\nclient_ca_file = \"{client_ca}\"\n{POLICY}",
                socket.display(),
                cert.display(),
                key.display(),
            ),
        )
        .unwrap();
        let child = Command::new(BIN)
            .arg("--config")
            .arg(&config)
            .stdout(File::create(dir.path().join("stdout.log")).unwrap())
            .stderr(File::create(dir.path().join("sluiced.log")).unwrap())
            .spawn()
            .unwrap();
        wait_for_socket(&socket);
        Tls {
            child,
            dir,
            http,
            resp,
            cert,
            key,
        }
    }

    fn unix(&self) -> Client {
        Client::unix(self.dir.path().join("d.sock")).with_timeout(Duration::from_secs(5))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sluiced.log")).unwrap()
    }

    /// `curl` a check over HTTPS trusting `ca`, with `client` as its certificate.
    fn curl(&self, ca: &Path, client: Option<&Pair>) -> Output {
        let mut curl = Command::new("curl");
        curl.args(["-sS", "--max-time", "10", "--cacert"])
            .arg(ca)
            .args(["-H", "Content-Type: application/json", "-d", CHECK]);
        if let Some(pair) = client {
            curl.arg("--cert")
                .arg(&pair.cert)
                .arg("--key")
                .arg(&pair.key);
        }
        curl.arg(format!("https://localhost:{}/v1/check", self.http))
            .output()
            .unwrap()
    }

    /// The count of failed handshakes on `listener` for `reason`.
    async fn handshake_errors(&self, listener: &str, reason: &str) -> u64 {
        let text = metrics(&self.unix()).await;
        let prefix = format!(
            "rate_limit_tls_handshake_errors_total{{listener=\"{listener}\",reason=\"{reason}\"}} "
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map_or(0, |n| n.parse().unwrap())
    }
}

fn tools() -> bool {
    sluice_testkit::tool_available("curl", &["--version"], "apt-get install curl")
        && sluice_testkit::tool_available(
            "redis-cli",
            &["--version"],
            "apt-get install redis-tools",
        )
}

fn ok_check(out: &Output) {
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && body.contains("\"allowed\":true"),
        "{body} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn https_and_resp_over_tls_and_a_plain_client_is_counted_not_logged() {
    if !tools() {
        return;
    }
    let certs = Certs::new();
    let daemon = Tls::start(&certs, None);
    ok_check(&daemon.curl(&certs.ca_file, None));

    // A client trusting another CA refuses the daemon; a plain HTTP client gets nothing.
    assert!(!daemon.curl(&certs.other_ca_file, None).status.success());
    let plain = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-d", CHECK])
        .arg(format!("http://127.0.0.1:{}/v1/check", daemon.http))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("allowed"));
    assert!(daemon.handshake_errors("http", "not_tls").await >= 1);
    assert!(
        daemon.handshake_errors("http", "unknown_authority").await
            + daemon.handshake_errors("http", "closed").await
            >= 1
    );

    // RESP over TLS.
    let out = Command::new("redis-cli")
        .args(["--tls", "--cacert"])
        .arg(&certs.ca_file)
        .args(["-h", "localhost", "-p", &daemon.resp.to_string()])
        .args(["SLUICE.CHECK", "p", "resp-key"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().next(), Some("1"), "{text}");

    assert!(!daemon.log().contains("handshake"), "{}", daemon.log());
}

#[tokio::test]
async fn mtls_refuses_a_client_without_a_certificate_and_one_of_another_ca() {
    if !tools() {
        return;
    }
    let certs = Certs::new();
    let daemon = Tls::start(&certs, Some(&certs.ca_file));
    ok_check(&daemon.curl(&certs.ca_file, Some(&certs.client)));
    assert!(!daemon.curl(&certs.ca_file, None).status.success());
    assert!(
        !daemon
            .curl(&certs.ca_file, Some(&certs.other_client))
            .status
            .success()
    );
    assert!(
        daemon
            .handshake_errors("http", "client_certificate_required")
            .await
            >= 1
    );
    assert!(daemon.handshake_errors("http", "unknown_authority").await >= 1);

    let redis_cli = |client: Option<&Pair>| {
        let mut cli = Command::new("redis-cli");
        cli.args(["--tls", "--cacert"]).arg(&certs.ca_file);
        if let Some(pair) = client {
            cli.arg("--cert")
                .arg(&pair.cert)
                .arg("--key")
                .arg(&pair.key);
        }
        let out = cli
            .args(["-h", "localhost", "-p", &daemon.resp.to_string(), "PING"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(redis_cli(Some(&certs.client)), "PONG");
    assert_ne!(redis_cli(None), "PONG");
    assert!(
        daemon.log().lines().all(|l| !l.contains("certificate")),
        "{}",
        daemon.log()
    );
}

/// A TLS client of the daemon's HTTP listener trusting `ca`: the certificate it was served.
async fn connect(
    port: u16,
    ca: &Path,
) -> (
    tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    CertificateDer<'static>,
) {
    let config = sluice_tls::client_config(
        "test",
        &sluice_tls::ClientFiles {
            ca_file: Some(ca.to_path_buf()),
            ..Default::default()
        },
    )
    .unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let stream = connector.connect(name, tcp).await.unwrap();
    let served = stream.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned();
    (stream, served)
}

/// One keep-alive check on `stream`: the status line.
async fn check_on(stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> String {
    let request = format!(
        "POST /v1/check HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{CHECK}",
        CHECK.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

fn der(path: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(path).unwrap()
}

/// Writes `pair` over the served files as a rotation does: each file renamed into place.
fn swap_in(pair: &Pair, cert: &Path, key: &Path) {
    for (from, to) in [(&pair.key, key), (&pair.cert, cert)] {
        let tmp = to.with_extension("new");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }
}

/// Waits (at most `PATIENCE`) until a new connection to `daemon` is served `pair`'s certificate.
async fn served_eventually(daemon: &Tls, certs: &Certs, pair: &Pair, what: &str) {
    let started = Instant::now();
    loop {
        let (_, served) = connect(daemon.http, &certs.ca_file).await;
        if served == der(&pair.cert) {
            return;
        }
        assert!(started.elapsed() < PATIENCE, "{what} is not served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_swapped_certificate_serves_the_next_connection_and_the_held_one_keeps_working() {
    let certs = Certs::new();
    let daemon = Tls::start(&certs, None);
    let (mut held, served) = connect(daemon.http, &certs.ca_file).await;
    assert_eq!(served, der(&certs.server.cert));
    assert!(check_on(&mut held).await.contains("200"));

    // Swapped on disk: the watch reads it again, no signal.
    let rotated = certs.issue_server("rotated", LOCAL_NAMES);
    swap_in(&rotated, &daemon.cert, &daemon.key);
    served_eventually(&daemon, &certs, &rotated, "the rotated certificate").await;
    assert!(check_on(&mut held).await.contains("200"));

    // And by SIGHUP (the same read): a third certificate.
    let third = certs.issue_server("third", LOCAL_NAMES);
    swap_in(&third, &daemon.cert, &daemon.key);
    common::signal(&daemon.child, "HUP");
    served_eventually(&daemon, &certs, &third, "the third certificate").await;
    assert!(check_on(&mut held).await.contains("200"));
    let log = daemon.log();
    assert!(log.contains("certificate files read again"), "{log}");
    assert!(!log.contains("PRIVATE KEY"), "{log}");
}

/// Requests pipelined on one connection: their answers are flushed together (one write,
/// one record), and each is there, in order, counted once.
#[tokio::test]
async fn pipelined_checks_over_tls_are_each_answered_in_order() {
    const PIPELINED: usize = 16;
    let certs = Certs::new();
    let daemon = Tls::start(&certs, None);
    let (mut stream, _) = connect(daemon.http, &certs.ca_file).await;
    let request = format!(
        "POST /v1/check HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{CHECK}",
        CHECK.len()
    );
    stream
        .write_all(request.repeat(PIPELINED).as_bytes())
        .await
        .unwrap();
    let mut answers = String::new();
    let mut buf = vec![0u8; 16_384];
    while answers.matches("\"remaining\":").count() < PIPELINED {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buf))
            .await
            .expect("the pipelined answers come")
            .unwrap();
        assert!(n > 0, "closed after {answers}");
        answers.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert_eq!(
        answers.matches("HTTP/1.1 200 OK").count(),
        PIPELINED,
        "{answers}"
    );
    let remaining: Vec<u64> = answers
        .split("\"remaining\":")
        .skip(1)
        .map(|rest| rest.split([',', '}']).next().unwrap().parse().unwrap())
        .collect();
    let expected: Vec<u64> = (0..PIPELINED as u64).map(|i| 99 - i).collect();
    assert_eq!(remaining, expected);
}

#[test]
fn check_config_refuses_a_malformed_key_naming_field_and_file_and_quoting_nothing() {
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("bad.key");
    let secret_line = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg";
    std::fs::write(
        &key,
        format!("-----BEGIN PRIVATE KEY-----\n{secret_line}\n"),
    )
    .unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[listen.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n{POLICY}",
            certs.server.cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let out = common::check_config(&config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("listen.tls.key_file"), "{stderr}");
    assert!(stderr.contains(&key.display().to_string()), "{stderr}");
    assert!(!stderr.contains(secret_line), "{stderr}");

    // A cert file that does not exist.
    std::fs::write(
        &config,
        format!(
            "[listen.tls]\ncert_file = \"/nonexistent/tls.crt\"\nkey_file = \"{}\"\n{POLICY}",
            certs.server.key.display()
        ),
    )
    .unwrap();
    let out = common::check_config(&config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("listen.tls.cert_file") && stderr.contains("/nonexistent/tls.crt"),
        "{stderr}"
    );
}
