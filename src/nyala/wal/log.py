"""The write-ahead log of one tablet: the public :class:`Log`."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Generator, Sequence
from concurrent.futures import Future
from types import TracebackType

from nyala.errors import IllegalState, InvalidArgument, IOFailure, NotFound
from nyala.files import fsync_dir
from nyala.wal.anchors import AnchorKind, LogAnchorRegistry, segments_to_delete
from nyala.wal.appender import GroupCommitter, Request, Waiter
from nyala.wal.entry import LogEntry
from nyala.wal.format import (
    FOOTER_SIZE,
    MAX_TABLET_ID_BYTES,
    batch_header,
    effective_records,
    encode_append,
    encode_truncate_marker,
)
from nyala.wal.index import LogIndex
from nyala.wal.metrics import WalMetrics, unexported
from nyala.wal.options import WalOptions
from nyala.wal.reader import BatchReader
from nyala.wal.recovery import recover
from nyala.wal.segment import ActiveSegment, Preallocator, SegmentInfo

__all__ = ["Log"]

_SPANS_PER_FETCH = 64


class Log:
    """A tablet's write-ahead log in one directory; see :mod:`nyala.wal` for how it works.

    Thread-safe.  :meth:`append` returns a ``concurrent.futures.Future`` that completes (with
    the last index appended) once the entries are durable; asyncio code calls
    :meth:`append_async`, whose ``asyncio.Future`` is resolved inside its event loop together
    with the rest of its group (one loop wake-up per group, not per append).
    """

    def __init__(
        self, directory: str, tablet_id: str, options: WalOptions, anchors: LogAnchorRegistry, metrics: WalMetrics
    ) -> None:
        """Use :meth:`open`."""
        self.directory = directory
        self.metrics = metrics
        #: This log's counts (only the committer updates them; the server's metrics sum them).
        self._tally = metrics.tally()
        self.tablet_id = tablet_id
        self.options = options
        self.anchors = anchors
        self._dir_fd = _lock_directory(directory)
        self._reserve_lock = threading.Lock()  # orders reservations; taken first
        self._state_lock = threading.Lock()  # guards the index and the segment list
        self._closed = False
        try:
            state = recover(directory, tablet_id, self._dir_fd)
            self._index: LogIndex = state.index
            self._segments: list[SegmentInfo] = state.closed
            self._preallocator = Preallocator(
                directory, tablet_id, options.segment_size_bytes, options.preallocate_segments
            )
            self._active = ActiveSegment(self._preallocator.take(state.next_seqno), self._dir_fd)
        except BaseException:
            os.close(self._dir_fd)
            raise
        self._preallocator.start(state.next_seqno + 1)
        self._next_index = self._index.last_index + 1
        self._last_term = self._index.last_term
        # A group never exceeds half a segment, so segments stay near their nominal size.
        group_bytes = min(options.group_commit_max_bytes, options.segment_size_bytes // 2)
        self._committer = GroupCommitter(
            f"wal-append-{tablet_id}", self._write_group, group_bytes, options.append_queue_max_bytes
        )
        metrics.track(self)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        tablet_id: str,
        options: WalOptions | None = None,
        anchors: LogAnchorRegistry | None = None,
        metrics: WalMetrics | None = None,
    ) -> Log:
        """Open (creating when missing) and recover the log in ``directory``.

        Raises Corruption when a segment is damaged anywhere but a torn tail, IllegalState when
        another Log holds the directory, InvalidArgument for a bad tablet id.
        """
        _check_tablet_id(tablet_id)
        path = os.fspath(directory)
        _make_directory(path)
        return cls(path, tablet_id, options or WalOptions(), anchors or LogAnchorRegistry(), metrics or unexported())

    # -- appending --------------------------------------------------------------------------

    def append(self, entries: Sequence[LogEntry]) -> Future[int]:
        """Queue ``entries`` (consecutive indexes starting at :attr:`next_index`) for group commit.

        The future completes with the last index once the entries are durable, in reservation
        order.  Raises InvalidArgument (changing nothing) for bad entries, IllegalState after
        close and IOFailure after an earlier write failure.
        """
        future: Future[int] = Future()
        future.set_running_or_notify_cancel()  # a reserved append cannot be cancelled any more
        self._reserve_append(entries, future, None, may_lead=False)
        return future

    def append_async(self, entries: Sequence[LogEntry]) -> asyncio.Future[int]:
        """:meth:`append` for code running in an asyncio event loop (call it from that loop).

        The entries are reserved at once, in call order, and the returned future resolves with
        the last index once they are durable.  The appender resolves all of a group's futures
        of one loop with a single ``call_soon_threadsafe``, in reservation order.  Cancelling
        the future (or the task awaiting it) does not withdraw the append: it is written and
        synced all the same, and ``next_index`` already counts it.  Raises like :meth:`append`,
        and IllegalState outside a running event loop.
        """
        loop = _running_loop("append_async")
        future: asyncio.Future[int] = loop.create_future()
        self._reserve_append(entries, future, loop, may_lead=False)
        return future

    def append_sync(self, entries: Sequence[LogEntry], timeout: float | None = None) -> int:
        """:meth:`append` and wait until durable; return the last index.

        When the log is idle the calling thread writes and syncs the group itself, saving two
        thread wake-ups; otherwise it waits for the committer like :meth:`append`.  TimedOut
        after ``timeout`` seconds (the append stays queued).
        """
        waiter = Waiter()
        if self._reserve_append(entries, waiter, None, may_lead=True):
            self._committer.lead(waiter)
        return waiter.result(timeout)

    async def wait_for_room(self) -> None:
        """Return once fewer than ``append_queue_max_bytes`` wait in the append queue.

        Backpressure for producers that do not await each append before the next: await this
        before producing more.  Appends themselves never wait for room (that would let a later
        caller overtake a reserved one), so the bound is soft: it is exceeded by at most what
        was appended without awaiting this.  Returns at once on a closed or failed log (the
        next append raises).  Call it from the event loop the appends come from.
        """
        waiter = self._committer.room(_running_loop("wait_for_room"))
        if waiter is not None:
            await waiter

    @property
    def queued_bytes(self) -> int:
        """Bytes appended but not yet taken by the appender into a group."""
        return self._committer.queued_bytes

    def _reserve_append(
        self,
        entries: Sequence[LogEntry],
        future: Future[int] | Waiter | asyncio.Future[int],
        loop: asyncio.AbstractEventLoop | None,
        may_lead: bool,
    ) -> bool:
        parts, size, runs = encode_append(entries)
        if size > self.options.max_append_bytes:
            limit = self.options.max_append_bytes
            raise InvalidArgument(f"append of {size} bytes exceeds max_append_bytes={limit}")
        first, last = entries[0].index, entries[-1].index
        with self._reserve_lock:
            if self._closed or self._committer.failure is not None:
                self._check_writable()
            if first != self._next_index:
                raise InvalidArgument(f"append must start at index {self._next_index}, not {first}")
            if self._last_term is not None and runs[0][1] < self._last_term:
                raise InvalidArgument(
                    f"entry {first}: term {runs[0][1]} is below the log's last term {self._last_term}"
                )
            self._next_index = last + 1
            self._last_term = runs[-1][1]
            return self._committer.submit(Request(parts, size, future, loop, first, last, runs), may_lead)

    def truncate_after(self, index: int) -> Future[int]:
        """Remove entries above ``index``, durably and in order with appends; the next append starts at index+1.

        A marker record goes through the same queue as appends; recovery and readers discard
        entries above ``index`` written before it.  ``index`` must lie in ``first_index-1 ..
        next_index-1`` (entries below first_index were garbage collected, hence committed).
        """
        future: Future[int] = Future()
        future.set_running_or_notify_cancel()
        self._reserve_truncation(index, future, None, may_lead=False)
        return future

    def truncate_after_async(self, index: int) -> asyncio.Future[int]:
        """:meth:`truncate_after` for asyncio code, resolved like :meth:`append_async`."""
        loop = _running_loop("truncate_after_async")
        future: asyncio.Future[int] = loop.create_future()
        self._reserve_truncation(index, future, loop, may_lead=False)
        return future

    def truncate_after_sync(self, index: int, timeout: float | None = None) -> int:
        """:meth:`truncate_after` and wait until durable."""
        waiter = Waiter()
        if self._reserve_truncation(index, waiter, None, may_lead=True):
            self._committer.lead(waiter)
        return waiter.result(timeout)

    def _reserve_truncation(
        self,
        index: int,
        future: Future[int] | Waiter | asyncio.Future[int],
        loop: asyncio.AbstractEventLoop | None,
        may_lead: bool,
    ) -> bool:
        if type(index) is not int or index < 0:
            raise InvalidArgument(f"truncation index must be an integer >= 0, got {index!r}")
        with self._reserve_lock:
            self._check_writable()
            with self._state_lock:
                lowest = self._index.first_index - 1
            if not lowest <= index < self._next_index:
                raise InvalidArgument(
                    f"cannot truncate after {index}: the log holds {lowest + 1}..{self._next_index - 1}"
                )
            self._next_index = index + 1
            self._last_term = None  # unknown until the next append; the consensus layer owns terms
            marker = encode_truncate_marker(index)
            request = Request([marker], len(marker), future, loop, index, index, None)
            return self._committer.submit(request, may_lead)

    def _check_writable(self) -> None:
        if self._closed:
            raise IllegalState(f"the log of tablet {self.tablet_id} is closed")
        failure = self._committer.failure
        if failure is not None:
            raise IOFailure(f"the log of tablet {self.tablet_id} failed earlier and must be reopened: {failure}")

    # -- the committer (the appender thread, or a blocking caller; one at a time) ------------

    def _write_group(self, group: list[Request]) -> None:
        """Write a group as one batch and sync it (called by the single active committer)."""
        # The one copy of the payloads, made here rather than on the callers' (event loop) thread.
        payload = b"".join([part for request in group for part in request.parts])
        header = batch_header(payload)
        segment = self._active
        needed = len(header) + len(payload) + FOOTER_SIZE
        if segment.has_records and segment.offset + needed > self.options.segment_size_bytes:
            segment = self._roll_over()
        tally = self._tally
        try:
            offset = segment.write(header, payload)
            if self.options.fsync_enabled:
                started = time.perf_counter()
                segment.sync()
                tally.fsync.observe(time.perf_counter() - started)
        except OSError as exc:
            raise IOFailure(f"{segment.path}: write or sync failed: {exc.strerror}") from exc
        tally.appends += len(group)
        tally.group_size.observe(len(group))
        tally.written_bytes += len(header) + len(payload)
        index, seqno = self._index, segment.seqno
        updates = _index_updates(group)
        tally.entries += sum(last - first + 1 for first, last, runs in updates if runs is not None)
        with self._state_lock:
            for first, last, runs in updates:
                if runs is None:
                    index.truncate_after(first)
                else:
                    index.add(seqno, offset, first, last, runs)
                    segment.note_entries(first, last)

    def _roll_over(self) -> ActiveSegment:
        old = self._active
        prepared = self._preallocator.take(old.seqno + 1)
        try:
            closed = old.finish()
        except OSError as exc:
            os.close(prepared.fd)
            raise IOFailure(f"{old.path}: cannot close segment: {exc.strerror}") from exc
        new = ActiveSegment(prepared, self._dir_fd)
        with self._state_lock:
            self._segments.append(closed)
            self._active = new
        self._preallocator.start(new.seqno + 1)
        return new

    # -- reading ----------------------------------------------------------------------------

    @property
    def first_index(self) -> int:
        """The lowest index still in the log (last_index + 1 when it holds no entry)."""
        with self._state_lock:
            return self._index.first_index

    @property
    def last_index(self) -> int:
        """The highest durable index (0 for a new log)."""
        with self._state_lock:
            return self._index.last_index

    @property
    def next_index(self) -> int:
        """The index the next append must start with (counts queued, not yet durable appends)."""
        with self._reserve_lock:
            return self._next_index

    def term_at(self, index: int) -> int:
        """Term of the durable entry ``index``; NotFound when it is not in the log."""
        with self._state_lock:
            return self._index.term_at(index)

    def entries(self, from_index: int, to_index: int | None = None) -> Generator[LogEntry, None, None]:
        """Iterate durable entries from ``from_index`` up to ``to_index`` (default: the last now).

        NotFound when ``from_index`` was garbage collected; InvalidArgument beyond last_index+1.
        """
        if type(from_index) is not int or from_index < 1:
            raise InvalidArgument(f"from_index must be an integer >= 1, got {from_index!r}")
        with self._state_lock:
            self._check_readable(from_index)
            upper = self._index.last_index if to_index is None else min(to_index, self._index.last_index)
        return self._iterate(from_index, upper)

    def read(self, from_index: int, max_bytes: int, to_index: int | None = None) -> list[LogEntry]:
        """Entries from ``from_index`` whose payloads total at most ``max_bytes`` (always at least one)."""
        if type(max_bytes) is not int or max_bytes < 0:
            raise InvalidArgument(f"max_bytes must be an integer >= 0, got {max_bytes!r}")
        result: list[LogEntry] = []
        total = 0
        with contextlib.closing(self.entries(from_index, to_index)) as entries:
            for entry in entries:
                total += len(entry.payload)
                if result and total > max_bytes:
                    break
                result.append(entry)
        return result

    def _check_readable(self, from_index: int) -> None:
        index = self._index
        if from_index < index.first_index:
            raise NotFound(f"index {from_index} was garbage collected; the log starts at {index.first_index}")
        if from_index > index.last_index + 1:
            raise InvalidArgument(f"index {from_index} is beyond the end of the log (last index {index.last_index})")

    def _iterate(self, position: int, upper: int) -> Generator[LogEntry, None, None]:
        reader = BatchReader(self.directory)
        try:
            while position <= upper:
                with self._state_lock:
                    self._check_readable(position)
                    if position > self._index.last_index:
                        return  # truncated meanwhile
                    spans = self._index.spans_from(position, _SPANS_PER_FETCH)
                reader.forget()
                for span in spans:
                    payload = reader.payload(span.seqno, span.offset)
                    where = f"{reader.path(span.seqno)}: batch at byte offset {span.offset}"
                    for record in effective_records(payload, where):
                        if span.lo <= record.op_index <= min(span.hi, upper):
                            data = bytes(payload[record.start : record.start + record.length])
                            yield LogEntry(record.term, record.op_index, record.type, data)
                    position = span.hi + 1
                    if position > upper:
                        return
        finally:
            reader.close()

    # -- segments and GC --------------------------------------------------------------------

    @property
    def segment_count(self) -> int:
        """Segment files of the log: the closed ones and the active one (0 once closed)."""
        with self._state_lock:
            return 0 if self._closed else len(self._segments) + 1

    def segments(self) -> list[SegmentInfo]:
        """Closed segments, oldest first, then the active one."""
        with self._state_lock:
            return [*self._segments, self._active.info()]

    def gc(self) -> list[SegmentInfo]:
        """Delete the oldest closed segments that no anchor needs; return what was deleted."""
        required = self.anchors.earliest(AnchorKind.REQUIRED)
        retention = self.anchors.earliest(AnchorKind.RETENTION)
        with self._state_lock:
            if self._closed:
                raise IllegalState(f"the log of tablet {self.tablet_id} is closed")
            count = segments_to_delete(
                [s.max_index for s in self._segments],
                required,
                retention,
                self.options.min_segments_to_retain,
                self.options.max_segments_to_retain,
            )
            victims = self._segments[:count]
            if victims:
                del self._segments[:count]
                self._index.drop_segments_through(victims[-1].seqno)
        self._delete_files(victims)
        if victims:
            self._tally.gc_segments += len(victims)
        return victims

    def _delete_files(self, victims: list[SegmentInfo]) -> None:
        try:
            for victim in victims:
                os.unlink(victim.path)
            if victims:
                fsync_dir(self._dir_fd)
        except OSError as exc:
            raise IOFailure(f"{self.directory}: cannot delete old segments: {exc.strerror}") from exc

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Finish queued appends, close the active segment (footer, truncate, fsync), unlock."""
        with self._reserve_lock:
            if self._closed:
                return
            self._closed = True
        self._committer.stop()
        self.metrics.retire(self._tally)  # nothing counts into it any more
        try:
            self._preallocator.discard()
            with self._state_lock:
                active = self._active
                if self._committer.failure is not None:
                    active.abandon()
                elif active.has_records:
                    self._segments.append(active.finish())
                else:
                    active.discard()
        except OSError as exc:
            raise IOFailure(f"{self._active.path}: cannot close segment: {exc.strerror}") from exc
        finally:
            os.close(self._dir_fd)

    def __enter__(self) -> Log:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- statistics -------------------------------------------------------------------------

    @property
    def group_stats(self) -> tuple[int, int]:
        """(groups committed, requests committed) since open; their ratio is the average group size."""
        return self._committer.groups, self._committer.requests


def _index_updates(group: list[Request]) -> list[tuple[int, int, list[tuple[int, int]] | None]]:
    """The group's changes to the index: (first, last, term runs), or (n, n, None) to truncate after n.

    Consecutive appends are merged into one change, which keeps the work done under the state
    lock (and under the GIL, while the event loop waits) to one call per run of appends.
    """
    updates: list[tuple[int, int, list[tuple[int, int]] | None]] = []
    merged: list[tuple[int, int]] | None = None
    for request in group:
        runs = request.runs
        if runs is None:
            updates.append((request.first, request.first, None))
            merged = None
        elif merged is None:
            merged = list(runs)
            updates.append((request.first, request.last, merged))
        else:
            merged.extend(runs)  # LogIndex.add skips a run that repeats the previous term
            updates[-1] = (updates[-1][0], request.last, merged)
    return updates


def _running_loop(method: str) -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise IllegalState(f"Log.{method} must be called from a running asyncio event loop") from None


def _check_tablet_id(tablet_id: str) -> None:
    if type(tablet_id) is not str or not tablet_id or len(tablet_id.encode()) > MAX_TABLET_ID_BYTES:
        raise InvalidArgument(f"tablet id must be a non-empty string of at most 1024 bytes, got {tablet_id!r}")


def _make_directory(path: str) -> None:
    if os.path.isdir(path):
        return
    try:
        os.makedirs(path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except FileExistsError as exc:
        raise InvalidArgument(f"{path} exists and is not a directory") from exc
    except OSError as exc:
        raise IOFailure(f"{path}: cannot create the log directory: {exc.strerror}") from exc


def _lock_directory(path: str) -> int:
    """Open the directory and take an exclusive lock on it, held until close."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise IllegalState(f"{path}: the log is open elsewhere (directory locked)") from exc
    return fd
