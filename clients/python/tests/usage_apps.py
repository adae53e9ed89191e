"""An OpenAI-compatible upstream in FastAPI and in Flask, behind the middleware with
``charge=OpenAIUsage``: ``GET /json`` answers a completion, ``GET /sse`` streams it as
server-sent events (usage in the last chunk before ``[DONE]``), each using TOKENS tokens.
Requests are keyed ``user:<X-User>``; a ``Hold`` can stop the next request in its handler
(after its check) until the test releases it.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Tuple, Union

import sluice
from conftest import serve_asgi, serve_wsgi

TOKENS = 40
JSON_BODY = (
    b'{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
    b'"content":"Hello"}}],"usage":{"prompt_tokens":15,"completion_tokens":25,"total_tokens":40}}'
)
SSE_EVENTS = (
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}],"usage":null}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"}}],"usage":null}\n\n',
    b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":15,"completion_tokens":25,"total_tokens":40}}\n\n',
    b"data: [DONE]\n\n",
)
SSE_BODY = b"".join(SSE_EVENTS)

AnyClient = Union[sluice.Client, sluice.AsyncClient]


class Hold:
    """Stops the next request in its handler: ``entered`` is set when it arrives (its check
    was answered), and it goes on once ``release`` is set."""

    def __init__(self) -> None:
        self._armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def arm(self) -> None:
        self.entered.clear()
        self.release.clear()
        self._armed = True

    def wait(self) -> None:
        if self._armed:
            self._armed = False
            self.entered.set()
            self.release.wait(10)


def _user(headers: Any) -> str:
    return "user:" + str(headers.get("x-user", "none"))


@contextmanager
def fastapi_upstream(socket: str, hold: Hold) -> Iterator[Tuple[int, sluice.AsyncClient]]:
    from fastapi import FastAPI
    from fastapi.responses import Response, StreamingResponse
    from starlette.datastructures import Headers

    app = FastAPI()

    @app.get("/json")
    def completion() -> Response:
        hold.wait()
        return Response(JSON_BODY, media_type="application/json")

    @app.get("/sse")
    def stream() -> StreamingResponse:
        hold.wait()
        return StreamingResponse(iter(SSE_EVENTS), media_type="text/event-stream")

    client = sluice.AsyncClient(socket, timeout=5.0)
    app.add_middleware(
        sluice.SluiceMiddleware,
        client=client,
        policy="tokens",
        key=lambda scope: _user(Headers(scope=scope)),
        charge=sluice.OpenAIUsage,
    )
    with serve_asgi(app) as port:
        yield port, client


@contextmanager
def flask_upstream(socket: str, hold: Hold) -> Iterator[Tuple[int, sluice.Client]]:
    from flask import Flask, Response

    app = Flask("upstream")

    @app.get("/json")
    def completion() -> Response:
        hold.wait()
        return Response(JSON_BODY, content_type="application/json")

    @app.get("/sse")
    def stream() -> Response:
        hold.wait()
        return Response(iter(SSE_EVENTS), content_type="text/event-stream")

    client = sluice.Client(socket, timeout=5.0)
    app.wsgi_app = sluice.SluiceWSGIMiddleware(  # type: ignore[method-assign]
        app.wsgi_app,
        client=client,
        policy="tokens",
        key=lambda environ: "user:" + environ.get("HTTP_X_USER", "none"),
        charge=sluice.OpenAIUsage,
    )
    with serve_wsgi(app) as port:
        yield port, client


UPSTREAMS = {"fastapi": fastapi_upstream, "flask": flask_upstream}


def wait_charges(stats: sluice.Stats, charges: int, failures: int) -> None:
    """Wait (10 s at most) until the middleware sent exactly this many charges."""
    deadline = time.monotonic() + 10
    while (stats.charges, stats.charge_failures) != (charges, failures):
        assert stats.charges <= charges and stats.charge_failures <= failures, vars(stats)
        assert time.monotonic() < deadline, f"charges {stats.charges}, failed {stats.charge_failures}"
        time.sleep(0.002)
