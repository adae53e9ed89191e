"""Sending the middlewares' charges in the background, after the response.

A charge must never delay a response nor turn into an error for the caller: the ASGI
middleware schedules it as an asyncio task once the response's last body message was sent, the
WSGI one hands it to a small thread pool once the server closed the response. Both bound what
is in flight; a charge that cannot be sent is counted and logged, and that is all.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Optional, Sequence, Set, Tuple

from ._answer import SluiceError, SluiceUnavailable
from ._stats import Stats
from ._usage import Meter

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client

#: The most charges in flight at once per middleware; past it a charge is dropped and counted.
MAX_IN_FLIGHT = 1024
#: Threads of the WSGI middleware's charge pool.
CHARGE_THREADS = 4

Headers = Sequence[Tuple[str, str]]


def _amount(meter: Meter, status: int, headers: Headers, stats: Stats) -> Optional[int]:
    """The meter's amount, or None (a meter that raised is a lost charge, not a failed request)."""
    try:
        amount = meter.amount(status, headers)
    except Exception as exc:  # the app's meter: any bug of it stays here
        stats.record_charge_failure(exc)
        return None
    return amount or None


class AsyncCharges:
    """Charges as asyncio tasks on the running loop, at most MAX_IN_FLIGHT at once."""

    def __init__(self, client: "AsyncClient", stats: Stats) -> None:
        self._client = client
        self._stats = stats
        self._tasks: Set["asyncio.Task[None]"] = set()

    def send(self, policy: str, key: str, tier: Optional[str], meter: Meter, status: int, headers: Headers) -> None:
        if len(self._tasks) >= MAX_IN_FLIGHT:
            self._stats.record_charge_failure(SluiceUnavailable(f"{MAX_IN_FLIGHT} charges already in flight"))
            return
        task = asyncio.get_running_loop().create_task(self._charge(policy, key, tier, meter, status, headers))
        # The loop keeps only weak references to tasks: hold each until it is done.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _charge(
        self, policy: str, key: str, tier: Optional[str], meter: Meter, status: int, headers: Headers
    ) -> None:
        amount = _amount(meter, status, headers, self._stats)
        if amount is None:
            return
        try:
            await self._client.charge(policy, key, amount, tier)
        except (SluiceError, ValueError) as exc:
            self._stats.record_charge_failure(exc)
            return
        self._stats.record_charge()


class ThreadCharges:
    """Charges on a pool of CHARGE_THREADS threads, at most MAX_IN_FLIGHT queued or running."""

    def __init__(self, client: "Client", stats: Stats) -> None:
        self._client = client
        self._stats = stats
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self._pool = ThreadPoolExecutor(CHARGE_THREADS, thread_name_prefix="sluice-charge")

    def send(self, policy: str, key: str, tier: Optional[str], meter: Meter, status: int, headers: Headers) -> None:
        if not self._slots.acquire(blocking=False):
            self._stats.record_charge_failure(SluiceUnavailable(f"{MAX_IN_FLIGHT} charges already in flight"))
            return
        try:
            self._pool.submit(self._charge, policy, key, tier, meter, status, headers)
        except RuntimeError as exc:  # the pool is shut down (interpreter exit)
            self._slots.release()
            self._stats.record_charge_failure(exc)

    def _charge(self, policy: str, key: str, tier: Optional[str], meter: Meter, status: int, headers: Headers) -> None:
        try:
            amount = _amount(meter, status, headers, self._stats)
            if amount is None:
                return
            try:
                self._client.charge(policy, key, amount, tier)
            except (SluiceError, ValueError) as exc:
                self._stats.record_charge_failure(exc)
                return
            self._stats.record_charge()
        finally:
            self._slots.release()
