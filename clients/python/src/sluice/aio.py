"""The asyncio client: HTTP/1.1 keep-alive on asyncio streams, over a Unix socket or TCP.

The standard library has no asynchronous HTTP client, and sluiced's check is one small POST
answered with a Content-Length body, so this module writes that request and reads the answer
itself (status line, headers, a Content-Length or chunked body, each bounded) rather than
pulling in an HTTP client library and its dependencies for one call. Nothing here blocks the
event loop: every wait is an ``await`` bounded by the check's timeout.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, List, Optional, Sequence, Tuple

from ._answer import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    MAX_BODY,
    CHARGE_PATH,
    CHECK_PATH,
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

#: Bound on the status line plus headers of an answer (sluiced sends about 300 bytes).
MAX_HEAD = 16 * 1024

_HAS_ASYNCIO_TIMEOUT = sys.version_info >= (3, 11)

Answer = Tuple[int, List[Tuple[str, str]], bytes]


class _BadAnswer(Exception):
    """The bytes sluiced sent are not an HTTP/1.1 answer this client can read."""


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def stale(self) -> bool:
        # EOF arrives through the event loop while the connection sits idle, so a daemon
        # that went away is seen here before anything is sent.
        return self.reader.at_eof() or self.writer.is_closing()

    def close(self) -> None:
        try:
            self.writer.close()
        except RuntimeError:  # its loop is closed already
            pass


class _Pool:
    """Idle connections and the slots bounding all connections, for one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self.loop = loop
        self.slots = asyncio.Semaphore(size)
        self.idle: List[_Conn] = []

    def take(self) -> Optional[_Conn]:
        while self.idle:
            conn = self.idle.pop()
            if not conn.stale():
                return conn
            conn.close()
        return None

    def close(self) -> None:
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()


class AsyncClient(_ClientSettings):
    """An asyncio sluice client. Create it anywhere; it binds to the loop that first uses it
    (a new loop gets new connections).

    >>> client = AsyncClient("/run/sluice/sluiced.sock")
    >>> decision = await client.check("public", "user:42")
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
        self._pool: Optional[_Pool] = None

    async def check(
        self,
        policy: str,
        key: str,
        cost: Optional[int] = None,
        tier: Optional[str] = None,
        endpoint: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Decision:
        """Ask sluiced whether ``key`` may spend ``cost`` under ``policy`` (see Client.check)."""
        return await self._post(CHECK_PATH, check_body(policy, key, cost, tier, endpoint), timeout)

    async def check_batch(self, checks: Sequence[CheckLike], *, timeout: Optional[float] = None) -> Decision:
        """All-or-nothing batch (at most 64 checks): ``results`` holds one Decision per check."""
        return await self._post(CHECK_PATH, batch_body(checks), timeout)

    async def charge(
        self, policy: str, key: str, amount: int, tier: Optional[str] = None, *, timeout: Optional[float] = None
    ) -> Decision:
        """Charge ``amount`` to ``key`` of a usage policy (see Client.charge)."""
        return await self._post(CHARGE_PATH, charge_body(policy, key, amount, tier), timeout)

    async def aclose(self) -> None:
        """Close the idle connections; later calls open new ones."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _post(self, path: str, body: bytes, timeout: Optional[float]) -> Decision:
        budget = self.timeout if timeout is None else timeout
        try:
            if _HAS_ASYNCIO_TIMEOUT:
                async with asyncio.timeout(budget):  # type: ignore[attr-defined,unused-ignore]
                    status, headers, data = await self._exchange(path, body)
            else:
                status, headers, data = await asyncio.wait_for(self._exchange(path, body), budget)
        except asyncio.TimeoutError as exc:
            raise SluiceTimeout(f"sluiced did not answer within {budget * 1000:.0f} ms") from exc
        return parse_answer(status, headers, data)

    def _current_pool(self) -> _Pool:
        loop = asyncio.get_running_loop()
        pool = self._pool
        if pool is None or pool.loop is not loop:
            if pool is not None:
                pool.close()
            pool = self._pool = _Pool(loop, self.pool_size)
        return pool

    async def _open(self) -> _Conn:
        try:
            if self.address.unix is not None:
                reader, writer = await asyncio.open_unix_connection(self.address.unix, limit=MAX_HEAD)
            else:
                reader, writer = await asyncio.open_connection(self.address.host, self.address.port, limit=MAX_HEAD)
        except OSError as exc:
            raise SluiceUnavailable(f"sluiced at {self.address} cannot be reached: {type(exc).__name__}: {exc}") from exc
        return _Conn(reader, writer)

    async def _exchange(self, path: str, body: bytes) -> Answer:
        pool = self._current_pool()
        request = b"POST %s HTTP/1.1\r\nHost: sluiced\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            path.encode("ascii"),
            len(body),
            body,
        )
        async with pool.slots:
            for attempt in (0, 1):
                conn = pool.take()
                reused = conn is not None
                if conn is None:
                    conn = await self._open()
                try:
                    # One small request per connection at a time: the write buffer holds at
                    # most this request, so no drain() round is needed to bound it.
                    conn.writer.write(request)
                    status, headers, data, keep_alive = await _read_answer(conn.reader)
                except asyncio.IncompleteReadError as exc:
                    conn.close()
                    if reused and attempt == 0 and not exc.partial:
                        continue  # closed while idle (restart, idle timeout): once more, fresh
                    raise SluiceUnavailable(f"sluiced at {self.address} closed the connection mid-answer") from exc
                except (BrokenPipeError, ConnectionResetError) as exc:
                    conn.close()
                    if reused and attempt == 0:
                        continue
                    raise SluiceUnavailable(f"sluiced at {self.address}: {type(exc).__name__}: {exc}") from exc
                except (OSError, _BadAnswer, asyncio.LimitOverrunError, ValueError) as exc:
                    conn.close()
                    raise SluiceUnavailable(f"sluiced at {self.address}: bad answer: {exc}") from exc
                except BaseException:
                    conn.close()  # cancelled (timeout) mid-exchange: the stream is in an unknown state
                    raise
                if keep_alive:
                    pool.idle.append(conn)
                else:
                    conn.close()
                return status, headers, data
        raise AssertionError("unreachable")  # pragma: no cover


async def _read_answer(reader: asyncio.StreamReader) -> Tuple[int, List[Tuple[str, str]], bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise _BadAnswer(f"status line {lines[0][:80]!r}")
    status = int(parts[1])
    keep_alive = parts[0] == b"HTTP/1.1"
    length: Optional[int] = None
    chunked = False
    headers: List[Tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise _BadAnswer(f"header line {line[:80]!r}")
        n = name.strip().decode("latin-1")
        v = value.strip().decode("latin-1")
        headers.append((n, v))
        lower = n.lower()
        if lower == "content-length":
            if not v.isdigit():
                raise _BadAnswer(f"content-length {v[:40]!r}")
            length = int(v)
        elif lower == "transfer-encoding":
            chunked = "chunked" in v.lower()
        elif lower == "connection":
            keep_alive = v.lower() == "keep-alive" if not keep_alive else v.lower() != "close"
    if chunked:
        body = await _read_chunked(reader)
    elif length is not None:
        if length > MAX_BODY:
            raise _BadAnswer(f"body of {length} bytes is over {MAX_BODY}")
        body = await reader.readexactly(length)
    else:  # no framing: the body runs to the end of the connection
        body = await _read_to_eof(reader)
        keep_alive = False
    return status, headers, body, keep_alive


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise _BadAnswer(f"chunk size {size_line[:40]!r}") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return bytes(body)
        if len(body) + size > MAX_BODY:
            raise _BadAnswer(f"chunked body over {MAX_BODY} bytes")
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise _BadAnswer("chunk not followed by CRLF")


async def _read_to_eof(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        piece = await reader.read(65536)
        if not piece:
            return bytes(body)
        body += piece
        if len(body) > MAX_BODY:
            raise _BadAnswer(f"body over {MAX_BODY} bytes")
