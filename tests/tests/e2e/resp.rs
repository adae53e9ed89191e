//! The RESP listener driven by real Redis clients: `redis-cli` (one command, and a pipeline on
//! its standard input), redis-py through its own connection handshake and a pipeline, and raw
//! frames for pipelining, truncated and malformed input. Checks answer what `POST /v1/check`
//! answers, on the same state and counted in the same metrics; `CL.THROTTLE` replays
//! redis-cell's documented answers on the memory store and on a real Redis; a dead Redis gives
//! each policy its fail mode.

use std::path::Path;
use std::time::Duration;

use sluice_testkit::RedisServer;
use sluice_tests::{Daemon, T0, TEST_CONFIG, req};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// `redis-cli -s SOCKET ARGS…`: its output lines (arrays one element a line, errors as
/// `ERR …`).
pub(crate) async fn cli(d: &Daemon, args: &[&str]) -> Vec<String> {
    cli_with_input(&d.resp_socket, args, "").await
}

/// `redis-cli -s SOCKET` reading commands from `input`, one a line, sent as they are read.
async fn cli_pipe(d: &Daemon, input: &str) -> Vec<String> {
    cli_with_input(&d.resp_socket, &[], input).await
}

async fn cli_with_input(socket: &Path, args: &[&str], input: &str) -> Vec<String> {
    let mut child = tokio::process::Command::new("redis-cli")
        .arg("-s")
        .arg(socket)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli (apt-get install -y redis-tools)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("redis-cli did not finish")
        .unwrap();
    let mut lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    // redis-cli ends an error with an empty line.
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

fn lines(expected: &[&str]) -> Vec<String> {
    expected.iter().map(|s| (*s).to_owned()).collect()
}

/// Writes `frames` in one write, half-closes, and reads every reply until the daemon closes
/// (a close with input left unread resets the connection after the replies: also the end).
async fn raw(d: &Daemon, frames: &[u8]) -> String {
    let mut stream = UnixStream::connect(&d.resp_socket).await.unwrap();
    stream.write_all(frames).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("the daemon did not close the connection");
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8(out).unwrap()
}

/// A command as a RESP array of bulk strings.
fn frame(args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for arg in args {
        out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    out
}

/// `rate_limit_requests_total` of `policy` with `status`, from `/metrics`.
async fn requests(d: &Daemon, policy: &str, status: &str) -> u64 {
    sluice_tests::metrics_text(d)
        .await
        .lines()
        .filter(|l| {
            l.starts_with("rate_limit_requests_total{")
                && l.contains(&format!("policy=\"{policy}\""))
                && l.contains(&format!("status=\"{status}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

const RESET: &str = "1800000010"; // T0 + the 10 s window of `fw`, in unix seconds

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_check_answers_the_http_decision_on_the_same_state_and_metrics() {
    let d = Daemon::start(TEST_CONFIG).await;
    assert_eq!(
        cli(&d, &["SLUICE.CHECK", "fw", "cli:1"]).await,
        lines(&["1", "5", "4", RESET, "0", "0", "0"])
    );
    for remaining in ["3", "2", "1", "0"] {
        assert_eq!(
            cli(&d, &["sluice.check", "fw", "cli:1"]).await[2],
            remaining
        );
    }
    // HTTP sees the state RESP consumed, and RESP the one HTTP did.
    assert_eq!(
        d.unix().check(&req("fw", "cli:1")).await.unwrap().status,
        429
    );
    assert_eq!(
        cli(&d, &["SLUICE.CHECK", "fw", "cli:1"]).await,
        lines(&["0", "5", "0", RESET, "10", "0", "0"])
    );
    assert_eq!(requests(&d, "fw", "allowed").await, 5);
    assert_eq!(requests(&d, "fw", "rejected").await, 2);

    // Tiers, costs and endpoints as in the HTTP API: the free tier of `public` holds 2.
    assert_eq!(
        cli(
            &d,
            &[
                "SLUICE.CHECK",
                "public",
                "cli:2",
                "TIER",
                "free",
                "COST",
                "2",
                "ENDPOINT",
                "/orders"
            ]
        )
        .await[..3],
        lines(&["1", "2", "0"])
    );
    // A shadow policy's denial lets the caller through, as over HTTP.
    cli(&d, &["SLUICE.CHECK", "shadowed", "cli:3"]).await;
    assert_eq!(
        cli(&d, &["SLUICE.CHECK", "shadowed", "cli:3"]).await[0],
        "1"
    );
    // leaky_bucket tells the second request of a burst to wait one interval (1 s).
    cli(&d, &["SLUICE.CHECK", "leaky", "cli:4"]).await;
    assert_eq!(
        cli(&d, &["SLUICE.CHECK", "leaky", "cli:4"]).await[5],
        "1000"
    );
    // The batch is all-or-nothing: `fw` of cli:1 is spent, so nothing is consumed.
    let batch = cli(
        &d,
        &[
            "SLUICE.BATCH",
            "CHECK",
            "exact_fw",
            "cli:5",
            "CHECK",
            "fw",
            "cli:1",
        ],
    )
    .await;
    assert_eq!(batch[0], "0", "{batch:?}");
    assert_eq!(
        cli(&d, &["SLUICE.CHECK", "exact_fw", "cli:5"]).await[2],
        "99"
    );
}

#[tokio::test]
async fn errors_name_the_problem_and_connection_commands_answer_as_redis() {
    let d = Daemon::start(TEST_CONFIG).await;
    for (args, expected) in [
        (
            &["SLUICE.CHECK", "nope", "k"][..],
            "ERR unknown policy \"nope\"",
        ),
        (
            &["SLUICE.CHECK", "fw", "k", "COST", "6"],
            "ERR cost exceeds capacity",
        ),
        (
            &["SLUICE.CHECK", "fw"],
            "ERR wrong number of arguments for 'sluice.check' command",
        ),
        (
            &["SLUICE.CHECK", "fw", "k", "COST", "x"],
            "ERR COST is not an integer",
        ),
        (
            &["SLUICE.CHECK", "fw", "k", "LIMIT", "9"],
            "ERR syntax error: unknown option 'LIMIT'",
        ),
        (
            &["CL.THROTTLE", "k", "15", "30"],
            "ERR wrong number of arguments for 'cl.throttle'",
        ),
        (
            &["CL.THROTTLE", "k", "x", "30", "60"],
            "ERR max_burst is not an integer",
        ),
        (&["GET", "k"], "ERR unknown command 'GET'"),
        (&["SELECT", "1"], "ERR DB index is out of range"),
        (&["HELLO", "4"], "NOPROTO"),
        (&["-3", "SLUICE.CHECK", "fw", "resp3"], "1"),
        (&["PING"], "PONG"),
        (&["ECHO", "hi"], "hi"),
        (&["SELECT", "0"], "OK"),
        (&["CLIENT", "SETINFO", "LIB-NAME", "cli"], "OK"),
        (&["COMMAND", "COUNT"], "11"),
        (&["HELLO", "2"], "server"),
    ] {
        let out = cli(&d, args).await;
        assert!(
            out.first().is_some_and(|l| l.starts_with(expected)),
            "{args:?}: {out:?}"
        );
    }
    // RESP3 after HELLO 3: its map, then the RESP3 null.
    let out = raw(
        &d,
        format!(
            "{}{}",
            frame(&["HELLO", "3"]),
            frame(&["CLIENT", "GETNAME"])
        )
        .as_bytes(),
    )
    .await;
    assert!(
        out.starts_with("%7\r\n$6\r\nserver\r\n$6\r\nsluice\r\n"),
        "{out}"
    );
    assert!(
        out.contains("$5\r\nproto\r\n:3\r\n") && out.ends_with("*0\r\n_\r\n"),
        "{out}"
    );
    // A key over the HTTP bound is refused as over HTTP.
    let long = "k".repeat(513);
    let out = cli(&d, &["SLUICE.CHECK", "fw", &long]).await;
    assert!(
        out[0].starts_with("ERR key must be 1 to 512 bytes"),
        "{out:?}"
    );
}

/// redis-cell's `it_rate_limits` (max_burst 4, one per second), replayed through the socket
/// with the daemon's clock moved between commands, on the memory store and on Redis: the
/// state lives in the configured backend, under a key no policy can have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_throttle_gives_redis_cells_answers_on_memory_and_redis() {
    let redis = RedisServer::start();
    for backend in [
        String::new(),
        format!("[backend]\nkind = \"redis\"\nurl = \"{}\"\n", redis.url()),
    ] {
        let d = Daemon::start(&format!("{backend}{TEST_CONFIG}")).await;
        // The example of redis-cell's README.
        assert_eq!(
            cli(&d, &["CL.THROTTLE", "user123", "15", "30", "60", "1"]).await,
            lines(&["0", "16", "15", "-1", "2"])
        );
        // (ms after T0, quantity, [limited, limit, remaining, retry_after, reset_after])
        let cases: [(u64, &str, [&str; 5]); 15] = [
            (0, "6", ["1", "5", "5", "-1", "0"]),
            (0, "1", ["0", "5", "4", "-1", "1"]),
            (0, "1", ["0", "5", "3", "-1", "2"]),
            (0, "1", ["0", "5", "2", "-1", "3"]),
            (0, "1", ["0", "5", "1", "-1", "4"]),
            (0, "1", ["0", "5", "0", "-1", "5"]),
            (0, "1", ["1", "5", "0", "1", "5"]),
            (3000, "1", ["0", "5", "2", "-1", "3"]),
            (3100, "1", ["0", "5", "1", "-1", "4"]),
            (4000, "1", ["0", "5", "1", "-1", "4"]),
            (8000, "1", ["0", "5", "4", "-1", "1"]),
            (9500, "1", ["0", "5", "4", "-1", "1"]),
            (9500, "0", ["0", "5", "4", "-1", "1"]),
            (9500, "2", ["0", "5", "2", "-1", "3"]),
            (9500, "5", ["1", "5", "2", "3", "3"]),
        ];
        for (i, (after, quantity, expected)) in cases.into_iter().enumerate() {
            d.clock.set(T0 + after);
            assert_eq!(
                cli(&d, &["CL.THROTTLE", "foo", "4", "1", "1", quantity]).await,
                lines(&expected),
                "case {i} (+{after} ms, quantity {quantity}) on {backend:?}"
            );
        }
        // A policy cannot read or spend a throttle's state: `fw` of key `foo` is fresh.
        assert_eq!(cli(&d, &["SLUICE.CHECK", "fw", "foo"]).await[2], "4");
    }
    let keys = redis.cli(&["KEYS", "*cl.throttle*"]);
    assert!(keys.contains("{@cl.throttle:foo}"), "{keys}");
}

/// Written for redis-py 5+: the handshake (HELLO 3 with protocol 3, the default of redis-py 8)
/// pipelines CLIENT SETNAME and CLIENT SETINFO, then checks one by one and in a pipeline
/// (without MULTI, which sluiced does not have).
const REDIS_PY: &str = r#"
import json, sys, redis
r = redis.Redis(unix_socket_path=sys.argv[1], client_name="e2e-worker", protocol=int(sys.argv[2]))
name = r.client_getname()
out = {"ping": r.ping(), "name": name.decode() if isinstance(name, bytes) else name}
out["one"] = r.execute_command("SLUICE.CHECK", "fw", "py:1")
p = r.pipeline(transaction=False)
for _ in range(7):
    p.execute_command("SLUICE.CHECK", "fw", "py:2")
p.execute_command("CL.THROTTLE", "py:3", 15, 30, 60, 1)
out["pipeline"] = p.execute()
try:
    r.execute_command("SLUICE.CHECK", "nope", "k")
except redis.ResponseError as e:
    out["error"] = str(e)
print(json.dumps(out))
"#;

/// redis-py on `protocol` (2 or 3), installed by pip when it is missing (as scripts/test does).
async fn redis_py(socket: &Path, protocol: &str) -> serde_json::Value {
    let has_redis_py = tokio::process::Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .await
        .is_ok_and(|s| s.success());
    if !has_redis_py {
        let installed = tokio::process::Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "redis"])
            .status()
            .await
            .unwrap();
        assert!(installed.success(), "pip install redis failed");
    }
    let out = tokio::process::Command::new("python3")
        .args(["-c", REDIS_PY])
        .arg(socket)
        .arg(protocol)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Not even a warning: no fallback from RESP3 was needed.
    assert!(stderr.is_empty(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_connects_checks_and_pipelines_on_resp2_and_resp3() {
    for protocol in ["3", "2"] {
        let d = Daemon::start(TEST_CONFIG).await;
        let out = redis_py(&d.resp_socket, protocol).await;
        assert_eq!(out["ping"], true);
        assert_eq!(out["name"], "e2e-worker");
        assert_eq!(
            out["one"],
            serde_json::json!([1, 5, 4, 1_800_000_010, 0, 0, 0])
        );
        let pipeline = out["pipeline"].as_array().unwrap();
        let remaining: Vec<i64> = pipeline[..7]
            .iter()
            .map(|answer| answer[2].as_i64().unwrap())
            .collect();
        assert_eq!(remaining, [4, 3, 2, 1, 0, 0, 0], "protocol {protocol}");
        assert_eq!(pipeline[6][0], 0);
        assert_eq!(pipeline[7], serde_json::json!([0, 16, 15, -1, 2]));
        assert_eq!(out["error"], "unknown policy \"nope\"");
    }
}

#[tokio::test]
async fn a_pipeline_is_answered_in_order_and_quit_ends_it() {
    let d = Daemon::start(TEST_CONFIG).await;
    let mut frames = String::new();
    for _ in 0..101 {
        frames.push_str(&frame(&["SLUICE.CHECK", "exact_fw", "pipe:1"]));
    }
    frames.push_str(&frame(&["PING"]));
    frames.push_str(&frame(&["QUIT"]));
    frames.push_str(&frame(&["SLUICE.CHECK", "exact_fw", "pipe:2"]));
    let out = raw(&d, frames.as_bytes()).await;
    let mut expected = String::new();
    for remaining in (0..100).rev() {
        expected.push_str(&format!(
            "*7\r\n:1\r\n:100\r\n:{remaining}\r\n:1800003600\r\n:0\r\n:0\r\n:0\r\n"
        ));
    }
    expected.push_str("*7\r\n:0\r\n:100\r\n:0\r\n:1800003600\r\n:3600\r\n:0\r\n:0\r\n");
    expected.push_str("+PONG\r\n+OK\r\n");
    assert_eq!(out, expected);
    // Nothing after QUIT ran.
    assert_eq!(
        cli(&d, &["SLUICE.CHECK", "exact_fw", "pipe:2"]).await[2],
        "99"
    );

    // redis-cli sends its standard input's commands as it reads them.
    let piped = cli_pipe(&d, "PING\nSLUICE.CHECK fw pipe:3\nECHO done\n").await;
    assert_eq!(
        piped,
        lines(&["PONG", "1", "5", "4", RESET, "0", "0", "0", "done"])
    );
}

#[tokio::test]
async fn truncated_frames_wait_and_malformed_ones_are_refused_and_closed() {
    let d = Daemon::start(TEST_CONFIG).await;
    // A frame sent in pieces is answered once whole.
    let mut stream = UnixStream::connect(&d.resp_socket).await.unwrap();
    let whole = frame(&["ECHO", "in pieces"]);
    for piece in whole.as_bytes().chunks(3) {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut answer = [0u8; 15];
    stream.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"$9\r\nin pieces\r\n");

    // A good command before a bad frame is answered, then the error, then the close.
    for bad in [
        "*1\r\n:1\r\n",
        "PING\r\n",
        "*x\r\n",
        &"*1\r\n".repeat(1000),
        &format!("*1\r\n${}\r\n{}", 1 << 20, "a".repeat(70_000)),
    ] {
        let out = raw(&d, format!("{}{bad}", frame(&["PING"])).as_bytes()).await;
        assert!(
            out.starts_with("+PONG\r\n-ERR Protocol error: ") && out.ends_with("\r\n"),
            "{bad:.40?}: {out}"
        );
        assert_eq!(out.matches("\r\n").count(), 2, "{out}");
    }
}

const FAIL_MODES: &str = r#"
[policies.open]
algorithm = "token_bucket"
limit = 1000
window = "1h"
fail = "open"

[policies.closed]
algorithm = "token_bucket"
limit = 1000
window = "1h"
fail = "closed"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_fails_open_degraded_or_closed_unavailable() {
    let mut redis = RedisServer::start();
    let d = Daemon::start(&format!(
        "[backend]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"50ms\"\n{FAIL_MODES}",
        redis.url()
    ))
    .await;
    let served = cli(&d, &["SLUICE.CHECK", "closed", "k"]).await;
    assert_eq!(
        (&served[..3], &served[4..]),
        (
            &lines(&["1", "1000", "999"])[..],
            &lines(&["0", "0", "0"])[..]
        )
    );
    redis.kill();
    // Degraded: allowed without counting, the key reported full.
    assert_eq!(
        cli(&d, &["SLUICE.CHECK", "open", "k"]).await,
        lines(&["1", "1000", "999", "1800000000", "0", "0", "1"])
    );
    for args in [
        &["SLUICE.CHECK", "closed", "k"][..],
        &["CL.THROTTLE", "k", "1", "1", "1"],
        &["SLUICE.BATCH", "CHECK", "open", "k", "CHECK", "closed", "k"],
    ] {
        assert_eq!(
            cli(&d, args).await,
            lines(&["UNAVAILABLE backend unavailable"]),
            "{args:?}"
        );
    }
    let text = sluice_tests::metrics_text(&d).await;
    assert!(
        text.contains(r#"rate_limit_fail_open_total{policy="open",reason="unavailable"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"rate_limit_fail_closed_total{policy="closed",reason="unavailable"}"#));
}
