"""The client's write batcher: small writes to one tablet that start together go as one Write RPC.

Many callers writing a few rows each (``table.insert(row)`` from many tasks or threads) would
each cost a Write RPC: framing, a request id, an Arrow stream to encode, and on the tablet
server a call to parse, a stream to decode and check, a partition check and an answer.  So
the write path hands each tablet batch to the client's :class:`WriteBatcher` (Kudu's client
calls its equivalent the Batcher) instead of sending it at once.  At the end of the current
turn of the client's event loop, the batches for the same tablet (same table, schema
version, partition and columns) go as one batch in one Write, up to
``write_batch_max_bytes``, rows in the order the batches were handed over.  Each caller gets
the row errors of its own rows.

While a Write to a tablet is in flight, groups of batches for that tablet smaller than
``SMALL_WRITE_BYTES`` are held until no Write to it is in flight, and then go together, as
Nagle's algorithm does for small segments.  Under load a Write RPC, and the Raft entry behind
it, costs far more than a row (about 5 ms of server CPU against a few microseconds a row):
64 single-row writers over 6 tablets sent 5 callers' rows a Write instead of 2.5 this way
(docs/benchmarks.md).  When a Write is answered, the batches its callers hand over in
response (a writer that waits for each row writes the next at once) go with the held ones;
otherwise they would be held behind that next Write, which would carry fewer rows (the 64
writers: 6.8 callers a Write instead of 5.6).  A lone writer never waits, since nothing is
in flight when it writes, and larger groups go at once, so batched writers keep several
Writes to a tablet in flight.
A held batch whose deadline passes is answered with TimedOut row errors, unsent.

A batched Write is one request with one request id, retried as a whole; it stops at the
earliest deadline among its callers (they share the client's default in the common case).
Order within a session is kept: a session sends the next batch for a tablet only once the
previous one has been answered, so two batches of one session never share a Write.  Rows of
different callers have no order between them, as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

from nyala.errors import NyalaError
from nyala.schema import Partition, RowFailure

from ._retry import Deadline
from .meta_cache import TableInfo
from .operations import OpBatch, RowError

__all__ = ["WriteBatcher", "WriteOutcome"]


@dataclasses.dataclass(slots=True)
class WriteOutcome:
    """What a Write did to its batch: the failed rows by position."""

    failures: list[RowFailure]
    tablet_id: str = ""
    ambiguous: bool = False

    @classmethod
    def failed(cls, rows: int, error: NyalaError, tablet_id: str = "", ambiguous: bool = False) -> WriteOutcome:
        return cls([RowFailure(i, error) for i in range(rows)], tablet_id, ambiguous)

    def row_errors(self, batch: OpBatch, offset: int = 0) -> list[RowError]:
        """The errors of ``batch``'s rows, which were rows ``offset``.. of the Write."""
        end = offset + batch.num_rows
        mine = [RowFailure(f.row - offset, f.error) for f in self.failures if offset <= f.row < end]
        return batch.errors_at(mine, tablet_id=self.tablet_id, ambiguous=self.ambiguous)


#: Writes one batch to one tablet with every retry it takes.
WriteRunner = Callable[[TableInfo, Partition, OpBatch, Deadline], Awaitable[WriteOutcome]]


@dataclasses.dataclass(slots=True)
class _Pending:
    table: TableInfo
    partition: Partition
    batch: OpBatch
    deadline: Deadline
    future: asyncio.Future[list[RowError]]


_GroupKey = tuple[str, int, bytes]


def _group_key(p: _Pending) -> _GroupKey:
    return (p.table.id, p.table.schema_version, p.partition.partition_key_start)


#: While a Write to a tablet is in flight, groups of batches for it under this size wait.
SMALL_WRITE_BYTES = 4096

# uvloop rounds timers to milliseconds: one that fires early would find nothing expired yet.
_TIMER_SLACK_S = 0.002


class WriteBatcher:
    """Collects tablet batches for one loop turn and writes those that can go together."""

    def __init__(self, run: WriteRunner, max_bytes: int) -> None:
        self._run_write = run
        self._max_bytes = max_bytes
        # A group can never grow past a Write's limit: with a small one, holding would only
        # send the tablet's Writes one at a time.
        self._small_bytes = min(SMALL_WRITE_BYTES, max_bytes // 2)
        self._pending: list[_Pending] = []
        #: Per tablet: batches held while a Write is in flight, in the order they came; the
        #: Writes in flight; a timer that answers held batches whose deadline passes.
        self._held: dict[_GroupKey, list[_Pending]] = {}
        self._in_flight: dict[_GroupKey, int] = {}
        self._timers: dict[_GroupKey, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed: NyalaError | None = None

    async def write(self, table: TableInfo, partition: Partition, batch: OpBatch, deadline: Deadline) -> list[RowError]:
        if self._closed is not None:
            raise self._closed
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        future: asyncio.Future[list[RowError]] = loop.create_future()
        self._pending.append(_Pending(table, partition, batch, deadline, future))
        return await future

    def close(self, error: NyalaError) -> None:
        """Fail every batch not sent yet with ``error``, and every later one (the client closed)."""
        self._closed = error
        waiting = self._pending + [p for held in self._held.values() for p in held]
        self._pending, self._held = [], {}
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for p in waiting:
            if not p.future.done():
                p.future.set_exception(error)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for p in pending:
            self._held.setdefault(_group_key(p), []).append(p)
        for key in dict.fromkeys(_group_key(p) for p in pending):
            self._pump(key)

    def _pump(self, key: _GroupKey) -> None:
        """Send the groups that may go now of the batches for ``key``'s tablet; hold the rest."""
        waiting = self._held.pop(key, [])
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        busy = key in self._in_flight
        held: list[_Pending] = []
        group: list[_Pending] = []
        try:
            while waiting:
                group, size, waiting = self._next_group(waiting)
                if busy and size < self._small_bytes:
                    held += group  # goes once the Writes in flight are answered
                elif group:
                    self._start(key, group)
                group = []
        except BaseException as exc:  # a bug: no caller may be left waiting for an answer
            for p in held + group + waiting:
                if not p.future.done():
                    p.future.set_exception(exc)
            raise
        if held:
            self._held[key] = held
            at = min(p.deadline.at for p in held)
            self._timers[key] = asyncio.get_running_loop().call_at(at + _TIMER_SLACK_S, self._pump, key)

    def _start(self, key: _GroupKey, group: list[_Pending]) -> None:
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        task = asyncio.get_running_loop().create_task(self._send(group))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._answered(key))

    def _answered(self, key: _GroupKey) -> None:
        self._in_flight[key] -= 1
        if not self._in_flight[key]:
            del self._in_flight[key]
        if self._closed is not None:
            return
        if self._pending:
            # The callers of the answered Write woke before this callback and may have handed
            # over new batches, whose flush is already queued: pump after it, so that theirs
            # go with the held ones.  Flushing here instead would split the turn's other batches.
            asyncio.get_running_loop().call_soon(self._pump, key)
        else:
            self._pump(key)

    def _next_group(self, waiting: list[_Pending]) -> tuple[list[_Pending], int, list[_Pending]]:
        """The first waiting batch with the later ones that fit beside it, their size, and the rest."""
        live = []
        for p in waiting:
            if p.future.done():
                continue  # cancelled before it was sent: its caller is gone, drop its rows
            if p.deadline.expired:
                # Never sent, so not ambiguous; and not batched, which would cut the others' Write short.
                error = p.deadline.timed_out(None, 0)
                p.future.set_result(p.batch.row_errors(error, tablet_id=""))
                continue
            live.append(p)
        if not live:
            return [], 0, []
        first = live[0]
        group, size, rest = [first], first.batch.nbytes, []
        for p in live[1:]:
            more = p.batch.nbytes
            if size + more <= self._max_bytes and first.batch.same_columns(p.batch):
                group.append(p)
                size += more
            else:
                rest.append(p)
        return group, size, rest

    async def _send(self, group: list[_Pending]) -> None:
        first = group[0]
        try:
            batch = OpBatch.joined([p.batch for p in group])
            deadline = min((p.deadline for p in group), key=lambda d: d.at)
            outcome = await self._run_write(first.table, first.partition, batch, deadline)
        except asyncio.CancelledError:
            for p in group:
                p.future.cancel()
            raise
        except Exception as exc:  # every caller gets what stopped its Write
            for p in group:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        offset = 0
        for p in group:
            if not p.future.done():
                p.future.set_result(outcome.row_errors(p.batch, offset))
            offset += p.batch.num_rows
