"""The entry joiner: the leader joins the writes of a tablet that arrive together into one Raft entry.

Every entry costs each replica a fixed price whatever its size: the Arrow stream is opened
and checked again, the store splits it into parts and adds them to the MemRowSet, the WAL
frames it.  With many small writes (single rows from many clients) that fixed price is most
of the work, on all three replicas.  So the leader holds each validated write until the end
of the current turn of its event loop: every write whose request was read in the same turn
(the RPC server starts all the calls of one read at once) goes into the same entry.  While
two entries of the tablet are still replicating, new writes wait for one of them to finish
and then go together.  A lone write is not delayed; under load the entries grow, which is
when joining pays.

Writes are joined only when their row operations have the same Arrow schema (the same
columns, so concatenating them changes no write) and every row sets every column, and only
up to ``max_bytes`` an entry.  A write alone keeps the bytes the client sent (a ``WRITE`` or
``TRACKED_WRITE`` payload, see :mod:`nyala.tserver.envelope`); joined writes are re-encoded as
one stream (a ``JOINED_WRITE`` payload).  Each caller gets its own write's result
(:func:`nyala.tserver.state_machine.split_joined`) or the error that stopped the entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pyarrow as pa

from nyala.schema import OP_COLUMN, encode_row_operations
from nyala.storage import EntryResult
from nyala.tserver.envelope import JoinedWrite, RequestId, encode_joined, encode_tracked_write, encode_write
from nyala.tserver.state_machine import JoinedResult

__all__ = ["EntryJoiner", "PendingWrite"]

# Room kept per write for its joined header (client ids are at most 64 bytes), besides four
# bytes per dropped row.
_HEADER_ALLOWANCE = 128
# Entries of one tablet the joiner has replicating at once; later writes wait and join.  One
# or two gave the same single-row rate and the same batched rate as no limit (measured, 64
# writers on 6 tablets); two keeps the disk busy while the next entry fills.
_MAX_IN_FLIGHT = 2


@dataclass(slots=True)
class PendingWrite:
    """A validated write waiting for its entry."""

    ops: pa.Array
    data: pa.Table
    payload: bytes | memoryview
    request_id: RequestId | None
    dropped_rows: tuple[int, ...]
    #: False for writes whose rows set different columns (an ``__isset`` column): their
    #: stream cannot be rebuilt from ``data``, so they go alone, as sent.
    joinable: bool = True
    future: asyncio.Future[EntryResult] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def entry(self) -> bytes:
        """This write alone, as the client sent it."""
        if self.request_id is None:
            return encode_write(self.payload)
        return encode_tracked_write(self.request_id, self.dropped_rows, self.payload)

    def table(self) -> pa.Table:
        return self.data.add_column(0, OP_COLUMN, self.ops)


class EntryJoiner:
    """Collects a tablet's writes for one loop turn, then replicates them as few entries."""

    def __init__(self, replicate: Callable[[bytes], Awaitable[EntryResult | JoinedResult]], max_bytes: int) -> None:
        self._replicate = replicate
        self._max_bytes = max_bytes
        self._pending: list[PendingWrite] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._scheduled = False

    def submit(self, write: PendingWrite) -> asyncio.Future[EntryResult]:
        self._pending.append(write)
        self._schedule()
        return write.future

    def _schedule(self) -> None:
        if self._pending and not self._scheduled and len(self._tasks) < _MAX_IN_FLIGHT:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        # A write whose caller is gone (its call was cancelled before the entry was built) is
        # not proposed: nobody learns its outcome, so not applying it is the safe choice.
        pending = [w for w in self._pending if not w.future.done()]
        self._pending = []
        for group in self._groups(pending):
            task = asyncio.get_running_loop().create_task(self._run(group))
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._schedule()

    def _groups(self, pending: list[PendingWrite]) -> list[list[PendingWrite]]:
        """The writes split where the schema differs or an entry would grow too big; groups in
        the order of their first write."""
        groups: list[list[PendingWrite]] = []
        open_groups: list[tuple[pa.Schema, int, int]] = []  # schema, position in groups, bytes
        for write in pending:
            if not write.joinable:
                groups.append([write])
                continue
            size = len(write.payload) + _HEADER_ALLOWANCE + 4 * len(write.dropped_rows)
            schema = write.data.schema
            for i, (group_schema, position, group_size) in enumerate(open_groups):
                if group_schema.equals(schema):
                    if group_size + size <= self._max_bytes:
                        groups[position].append(write)
                        open_groups[i] = (group_schema, position, group_size + size)
                    else:
                        open_groups[i] = (group_schema, len(groups), size)
                        groups.append([write])
                    break
            else:
                open_groups.append((schema, len(groups), size))
                groups.append([write])
        return groups

    async def _run(self, group: list[PendingWrite]) -> None:
        try:
            if len(group) == 1:
                entry = group[0].entry()
            else:
                # One record batch: replicas decode, check and apply each batch of a stream on its own.
                joined = encode_row_operations(pa.concat_tables([w.table() for w in group]).combine_chunks())
                writes = [JoinedWrite(len(w.ops), w.request_id, w.dropped_rows) for w in group]
                entry = encode_joined(writes, joined)
            result = await self._replicate(entry)
        except asyncio.CancelledError:
            for write in group:
                write.future.cancel()
            raise
        except Exception as e:  # every caller gets the error that stopped its entry
            for write in group:
                if not write.future.done():
                    write.future.set_exception(e)
            return
        results = result.results if isinstance(result, JoinedResult) else (result,)
        for write, write_result in zip(group, results, strict=True):
            if not write.future.done():
                write.future.set_result(write_result)
