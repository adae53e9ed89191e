"""WSGI middleware (Flask, Django, any WSGI app) asking sluiced before each request.

``app.wsgi_app = SluiceWSGIMiddleware(app.wsgi_app, client=Client(), policy="public")``.
WSGI is blocking by design, so the check is a blocking call bounded by the client's timeout.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from ._answer import Decision, SluiceError
from ._charges import ThreadCharges
from ._middleware import FAIL_CLOSED_BODY, FAIL_CLOSED_HEADERS, FailMode, Options, PROBLEM_JSON, PerRequest, merge_headers
from ._stats import Stats
from ._usage import Meter
from .client import Client

Environ = Mapping[str, Any]
Headers = List[Tuple[str, str]]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_RULE_CACHE_SIZE = 4096
_REASONS = {429: "429 Too Many Requests", 503: "503 Service Unavailable"}


def default_key(environ: Environ) -> str:
    """``user:<REMOTE_USER>`` when the server or an auth layer set it, else
    ``ip:<REMOTE_ADDR>`` (behind a proxy, werkzeug's ProxyFix sets it from X-Forwarded-For)."""
    user = environ.get("REMOTE_USER")
    if user:
        return f"user:{user}"
    return f"ip:{environ.get('REMOTE_ADDR') or 'unknown'}"


class SluiceWSGIMiddleware:
    """Rate-limits every request of the wrapped WSGI app through sluiced.

    Options as :class:`sluice.asgi.SluiceMiddleware`, the functions receiving the WSGI
    environ; ``on_denied(environ, decision)`` returns a WSGI app (a werkzeug ``Response`` is
    one). ``endpoint`` defaults to the Flask route pattern when the wrapped callable is a
    Flask app's ``wsgi_app``, else ``PATH_INFO``.

    ``charge(environ)``, for a usage policy, returns a :class:`sluice.Meter` for each request
    the app serves (allowed, or let through by a failed check), or None: the meter is fed every
    piece of the body as the server takes it, and once the server has closed the response, its
    amount is charged to the request's key and tier on a small pool of threads, never delaying
    the response nor failing it (lost charges: ``stats.charge_failures``).
    """

    def __init__(
        self,
        app: WSGIApp,
        *,
        client: Client,
        policy: str,
        key: Optional[Callable[[Environ], str]] = None,
        cost: PerRequest[Optional[int]] = None,
        tier: PerRequest[Optional[str]] = None,
        endpoint: PerRequest[Optional[str]] = None,
        fail: FailMode = "open",
        on_denied: Optional[Callable[[Environ, Decision], WSGIApp]] = None,
        stats: Optional[Stats] = None,
        charge: Optional[Callable[[Environ], Optional[Meter]]] = None,
    ) -> None:
        self.app = app
        self.client = client
        self.options: Options[Environ] = Options(policy, key, cost, tier, endpoint, fail, charge)
        self.on_denied = on_denied
        #: Failure counters; the client's by default, so ``client.stats`` shows them.
        self.stats = stats or client.stats
        self._charges = ThreadCharges(client, self.stats) if charge is not None else None
        # app.wsgi_app is a bound method of the Flask app: its url_map names the route.
        self._url_map = getattr(getattr(app, "__self__", None), "url_map", None)
        # (method, host, path) -> rule: matching the url map costs ~15 µs a request; paths
        # repeat. Cleared when full, so distinct paths (ids in URLs) cannot grow it unbounded.
        self._rules: Dict[Tuple[str, str, str], str] = {}

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        opts = self.options
        key: Optional[str] = None
        tier: Optional[str] = None
        try:
            key = opts.key(environ) if opts.key is not None else default_key(environ)
            tier = opts.tier(environ) if callable(opts.tier) else opts.tier
            decision = self.client.check(
                opts.policy,
                key,
                opts.cost(environ) if callable(opts.cost) else opts.cost,
                tier,
                self._endpoint(environ),
            )
        except SluiceError as exc:
            self.stats.record_failure(exc, opts.fail_open)
            if opts.fail_open:
                return self._serve(environ, start_response, key, tier)
            start_response(_REASONS[503], list(FAIL_CLOSED_HEADERS))
            return [FAIL_CLOSED_BODY]
        extra = decision.headers
        if decision.status == 200:
            return self._serve(environ, _with_headers(start_response, extra), key, tier)
        if decision.status == 429 and self.on_denied is not None:
            return self.on_denied(environ, decision)(environ, _with_headers(start_response, extra))
        # 429, or sluiced's own 503 (a fail-closed policy), passed through as sent
        content_type = PROBLEM_JSON if decision.status == 429 else decision.content_type
        head = [("Content-Type", content_type), ("Content-Length", str(len(decision.body)))]
        start_response(_REASONS.get(decision.status, f"{decision.status} Error"), head + list(extra))
        return [decision.body]

    def _serve(
        self, environ: Environ, start_response: StartResponse, key: Optional[str], tier: Optional[str]
    ) -> Iterable[bytes]:
        """The app, with its body metered and charged once the server closes it when
        ``charge`` gives a meter."""
        charge = self.options.charge
        meter = charge(environ) if charge is not None and key is not None else None
        if meter is None or self._charges is None:
            return self.app(environ, start_response)
        head: Dict[str, Any] = {"status": 200, "headers": []}

        def metered_start(status: str, headers: Headers, exc_info: Any = None) -> Any:
            head["status"] = int(status.split(" ", 1)[0])
            head["headers"] = list(headers)
            write = start_response(status, headers, exc_info)

            def metered_write(data: bytes) -> Any:  # the legacy write() callable
                result = write(data)
                meter.feed(data)
                return result

            return metered_write

        charges = self._charges

        def finished() -> None:
            charges.send(self.options.policy, str(key), tier, meter, head["status"], head["headers"])

        return _MeteredBody(self.app(environ, metered_start), meter, finished)

    def _endpoint(self, environ: Environ) -> Optional[str]:
        endpoint = self.options.endpoint
        if endpoint is not None:
            return endpoint(environ) if callable(endpoint) else endpoint
        path = str(environ.get("PATH_INFO", ""))
        if self._url_map is None:
            return path
        cache_key = (str(environ.get("REQUEST_METHOD", "")), str(environ.get("HTTP_HOST", "")), path)
        found = self._rules.get(cache_key)
        if found is not None:
            return found
        try:
            rule, _ = self._url_map.bind_to_environ(environ).match(return_rule=True)
            pattern = str(rule.rule)
        except Exception:  # 404/405/redirects: no route matched, the path it is
            pattern = path
        if len(self._rules) >= _RULE_CACHE_SIZE:
            self._rules.clear()
        self._rules[cache_key] = pattern
        return pattern


def _with_headers(start_response: StartResponse, extra: Tuple[Tuple[str, str], ...]) -> StartResponse:
    def wrapped(status: str, headers: Headers, exc_info: Any = None) -> Any:
        return start_response(status, merge_headers(headers, extra), exc_info)

    return wrapped


class _MeteredBody:
    """A WSGI body passed through unchanged: each piece is fed to the meter once the server
    took it, and ``finished`` runs when the server closes the body (the response is sent)."""

    def __init__(self, body: Iterable[bytes], meter: Meter, finished: Callable[[], None]) -> None:
        self._body = body
        self._meter = meter
        self._finished = finished

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._body:
            yield chunk
            self._meter.feed(chunk)

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            self._finished()
