"""Counting failed checks and lost charges, and logging each kind once per burst.

When sluiced is away every request fails its check (and its charge); a log line per request
would drown the application's log exactly when it matters. Failures are counted (the app can
read the counters) and logged at most once per interval, each line saying how many failed
since the last one.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Optional

LOG = logging.getLogger("sluice")

#: At most one log line per this many seconds.
LOG_INTERVAL = 10.0


class _Burst:
    """When the last line of one kind was written, and how many failures it has not told.
    Used under the Stats lock."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._last_log = -interval - 1.0
        self._since_log = 0

    def due(self) -> int:
        """Count one failure; how many to report now (0: not yet)."""
        self._since_log += 1
        now = time.monotonic()
        if now - self._last_log < self._interval:
            return 0
        count, self._since_log, self._last_log = self._since_log, 0, now
        return count


class Stats:
    """Counters of a client's middleware outcomes, safe to share between threads.

    ``fail_open``: requests let through because the check failed; ``fail_closed``: requests
    answered 503 because the check failed; ``errors``: every failed check, of either kind.
    ``charges``: charges the middleware sent after a response and sluiced answered;
    ``charge_failures``: charges lost (sluiced unreachable, too slow or refusing the charge, a
    meter that raised, too many in flight) — never an error for the request itself.
    """

    def __init__(self, logger: Optional[logging.Logger] = None, interval: float = LOG_INTERVAL) -> None:
        self._lock = threading.Lock()
        self._logger = logger or LOG
        self._checks = _Burst(interval)
        self._charges = _Burst(interval)
        self.fail_open = 0
        self.fail_closed = 0
        self.errors = 0
        self.charges = 0
        self.charge_failures = 0

    def record_failure(self, exc: BaseException, fail_open: bool) -> None:
        """Count one failed check; log if the last line is older than the interval."""
        with self._lock:
            self.errors += 1
            if fail_open:
                self.fail_open += 1
            else:
                self.fail_closed += 1
            count = self._checks.due()
        if count:
            self._logger.warning(
                "sluice: %d rate-limit check(s) failed since the last report, failing %s; latest: %s",
                count,
                "open" if fail_open else "closed",
                exc,
            )

    def record_charge(self) -> None:
        """Count one charge sluiced answered."""
        with self._lock:
            self.charges += 1

    def record_charge_failure(self, exc: BaseException) -> None:
        """Count one lost charge (after logging it, when due: whoever sees the count sees the
        line)."""
        with self._lock:
            count = self._charges.due()
        if count:
            self._logger.warning(
                "sluice: %d charge(s) lost since the last report (the responses were served); latest: %s",
                count,
                exc,
            )
        with self._lock:
            self.charge_failures += 1
