"""What a check is and what sluiced answered: the request body, the Decision, the errors.

Both clients (sync and async) speak the same JSON and read the same answers; this module is
the one place that turns a check into bytes and an HTTP answer into a Decision or an error,
so the two transports cannot drift apart.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

#: The headers a middleware copies from sluiced's answer, lowercase → the casing it sends.
RATE_LIMIT_HEADERS: Mapping[str, str] = {
    "x-ratelimit-limit": "X-RateLimit-Limit",
    "x-ratelimit-remaining": "X-RateLimit-Remaining",
    "x-ratelimit-reset": "X-RateLimit-Reset",
    "ratelimit": "RateLimit",
    "ratelimit-policy": "RateLimit-Policy",
    "retry-after": "Retry-After",
    "x-ratelimit-degraded": "X-RateLimit-Degraded",
}

#: Largest answer body read from sluiced (its own bodies are a few hundred bytes; a 64-check
#: batch a few KiB). Past it the answer is a bad answer, so no buffer grows without bound.
MAX_BODY = 1 << 20

DEFAULT_SOCKET = "/tmp/sluiced.sock"
DEFAULT_TIMEOUT = 0.05
DEFAULT_POOL_SIZE = 8
CHECK_PATH = "/v1/check"
CHARGE_PATH = "/v1/charge"


class SluiceError(Exception):
    """Base of every error the clients raise."""


class SluiceUnavailable(SluiceError):
    """sluiced could not be reached, did not answer in time, or answered nonsense.

    This is the failure a middleware fails open (or closed) on.
    """


class SluiceTimeout(SluiceUnavailable):
    """No whole answer within the check's timeout."""


class SluiceRequestError(SluiceError):
    """sluiced refused the check itself (400 bad_request, 404 unknown_policy, 413 …).

    This is a bug or a misconfiguration in the application, not an outage: ``code`` and
    ``message`` are sluiced's own, so the log says what to fix.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"sluiced answered {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Check:
    """One check: may ``key`` spend ``cost`` under ``policy`` (and ``tier``)?"""

    policy: str
    key: str
    #: None: sluiced's default (1, or 0 on a usage policy: the check only asks).
    cost: Optional[int] = None
    tier: Optional[str] = None
    endpoint: Optional[str] = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": self.policy, "key": self.key}
        if self.cost is not None:
            out["cost"] = self.cost
        if self.tier is not None:
            out["tier"] = self.tier
        if self.endpoint is not None:
            out["endpoint"] = self.endpoint
        return out


CheckLike = Union[Check, Mapping[str, Any]]


@dataclass(frozen=True)
class Decision:
    """sluiced's answer to a check (or to a batch: then ``results`` holds one per check).

    ``status`` is what sluiced sent: 200 allowed, 429 denied, 503 a fail-closed policy whose
    backend is down. ``headers`` are the rate-limit headers it sent, in its order, for a
    middleware to copy; ``body`` the raw body bytes (a 429's is the problem document).
    """

    allowed: bool
    status: int
    limit: Optional[int] = None
    remaining: Optional[int] = None
    reset: Optional[int] = None
    retry_after: Optional[int] = None
    degraded: bool = False
    policy: Optional[str] = None
    delay_ms: Optional[int] = None
    #: What a key of a usage policy owes beyond its limit (0 when nothing); None for other policies.
    debt: Optional[int] = None
    headers: Tuple[Tuple[str, str], ...] = ()
    body: bytes = b""
    content_type: str = "application/json"
    results: Tuple["Decision", ...] = field(default=())


def check_body(policy: str, key: str, cost: Optional[int], tier: Optional[str], endpoint: Optional[str]) -> bytes:
    return encode(Check(policy, key, cost, tier, endpoint).as_json())


def charge_body(policy: str, key: str, amount: int, tier: Optional[str]) -> bytes:
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise ValueError(f"charge amount must be an integer, not {type(amount).__name__}")
    doc: dict[str, Any] = {"policy": policy, "key": key, "amount": amount}
    if tier is not None:
        doc["tier"] = tier
    return encode(doc)


def batch_body(checks: Sequence[CheckLike]) -> bytes:
    items = [c.as_json() if isinstance(c, Check) else dict(c) for c in checks]
    return encode({"checks": items})


def encode(doc: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"check cannot be encoded as JSON: {exc}") from exc


def _int(doc: Mapping[str, Any], name: str, headers: Mapping[str, str], header: str) -> Optional[int]:
    value = doc.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raw = headers.get(header)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            return None
    return None


def _from_doc(
    doc: Mapping[str, Any],
    status: int,
    headers: Mapping[str, str],
    copied: Tuple[Tuple[str, str], ...],
    body: bytes,
    content_type: str,
) -> Decision:
    allowed = doc.get("allowed")
    results: Tuple[Decision, ...] = ()
    raw_results = doc.get("results")
    if isinstance(raw_results, list):
        results = tuple(
            _from_doc(r, 200 if r.get("allowed") else 429, {}, (), b"", "application/json")
            for r in raw_results
            if isinstance(r, dict)
        )
    policy = doc.get("policy")
    return Decision(
        allowed=bool(allowed) if isinstance(allowed, bool) else status == 200,
        status=status,
        limit=_int(doc, "limit", headers, "x-ratelimit-limit"),
        remaining=_int(doc, "remaining", headers, "x-ratelimit-remaining"),
        reset=_int(doc, "reset", headers, "x-ratelimit-reset"),
        retry_after=_int(doc, "retry_after", headers, "retry-after"),
        degraded=doc.get("degraded") is True or headers.get("x-ratelimit-degraded") == "1",
        policy=policy if isinstance(policy, str) else None,
        delay_ms=_int(doc, "delay_ms", {}, ""),
        debt=_int(doc, "debt", {}, ""),
        headers=copied,
        body=body,
        content_type=content_type,
        results=results,
    )


def parse_answer(status: int, raw_headers: Iterable[Tuple[str, str]], body: bytes) -> Decision:
    """Turn sluiced's answer into a Decision, or raise the error it means."""
    headers: dict[str, str] = {}
    copied = []
    for name, value in raw_headers:
        lower = name.lower()
        headers[lower] = value
        canonical = RATE_LIMIT_HEADERS.get(lower)
        if canonical is not None:
            copied.append((canonical, value))
    content_type = headers.get("content-type", "application/json")
    doc: Any = None
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        doc = None
    if status in (200, 429, 503):
        if not isinstance(doc, dict):
            raise SluiceUnavailable(f"sluiced answered {status} with a body that is not a JSON object")
        if status == 503 and doc.get("error") != "backend_unavailable":
            # Not a policy's decision (e.g. "overloaded": sluiced at listen.max_connections):
            # sluiced could not serve the check, the same as not reaching it.
            raise SluiceUnavailable(f"sluiced answered 503 {doc.get('error')}: {doc.get('message')}")
        return _from_doc(doc, status, headers, tuple(copied), body, content_type)
    if 400 <= status < 500 and isinstance(doc, dict) and isinstance(doc.get("error"), str):
        message = doc.get("message")
        raise SluiceRequestError(status, doc["error"], message if isinstance(message, str) else "")
    raise SluiceUnavailable(f"sluiced answered an unexpected status {status}")


@dataclass(frozen=True)
class Address:
    """Where sluiced listens: a Unix socket path, or host and port for TCP."""

    unix: Optional[str] = None
    host: str = "127.0.0.1"
    port: int = 8080

    @classmethod
    def parse(cls, address: Optional[str]) -> "Address":
        """``None`` → ``$SLUICE_SOCKET`` or ``/tmp/sluiced.sock``; ``http://HOST:PORT`` → TCP;
        ``unix:PATH`` or a path → that socket."""
        if address is None:
            return cls(unix=os.environ.get("SLUICE_SOCKET") or DEFAULT_SOCKET)
        if address.startswith("unix:"):
            address = address[len("unix:") :]
        elif "://" in address:
            parts = urlsplit(address)
            if parts.scheme != "http" or not parts.hostname:
                raise ValueError(f"sluice address {address!r}: expected http://HOST:PORT or a socket path")
            try:
                port = parts.port or 80
            except ValueError as exc:
                raise ValueError(f"sluice address {address!r}: {exc}") from exc
            return cls(host=parts.hostname, port=port)
        if not address:
            raise ValueError("sluice address is empty")
        return cls(unix=address)

    def __str__(self) -> str:
        return f"unix:{self.unix}" if self.unix is not None else f"http://{self.host}:{self.port}"
