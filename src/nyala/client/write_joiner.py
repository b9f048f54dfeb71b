"""The client sends small writes to one tablet that start together as one Write RPC.

Many callers writing a few rows each (``table.insert(row)`` from many tasks or threads) would
each cost a Write RPC: framing, a request id, an Arrow stream to encode, and on the tablet
server a call to parse, a stream to decode and check, a partition check and an answer.  So
the write path hands each tablet batch to the client's :class:`WriteJoiner` instead of
sending it at once.  At the end of the current turn of the client's event loop, the batches
for the same tablet (same table, schema version, partition and columns) go as one batch in
one Write, up to ``write_batch_max_bytes``, rows in the order the batches were handed over.
Each caller gets the row errors of its own rows.

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


class WriteJoiner:
    """Collects tablet batches for one loop turn and writes those that can go together."""

    def __init__(self, run: WriteRunner, max_bytes: int) -> None:
        self._run_write = run
        self._max_bytes = max_bytes
        self._pending: list[_Pending] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(self, table: TableInfo, partition: Partition, batch: OpBatch, deadline: Deadline) -> list[RowError]:
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        future: asyncio.Future[list[RowError]] = loop.create_future()
        self._pending.append(_Pending(table, partition, batch, deadline, future))
        return await future

    def _flush(self) -> None:
        # A caller cancelled before its batch was sent has nothing to wait for: drop its rows.
        pending = [p for p in self._pending if not p.future.done()]
        self._pending = []
        for group in self._groups(pending):
            task = asyncio.get_running_loop().create_task(self._send(group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _groups(self, pending: list[_Pending]) -> list[list[_Pending]]:
        groups: list[list[_Pending]] = []
        open_groups: dict[tuple[str, int, bytes], list[tuple[pa.Schema, int, int]]] = {}
        for p in pending:
            key = (p.table.id, p.table.schema_version, p.partition.partition_key_start)
            size = p.batch.nbytes
            candidates = open_groups.setdefault(key, [])
            for i, (schema, position, group_size) in enumerate(candidates):
                if schema.equals(p.batch.data.schema) and group_size + size <= self._max_bytes:
                    groups[position].append(p)
                    candidates[i] = (schema, position, group_size + size)
                    break
            else:
                candidates.append((p.batch.data.schema, len(groups), size))
                groups.append([p])
        return groups

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
