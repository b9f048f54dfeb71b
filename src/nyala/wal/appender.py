"""Group commit: one appender thread per log turns queued requests into one write and one sync.

Callers reserve their place by putting a :class:`Request` on a FIFO queue (under the log's
reservation lock, so queue order is reservation order).  The appender blocks for the first
request, then takes everything else already queued, up to ``max_group_bytes``, and hands the
group to the log's ``write_group`` (one batch, one write, one fdatasync).  Only after that
returns does it complete the group's futures, in queue order; so completion order equals
reservation order and a completed future means the data is durable.

If ``write_group`` fails, the error completes that group's futures and every later one: after
a failed fsync the page cache can no longer be trusted, so the log must be reopened.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from queue import Empty, SimpleQueue

from nyala.common.errors import InternalError, NyalaError

__all__ = ["GroupCommitter", "Request"]

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class Request:
    """One queued append (``runs`` holds its term runs) or truncation marker (``runs`` is None).

    ``first``/``last`` are its op indexes (both N for ``truncate_after(N)``); the future
    completes with ``last``.
    """

    data: bytes
    future: Future[int]
    first: int
    last: int
    runs: list[tuple[int, int]] | None


_STOP = object()


class GroupCommitter:
    """The queue and the appender thread of one log."""

    def __init__(self, name: str, write_group: Callable[[list[Request]], None], max_group_bytes: int) -> None:
        self._queue: SimpleQueue[Request | object] = SimpleQueue()
        self._write_group = write_group
        self._max_group_bytes = max_group_bytes
        self.failure: NyalaError | None = None
        self.groups = 0  # statistics for benchmarks and tests
        self.requests = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request: Request) -> None:
        self._queue.put(request)

    def stop(self) -> None:
        """Finish everything queued so far, then end the thread."""
        self._queue.put(_STOP)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            group, stopping = self._take_group()
            if group:
                self._commit(group)

    def _take_group(self) -> tuple[list[Request], bool]:
        first = self._queue.get()
        if first is _STOP:
            return [], True
        assert isinstance(first, Request)
        group = [first]
        size = len(first.data)
        get = self._queue.get_nowait
        while size < self._max_group_bytes:
            try:
                item = get()
            except Empty:
                break
            if item is _STOP:
                return group, True
            assert isinstance(item, Request)
            group.append(item)
            size += len(item.data)
        return group, False

    def _commit(self, group: list[Request]) -> None:
        if self.failure is None:
            try:
                self._write_group(group)
            except NyalaError as exc:
                log.error("write-ahead log failed; later appends fail too: %s", exc)
                self.failure = exc
            except BaseException as exc:  # a bug: keep it visible, and fail the log rather than hang callers
                log.exception("bug in the write-ahead log appender")
                self.failure = InternalError(f"write-ahead log appender crashed: {exc!r}")
                self.failure.__cause__ = exc
        if self.failure is not None:
            for request in group:
                request.future.set_exception(self.failure)
            return
        self.groups += 1
        self.requests += len(group)
        for request in group:
            request.future.set_result(request.last)
