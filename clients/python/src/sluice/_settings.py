"""What the sync and the async client share: where sluiced is, the bound on each call, the
size of the connection pool, and the counters of the middleware using the client."""

from __future__ import annotations

from typing import Optional

from ._answer import DEFAULT_POOL_SIZE, DEFAULT_TIMEOUT, Address
from ._stats import Stats


class _ClientSettings:
    """The settings both clients validate the same way."""

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        pool_size: int = DEFAULT_POOL_SIZE,
        stats: Optional[Stats] = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self.address = Address.parse(address)
        self.timeout = timeout
        self.pool_size = pool_size
        #: Counters of the middleware using this client (fail_open, fail_closed, errors).
        self.stats = stats or Stats()
