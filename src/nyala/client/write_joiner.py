"""The client sends small writes to one tablet that start together as one Write RPC.

Many callers writing a few rows each (``table.insert(row)`` from many tasks or threads) would
each cost a Write RPC: framing, a request id, an Arrow stream to encode, and on the tablet
server a call to parse, a stream to decode and check, a partition check and an answer.  So
the write path hands each tablet batch to the client's :class:`WriteJoiner` instead of
sending it at once.  At the end of the current turn of the client's event loop, the batches
for the same tablet (same table, schema version, partition and columns) go as one batch in
one Write, up to ``write_batch_max_bytes``, rows in the order the batches were handed over.
Each caller gets the row errors of its own rows.

While a Write to a tablet is in flight, small batches for that tablet (under
``SMALL_WRITE_BYTES`` together) wait for its answer and then go together, as Nagle's
algorithm does for small segments.  Under load the Write RPCs, and the Raft entries behind
them, each cost far more than a row (about 5 ms of server CPU against a few microseconds a
row), so 64 single-row writers over 6 tablets cut their Writes by half and their server
CPU a write by a quarter this way (docs/benchmarks.md).  A lone writer never waits: nothing
is in flight when it writes.  Larger batches go at once, as before, so that batched writers
keep several Writes to a tablet in flight.

A joined Write is one request with one request id, retried as a whole; it stops at the
earliest deadline among its callers (they share the client's default in the common case).
Order within a session is kept: a session sends the next batch for a tablet only once the
previous one has been answered, so two batches of one session are never joined.  Rows of
different callers have no order between them, as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

import pyarrow as pa

from nyala.common.errors import NyalaError
from nyala.schema import Partition

from ._retry import Deadline
from .meta_cache import TableInfo
from .operations import OpBatch, RowError

__all__ = ["WriteJoiner", "WriteOutcome"]


@dataclasses.dataclass(slots=True)
class WriteOutcome:
    """What a Write did to its batch: the failed rows by position."""

    failures: list[tuple[int, NyalaError]]
    tablet_id: str = ""
    ambiguous: bool = False

    @classmethod
    def failed(cls, rows: int, error: NyalaError, tablet_id: str = "", ambiguous: bool = False) -> WriteOutcome:
        return cls([(i, error) for i in range(rows)], tablet_id, ambiguous)

    def row_errors(self, batch: OpBatch, offset: int = 0) -> list[RowError]:
        """The errors of ``batch``'s rows, which were rows ``offset``.. of the Write."""
        end = offset + batch.num_rows
        mine = [(i - offset, e) for i, e in self.failures if offset <= i < end]
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


#: Batches for a tablet with a Write in flight wait for its answer while they stay under this.
SMALL_WRITE_BYTES = 4096


class WriteJoiner:
    """Collects tablet batches for one loop turn and writes those that can go together."""

    def __init__(self, run: WriteRunner, max_bytes: int) -> None:
        self._run_write = run
        self._max_bytes = max_bytes
        self._pending: list[_Pending] = []
        #: Batches per tablet not sent yet, in the order they came, and Writes in flight per tablet.
        self._waiting: dict[_GroupKey, list[_Pending]] = {}
        self._in_flight: dict[_GroupKey, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(self, table: TableInfo, partition: Partition, batch: OpBatch, deadline: Deadline) -> list[RowError]:
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        future: asyncio.Future[list[RowError]] = loop.create_future()
        self._pending.append(_Pending(table, partition, batch, deadline, future))
        return await future

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for p in pending:
            self._waiting.setdefault(_group_key(p), []).append(p)
        for key in dict.fromkeys(_group_key(p) for p in pending):
            self._pump(key)

    def _pump(self, key: _GroupKey) -> None:
        """Send what may go now of the batches waiting for ``key``'s tablet."""
        waiting = self._waiting.pop(key, [])
        while waiting:
            group, size, rest = self._next_group(waiting)
            if group and size < SMALL_WRITE_BYTES and self._in_flight.get(key, 0):
                break  # goes when the Write in flight is answered
            waiting = rest
            if group:
                self._start(key, group)
        if waiting:
            self._waiting[key] = waiting

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
        self._pump(key)

    def _next_group(self, waiting: list[_Pending]) -> tuple[list[_Pending], int, list[_Pending]]:
        """The first waiting batch with the later ones that fit beside it, their size, and the rest."""
        # A caller cancelled before its batch was sent has nothing to wait for: drop its rows.
        live = [p for p in waiting if not p.future.done()]
        if not live:
            return [], 0, []
        first = live[0]
        group, size, rest = [first], first.batch.nbytes, []
        schema = first.batch.data.schema
        for p in live[1:]:
            more = p.batch.nbytes
            if size + more <= self._max_bytes and schema.equals(p.batch.data.schema):
                group.append(p)
                size += more
            else:
                rest.append(p)
        return group, size, rest

    async def _send(self, group: list[_Pending]) -> None:
        first = group[0]
        try:
            if len(group) == 1:
                batch = first.batch
            else:
                batch = OpBatch(
                    pa.concat_arrays([p.batch.ops for p in group]), pa.concat_tables([p.batch.data for p in group])
                )
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
