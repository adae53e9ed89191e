"""The benchmark's apps: one trivial route, with and without the sluice middleware.

Run as ``python3 apps.py KIND PORT`` (KIND: flask, flask-sluice) or under uvicorn as
``apps:fastapi_plain`` / ``apps:fastapi_sluice``. The client finds sluiced through
``$SLUICE_SOCKET``, the default address.
"""

from __future__ import annotations

import sys
from typing import Any

import sluice


def _fastapi(limited: bool) -> Any:
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    app = FastAPI()

    @app.get("/")
    async def index() -> PlainTextResponse:
        return PlainTextResponse("ok")

    if limited:
        app.add_middleware(sluice.SluiceMiddleware, client=sluice.AsyncClient(), policy="bench")
    return app


def _flask(limited: bool) -> Any:
    from flask import Flask

    app = Flask("bench")
    app.add_url_rule("/", "index", lambda: "ok")
    if limited:
        app.wsgi_app = sluice.SluiceWSGIMiddleware(  # type: ignore[method-assign]
            app.wsgi_app, client=sluice.Client(), policy="bench"
        )
    return app


fastapi_plain = _fastapi(False)
fastapi_sluice = _fastapi(True)

if __name__ == "__main__":
    from werkzeug.serving import WSGIRequestHandler, make_server

    class KeepAlive(WSGIRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as wrk's connections expect

        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    kind, port = sys.argv[1], int(sys.argv[2])
    server = make_server("127.0.0.1", port, _flask(kind == "flask-sluice"), threaded=True, request_handler=KeepAlive)
    server.serve_forever()
