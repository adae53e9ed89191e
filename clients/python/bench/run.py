"""Benchmark of the Python client and middleware against a real sluiced, in one run.

(a) the bare client call: N sequential checks over the socket, sync and async: mean and p50.
(b) the same app route with and without the middleware under wrk, same concurrency, for
    FastAPI (uvicorn) and Flask (werkzeug, threaded): added latency = with - without, and its
    ratio to (a) of the client the middleware uses.
(c) keep-alive reuse: the most sockets sluiced held during each run, listeners excluded,
    against the pool size (8).

Usage: SLUICED=/path/to/sluiced python3 run.py [--calls 5000] [--duration 5] [--conc 1,8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import sluice  # noqa: E402

POOL_SIZE = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_connect(family: int, addr: Any, proc: "subprocess.Popen[bytes]", what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            with socket.socket(family) as s:
                s.connect(addr)
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"{what} did not listen")


def sockets_of(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            pass
    return count


def summary(samples_ns: List[int]) -> Tuple[float, float]:
    return statistics.fmean(samples_ns) / 1000, statistics.median(samples_ns) / 1000


def bare_sync(sock: str, calls: int) -> Tuple[float, float]:
    client = sluice.Client(sock, timeout=1.0)
    for i in range(500):
        client.check("bench", f"warm:{i}")
    out = []
    for i in range(calls):
        t = time.perf_counter_ns()
        client.check("bench", f"user:{i % 1000}")
        out.append(time.perf_counter_ns() - t)
    client.close()
    return summary(out)


def bare_async(sock: str, calls: int) -> Tuple[float, float]:
    async def main() -> Tuple[float, float]:
        client = sluice.AsyncClient(sock, timeout=1.0)
        for i in range(500):
            await client.check("bench", f"warm:{i}")
        out = []
        for i in range(calls):
            t = time.perf_counter_ns()
            await client.check("bench", f"user:{i % 1000}")
            out.append(time.perf_counter_ns() - t)
        await client.aclose()
        return summary(out)

    return asyncio.run(main())


def bare_httpx(sock: str, calls: int) -> Tuple[float, float]:
    """The same check through httpx's UDS transport: the HTTP client this package did not take."""
    import httpx

    async def main() -> Tuple[float, float]:
        client = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=sock), timeout=1.0)
        for i in range(500):
            (await client.post("http://sluiced/v1/check", json={"policy": "bench", "key": f"warm:{i}"})).read()
        out = []
        for i in range(calls):
            t = time.perf_counter_ns()
            r = await client.post("http://sluiced/v1/check", json={"policy": "bench", "key": f"user:{i % 1000}"})
            r.read()
            out.append(time.perf_counter_ns() - t)
        await client.aclose()
        return summary(out)

    return asyncio.run(main())


def in_process(calls: int) -> Dict[str, Tuple[float, float]]:
    """p50 µs of one request through the app called directly (no server, no load generator),
    without and with the middleware: the middleware's own cost beside its check."""
    sys.path.insert(0, str(HERE))
    import apps  # noqa: E402  (reads $SLUICE_SOCKET, set by main)
    from werkzeug.test import EnvironBuilder

    def asgi_scope() -> Dict[str, Any]:
        return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                "scheme": "http", "path": "/", "raw_path": b"/", "root_path": "", "query_string": b"",
                "headers": [], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}

    async def asgi(app: Any, n: int) -> float:
        async def receive() -> Dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Dict[str, Any]) -> None:
            pass

        out = []
        for _ in range(n):
            t = time.perf_counter_ns()
            await app(asgi_scope(), receive, send)
            out.append(time.perf_counter_ns() - t)
        return statistics.median(out) / 1000

    async def asgi_pair() -> Tuple[float, float]:
        await asgi(apps.fastapi_plain, 300)
        await asgi(apps.fastapi_sluice, 300)
        return await asgi(apps.fastapi_plain, calls), await asgi(apps.fastapi_sluice, calls)

    def wsgi(app: Any, n: int) -> float:
        environ = EnvironBuilder(path="/").get_environ()
        out = []
        for _ in range(n):
            t = time.perf_counter_ns()
            b"".join(app(dict(environ), lambda *a: None))
            out.append(time.perf_counter_ns() - t)
        return statistics.median(out) / 1000

    flask_plain, flask_sluice = apps._flask(False), apps._flask(True)
    wsgi(flask_plain, 300)
    wsgi(flask_sluice, 300)
    return {"fastapi": asyncio.run(asgi_pair()), "flask": (wsgi(flask_plain, calls), wsgi(flask_sluice, calls))}


def start_app(framework: str, limited: bool, port: int, env: Dict[str, str]) -> "subprocess.Popen[bytes]":
    if framework == "fastapi":
        target = "apps:fastapi_sluice" if limited else "apps:fastapi_plain"
        cmd = [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1", "--port", str(port),
               "--log-level", "warning", "--no-access-log"]
    else:
        cmd = [sys.executable, "apps.py", "flask-sluice" if limited else "flask", str(port)]
    proc = subprocess.Popen(cmd, cwd=HERE, env=env)
    wait_connect(socket.AF_INET, ("127.0.0.1", port), proc, " ".join(cmd))
    return proc


def wrk(port: int, conc: int, seconds: int) -> Dict[str, Any]:
    cmd = ["wrk", "-t1", f"-c{conc}", f"-d{seconds}s", "-s", str(HERE / "report.lua"), f"http://127.0.0.1:{port}/"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"^WRK (\{.*\})$", out, re.M)
    if m is None:
        raise SystemExit(f"wrk printed no report:\n{out}")
    doc: Dict[str, Any] = json.loads(m.group(1))
    doc["rps"] = doc["requests"] / doc["seconds"]
    return doc


def load(port: int, conc: int, seconds: int, daemon_pid: int, baseline: int) -> Dict[str, Any]:
    wrk(port, conc, 1)  # warm-up: imports, pool, JIT-free but caches
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], sockets_of(daemon_pid) - baseline)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        doc = wrk(port, conc, seconds)
    finally:
        stop.set()
        sampler.join()
    doc["daemon_conns"] = peak[0]
    return doc


def merge(docs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Rounds of one configuration: request-weighted mean latency, mean of the rest."""
    total = sum(d["requests"] for d in docs)
    return {
        "requests": total,
        "rps": statistics.fmean(d["rps"] for d in docs),
        "mean_us": sum(d["mean_us"] * d["requests"] for d in docs) / total,
        "p50_us": int(statistics.median(d["p50_us"] for d in docs)),
        "errors": sum(d["errors"] for d in docs),
        "daemon_conns": max(d["daemon_conns"] for d in docs),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conc", default="1,8")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    binary = os.environ.get("SLUICED", "")
    if not binary or not os.access(binary, os.X_OK):
        raise SystemExit(f"SLUICED={binary!r} is not an executable sluiced binary")
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed")
    concs = [int(c) for c in args.conc.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="slbench-"))
    sock = str(tmp / "s.sock")
    (tmp / "sluice.toml").write_text(
        f'[listen]\nunix = "{sock}"\nhttp = ""\n\n[backend]\nkind = "memory"\n\n'
        '[policies.bench]\nalgorithm = "token_bucket"\nlimit = 1000000000\nwindow = "1s"\n'
    )
    daemon = subprocess.Popen([binary, "--config", str(tmp / "sluice.toml")],
                              stdout=subprocess.DEVNULL, stderr=open(tmp / "sluiced.log", "wb"))
    try:
        wait_connect(socket.AF_UNIX, sock, daemon, "sluiced")
        time.sleep(0.2)
        env = dict(os.environ, SLUICE_SOCKET=sock,
                   PYTHONPATH=os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")]))

        sync_mean, sync_p50 = bare_sync(sock, args.calls)
        async_mean, async_p50 = bare_async(sock, args.calls)
        bare = {"flask": ("Client", sync_mean, sync_p50), "fastapi": ("AsyncClient", async_mean, async_p50)}
        print(f"sluiced: {binary}")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
              f"wrk -t1, {args.duration} s per run, {args.rounds} rounds (without, with) per app\n")
        print(f"(a) bare client call, {args.calls} sequential checks over the Unix socket")
        print("| client | mean µs | p50 µs |\n|---|---|---|")
        print(f"| sluice.Client (sync, http.client) | {sync_mean:.1f} | {sync_p50:.1f} |")
        print(f"| sluice.AsyncClient (asyncio) | {async_mean:.1f} | {async_p50:.1f} |")
        hx_mean, hx_p50 = bare_httpx(sock, args.calls)
        print(f"| for comparison: httpx.AsyncClient, UDS transport | {hx_mean:.1f} | {hx_p50:.1f} |\n")

        os.environ["SLUICE_SOCKET"] = sock
        direct = in_process(args.calls)
        print("(a') the app called in-process (no server): p50 µs of one request; added / bare call p50")
        print("| app | without | with | added | added / bare p50 |\n|---|---|---|---|---|")
        for framework, (plain_p50, with_p50) in direct.items():
            label, _, b_p50 = bare[framework]
            added = with_p50 - plain_p50
            print(f"| {framework} ({label}) | {plain_p50:.1f} | {with_p50:.1f} | {added:.1f} | {added / b_p50:.2f}× |")
        print()

        rows = []
        for framework in ("fastapi", "flask"):
            # Rounds alternate without / with, so a drift in the machine's load hits both.
            runs: Dict[Tuple[bool, int], List[Dict[str, Any]]] = {}
            for _ in range(args.rounds):
                for limited in (False, True):
                    # before the app opens any: only the app's connections are counted
                    baseline = sockets_of(daemon.pid)
                    port = free_port()
                    app = start_app(framework, limited, port, env)
                    try:
                        for conc in concs:
                            doc = load(port, conc, args.duration, daemon.pid, baseline)
                            runs.setdefault((limited, conc), []).append(doc)
                    finally:
                        app.send_signal(signal.SIGTERM)
                        app.wait(10)
            results = {k: merge(v) for k, v in runs.items()}
            for conc in concs:
                plain, limited_ = results[(False, conc)], results[(True, conc)]
                rows.append((framework, conc, plain, limited_) + bare[framework])

        print("(b) same route without / with the middleware under wrk; added = with − without,")
        print("    for the mean and for the p50 latency, each divided by the bare call's mean / p50")
        print("| app | conc | without: req/s, mean µs, p50 µs | with: req/s, mean µs, p50 µs "
              "| added mean µs (× bare) | added p50 µs (× bare) | sluiced conns (pool 8) | errors |")
        print("|---|---|---|---|---|---|---|---|")
        for framework, conc, p, w, label, b_mean, b_p50 in rows:
            a_mean, a_p50 = w["mean_us"] - p["mean_us"], w["p50_us"] - p["p50_us"]
            print(f"| {framework} ({label}) | {conc} | {p['rps']:.0f}, {p['mean_us']:.0f}, {p['p50_us']} "
                  f"| {w['rps']:.0f}, {w['mean_us']:.0f}, {w['p50_us']} "
                  f"| {a_mean:.0f} ({a_mean / b_mean:.2f}×) | {a_p50:.0f} ({a_p50 / b_p50:.2f}×) "
                  f"| {w['daemon_conns']} | {p['errors'] + w['errors']} |")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
