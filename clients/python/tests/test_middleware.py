"""The middleware behaviour table, checked on FastAPI under uvicorn and Flask under werkzeug,
both against a real sluiced."""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Dict, Iterator, Tuple

import pytest
from apps import BUILDERS
from conftest import Daemon, direct, get, rate_headers, unique

FRAMEWORKS = sorted(BUILDERS)


@pytest.fixture(scope="module", params=FRAMEWORKS)
def app(request: Any, daemon: Daemon, down_daemon: Daemon) -> Iterator[Tuple[str, int, Dict[str, Any]]]:
    mem, down = daemon.sock, down_daemon.sock
    routes = {
        "/limited": {"socket": mem, "policy": "api", "key": "header"},
        "/costly": {"socket": mem, "policy": "api", "key": "header", "cost": 2, "tier": "pro"},
        "/custom": {"socket": mem, "policy": "api", "key": "header", "denied": "custom"},
        "/default": {"socket": mem, "policy": "wide"},
        "/user": {"socket": mem, "policy": "wide", "auth": True},
        "/shut": {"socket": down, "policy": "shut", "key": "header"},
        "/soft": {"socket": down, "policy": "soft", "key": "header"},
        "/misconfigured": {"socket": mem, "policy": "no-such-policy", "key": "header"},
    }
    with BUILDERS[request.param](routes) as (port, clients):
        yield request.param, port, clients


def test_allowed_answers_carry_sluiced_headers(app: Any) -> None:
    _, port, _ = app
    status, headers, body = get(port, "/limited/", {"X-Key": unique()})
    assert (status, body) == (200, b"ok")
    assert headers["x-ratelimit-limit"] == "3"
    assert headers["x-ratelimit-remaining"] == "2"
    assert headers["ratelimit-policy"] == '"api";q=3;w=3600'
    assert headers["ratelimit"].startswith('"api";r=2;t=')
    assert int(headers["x-ratelimit-reset"]) > time.time()
    assert "retry-after" not in headers


def test_limit_reached_gives_sluiceds_exact_429(app: Any, daemon: Daemon) -> None:
    _, port, _ = app
    key = unique()
    for _ in range(3):
        assert get(port, "/limited/", {"X-Key": key})[0] == 200
    # A denial consumes nothing, so the app's 429 and a direct check right after must match
    # byte for byte; a second boundary between the two can move Retry-After: try again.
    for _ in range(3):
        status, headers, body = get(port, "/limited/", {"X-Key": key})
        d_status, d_headers, d_body = direct(daemon.sock, {"policy": "api", "key": "h:" + key})
        if rate_headers(headers) == rate_headers(d_headers) and body == d_body:
            break
    assert status == d_status == 429
    assert rate_headers(headers) == rate_headers(d_headers)
    assert body == d_body
    assert headers["content-type"] == "application/problem+json"
    assert int(headers["retry-after"]) >= 1
    doc = json.loads(body)
    assert doc["error"] == "rate_limit_exceeded" and doc["violated-policies"] == ["api"]


def test_another_key_keeps_its_quota(app: Any) -> None:
    _, port, _ = app
    spent = unique()
    for _ in range(4):
        get(port, "/limited/", {"X-Key": spent})
    assert get(port, "/limited/", {"X-Key": spent})[0] == 429
    status, headers, _ = get(port, "/limited/", {"X-Key": unique()})
    assert status == 200 and headers["x-ratelimit-remaining"] == "2"


def test_cost_and_tier_are_passed_through(app: Any) -> None:
    _, port, _ = app
    key = unique()
    status, headers, _ = get(port, "/costly/", {"X-Key": key})
    assert status == 200
    assert (headers["x-ratelimit-limit"], headers["x-ratelimit-remaining"]) == ("10", "8")
    assert get(port, "/costly/", {"X-Key": key})[1]["x-ratelimit-remaining"] == "6"


def test_default_key_is_the_client_address(app: Any, daemon: Daemon) -> None:
    _, port, _ = app

    def remaining() -> int:
        return int(direct(daemon.sock, {"policy": "wide", "key": "ip:127.0.0.1", "cost": 0})[1]["x-ratelimit-remaining"])

    before = remaining()
    status, headers, _ = get(port, "/default/")
    assert status == 200 and int(headers["x-ratelimit-remaining"]) == before - 1
    assert remaining() == before - 1


def test_default_key_is_the_frameworks_user(app: Any, daemon: Daemon) -> None:
    _, port, _ = app
    user = unique("alice")
    status, headers, _ = get(port, "/user/", {"X-User": user})
    assert status == 200 and headers["x-ratelimit-remaining"] == "999"
    peek = direct(daemon.sock, {"policy": "wide", "key": f"user:{user}", "cost": 0})
    assert peek[1]["x-ratelimit-remaining"] == "999"


def test_denial_handler_can_be_replaced(app: Any) -> None:
    _, port, _ = app
    key = unique()
    for _ in range(3):
        get(port, "/custom/", {"X-Key": key})
    status, headers, body = get(port, "/custom/", {"X-Key": key})
    assert status == 429
    assert json.loads(body)["custom"] is True
    assert headers["x-ratelimit-remaining"] == "0" and "retry-after" in headers


def test_sluiceds_own_503_is_passed_through(app: Any, down_daemon: Daemon) -> None:
    _, port, clients = app
    status, headers, body = get(port, "/shut/", {"X-Key": unique()})
    d_status, d_headers, d_body = direct(down_daemon.sock, {"policy": "shut", "key": "x"})
    assert status == d_status == 503
    assert body == d_body and json.loads(body)["error"] == "backend_unavailable"
    assert rate_headers(headers) == rate_headers(d_headers) == {"retry-after": "1"}
    assert headers["content-type"] == "application/json"
    assert clients["/shut"].stats.errors == 0  # sluiced answered: not a client-side failure


def test_degraded_answer_is_copied(app: Any) -> None:
    _, port, _ = app
    status, headers, _ = get(port, "/soft/", {"X-Key": unique()})
    assert status == 200 and headers["x-ratelimit-degraded"] == "1"


def test_unknown_policy_fails_open_and_is_logged(app: Any, caplog: Any) -> None:
    _, port, clients = app
    with caplog.at_level(logging.WARNING, logger="sluice"):
        status, headers, body = get(port, "/misconfigured/", {"X-Key": unique()})
    assert (status, body) == (200, b"ok") and not rate_headers(headers)
    assert clients["/misconfigured"].stats.fail_open >= 1
    assert any("unknown_policy" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_daemon_down_fails_open_or_closed_then_recovers(framework: str, fresh_daemon: Daemon, caplog: Any) -> None:
    routes = {
        "/open": {"socket": fresh_daemon.sock, "policy": "wide"},
        "/closed": {"socket": fresh_daemon.sock, "policy": "wide", "fail": "closed"},
    }
    with BUILDERS[framework](routes) as (port, clients):
        assert get(port, "/open/")[1]["x-ratelimit-limit"] == "1000"  # a pooled connection now
        assert get(port, "/closed/")[0] == 200

        fresh_daemon.stop()
        with caplog.at_level(logging.WARNING, logger="sluice"):
            started = time.monotonic()
            status, headers, body = get(port, "/open/")
            assert time.monotonic() - started < 2  # no hang: a refused connect fails at once
        assert (status, body) == (200, b"ok") and not rate_headers(headers)
        assert clients["/open"].stats.fail_open == 1
        assert sum("failing open" in r.getMessage() for r in caplog.records) == 1

        status, headers, body = get(port, "/closed/")
        assert status == 503 and headers["retry-after"] == "1"
        assert headers["content-type"] == "application/json"
        assert json.loads(body)["error"] == "rate_limiter_unavailable"
        assert clients["/closed"].stats.fail_closed == 1

        fresh_daemon.start()  # same socket path, app untouched
        status, headers, _ = get(port, "/open/")
        assert status == 200 and headers["x-ratelimit-limit"] == "1000"
        assert get(port, "/closed/")[0] == 200


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hung_daemon_times_out_open_or_closed(framework: str, fresh_daemon: Daemon) -> None:
    routes = {
        "/open": {"socket": fresh_daemon.sock, "policy": "wide", "timeout": 0.25},
        "/closed": {"socket": fresh_daemon.sock, "policy": "wide", "fail": "closed", "timeout": 0.25},
    }
    with BUILDERS[framework](routes) as (port, clients):
        assert get(port, "/open/")[0] == 200
        fresh_daemon.pause()  # SIGSTOP: connections accepted by the kernel, never answered
        try:
            started = time.monotonic()
            status, headers, body = get(port, "/open/")
            assert time.monotonic() - started < 2  # bounded by the 250 ms check timeout
            assert (status, body) == (200, b"ok") and not rate_headers(headers)
            assert get(port, "/closed/")[0] == 503
        finally:
            fresh_daemon.resume()
        assert clients["/open"].stats.fail_open == 1
        assert get(port, "/open/")[1]["x-ratelimit-limit"] == "1000"
