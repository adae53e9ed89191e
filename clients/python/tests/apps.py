"""The same test app in FastAPI and in Flask: one sub-app per route, each with its own
middleware options (the way an app sets policy, cost, tier per route or group).

A route is described by a dict: ``socket`` (which daemon), ``policy``, and optionally
``key="header"`` (key from the X-Key header), ``cost``, ``tier``, ``fail``, ``auth`` (the
framework's user comes from the X-User header), ``denied="custom"`` (a replaced 429),
``timeout`` (the client's; 1 s here so a loaded machine cannot turn an answer into a
fail-open; the hung-daemon cases set their own).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Mapping, Tuple

import sluice
from conftest import serve_asgi, serve_wsgi

Route = Mapping[str, Any]


@contextmanager
def fastapi_app(routes: Mapping[str, Route]) -> Iterator[Tuple[int, Dict[str, sluice.AsyncClient]]]:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, PlainTextResponse
    from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
    from starlette.middleware.authentication import AuthenticationMiddleware

    class HeaderAuth(AuthenticationBackend):
        async def authenticate(self, conn: Any) -> Any:
            user = conn.headers.get("x-user")
            return (AuthCredentials(["authenticated"]), SimpleUser(user)) if user else None

    def by_header(scope: Any) -> str:
        for name, value in scope["headers"]:
            if name == b"x-key":
                return "h:" + value.decode()
        return "h:none"

    def custom_denial(scope: Any, decision: sluice.Decision) -> Any:
        return JSONResponse({"custom": True, "retry_in": decision.retry_after}, status_code=429)

    app = FastAPI()
    clients: Dict[str, sluice.AsyncClient] = {}
    for mount, route in routes.items():
        sub = FastAPI()

        @sub.get("/")
        async def ok() -> PlainTextResponse:
            return PlainTextResponse("ok")

        client = clients[mount] = sluice.AsyncClient(route["socket"], timeout=route.get("timeout", 1.0))
        sub.add_middleware(
            sluice.SluiceMiddleware,
            client=client,
            policy=route["policy"],
            key=by_header if route.get("key") == "header" else None,
            cost=route.get("cost", 1),
            tier=route.get("tier"),
            fail=route.get("fail", "open"),
            on_denied=custom_denial if route.get("denied") == "custom" else None,
        )
        if route.get("auth"):
            sub.add_middleware(AuthenticationMiddleware, backend=HeaderAuth())
        app.mount(mount, sub)
    with serve_asgi(app) as port:
        yield port, clients


@contextmanager
def flask_app(routes: Mapping[str, Route]) -> Iterator[Tuple[int, Dict[str, sluice.Client]]]:
    from flask import Flask, Response
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    def by_header(environ: Any) -> str:
        return "h:" + environ.get("HTTP_X_KEY", "none")

    def custom_denial(environ: Any, decision: sluice.Decision) -> Any:
        body = json.dumps({"custom": True, "retry_in": decision.retry_after})
        return Response(body, status=429, content_type="application/json")

    def remote_user(app: Any) -> Any:
        # Stands in for the server or auth layer that sets REMOTE_USER.
        def wrapped(environ: Any, start_response: Any) -> Any:
            if environ.get("HTTP_X_USER"):
                environ["REMOTE_USER"] = environ["HTTP_X_USER"]
            return app(environ, start_response)

        return wrapped

    root = Flask("root")
    mounts: Dict[str, Any] = {}
    clients: Dict[str, sluice.Client] = {}
    for mount, route in routes.items():
        sub = Flask(f"sub{mount.replace('/', '_')}")
        sub.add_url_rule("/", "ok", lambda: "ok")
        client = clients[mount] = sluice.Client(route["socket"], timeout=route.get("timeout", 1.0))
        sub.wsgi_app = sluice.SluiceWSGIMiddleware(  # type: ignore[method-assign]
            sub.wsgi_app,
            client=client,
            policy=route["policy"],
            key=by_header if route.get("key") == "header" else None,
            cost=route.get("cost", 1),
            tier=route.get("tier"),
            fail=route.get("fail", "open"),
            on_denied=custom_denial if route.get("denied") == "custom" else None,
        )
        mounts[mount] = remote_user(sub) if route.get("auth") else sub
    with serve_wsgi(DispatcherMiddleware(root, mounts)) as port:
        yield port, clients


BUILDERS = {"fastapi": fastapi_app, "flask": flask_app}
