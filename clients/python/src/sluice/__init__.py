"""Client and middleware for sluiced, the sluice rate-limiter daemon.

``Client`` (blocking, http.client) and ``AsyncClient`` (asyncio) talk HTTP/1.1 to sluiced
over its Unix socket or TCP with a bounded keep-alive pool; ``SluiceMiddleware`` (ASGI:
Starlette, FastAPI) and ``SluiceWSGIMiddleware`` (WSGI: Flask, Django) rate-limit every
request with them, copying sluiced's headers onto every answer and failing open by default.
For usage policies, ``charge()`` debits what a request used, and the middlewares' ``charge=``
meters a response (``OpenAIUsage``: an OpenAI-compatible upstream's tokens) and charges it in
the background after the response.
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
from ._usage import Meter, OpenAIUsage
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
    "Meter",
    "OpenAIUsage",
    "SluiceError",
    "SluiceMiddleware",
    "SluiceRequestError",
    "SluiceTimeout",
    "SluiceUnavailable",
    "SluiceWSGIMiddleware",
    "Stats",
]
