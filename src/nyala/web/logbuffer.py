"""The tail of a server's log, kept in memory for ``/logs``.

The server's log goes to stderr (a supervisor or the local cluster puts it in a file the
server does not know), so the page reads from a bounded ring of formatted records instead:
the last ``capacity`` lines cost a few hundred kilobytes and no disk reads.  In a process
that hosts several servers (tests) every server's buffer sees the whole process's log.
"""

from __future__ import annotations

import collections
import logging
import threading

__all__ = ["LogBuffer"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogBuffer(logging.Handler):
    """A logging handler that keeps the last ``capacity`` formatted records."""

    def __init__(self, capacity: int = 2000) -> None:
        super().__init__()
        self._lines: collections.deque[str] = collections.deque(maxlen=capacity)
        self._guard = threading.Lock()  # records arrive from worker threads too
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    @property
    def capacity(self) -> int:
        return self._lines.maxlen or 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._guard:
            self._lines.append(line)

    def tail(self, lines: int) -> list[str]:
        with self._guard:
            kept = list(self._lines)
        return kept[-lines:] if lines > 0 else []

    def attach(self, logger: logging.Logger | None = None) -> None:
        (logger or logging.getLogger()).addHandler(self)

    def detach(self, logger: logging.Logger | None = None) -> None:
        (logger or logging.getLogger()).removeHandler(self)
