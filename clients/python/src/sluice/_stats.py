"""Counting failed checks and logging them once per burst.

When sluiced is away every request fails its check; a log line per request would drown the
application's log exactly when it matters. Failures are counted (the app can read the
counters) and logged at most once per interval, each line saying how many failed since the
last one.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Optional

LOG = logging.getLogger("sluice")

#: At most one log line per this many seconds.
LOG_INTERVAL = 10.0


class Stats:
    """Counters of a client's middleware outcomes, safe to share between threads.

    ``fail_open``: requests let through because the check failed; ``fail_closed``: requests
    answered 503 because the check failed; ``errors``: every failed check, of either kind.
    """

    def __init__(self, logger: Optional[logging.Logger] = None, interval: float = LOG_INTERVAL) -> None:
        self._lock = threading.Lock()
        self._logger = logger or LOG
        self._interval = interval
        self._last_log = -interval - 1.0
        self._since_log = 0
        self.fail_open = 0
        self.fail_closed = 0
        self.errors = 0

    def record_failure(self, exc: BaseException, fail_open: bool) -> None:
        """Count one failed check; log if the last line is older than the interval."""
        with self._lock:
            self.errors += 1
            if fail_open:
                self.fail_open += 1
            else:
                self.fail_closed += 1
            self._since_log += 1
            now = time.monotonic()
            if now - self._last_log < self._interval:
                return
            count, self._since_log, self._last_log = self._since_log, 0, now
        self._logger.warning(
            "sluice: %d rate-limit check(s) failed since the last report, failing %s; latest: %s",
            count,
            "open" if fail_open else "closed",
            exc,
        )
