"""WSGI middleware (Flask, Django, any WSGI app) asking sluiced before each request.

``app.wsgi_app = SluiceWSGIMiddleware(app.wsgi_app, client=Client(), policy="public")``.
WSGI is blocking by design, so the check is a blocking call bounded by the client's timeout.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ._answer import Decision, SluiceError
from ._middleware import FAIL_CLOSED_BODY, FAIL_CLOSED_HEADERS, FailMode, Options, PROBLEM_JSON, PerRequest, merge_headers
from ._stats import Stats
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
    """

    def __init__(
        self,
        app: WSGIApp,
        *,
        client: Client,
        policy: str,
        key: Optional[Callable[[Environ], str]] = None,
        cost: PerRequest[int] = 1,
        tier: PerRequest[Optional[str]] = None,
        endpoint: PerRequest[Optional[str]] = None,
        fail: FailMode = "open",
        on_denied: Optional[Callable[[Environ, Decision], WSGIApp]] = None,
        stats: Optional[Stats] = None,
    ) -> None:
        self.app = app
        self.client = client
        self.options: Options[Environ] = Options(policy, key, cost, tier, endpoint, fail)
        self.on_denied = on_denied
        #: Failure counters; the client's by default, so ``client.stats`` shows them.
        self.stats = stats or client.stats
        # app.wsgi_app is a bound method of the Flask app: its url_map names the route.
        self._url_map = getattr(getattr(app, "__self__", None), "url_map", None)
        # (method, host, path) -> rule: matching the url map costs ~15 µs a request; paths
        # repeat. Cleared when full, so distinct paths (ids in URLs) cannot grow it unbounded.
        self._rules: Dict[Tuple[str, str, str], str] = {}

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        opts = self.options
        try:
            key = opts.key(environ) if opts.key is not None else default_key(environ)
            decision = self.client.check(
                opts.policy,
                key,
                opts.cost(environ) if callable(opts.cost) else opts.cost,
                opts.tier(environ) if callable(opts.tier) else opts.tier,
                self._endpoint(environ),
            )
        except SluiceError as exc:
            self.stats.record_failure(exc, opts.fail_open)
            if opts.fail_open:
                return self.app(environ, start_response)
            start_response(_REASONS[503], list(FAIL_CLOSED_HEADERS))
            return [FAIL_CLOSED_BODY]
        extra = decision.headers
        if decision.status == 200:
            return self.app(environ, _with_headers(start_response, extra))
        if decision.status == 429 and self.on_denied is not None:
            return self.on_denied(environ, decision)(environ, _with_headers(start_response, extra))
        # 429, or sluiced's own 503 (a fail-closed policy), passed through as sent
        content_type = PROBLEM_JSON if decision.status == 429 else decision.content_type
        head = [("Content-Type", content_type), ("Content-Length", str(len(decision.body)))]
        start_response(_REASONS.get(decision.status, f"{decision.status} Error"), head + list(extra))
        return [decision.body]

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
