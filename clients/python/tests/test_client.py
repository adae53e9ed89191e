"""The sync and async clients against a real sluiced: answers, errors, batches, keep-alive
reuse, a stopped / restarted / hung daemon, and an event loop that keeps running."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, List

import pytest
import sluice
from conftest import MEMORY_POLICIES, Daemon, unique


def test_check_reads_the_answer(daemon: Daemon) -> None:
    client = sluice.Client(daemon.sock, timeout=1.0)
    key = unique()
    d = client.check("api", key)
    assert (d.allowed, d.status, d.limit, d.remaining, d.policy) == (True, 200, 3, 2, "api")
    assert dict(d.headers)["RateLimit-Policy"] == '"api";q=3;w=3600'
    client.check("api", key, cost=2)
    denied = client.check("api", key)
    assert (denied.allowed, denied.status, denied.remaining) == (False, 429, 0)
    assert denied.retry_after is not None and denied.retry_after >= 1
    assert dict(denied.headers)["Retry-After"] == str(denied.retry_after)
    assert b'"violated-policies":["api"]' in denied.body and denied.content_type == "application/problem+json"
    pro = client.check("api", unique(), cost=3, tier="pro", endpoint="/orders")
    assert (pro.limit, pro.remaining) == (10, 7)


def test_refused_checks_carry_sluiceds_code(daemon: Daemon) -> None:
    client = sluice.Client(daemon.sock, timeout=1.0)
    with pytest.raises(sluice.SluiceRequestError) as err:
        client.check("no-such-policy", "k")
    assert (err.value.status, err.value.code) == (404, "unknown_policy")
    with pytest.raises(sluice.SluiceRequestError) as err:
        client.check("api", "")
    assert (err.value.status, err.value.code) == (400, "bad_request")
    assert "key" in err.value.message


def test_batch_is_all_or_nothing(daemon: Daemon) -> None:
    client = sluice.Client(daemon.sock, timeout=1.0)
    a, b = unique(), unique()
    client.check("api", b, cost=3)  # b has nothing left
    d = client.check_batch([sluice.Check("api", a), {"policy": "api", "key": b}])
    assert (d.status, d.allowed, [r.allowed for r in d.results]) == (429, False, [True, False])
    assert client.check("api", a, cost=0).remaining == 3  # the allowed half consumed nothing
    ok = client.check_batch([sluice.Check("api", a), sluice.Check("api", unique(), cost=2, tier="pro")])
    assert ok.allowed and [(r.limit, r.remaining) for r in ok.results] == [(3, 2), (10, 8)]


def test_tcp_address(daemon: Daemon) -> None:
    d = sluice.Client(f"http://127.0.0.1:{daemon.http_port}", timeout=1.0).check("api", unique())
    assert (d.status, d.remaining) == (200, 2)

    async def main() -> sluice.Decision:
        return await sluice.AsyncClient(f"http://127.0.0.1:{daemon.http_port}", timeout=1.0).check("api", unique())

    assert asyncio.run(main()).remaining == 2


def test_defaults(monkeypatch: Any) -> None:
    monkeypatch.setenv("SLUICE_SOCKET", "/run/x/sluiced.sock")
    client = sluice.Client()
    assert (client.timeout, client.pool_size, str(client.address)) == (0.05, 8, "unix:/run/x/sluiced.sock")
    monkeypatch.delenv("SLUICE_SOCKET")
    assert str(sluice.AsyncClient().address) == "unix:/tmp/sluiced.sock"


def test_bad_addresses_are_refused() -> None:
    for bad in ("https://127.0.0.1:8080", "http://", ""):
        with pytest.raises(ValueError):
            sluice.Client(bad)
    with pytest.raises(ValueError):
        sluice.Client("/tmp/x.sock", timeout=0)


def test_sync_connections_are_reused_and_bounded(fresh_daemon: Daemon) -> None:
    daemon = fresh_daemon  # its own daemon: no other test's connections in the count
    baseline = daemon.socket_count()
    client = sluice.Client(daemon.sock, pool_size=2, timeout=2.0)
    counts: List[int] = []

    def work() -> None:
        for _ in range(25):
            client.check("wide", unique())
        counts.append(daemon.socket_count())

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= max(counts) - baseline <= 2  # 150 checks from 6 threads over at most 2 connections
    client.close()


def test_async_connections_are_reused_and_bounded(fresh_daemon: Daemon) -> None:
    daemon = fresh_daemon
    baseline = daemon.socket_count()

    async def main() -> int:
        client = sluice.AsyncClient(daemon.sock, pool_size=3, timeout=2.0)
        for _ in range(4):
            await asyncio.gather(*(client.check("wide", unique()) for _ in range(30)))
        held = daemon.socket_count() - baseline
        await client.aclose()
        return held

    assert 1 <= asyncio.run(main()) <= 3


def test_sync_daemon_stopped_then_restarted(fresh_daemon: Daemon) -> None:
    client = sluice.Client(fresh_daemon.sock, timeout=1.0)
    assert client.check("wide", "k").status == 200  # leaves a pooled connection
    fresh_daemon.stop()
    with pytest.raises(sluice.SluiceUnavailable):
        client.check("wide", "k")
    fresh_daemon.start()
    assert client.check("wide", "k").status == 200
    # a pooled connection to the old process is retried once on a fresh one
    fresh_daemon.stop()
    fresh_daemon.start()
    assert client.check("wide", "k").status == 200


def test_async_daemon_stopped_then_restarted(fresh_daemon: Daemon) -> None:
    async def main() -> None:
        client = sluice.AsyncClient(fresh_daemon.sock, timeout=1.0)
        assert (await client.check("wide", "k")).status == 200
        fresh_daemon.stop()
        with pytest.raises(sluice.SluiceUnavailable):
            await client.check("wide", "k")
        fresh_daemon.start()
        assert (await client.check("wide", "k")).status == 200
        fresh_daemon.stop()
        fresh_daemon.start()
        assert (await client.check("wide", "k")).status == 200

    asyncio.run(main())


def test_sync_hung_daemon_times_out(fresh_daemon: Daemon) -> None:
    client = sluice.Client(fresh_daemon.sock, timeout=0.1)
    assert client.check("wide", "k").status == 200
    fresh_daemon.pause()
    try:
        started = time.monotonic()
        with pytest.raises(sluice.SluiceTimeout):
            client.check("wide", "k")
        assert time.monotonic() - started < 2
    finally:
        fresh_daemon.resume()
    assert client.check("wide", "k", timeout=1.0).status == 200


def test_async_hung_daemon_times_out_without_blocking_the_loop(fresh_daemon: Daemon) -> None:
    async def main() -> Any:
        client = sluice.AsyncClient(fresh_daemon.sock, timeout=0.3)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        fresh_daemon.pause()
        try:
            with pytest.raises(sluice.SluiceTimeout):
                await client.check("wide", "k")
        finally:
            fresh_daemon.resume()
            task.cancel()
        # the loop ran other work the whole time the check waited
        assert ticks >= 5
        return (await client.check("wide", "k", timeout=1.0)).status

    assert asyncio.run(main()) == 200


def test_async_client_survives_a_new_event_loop(daemon: Daemon) -> None:
    client = sluice.AsyncClient(daemon.sock, timeout=1.0)
    assert asyncio.run(client.check("wide", unique())).status == 200
    assert asyncio.run(client.check("wide", unique())).status == 200


def test_overloaded_daemon_is_unavailable_not_a_decision(sluiced_bin: str, workdir: Any) -> None:
    # sluiced at listen.max_connections answers 503 "overloaded": no policy decided that, so
    # it is the daemon not serving (a middleware fails open on it), unlike backend_unavailable.
    d = Daemon(sluiced_bin, workdir, unique("full"), 'kind = "memory"', MEMORY_POLICIES, listen="max_connections = 1")
    d.start()
    try:
        holder = _hold_the_only_slot(d.sock)
        try:
            with pytest.raises(sluice.SluiceUnavailable, match="overloaded"):
                sluice.Client(d.sock, timeout=1.0).check("wide", "k")
        finally:
            holder.close()
    finally:
        d.stop()


def _hold_the_only_slot(path: str) -> socket.socket:
    # The start-up probe's connection may not be released yet: retry until one is served.
    deadline = time.monotonic() + 5
    while True:
        holder = socket.socket(socket.AF_UNIX)
        holder.connect(path)
        holder.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        if holder.recv(100).startswith(b"HTTP/1.1 200"):
            return holder
        holder.close()
        assert time.monotonic() < deadline, "no connection was ever served"
        time.sleep(0.05)
