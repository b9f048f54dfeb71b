"""An open table: its schema and partitioning, sessions, conveniences and scanners."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from nyala.errors import InvalidArgument
from nyala.schema import KeyRange, Partitioner, Schema
from nyala.schema.rowops import OpType

from ._retry import Deadline
from .info import TabletInfo
from .meta_cache import TableInfo
from .operations import Operation, RowError, Rows, UnhandledRowErrors, to_op_batches
from .placement import PlacementPolicy, RangePlacement
from .predicates import PredicateLike, bind_predicates, bind_projection
from .replicas import ReadMode, ReplicaSelection
from .scan_spec import ScanArgs, ScanSpec
from .scanner import AsyncScanner, ScanToken, make_scan_tokens
from .session import AsyncSession, FlushMode, flush_batches

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .async_client import AsyncClient

__all__ = ["AsyncTable"]

#: Up to this many dict rows, ``AsyncTable.write`` flushes them in the caller's task.
_FEW_ROWS = 1000


class AsyncTable:
    """A table opened by an :class:`AsyncClient` (use on the client's event loop)."""

    def __init__(self, client: AsyncClient, info: TableInfo) -> None:
        self._client = client
        self._ctx = client._ctx
        self._info = info

    @property
    def info(self) -> TableInfo:
        """The newest schema and partitioning this client knows for the table."""
        latest = self._ctx.meta.cached_table(self._info.id)
        if latest is not None:
            self._info = latest
        return self._info

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def schema(self) -> Schema:
        return self.info.schema

    @property
    def partitioner(self) -> Partitioner:
        return self.info.partitioner

    @property
    def num_replicas(self) -> int:
        return self.info.num_replicas

    @property
    def placement(self) -> PlacementPolicy:
        """The table's own placement policy (empty: the cluster-wide policy only)."""
        return self.info.placement

    @property
    def range_placements(self) -> tuple[RangePlacement, ...]:
        """The range partitions with a placement policy of their own."""
        return self.info.range_placements

    @property
    def schema_version(self) -> int:
        return self.info.schema_version

    def __repr__(self) -> str:
        return f"<Table {self.name!r} id={self.id} {self.schema!r}>"

    async def refresh(self) -> None:
        """Fetch the table's schema, partitioning and tablet locations again (after another
        client altered it)."""
        deadline = Deadline(self._client._admin_timeout(None), f"refreshing table {self.name!r}")
        self._info = await self._ctx.meta.table(deadline, table_id=self.id, refresh=True)
        self._ctx.meta.invalidate_locations(self.id)

    async def tablets(self) -> list[TabletInfo]:
        """Every tablet with its partition and replicas, in partition-key order."""
        return await self._client.table_tablets(self.name)

    # --- writing -------------------------------------------------------------------------

    def new_session(
        self,
        flush_mode: FlushMode = FlushMode.AUTO_FLUSH_SYNC,
        *,
        buffer_bytes: int | None = None,
        timeout_s: float | None = None,
    ) -> AsyncSession:
        """A write session for this table."""
        return AsyncSession(
            self._ctx, self._current, self.name, flush_mode=flush_mode, buffer_bytes=buffer_bytes, timeout_s=timeout_s
        )

    async def _current(self, deadline: Deadline) -> TableInfo:
        return await self._ctx.meta.table(deadline, table_id=self.id)

    def new_insert(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.INSERT, row)

    def new_insert_ignore(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.INSERT_IGNORE, row)

    def new_upsert(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.UPSERT, row)

    def new_upsert_ignore(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.UPSERT_IGNORE, row)

    def new_update(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.UPDATE, row)

    def new_update_ignore(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.UPDATE_IGNORE, row)

    def new_delete(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.DELETE, row)

    def new_delete_ignore(self, row: dict[str, Any]) -> Operation:
        return Operation(OpType.DELETE_IGNORE, row)

    async def write(self, op: OpType, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        """Apply ``op`` to every row; returns the row errors once every row has been answered.

        More failed rows than ``session_max_pending_errors`` raise UnhandledRowErrors with the
        first of them and the count, rather than a list that silently lacks the rest.
        """
        if isinstance(rows, Mapping) or (isinstance(rows, list | tuple) and len(rows) <= _FEW_ROWS):
            return await self._write_once(OpType(op), rows, timeout_s)
        session = self.new_session(FlushMode.AUTO_FLUSH_BACKGROUND, timeout_s=timeout_s)
        errors: list[RowError] = []
        try:
            errors += await session.write(op, rows)
        finally:
            errors += await session.close()
        if session.dropped_errors:
            raise UnhandledRowErrors(errors, session.dropped_errors)
        return errors

    async def _write_once(self, op: OpType, rows: Rows, timeout_s: float | None) -> list[RowError]:
        """A few rows make one flush: what an AUTO_FLUSH_SYNC session does, without the session.

        One flush needs none of a session's buffer, ordering and bookkeeping, which were 11 % of
        the client's instructions for a one-row write (measured).  Its errors come back whole."""
        timeout = timeout_s or self._ctx.options.operation_timeout_ms / 1000
        deadline = Deadline(timeout, f"writing to table {self.name!r}")
        info = await self._current(deadline)
        batches = to_op_batches(info.schema, op, rows)
        if not batches:
            return []
        return await flush_batches(self._ctx, self._current, batches, deadline, lambda: True)

    async def insert(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.INSERT, rows, timeout_s=timeout_s)

    async def insert_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.INSERT_IGNORE, rows, timeout_s=timeout_s)

    async def upsert(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.UPSERT, rows, timeout_s=timeout_s)

    async def upsert_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.UPSERT_IGNORE, rows, timeout_s=timeout_s)

    async def update(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.UPDATE, rows, timeout_s=timeout_s)

    async def update_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.UPDATE_IGNORE, rows, timeout_s=timeout_s)

    async def delete(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.DELETE, rows, timeout_s=timeout_s)

    async def delete_ignore(self, rows: Rows, *, timeout_s: float | None = None) -> list[RowError]:
        return await self.write(OpType.DELETE_IGNORE, rows, timeout_s=timeout_s)

    # --- reading -------------------------------------------------------------------------

    def scan_spec(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[PredicateLike] = (),
        *,
        limit: int | None = None,
        replica_selection: ReplicaSelection = ReplicaSelection.LEADER_ONLY,
        read_mode: ReadMode = ReadMode.READ_LATEST,
        ordered: bool = False,
        batch_size_bytes: int | None = None,
        lower_bound: Sequence[Any] | None = None,
        upper_bound: Sequence[Any] | None = None,
        timeout_s: float | None = None,
    ) -> ScanSpec:
        """Check a scan's arguments against the schema (InvalidArgument names any mistake)."""
        schema = self.schema
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidArgument(f"limit must be a non-negative int or None, got {limit!r}")
        if batch_size_bytes is not None and batch_size_bytes <= 0:
            raise InvalidArgument(f"batch_size_bytes must be positive, got {batch_size_bytes}")
        key_range = None
        if lower_bound is not None or upper_bound is not None:
            key_range = KeyRange(_key(lower_bound), _key(upper_bound)).bind(schema)
        return ScanSpec(
            projection=bind_projection(schema, columns),
            predicates=bind_predicates(schema, predicates),
            key_range=key_range,
            limit=limit,
            replica_selection=ReplicaSelection(replica_selection),
            read_mode=ReadMode(read_mode),
            ordered=bool(ordered),
            batch_size_bytes=batch_size_bytes or self._ctx.options.scan_batch_size_bytes,
            timeout_s=timeout_s or self._ctx.options.operation_timeout_ms / 1000,
        )

    def scanner(
        self, columns: Sequence[str] | None = None, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]
    ) -> AsyncScanner:
        """A scanner; see :meth:`scan_spec` for the arguments."""
        return AsyncScanner(self._ctx, self.info, self.scan_spec(columns, predicates, **kwargs))

    async def scan_tokens(
        self, columns: Sequence[str] | None = None, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]
    ) -> list[ScanToken]:
        """One serializable token per tablet the scan would read (after pruning)."""
        scanner = self.scanner(columns, predicates, **kwargs)
        return await make_scan_tokens(scanner, self._client.master_addresses)

    async def to_arrow(
        self, columns: Sequence[str] | None = None, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]
    ) -> pa.Table:
        return await self.scanner(columns, predicates, **kwargs).to_arrow()

    async def count(self, predicates: Sequence[PredicateLike] = (), **kwargs: Unpack[ScanArgs]) -> int:
        """How many rows match ``predicates``."""
        return await self.scanner(None, predicates, **kwargs).count()


def _key(values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    if values is None:
        return None
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        return (values,)
    return tuple(values)
