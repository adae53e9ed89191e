"""The default ``endpoint`` label is the route pattern the framework will match, else the path."""

from __future__ import annotations

from typing import Any

import sluice
from sluice.asgi import route_pattern


def test_asgi_endpoint_is_the_fastapi_route_pattern() -> None:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> Any:
        return {}

    scope = {"type": "http", "method": "GET", "path": "/items/5", "root_path": "", "app": app}
    assert route_pattern(scope) == "/items/{item_id}"
    assert route_pattern({**scope, "path": "/nowhere"}) == "/nowhere"
    assert route_pattern({"type": "http", "path": "/bare"}) == "/bare"


def test_wsgi_endpoint_is_the_flask_rule() -> None:
    from flask import Flask
    from werkzeug.test import EnvironBuilder

    app = Flask("endpoint")
    app.add_url_rule("/orders/<int:order_id>", "order", lambda order_id: "ok")
    mw = sluice.SluiceWSGIMiddleware(app.wsgi_app, client=sluice.Client("/nonexistent.sock"), policy="p")
    assert mw._endpoint(EnvironBuilder(path="/orders/7").get_environ()) == "/orders/<int:order_id>"
    assert mw._endpoint(EnvironBuilder(path="/missing").get_environ()) == "/missing"
    fixed = sluice.SluiceWSGIMiddleware(app.wsgi_app, client=sluice.Client("/x.sock"), policy="p", endpoint="/o")
    assert fixed._endpoint(EnvironBuilder(path="/orders/7").get_environ()) == "/o"


def test_middleware_options_are_validated() -> None:
    import pytest

    client = sluice.Client("/x.sock")
    for bad in ({"policy": ""}, {"policy": "p", "fail": "sometimes"}, {"policy": "p", "cost": -1}):
        with pytest.raises(ValueError):
            sluice.SluiceWSGIMiddleware(lambda e, s: [], client=client, **bad)  # type: ignore[arg-type]
