"""Group commit: queued requests become one write and one sync, completed in queue order.

Callers reserve their place by adding a :class:`Request` to a FIFO (under the log's
reservation lock, so queue order is reservation order).  At most one *committer* is active at
a time; it takes everything queued (up to ``max_group_bytes``), hands the group to the log's
``write_group`` (one batch, one write, one fdatasync), then completes the group's futures in
queue order, and repeats until the queue is empty.  A completed future therefore means
durable, and completion order equals reservation order.

The committer is normally the log's appender thread, woken through a doorbell when a request
arrives at an idle log.  A *blocking* caller (``Log.append_sync``) that finds the log idle
commits its own group on its own thread instead, and hands whatever queued up meanwhile to the
appender thread: with one writer this saves two thread wake-ups per append, which on a busy
machine cost as much as a third of an fdatasync.  Callers that must not block always go
through the appender thread.

Requests come with one of two kinds of completion.  Thread-side ones (a
``concurrent.futures.Future`` or a :class:`Waiter`) are completed on the committer's thread.
Asyncio ones (``Log.append_async``; the request names its event loop) are completed in their
loop: the committer posts ONE callback per loop per group (:mod:`nyala.wal.loop_bridge`), which
resolves that loop's futures of the group in queue order.  So in each loop, and on the thread
side, completion order is reservation order; and whenever any append has completed, every
append reserved before it is durable.

Queued bytes are bounded softly: :meth:`GroupCommitter.room` gives an asyncio caller a future
to await while ``max_queued_bytes`` or more wait in the queue; taking a group off the queue
wakes the waiters once the queue is below the bound again.  Appends themselves are never
refused or delayed for room, so a reservation keeps its place in order.

Invariant (under ``_lock``): requests are pending only while ``_busy``; ``_busy`` means one
committer is running or one doorbell ring is on its way to the appender thread.

If ``write_group`` fails, the error completes that group's futures and every later one: after
a failed fsync the page cache can no longer be trusted, so the log must be reopened.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from queue import SimpleQueue
from typing import cast

from nyala.errors import InternalError, NyalaError, TimedOut
from nyala.wal.loop_bridge import post

__all__ = ["GroupCommitter", "Request", "Waiter"]

log = logging.getLogger(__name__)


class Waiter:
    """A minimal future for a blocking caller: one pre-acquired lock, released on completion.

    Cheaper than a ``concurrent.futures.Future`` (no condition variable, no callbacks), which
    matters on the one-writer path where the caller commits its own group.
    """

    __slots__ = ("_done", "_exception", "_lock", "_result")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._done = False
        self._result = 0
        self._exception: BaseException | None = None

    def set_result(self, result: int) -> None:
        self._result = result
        self._done = True
        self._lock.release()

    def set_exception(self, exception: BaseException) -> None:
        self._exception = exception
        self._done = True
        self._lock.release()

    def done(self) -> bool:
        return self._done

    def result(self, timeout: float | None) -> int:
        if not self._done and not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise TimedOut(f"the append was not durable within {timeout} s; it stays queued")
        if self._exception is not None:
            raise self._exception
        return self._result


@dataclass(slots=True, eq=False)
class Request:
    """One queued append (``runs`` holds its term runs) or truncation marker (``runs`` is None).

    ``parts`` are the encoded records, ``size`` their total length.  ``first``/``last`` are
    its op indexes (both N for ``truncate_after(N)``); the future completes with ``last``.
    ``loop`` is set when ``future`` is an asyncio future of that event loop.
    """

    parts: list[bytes]
    size: int
    future: Future[int] | Waiter | asyncio.Future[int]
    loop: asyncio.AbstractEventLoop | None
    first: int
    last: int
    runs: list[tuple[int, int]] | None


class GroupCommitter:
    """The queue, the appender thread and the committer hand-over of one log."""

    def __init__(
        self,
        name: str,
        write_group: Callable[[list[Request]], None],
        max_group_bytes: int,
        max_queued_bytes: int,
    ) -> None:
        self._write_group = write_group
        self._max_group_bytes = max_group_bytes
        self._max_queued_bytes = max_queued_bytes
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending: deque[Request] = deque()
        self._queued_bytes = 0
        self._room_waiters: list[asyncio.Future[None]] = []
        self._busy = False
        self._doorbell: SimpleQueue[bool] = SimpleQueue()  # True: commit what is queued; False: exit
        self.failure: NyalaError | None = None
        self.groups = 0  # statistics for benchmarks and tests
        self.requests = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request: Request, may_lead: bool = False) -> bool:
        """Queue ``request``; True means the caller must now call :meth:`lead` with its future."""
        with self._lock:
            self._pending.append(request)
            self._queued_bytes += request.size
            if self._busy:
                return False  # the active committer will take it
            self._busy = True
        if may_lead:
            return True
        self._doorbell.put(True)
        return False

    def room(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None] | None:
        """None while fewer than ``max_queued_bytes`` are queued; else a future resolved once fewer are."""
        with self._lock:
            if self._queued_bytes < self._max_queued_bytes:
                return None
            # Pending requests imply _busy: a committer will take a group and wake this waiter.
            waiter: asyncio.Future[None] = loop.create_future()
            self._room_waiters.append(waiter)
            return waiter

    @property
    def queued_bytes(self) -> int:
        """Bytes reserved but not yet taken into a group."""
        with self._lock:
            return self._queued_bytes

    def lead(self, until: Waiter) -> None:
        """Commit on the calling thread until ``until`` is done, then hand the rest over."""
        self._drain(until)

    def stop(self) -> None:
        """Wait for everything queued so far to be committed, then end the appender thread."""
        with self._lock:
            while self._busy:
                self._idle.wait()
        self._doorbell.put(False)
        self._thread.join()

    def _run(self) -> None:
        while self._doorbell.get():
            self._drain(None)

    def _drain(self, until: Waiter | None) -> None:
        while True:
            with self._lock:
                group = self._take_group()
                if not group:
                    self._become_idle()
                    return
                waiters = self._take_room_waiters()
            if waiters:
                _wake_room_waiters(waiters)
            self._commit(group)
            if until is not None and until.done():
                with self._lock:
                    if not self._pending:
                        self._become_idle()
                        return
                self._doorbell.put(True)  # still busy: the appender thread carries on
                return

    def _take_group(self) -> list[Request]:
        pending = self._pending
        group: list[Request] = []
        size = 0
        while pending and (not group or size < self._max_group_bytes):
            request = pending.popleft()
            group.append(request)
            size += request.size
        self._queued_bytes -= size
        return group

    def _take_room_waiters(self) -> list[asyncio.Future[None]]:
        if not self._room_waiters or self._queued_bytes >= self._max_queued_bytes:
            return []
        waiters, self._room_waiters = self._room_waiters, []
        return waiters

    def _become_idle(self) -> None:
        self._busy = False
        self._idle.notify_all()

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
        if self.failure is None:
            self.groups += 1
            self.requests += len(group)
        _complete(group, self.failure)


def _complete(group: list[Request], failure: NyalaError | None) -> None:
    """Complete thread-side futures here, in order; post asyncio ones to their loops in bulk."""
    per_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[int], int]]] | None = None
    for request in group:
        loop = request.loop
        if loop is None:
            if failure is None:
                request.future.set_result(request.last)
            else:
                request.future.set_exception(failure)
            continue
        if per_loop is None:
            per_loop = {}
        results = per_loop.get(loop)
        if results is None:
            results = per_loop[loop] = []
        results.append((cast("asyncio.Future[int]", request.future), request.last))
    if per_loop is not None:
        for loop, results in per_loop.items():
            post(loop, results, failure)


def _wake_room_waiters(waiters: list[asyncio.Future[None]]) -> None:
    per_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[None], None]]] = {}
    for waiter in waiters:
        per_loop.setdefault(waiter.get_loop(), []).append((waiter, None))
    for loop, results in per_loop.items():
        post(loop, results, None)
