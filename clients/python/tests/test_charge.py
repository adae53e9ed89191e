"""Charges: the clients' charge() against a real sluiced, and the ASGI (FastAPI) and WSGI
(Flask) middlewares charging what an OpenAI-compatible upstream reported, after the response
and without delaying it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List

import pytest
import sluice
from conftest import Daemon, get, unique
from usage_apps import JSON_BODY, SSE_BODY, SSE_EVENTS, TOKENS, UPSTREAMS, Hold, wait_charges

FRAMEWORKS = sorted(UPSTREAMS)


def test_charge_debits_into_debt_and_refunds(usage_daemon: Daemon) -> None:
    client = sluice.Client(usage_daemon.sock, timeout=5.0)
    got = [client.charge("tokens", "user:1", 40) for _ in range(3)]
    assert [(d.status, d.remaining, d.debt, d.allowed) for d in got] == [
        (200, 60, 0, True),
        (200, 20, 0, True),
        (200, 0, 20, False),
    ]
    ask = client.check("tokens", "user:1", cost=0)
    assert (ask.status, ask.debt) == (429, 20)
    refund = client.charge("tokens", "user:1", -30)
    assert (refund.allowed, refund.remaining, refund.debt) == (True, 10, 0)
    with pytest.raises(sluice.SluiceRequestError) as refused:
        client.charge("plain", "user:1", 40)
    assert refused.value.status == 400 and "usage" in refused.value.message
    client.close()


def test_async_charge_with_a_tier_name(usage_daemon: Daemon) -> None:
    async def main() -> sluice.Decision:
        async with sluice.AsyncClient(usage_daemon.sock, timeout=5.0) as client:
            first = await client.charge("tokens", "user:2", 70)
            assert (first.remaining, first.debt) == (30, 0)
            return await client.charge("tokens", "user:2", 50, tier=None)

    second = asyncio.run(main())
    assert (second.allowed, second.remaining, second.debt) == (False, 0, 20)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("path,body", [("/json", JSON_BODY), ("/sse", SSE_BODY)])
def test_budget_denies_the_fourth_request(framework: str, path: str, body: bytes, usage_daemon: Daemon) -> None:
    user = unique()
    with UPSTREAMS[framework](usage_daemon.sock, Hold()) as (port, client):
        # 100 tokens, 40 an answer: the third passes (20 left) and leaves the key in debt.
        for n in (1, 2, 3):
            status, _, got = get(port, path, {"X-User": user})
            assert (status, got) == (200, body), n
            wait_charges(client.stats, n, 0)
        status, headers, _ = get(port, path, {"X-User": user})
        assert status == 429 and int(headers["retry-after"]) >= 1


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_charge_does_not_delay_the_response(framework: str, usage_daemon: Daemon) -> None:
    hold = Hold()
    with UPSTREAMS[framework](usage_daemon.sock, hold) as (port, client):
        hold.arm()
        answers: List[Any] = []
        request = threading.Thread(target=lambda: answers.append(get(port, "/sse", {"X-User": "held"})))
        request.start()
        # The check is answered (the request reached its handler); then sluiced stops
        # answering anything, so the charge cannot complete until it is resumed.
        assert hold.entered.wait(10)
        usage_daemon.pause()
        hold.release.set()
        request.join(10)
        try:
            assert answers and answers[0][0] == 200 and answers[0][2] == SSE_BODY
            # The whole answer arrived while its charge was still waiting for sluiced.
            assert (client.stats.charges, client.stats.charge_failures) == (0, 0)
        finally:
            usage_daemon.resume()
        wait_charges(client.stats, 1, 0)
    check = sluice.Client(usage_daemon.sock, timeout=5.0).check("tokens", "user:held", cost=0)
    assert check.remaining == 100 - TOKENS


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sluiced_stopped_serves_and_counts_the_lost_charge(
    framework: str, usage_daemon: Daemon, caplog: Any
) -> None:
    with UPSTREAMS[framework](usage_daemon.sock, Hold()) as (port, client):
        usage_daemon.stop()
        status, _, body = get(port, "/json", {"X-User": "u"})
        assert (status, body) == (200, JSON_BODY)
        wait_charges(client.stats, 0, 1)
        assert client.stats.fail_open == 1
    assert any("charge(s) lost" in r.getMessage() for r in caplog.records)


SSE = b"".join(SSE_EVENTS)


@pytest.mark.parametrize(
    "body,want",
    [
        (JSON_BODY, 40),
        (b"\n  " + JSON_BODY, 40),
        (b'{"choices":[]}', None),
        (JSON_BODY[:50], None),
        (b'{"usage":{"total_tokens":7},"pad":"' + b"x" * (1 << 20) + b'"}', None),
        (SSE, 40),
        (SSE.replace(b"\n", b"\r\n"), 40),
        (b'data: {"usage":{"total_tokens":9}}', 9),
        (b'data: {"usage":{"total_tokens":5}}\n\ndata: {"usage":{"total_tokens":6}}\n\n', 6),
        (b'data: {"usage":\ndata: {"total_tokens":3}}\n\n', 3),
        (b': keep-alive\n\ndata: {"choices":[]}\n\ndata: [DONE]\n\n', None),
    ],
)
def test_openai_usage(body: bytes, want: Any) -> None:
    for step in (len(body) + 1, 7, 1):
        meter = sluice.OpenAIUsage()
        for i in range(0, len(body), step):
            meter.feed(body[i : i + step])
        assert meter.amount(200, []) == want, step
