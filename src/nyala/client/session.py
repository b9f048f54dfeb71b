"""Write sessions: buffering, the three flush modes, per-row errors, ordering.

A session belongs to one table.  Rows are checked and converted to Arrow when they are
applied (a mistake raises at that call); what happens next depends on the flush mode
(Kudu's):

- AUTO_FLUSH_SYNC (default): every call is sent at once and returns its row errors.
- AUTO_FLUSH_BACKGROUND: calls return at once; a flush starts when the buffer reaches the
  watermark (50 % of ``buffer_bytes``) or ``flush_interval_ms`` after the first buffered
  row.  Several flushes may be in flight; when buffered plus in-flight bytes would exceed
  ``buffer_bytes``, the applying call waits (back-pressure).  Row errors collect in
  :meth:`AsyncSession.pending_errors`.
- MANUAL_FLUSH: rows are buffered until :meth:`AsyncSession.flush`; a call that would grow the
  buffer past ``buffer_bytes`` raises IllegalState and buffers nothing.

Order: operations on one partition are applied in the order they were given, also across
concurrent background flushes (each flush's batch for a partition waits for the previous
flush's batch for that partition).  Different partitions are written in parallel.

Errors are never dropped silently: ``flush()`` and ``close()`` return every row error not yet
returned; errors beyond ``session_max_pending_errors`` are counted in ``dropped_errors``;
leaving an ``async with`` block (or ``with`` for the sync session) with uncollected errors
raises :class:`UnhandledRowErrors`.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import itertools
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType

from nyala.errors import IllegalState, InvalidArgument, NotFound, NyalaError
from nyala.schema import OpType

from ._context import ClientContext
from ._retry import Deadline
from .meta_cache import TableInfo
from .operations import OpBatch, Operation, RowError, Rows, UnhandledRowErrors, to_op_batches
from .writer import TabletWork, send_tablet_work, split_by_partition

__all__ = ["AsyncSession", "FlushMode", "flush_batches"]


class FlushMode(enum.Enum):
    """When a session sends what it buffers (Kudu's flush modes)."""

    AUTO_FLUSH_SYNC = "auto_flush_sync"
    AUTO_FLUSH_BACKGROUND = "auto_flush_background"
    MANUAL_FLUSH = "manual_flush"


TableGetter = Callable[[Deadline], Awaitable[TableInfo]]


class AsyncSession:
    """Buffers and sends write operations for one table (use on the client's event loop)."""

    def __init__(
        self,
        ctx: ClientContext,
        table: TableGetter,
        table_name: str,
        *,
        flush_mode: FlushMode = FlushMode.AUTO_FLUSH_SYNC,
        buffer_bytes: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        if not isinstance(flush_mode, FlushMode):
            raise InvalidArgument(f"flush_mode must be a FlushMode, not {flush_mode!r}")
        self._ctx = ctx
        self._table = table
        self.table_name = table_name
        self.flush_mode = flush_mode
        self.buffer_bytes = buffer_bytes or ctx.options.session_buffer_bytes
        if self.buffer_bytes <= 0:
            raise InvalidArgument(f"buffer_bytes must be positive, got {self.buffer_bytes}")
        self.timeout_s = timeout_s or ctx.options.operation_timeout_ms / 1000
        self._buffer: list[OpBatch] = []
        self._buffered_bytes = 0
        self._inflight: set[asyncio.Task[None]] = set()
        self._inflight_bytes = 0
        self._tails: dict[bytes, asyncio.Future[None]] = {}
        self._errors: list[RowError] = []
        self.dropped_errors = 0
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._failure: BaseException | None = None
        self._last_refresh = -1e9

    # --- applying --------------------------------------------------------------------------

    async def apply(self, *operations: Operation) -> list[RowError]:
        """Apply operations made by ``table.new_insert(row)`` and friends, in order."""
        self._check_open()
        info = await self._table(Deadline(self.timeout_s, f"looking up table {self.table_name!r}"))
        batches: list[OpBatch] = []
        for op, group in itertools.groupby(operations, key=lambda o: o.op):
            batches += to_op_batches(info.schema, op, [o.row for o in group])
        return await self._add(batches)

    async def write(self, op: OpType, rows: Rows) -> list[RowError]:
        """Apply ``op`` to rows: a dict, a list of dicts, or an Arrow table or record batch."""
        self._check_open()
        info = await self._table(Deadline(self.timeout_s, f"looking up table {self.table_name!r}"))
        return await self._add(to_op_batches(info.schema, OpType(op), rows))

    async def insert(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.INSERT, rows)

    async def insert_ignore(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.INSERT_IGNORE, rows)

    async def upsert(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.UPSERT, rows)

    async def upsert_ignore(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.UPSERT_IGNORE, rows)

    async def update(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.UPDATE, rows)

    async def update_ignore(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.UPDATE_IGNORE, rows)

    async def delete(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.DELETE, rows)

    async def delete_ignore(self, rows: Rows) -> list[RowError]:
        return await self.write(OpType.DELETE_IGNORE, rows)

    async def _add(self, batches: list[OpBatch]) -> list[RowError]:
        if not batches:
            return []
        if self.flush_mode is FlushMode.AUTO_FLUSH_SYNC:
            return await self._flush_batches(batches)
        nbytes = sum(b.nbytes for b in batches)
        if self.flush_mode is FlushMode.MANUAL_FLUSH:
            if self._buffered_bytes + nbytes > self.buffer_bytes:
                raise IllegalState(
                    f"the session buffer holds {self._buffered_bytes} bytes and cannot take {nbytes} more "
                    f"(buffer_bytes={self.buffer_bytes}); call flush() first or use a bigger buffer"
                )
            self._buffer += batches
            self._buffered_bytes += nbytes
            return []
        for piece in _slices(batches, self._watermark()):
            await self._make_room(piece.nbytes)
            self._buffer.append(piece)
            self._buffered_bytes += piece.nbytes
            if self._buffered_bytes >= self._watermark():
                self._start_flush()
            elif self._timer is None:
                interval = self._ctx.options.session_flush_interval_ms / 1000
                self._timer = asyncio.get_running_loop().call_later(interval, self._on_timer)
        return []

    def _watermark(self) -> int:
        return max(1, self.buffer_bytes * self._ctx.options.session_flush_watermark_pct // 100)

    async def _make_room(self, nbytes: int) -> None:
        while self._buffered_bytes + self._inflight_bytes + nbytes > self.buffer_bytes and (
            self._buffer or self._inflight
        ):
            if self._buffer:
                self._start_flush()
            await asyncio.wait(list(self._inflight), return_when=asyncio.FIRST_COMPLETED)

    def _on_timer(self) -> None:
        self._timer = None
        if self._buffer:
            self._start_flush()

    # --- flushing --------------------------------------------------------------------------

    def _start_flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batches, self._buffer = self._buffer, []
        nbytes, self._buffered_bytes = self._buffered_bytes, 0
        self._inflight_bytes += nbytes
        task = asyncio.get_running_loop().create_task(self._background_flush(batches))
        self._inflight.add(task)

        def finished(t: asyncio.Task[None]) -> None:
            self._inflight.discard(t)
            self._inflight_bytes -= nbytes
            exc = None if t.cancelled() else t.exception()
            if isinstance(exc, NyalaError):
                self._collect(_as_errors(batches, exc))
            elif exc is not None:
                self._failure = exc  # a bug: raised by the next flush() rather than lost in a callback

        task.add_done_callback(finished)

    async def _background_flush(self, batches: list[OpBatch]) -> None:
        self._collect(await self._flush_batches(batches))

    async def _flush_batches(self, batches: list[OpBatch]) -> list[RowError]:
        rows = sum(b.num_rows for b in batches)
        deadline = Deadline(self.timeout_s, f"writing {rows} rows to table {self.table_name!r}")
        return await flush_batches(self._ctx, self._table, batches, deadline, self._may_refresh, self._send_in_order)

    def _may_refresh(self) -> bool:
        """At most one table refresh per second for rows that fit no partition."""
        now = asyncio.get_running_loop().time()
        if now - self._last_refresh < 1.0:
            return False
        self._last_refresh = now
        return True

    async def _send_in_order(self, info: TableInfo, work: TabletWork, deadline: Deadline) -> list[RowError]:
        key = work.partition.partition_key_start
        previous = self._tails.get(key)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = mine
        try:
            if previous is not None:
                await previous
            return await send_tablet_work(self._ctx, info, work, deadline)
        finally:
            mine.set_result(None)
            if self._tails.get(key) is mine:
                del self._tails[key]

    def _collect(self, errors: Sequence[RowError]) -> None:
        room = max(0, self._ctx.options.session_max_pending_errors - len(self._errors))
        self._errors += errors[:room]
        self.dropped_errors += max(0, len(errors) - room)

    async def flush(self) -> list[RowError]:
        """Send everything buffered, wait for every flush in flight, return all uncollected row errors."""
        if self._buffer:
            self._start_flush()
        while self._inflight:
            await asyncio.wait(list(self._inflight))
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        return self.pending_errors()

    async def close(self) -> list[RowError]:
        """Flush and refuse further operations; returns the uncollected row errors."""
        try:
            return await self.flush()
        finally:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    # --- errors and state ------------------------------------------------------------------

    def pending_errors(self) -> list[RowError]:
        """Take the row errors collected so far (the session forgets them)."""
        errors, self._errors = self._errors, []
        return errors

    def count_pending_errors(self) -> int:
        return len(self._errors)

    @property
    def buffered_bytes(self) -> int:
        return self._buffered_bytes

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalState(f"the session on table {self.table_name!r} is closed")

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        errors = await self.close()
        dropped, self.dropped_errors = self.dropped_errors, 0
        if exc is None and (errors or dropped):
            raise UnhandledRowErrors(errors, dropped)


def _slices(batches: list[OpBatch], max_bytes: int) -> list[OpBatch]:
    """Cut big batches so back-pressure and background flushes work in buffer-sized steps."""
    out: list[OpBatch] = []
    for batch in batches:
        if batch.nbytes <= max_bytes or batch.num_rows <= 1:
            out.append(batch)
            continue
        rows = max(1, batch.num_rows * max_bytes // batch.nbytes)
        out += [OpBatch(batch.ops.slice(i, rows), batch.data.slice(i, rows)) for i in range(0, batch.num_rows, rows)]
    return out


def _as_errors(batches: Sequence[OpBatch], exc: NyalaError) -> list[RowError]:
    return [e for b in batches for e in b.row_errors(exc)]


TabletSender = Callable[[TableInfo, TabletWork, Deadline], Awaitable[list[RowError]]]


async def flush_batches(
    ctx: ClientContext,
    table: TableGetter,
    batches: list[OpBatch],
    deadline: Deadline,
    may_refresh: Callable[[], bool],
    send: TabletSender | None = None,
) -> list[RowError]:
    """Write ``batches`` once: split by tablet, send each tablet's part, return every row error.

    ``send`` writes one tablet's part (a session passes one that keeps its flushes in order);
    by default it is sent as it is.  Rows no partition covers cause one look at the table
    (when ``may_refresh()`` allows) before they are reported as NotFound."""
    try:
        info = await table(deadline)
    except NyalaError as exc:
        return _as_errors(batches, exc)
    work, uncovered = split_by_partition(info, batches)
    if uncovered and may_refresh():
        # Another client may have added the range: look again before calling the rows bad.
        try:
            info = await ctx.meta.table(deadline, table_id=info.id, refresh=True)
        except NyalaError as exc:
            return _as_errors(batches, exc)
        work, uncovered = split_by_partition(info, batches)
    missing = NotFound(f"no range partition of table {info.name!r} covers this row")
    errors = [e for b in uncovered for e in b.row_errors(missing)]
    if send is None:
        send = functools.partial(send_tablet_work, ctx)
    if len(work) == 1:  # a few rows' usual case: no tasks to gather
        return errors + await send(info, work[0], deadline)
    for result in await asyncio.gather(*(send(info, w, deadline) for w in work)):
        errors += result
    return errors
