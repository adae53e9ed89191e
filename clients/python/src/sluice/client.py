"""The blocking client: ``http.client`` over a Unix socket (or TCP) with a bounded keep-alive pool.

For WSGI apps, scripts and threads. Every call is bounded by a timeout; connections are
reused across calls and threads, never more than ``pool_size`` at once.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from typing import Any, List, Optional, Sequence, Tuple, Type

from ._answer import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    MAX_BODY,
    CHARGE_PATH,
    CHECK_PATH,
    Address,
    CheckLike,
    Decision,
    SluiceTimeout,
    SluiceUnavailable,
    batch_body,
    charge_body,
    check_body,
    parse_answer,
)
from ._settings import _ClientSettings
from ._stats import Stats

_HEADERS = {"Content-Type": "application/json", "Host": "sluiced"}

# A reused connection that fails with one of these before any byte of answer was closed by
# sluiced (restart, idle timeout): the check is sent once more on a fresh connection.
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, http.client.RemoteDisconnected)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose socket is AF_UNIX."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class Client(_ClientSettings):
    """A blocking sluice client. Thread-safe; share one per process.

    >>> client = Client("/run/sluice/sluiced.sock")          # or Client("http://127.0.0.1:8080")
    >>> decision = client.check("public", "user:42")
    """

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        pool_size: int = DEFAULT_POOL_SIZE,
        stats: Optional[Stats] = None,
    ) -> None:
        super().__init__(address, timeout=timeout, pool_size=pool_size, stats=stats)
        self._slots = threading.BoundedSemaphore(pool_size)
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def check(
        self,
        policy: str,
        key: str,
        cost: Optional[int] = None,
        tier: Optional[str] = None,
        endpoint: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Decision:
        """Ask sluiced whether ``key`` may spend ``cost`` under ``policy`` (None: sluiced's
        default, 1; 0 on a usage policy, whose check only asks whether anything is left).

        Returns the Decision for a 200, 429 or 503 answer; raises SluiceRequestError for a
        refused check (bad input, unknown policy) and SluiceUnavailable (SluiceTimeout) when
        sluiced cannot be reached or answers nothing usable in time.
        """
        return self._post(CHECK_PATH, check_body(policy, key, cost, tier, endpoint), timeout)

    def check_batch(self, checks: Sequence[CheckLike], *, timeout: Optional[float] = None) -> Decision:
        """All-or-nothing batch (at most 64 checks): ``results`` holds one Decision per check."""
        return self._post(CHECK_PATH, batch_body(checks), timeout)

    def charge(
        self, policy: str, key: str, amount: int, tier: Optional[str] = None, *, timeout: Optional[float] = None
    ) -> Decision:
        """Charge ``amount`` (what a request used; negative refunds) to ``key`` of the usage
        policy ``policy`` (``usage = true``). sluiced always debits, into debt when the key has
        less left, and answers 200 with the body of a check: ``allowed`` says whether the key
        still has room for a request, ``debt`` what it owes beyond its limit. Raises as
        :meth:`check` does (a policy that is not a usage policy: SluiceRequestError 400).
        """
        return self._post(CHARGE_PATH, charge_body(policy, key, amount, tier), timeout)

    def close(self) -> None:
        """Close the idle connections; later calls open new ones."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.address.unix is not None:
            return _UnixHTTPConnection(self.address.unix, timeout)
        return http.client.HTTPConnection(self.address.host, self.address.port, timeout=timeout)

    def _post(self, path: str, body: bytes, timeout: Optional[float]) -> Decision:
        budget = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        if not self._slots.acquire(timeout=budget):
            raise SluiceTimeout(f"no free connection to sluiced within {budget * 1000:.0f} ms")
        try:
            status, headers, data = self._exchange(path, body, deadline, budget)
        finally:
            self._slots.release()
        return parse_answer(status, headers, data)

    def _exchange(self, path: str, body: bytes, deadline: float, budget: float) -> Tuple[int, List[Tuple[str, str]], bytes]:
        for attempt in (0, 1):
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            reused = conn is not None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if conn is not None:
                    self._give_back(conn)
                raise SluiceTimeout(f"sluiced did not answer within {budget * 1000:.0f} ms")
            if conn is None:
                conn = self._connection(remaining)
            else:
                # http.client applies the timeout per socket operation; sluiced answers in
                # one write, so this bounds the call by about the remaining budget.
                conn.timeout = remaining
                if conn.sock is not None:
                    conn.sock.settimeout(remaining)
            try:
                conn.request("POST", path, body, _HEADERS)
                resp = conn.getresponse()
                data = resp.read(MAX_BODY + 1)
            except socket.timeout as exc:
                conn.close()
                raise SluiceTimeout(f"sluiced did not answer within {budget * 1000:.0f} ms") from exc
            except _STALE as exc:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise _unavailable(self.address, exc) from exc
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise _unavailable(self.address, exc) from exc
            if len(data) > MAX_BODY:
                conn.close()
                raise SluiceUnavailable(f"sluiced's answer is over {MAX_BODY} bytes")
            if resp.will_close:
                conn.close()
            else:
                self._give_back(conn)
            return resp.status, resp.getheaders(), data
        raise AssertionError("unreachable")  # pragma: no cover

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(conn)


def _unavailable(address: Address, exc: BaseException) -> SluiceUnavailable:
    kind: Type[BaseException] = type(exc)
    return SluiceUnavailable(f"sluiced at {address} cannot be reached: {kind.__name__}: {exc}")
