"""Real parts for the tests: sluiced daemons on temp Unix sockets, apps under real servers.

`SLUICED` names the sluiced binary; without it the tests are skipped, or FAIL when `CI` is
set. Each daemon gets its own temp config and socket and is stopped at the end; apps run
under uvicorn / werkzeug in a thread on a free loopback port.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

RATE_HEADERS = (
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "ratelimit",
    "ratelimit-policy",
    "retry-after",
    "x-ratelimit-degraded",
)

# Token buckets refilling 3 (or 10, 1000) per hour: over a test's seconds the counts move only
# by what the test spends, whatever the wall clock (window algorithms would reset at an edge).
MEMORY_POLICIES = """
[policies.api]
algorithm = "token_bucket"
limit = 3
window = "1h"
tiers = { pro = { limit = 10 } }

[policies.wide]
algorithm = "token_bucket"
limit = 1000
window = "1h"
"""

# A usage policy of 100 tokens a week (a fixed window aligned to unix time: no window edge
# inside a test run in practice), and a policy that is not one.
USAGE_POLICIES = """
[policies.tokens]
algorithm = "fixed_window"
limit = 100
window = "7d"
usage = true

[policies.plain]
algorithm = "fixed_window"
limit = 100
window = "7d"
"""

# A redis backend on a closed loopback port: every check is a backend failure.
DOWN_POLICIES = """
[policies.shut]
algorithm = "fixed_window"
limit = 3
window = "60s"
fail = "closed"

[policies.soft]
algorithm = "token_bucket"
limit = 3
window = "1h"
fail = "open"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """One sluiced process on its own config and socket; start/stop/pause at will."""

    def __init__(
        self, binary: str, workdir: Path, name: str, backend: str, policies: str, http_port: int = 0, listen: str = ""
    ) -> None:
        self.binary = binary
        self.sock = str(workdir / f"{name}.sock")
        self.http_port = http_port
        self.log = workdir / f"{name}.log"
        self.config = workdir / f"{name}.toml"
        http = f"127.0.0.1:{http_port}" if http_port else ""
        self.config.write_text(
            f'[listen]\nunix = "{self.sock}"\nhttp = "{http}"\nshutdown_timeout = "1s"\n{listen}\n'
            f"[backend]\n{backend}\n{policies}"
        )
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> "Daemon":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.binary, "--config", str(self.config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluiced exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)
                return self
            except OSError:
                time.sleep(0.01)
        raise RuntimeError(f"sluiced did not listen on {self.sock}: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        # The stop reaches each thread asynchronously: wait until every one shows state T.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            states = []
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                try:
                    states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
                except OSError:
                    pass
            if states and all(s in ("T", "t") for s in states):
                return
            time.sleep(0.005)
        raise RuntimeError("sluiced did not stop on SIGSTOP")

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def socket_count(self) -> int:
        """Sockets the daemon holds open (listeners included)."""
        assert self.proc is not None
        fds = Path(f"/proc/{self.proc.pid}/fd")
        count = 0
        for fd in fds.iterdir():
            try:
                if os.readlink(fd).startswith("socket:"):
                    count += 1
            except OSError:
                pass
        return count


class _UnixConn(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=5)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(5)
        self.sock.connect(self._path)


Answer = Tuple[int, Dict[str, str], bytes]


def direct(sock: str, doc: Mapping[str, Any]) -> Answer:
    """POST a check to sluiced directly (not through the package under test)."""
    conn = _UnixConn(sock)
    try:
        conn.request("POST", "/v1/check", json.dumps(doc), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def get(port: int, path: str, headers: Optional[Mapping[str, str]] = None) -> Answer:
    """GET from an app on loopback; header names lowercased."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=dict(headers or {}))
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def rate_headers(headers: Mapping[str, str]) -> Dict[str, str]:
    return {k: v for k, v in headers.items() if k in RATE_HEADERS}


def unique(prefix: str = "k") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def sluiced_bin() -> str:
    binary = os.environ.get("SLUICED", "")
    if not binary or not os.access(binary, os.X_OK):
        why = f"SLUICED={binary!r} is not an executable sluiced binary"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return binary


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Unix socket paths are limited to ~108 bytes: keep them short.
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="slpy-"))
    return d


@pytest.fixture(scope="session")
def daemon(sluiced_bin: str, workdir: Path) -> Iterator[Daemon]:
    d = Daemon(sluiced_bin, workdir, "mem", 'kind = "memory"', MEMORY_POLICIES, http_port=free_port()).start()
    yield d
    d.stop()


@pytest.fixture(scope="session")
def down_daemon(sluiced_bin: str, workdir: Path) -> Iterator[Daemon]:
    backend = f'kind = "redis"\nurl = "redis://127.0.0.1:{free_port()}"\ntimeout = "10ms"'
    d = Daemon(sluiced_bin, workdir, "down", backend, DOWN_POLICIES).start()
    yield d
    d.stop()


@pytest.fixture
def fresh_daemon(sluiced_bin: str, workdir: Path) -> Iterator[Daemon]:
    """A daemon of the test's own, for stopping, pausing and restarting."""
    d = Daemon(sluiced_bin, workdir, unique("fresh"), 'kind = "memory"', MEMORY_POLICIES).start()
    yield d
    d.stop()


@pytest.fixture
def usage_daemon(sluiced_bin: str, workdir: Path) -> Iterator[Daemon]:
    """A daemon of the test's own with USAGE_POLICIES, for charging, pausing and stopping."""
    d = Daemon(sluiced_bin, workdir, unique("usage"), 'kind = "memory"', USAGE_POLICIES).start()
    yield d
    d.stop()


@contextmanager
def serve_asgi(app: Any) -> Iterator[int]:
    """The ASGI app under a real uvicorn, in a thread, on a free loopback port."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def serve_wsgi(app: Callable[..., Any]) -> Iterator[int]:
    """The WSGI app under werkzeug's threaded server, in a thread, on a free loopback port."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_port)
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()
