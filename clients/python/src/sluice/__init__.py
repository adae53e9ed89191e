"""Client and middleware for sluiced, the sluice rate-limiter daemon.

``Client`` (blocking, http.client) and ``AsyncClient`` (asyncio) talk HTTP/1.1 to sluiced
over its Unix socket or TCP with a bounded keep-alive pool; ``SluiceMiddleware`` (ASGI:
Starlette, FastAPI) and ``SluiceWSGIMiddleware`` (WSGI: Flask, Django) rate-limit every
request with them, copying sluiced's headers onto every answer and failing open by default.
"""

from ._answer import (
    Check,
    Decision,
    SluiceError,
    SluiceRequestError,
    SluiceTimeout,
    SluiceUnavailable,
)
from ._middleware import FailMode
from ._stats import Stats
from .aio import AsyncClient
from .asgi import SluiceMiddleware
from .client import Client
from .wsgi import SluiceWSGIMiddleware

__all__ = [
    "AsyncClient",
    "Check",
    "Client",
    "Decision",
    "FailMode",
    "SluiceError",
    "SluiceMiddleware",
    "SluiceRequestError",
    "SluiceTimeout",
    "SluiceUnavailable",
    "SluiceWSGIMiddleware",
    "Stats",
]
