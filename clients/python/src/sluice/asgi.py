"""ASGI middleware (Starlette, FastAPI, any ASGI app) asking sluiced before each HTTP request.

``app.add_middleware(SluiceMiddleware, client=AsyncClient(), policy="public")``. A plain ASGI
middleware, not Starlette's BaseHTTPMiddleware: it adds one awaited check and rewrites the
response start, nothing else, and needs no framework import.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Tuple

from ._answer import Decision, SluiceError
from ._charges import AsyncCharges
from ._middleware import FAIL_CLOSED_BODY, FAIL_CLOSED_HEADERS, FailMode, Options, PROBLEM_JSON, PerRequest
from ._stats import Stats
from ._usage import Meter
from .aio import AsyncClient

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RawHeaders = List[Tuple[bytes, bytes]]


def default_key(scope: Scope) -> str:
    """``user:<id>`` for an authenticated ``scope["user"]`` (Starlette's
    AuthenticationMiddleware: ``identity``, else ``display_name``), else ``ip:<client host>``
    as the server resolved it (uvicorn's ``--proxy-headers`` / ``--forwarded-allow-ips``)."""
    user = scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        for attr in ("identity", "display_name"):
            try:
                ident = getattr(user, attr)
            except NotImplementedError:  # Starlette's BaseUser leaves identity abstract
                continue
            if ident:
                return f"user:{ident}"
    client = scope.get("client")
    if client:
        return f"ip:{client[0]}"
    return "ip:unknown"


# (id of the routes list, its length, method, path) -> pattern. Matching every route's regex
# costs ~10 µs per request on a small app; paths repeat, so answers are kept, in a dict
# cleared when full so that distinct paths (ids in URLs) cannot grow it without bound.
_ROUTE_CACHE: Dict[Tuple[int, int, str, str], str] = {}
_ROUTE_CACHE_SIZE = 4096


def route_pattern(scope: Scope) -> str:
    """The route pattern the app will match (``/items/{id}``), else the path.

    Middleware runs before routing, so the app's routes are matched here the way Starlette's
    router will (``route.matches``); an app without ``routes`` gives the path.
    """
    path = str(scope.get("path", ""))
    routes = getattr(scope.get("app"), "routes", None)
    if not routes:
        return path
    cache_key = (id(routes), len(routes), str(scope.get("method", "")), path)
    found = _ROUTE_CACHE.get(cache_key)
    if found is not None:
        return found
    try:
        from starlette.routing import Match
    except ImportError:  # pragma: no cover - an ASGI app with routes but no Starlette
        return path
    pattern = path
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            route_path = getattr(route, "path", None)
            if isinstance(route_path, str):
                pattern = route_path
            break
    if len(_ROUTE_CACHE) >= _ROUTE_CACHE_SIZE:
        _ROUTE_CACHE.clear()
    _ROUTE_CACHE[cache_key] = pattern
    return pattern


async def _value(value: Any, scope: Scope) -> Any:
    if callable(value):
        value = value(scope)
        if inspect.isawaitable(value):
            value = await value
    return value


def _raw(headers: Tuple[Tuple[str, str], ...]) -> RawHeaders:
    return [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in headers]


class SluiceMiddleware:
    """Rate-limits every HTTP request of the wrapped ASGI app through sluiced.

    Options: ``policy``; ``key`` (a function of the scope, sync or async; default
    :func:`default_key`); ``cost``, ``tier``, ``endpoint`` (values or functions of the scope;
    ``endpoint`` defaults to the route pattern); ``fail`` ``"open"`` (default) or
    ``"closed"``; ``on_denied(scope, decision)`` returning an ASGI app (a Starlette
    ``Response`` is one) to replace the 429 answer. sluiced's rate-limit headers are added to
    every answer, the replacement's included.

    ``charge(scope)``, for a usage policy, returns a :class:`sluice.Meter` for each request the
    app serves (allowed, or let through by a failed check), or None: the meter is fed every
    body message as it is sent, and once the last one is, its amount is charged to the
    request's key and tier in an asyncio task, never delaying the response nor failing it
    (lost charges: ``stats.charge_failures``). ``charge=OpenAIUsage`` charges an
    OpenAI-compatible upstream's tokens.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        client: AsyncClient,
        policy: str,
        key: Optional[Callable[[Scope], Any]] = None,
        cost: PerRequest[Optional[int]] = None,
        tier: PerRequest[Optional[str]] = None,
        endpoint: PerRequest[Optional[str]] = None,
        fail: FailMode = "open",
        on_denied: Optional[Callable[[Scope, Decision], ASGIApp]] = None,
        stats: Optional[Stats] = None,
        charge: Optional[Callable[[Scope], Optional[Meter]]] = None,
    ) -> None:
        self.app = app
        self.client = client
        self.options: Options[Scope] = Options(policy, key, cost, tier, endpoint, fail, charge)
        self.on_denied = on_denied
        #: Failure counters; the client's by default, so ``client.stats`` shows them.
        self.stats = stats or client.stats
        self._charges = AsyncCharges(client, self.stats)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        opts = self.options
        key: Optional[str] = None
        tier: Optional[str] = None
        try:
            key = await _value(opts.key, scope) if opts.key is not None else default_key(scope)
            endpoint = await _value(opts.endpoint, scope) if opts.endpoint is not None else route_pattern(scope)
            tier = await _value(opts.tier, scope)
            decision = await self.client.check(opts.policy, key, await _value(opts.cost, scope), tier, endpoint)
        except SluiceError as exc:
            self.stats.record_failure(exc, opts.fail_open)
            if opts.fail_open:
                await self._serve(scope, receive, send, key, tier)
            else:
                await _answer(send, 503, _raw(FAIL_CLOSED_HEADERS), FAIL_CLOSED_BODY)
            return
        extra = _raw(decision.headers)
        if decision.status == 200:
            await self._serve(scope, receive, _with_headers(send, extra), key, tier)
        elif decision.status == 429 and self.on_denied is not None:
            await self.on_denied(scope, decision)(scope, receive, _with_headers(send, extra))
        else:  # 429, or sluiced's own 503 (a fail-closed policy), passed through as sent
            content_type = PROBLEM_JSON if decision.status == 429 else decision.content_type
            head = [
                (b"content-type", content_type.encode("latin-1")),
                (b"content-length", str(len(decision.body)).encode("latin-1")),
            ]
            await _answer(send, decision.status, head + extra, decision.body)


    async def _serve(self, scope: Scope, receive: Receive, send: Send, key: Optional[str], tier: Optional[str]) -> None:
        """The app, with the response metered and charged after its last body message when
        ``charge`` gives a meter."""
        meter = self.options.charge(scope) if self.options.charge is not None and key is not None else None
        if meter is None:
            await self.app(scope, receive, send)
            return
        head: Dict[str, Any] = {"status": 200, "headers": []}
        charged = False

        async def metered(message: Message) -> None:
            nonlocal charged
            await send(message)
            if message["type"] == "http.response.start":
                head["status"] = int(message["status"])
                head["headers"] = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in message.get("headers", ())]
            elif message["type"] == "http.response.body":
                meter.feed(bytes(message.get("body", b"")))
                if not message.get("more_body", False) and not charged:
                    charged = True
                    self._charges.send(self.options.policy, str(key), tier, meter, head["status"], head["headers"])

        await self.app(scope, receive, metered)


def _with_headers(send: Send, extra: RawHeaders) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            own = list(message.get("headers", ()))
            if own:
                present = {name.lower() for name, _ in own}
                own.extend(h for h in extra if h[0] not in present)
            else:
                own = extra
            message["headers"] = own
        await send(message)

    return wrapped


async def _answer(send: Send, status: int, headers: RawHeaders, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
