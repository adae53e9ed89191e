"""Meters: how a middleware learns what a response used (its LLM tokens, say) without holding
the response back, and the meter of an OpenAI-compatible upstream.

The middleware feeds every piece of the body to the meter as the piece goes to the client,
and asks the meter for the amount only once the response is finished, when it charges it in
the background.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Protocol, Sequence, Tuple

#: Bound on the copy of a JSON answer kept to parse at the end (a completion is a few KiB),
#: and on one event of a stream; past it nothing is charged for that answer or event.
MAX_METERED = 1 << 20


class Meter(Protocol):
    """What a middleware's ``charge=`` function returns for one request."""

    def feed(self, chunk: bytes) -> None:
        """One piece of the response body, as it was sent to the client."""

    def amount(self, status: int, headers: Sequence[Tuple[str, str]]) -> Optional[int]:
        """What the finished response used; None (or 0) charges nothing."""


def total_tokens(doc: bytes) -> Optional[int]:
    """``usage.total_tokens`` of a completion (or of one chunk of a streamed one)."""
    try:
        value = json.loads(doc)
    except ValueError:
        return None
    usage = value.get("usage") if isinstance(value, dict) else None
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    if isinstance(total, int) and not isinstance(total, bool):
        return total
    return None


class OpenAIUsage:
    """The meter of an OpenAI-compatible upstream (OpenAI, vLLM, llama.cpp, LiteLLM):
    ``usage.total_tokens`` of a JSON answer, or of the last ``data:`` event carrying usage in a
    streamed (``text/event-stream``) one. The class is its own ``charge=`` function:
    ``charge=OpenAIUsage`` makes one per request.

    The two kinds are told apart by the first byte (``{`` for JSON). A stream is parsed as it
    passes, one event at a time; a JSON answer is kept (at most 1 MiB) and parsed at the end.
    """

    def __init__(self, request: Any = None) -> None:
        self._mode = ""  # "", "json", "sse"
        self._body = bytearray()
        self._over = False
        self._line = bytearray()
        self._line_over = False
        self._data = bytearray()
        self._total: Optional[int] = None

    def feed(self, chunk: bytes) -> None:
        if not self._mode:
            chunk = chunk.lstrip(b" \t\r\n")
            if not chunk:
                return
            self._mode = "json" if chunk[:1] == b"{" else "sse"
        if self._mode == "json":
            if len(self._body) + len(chunk) > MAX_METERED:
                self._over = True
                self._body = bytearray()
            if not self._over:
                self._body += chunk
            return
        while chunk:
            line, newline, chunk = chunk.partition(b"\n")
            self._extend_line(line)
            if newline:
                self._end_line()

    def _extend_line(self, piece: bytes) -> None:
        if len(self._line) + len(piece) > MAX_METERED:
            self._line_over = True
            self._line = bytearray()
        if not self._line_over:
            self._line += piece

    def _end_line(self) -> None:
        line = bytes(self._line).rstrip(b"\r")
        over = self._line_over
        self._line, self._line_over = bytearray(), False
        if over:
            return
        if not line:
            self._end_event()
        elif line.startswith(b"data:"):
            value = line[5:]
            if value.startswith(b" "):
                value = value[1:]
            if len(self._data) + len(value) + 1 > MAX_METERED:
                self._data = bytearray()
                return
            if self._data:
                self._data += b"\n"
            self._data += value

    def _end_event(self) -> None:
        data, self._data = bytes(self._data), bytearray()
        # Most events are token deltas: only one that names usage is parsed.
        if b'"usage"' in data:
            total = total_tokens(data)
            if total is not None:
                self._total = total

    def amount(self, status: int, headers: Sequence[Tuple[str, str]]) -> Optional[int]:
        if self._mode == "json":
            return None if self._over else total_tokens(bytes(self._body))
        if self._mode == "sse":
            # A stream may end without the empty line after its last event.
            if self._line:
                self._end_line()
            if self._data:
                self._end_event()
        return self._total
