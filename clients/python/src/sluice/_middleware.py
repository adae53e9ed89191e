"""What the ASGI and WSGI middlewares share: their options, the fail-closed answer, header merging.

The two middlewares differ only in how they read a request and write an answer; the
behaviour (which headers, which body, what a failure gives) is decided here once.
"""

from __future__ import annotations

import json
from typing import Callable, Generic, Iterable, List, Literal, Optional, Tuple, TypeVar, Union

from ._usage import Meter

R = TypeVar("R")

#: A value given once for the middleware, or computed from each request.
PerRequest = Union[R, Callable[..., R]]

#: What a middleware does when sluiced cannot be asked: let the request through, or answer 503.
FailMode = Literal["open", "closed"]

FAIL_CLOSED_BODY = json.dumps(
    {"error": "rate_limiter_unavailable", "message": "the rate limiter cannot be reached; retry shortly"},
    separators=(",", ":"),
).encode("utf-8")
FAIL_CLOSED_HEADERS: Tuple[Tuple[str, str], ...] = (
    ("Content-Type", "application/json"),
    ("Retry-After", "1"),
    ("Content-Length", str(len(FAIL_CLOSED_BODY))),
)
PROBLEM_JSON = "application/problem+json"


class Options(Generic[R]):
    """The per-instance options; ``R`` is what the per-request functions receive
    (the ASGI scope, or the WSGI environ)."""

    def __init__(
        self,
        policy: str,
        key: Optional[Callable[[R], str]],
        cost: PerRequest[Optional[int]],
        tier: PerRequest[Optional[str]],
        endpoint: PerRequest[Optional[str]],
        fail: FailMode,
        charge: Optional[Callable[[R], Optional[Meter]]] = None,
    ) -> None:
        if not isinstance(policy, str) or not policy:
            raise ValueError("policy must be a non-empty string")
        if fail not in ("open", "closed"):
            raise ValueError(f"fail must be 'open' or 'closed', not {fail!r}")
        if cost is not None and not callable(cost) and (not isinstance(cost, int) or cost < 0):
            raise ValueError("cost must be an integer >= 0, None or a function of the request")
        if charge is not None and not callable(charge):
            raise ValueError("charge must be a function of the request returning a meter")
        self.policy = policy
        self.key = key
        self.cost = cost
        self.tier = tier
        self.endpoint = endpoint
        self.fail_open = fail == "open"
        #: Makes the meter of each served request, whose amount is charged after the response.
        self.charge = charge


def merge_headers(
    own: Iterable[Tuple[str, str]], extra: Iterable[Tuple[str, str]]
) -> List[Tuple[str, str]]:
    """The response's own headers plus sluiced's, except names the response set itself."""
    own = list(own)
    present = {name.lower() for name, _ in own}
    own.extend(h for h in extra if h[0].lower() not in present)
    return own
