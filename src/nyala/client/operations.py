"""Write operations as the client buffers them, and the row errors it reports.

User rows (a dict, a list of dicts, or an Arrow table or record batch) become
:class:`OpBatch` objects when they are applied: the columns are checked against the table's
schema and cast to its Arrow types, key columns must be present and non-null, and INSERT and
UPSERT rows must set every non-null column without a default.  A mistake raises
``InvalidArgument`` naming the row and column, at the call that made it, and nothing of that
call is buffered.  Dicts that set different columns go in separate batches, in order.

Every row that the servers refuse comes back as a :class:`RowError` with its operation, the
row's values and the error; rows are never dropped silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from nyala.common.errors import InvalidArgument, NyalaError
from nyala.schema import IPC_WRITE_OPTIONS, OP_COLUMN, OpType, RowOperationOptions, Schema
from nyala.schema.types import DataType

__all__ = ["OpBatch", "Operation", "RowError", "Rows", "UnhandledRowErrors", "encode_batch", "to_op_batches"]

#: What the write calls accept: one row, many rows, or Arrow data.
Rows: TypeAlias = Mapping[str, Any] | Sequence[Mapping[str, Any]] | pa.Table | pa.RecordBatch

_CREATING = frozenset({OpType.INSERT, OpType.UPSERT})


@dataclasses.dataclass(frozen=True, slots=True)
class Operation:
    """One row and what to do with it (``table.new_insert(row)`` and friends make these)."""

    op: OpType
    row: Mapping[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class RowError:
    """A row the cluster did not apply, and why.

    ``after_ambiguous_retry`` is True when the batch holding the row was sent again after an
    attempt whose outcome was unknown (a network error or a timed-out attempt): the first
    attempt may have been applied, so an INSERT reporting ALREADY_PRESENT (or a DELETE
    reporting NOT_FOUND) may be this client's own earlier write.  A ``TimedOut`` error means
    the row's outcome is unknown.
    """

    op: OpType
    row: dict[str, Any]
    error: NyalaError
    tablet_id: str = ""
    after_ambiguous_retry: bool = False

    def __str__(self) -> str:
        note = " (after a retry of an attempt with unknown outcome)" if self.after_ambiguous_retry else ""
        return f"{self.op.name} {self.row}: {type(self.error).__name__}: {self.error}{note}"


@dataclasses.dataclass(slots=True)
class OpBatch:
    """Rows that set the same columns, with one op code each, in the table's Arrow types."""

    ops: pa.Array  # int8
    data: pa.Table
    _nbytes: int = dataclasses.field(default=-1, repr=False, compare=False)

    @property
    def num_rows(self) -> int:
        return len(self.ops)

    @property
    def nbytes(self) -> int:
        # Remembered: Table.nbytes measures slices exactly, at ~20 us a call, and a write asks
        # several times (buffer accounting, splitting by size).
        if self._nbytes < 0:
            self._nbytes = int(self.data.nbytes) + len(self.ops)
        return self._nbytes

    def row_errors(self, error: NyalaError, *, tablet_id: str = "", ambiguous: bool = False) -> list[RowError]:
        """One RowError with ``error`` for every row."""
        return self.errors_at([(i, error) for i in range(self.num_rows)], tablet_id=tablet_id, ambiguous=ambiguous)

    def errors_at(
        self, failures: Sequence[tuple[int, NyalaError]], *, tablet_id: str = "", ambiguous: bool = False
    ) -> list[RowError]:
        """RowErrors for the rows at the given indexes."""
        if not failures:
            return []
        indices = pa.array([i for i, _ in failures], pa.int64())
        ops = self.ops.take(indices).to_pylist()
        values = self.data.take(indices).to_pylist()
        return [
            RowError(OpType(op), row, error, tablet_id, ambiguous)
            for op, row, (_, error) in zip(ops, values, failures, strict=True)
        ]


def to_op_batches(schema: Schema, op: OpType, rows: Rows) -> list[OpBatch]:
    """Check and convert user rows for ``op``; InvalidArgument names the first mistake."""
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    if isinstance(rows, pa.Table):
        if not rows.num_rows:
            return []
        data = _from_arrow(schema, rows)
        _check_rows(schema, op, data)
        return [OpBatch(_op_codes(op, data.num_rows), data)]
    if isinstance(rows, Mapping):
        tables = [_from_dicts(schema, [rows], 0)]
    elif isinstance(rows, Sequence) and not isinstance(rows, str | bytes):
        tables = [_from_dicts(schema, group, start) for start, group in _groups_by_columns(rows)]
    else:
        raise InvalidArgument(f"rows must be a dict, a list of dicts or an Arrow table, not {type(rows).__name__}")
    for table in tables:
        _check_rows(schema, op, table)
    # Tables built from Python values own their buffers, so the buffers' total is their size:
    # Table.nbytes, which measures slices exactly, costs 16 us for one row (measured).
    return [OpBatch(_op_codes(op, t.num_rows), t, t.get_total_buffer_size() + t.num_rows) for t in tables]


def _op_codes(op: OpType, rows: int) -> pa.Array:
    if rows != 1:
        return pa.array([int(op)] * rows, pa.int8())
    # A single-row write: Arrow arrays are immutable, so one array per op serves them all.
    codes = _ONE_OP_CODE.get(op)
    if codes is None:
        codes = _ONE_OP_CODE[op] = pa.array([int(op)], pa.int8())
    return codes


_ONE_OP_CODE: dict[OpType, pa.Array] = {}


def _groups_by_columns(rows: Sequence[Mapping[str, Any]]) -> Iterator[tuple[int, list[Mapping[str, Any]]]]:
    start = 0
    group: list[Mapping[str, Any]] = []
    names: tuple[str, ...] | None = None
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InvalidArgument(f"row {i} must be a dict of column name to value, not {type(row).__name__}")
        these = tuple(sorted(row))
        if names is not None and these != names:
            yield start, group
            start, group = i, []
        names = these
        group.append(row)
    if group:
        yield start, group


def _from_arrow(schema: Schema, table: pa.Table) -> pa.Table:
    columns = []
    for name in table.column_names:
        _check_known(schema, name)
        target = schema.column(name).arrow_type
        column = table.column(name)
        if column.type != target:
            try:
                column = column.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise InvalidArgument(f"column {name!r}: cannot convert {column.type} to {target}: {exc}") from None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema.arrow_schema_of(tuple(table.column_names)))


def _from_dicts(schema: Schema, rows: Sequence[Mapping[str, Any]], first: int) -> pa.Table:
    arrow_schema = schema.arrow_schema_of(tuple(rows[0]))  # InvalidArgument names an unknown column
    try:
        return pa.Table.from_pylist(list(rows), schema=arrow_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        _raise_first_bad_value(schema, rows, first)
        raise


def _raise_first_bad_value(schema: Schema, rows: Sequence[Mapping[str, Any]], first: int) -> None:
    """Find the value Arrow refused and raise a message naming its row and column."""
    for i, row in enumerate(rows):
        for name, value in row.items():
            if value is not None:
                schema.column(name).type.check(value, f"row {first + i}, column {name!r}")
    raise InvalidArgument(f"rows {first}..{first + len(rows) - 1} cannot be converted to the table's types")


def _check_known(schema: Schema, name: str) -> None:
    if not schema.has_column(name):
        raise InvalidArgument(f"unknown column {name!r}; the table's columns are {schema.names}")


def _check_rows(schema: Schema, op: OpType, data: pa.Table) -> None:
    present = set(data.column_names)
    for col in schema.key_columns:
        if col.name not in present:
            raise InvalidArgument(f"{op.name} rows must set primary key column {col.name!r}")
    limit = RowOperationOptions().max_cell_size_bytes
    for col in schema.columns:
        if col.name not in present:
            if op.base in _CREATING and not col.nullable and col.default is None:
                raise InvalidArgument(f"{op.name} rows must set non-null column {col.name!r} (it has no default)")
            continue
        values = data.column(col.name)
        if values.null_count and not col.nullable and (col.name in schema.key_names or op.base is not OpType.DELETE):
            row = pc.index(pc.is_null(values), True).as_py()
            raise InvalidArgument(f"row {row}: column {col.name!r} may not be null")
        # The buffers' total bounds every cell and, unlike nbytes, costs nothing per row.
        if col.type.type in (DataType.STRING, DataType.BINARY) and values.get_total_buffer_size() > limit:
            lengths = pc.binary_length(values)
            if (pc.max(lengths).as_py() or 0) > limit:
                row = pc.index(pc.greater(lengths, limit), True).as_py()
                raise InvalidArgument(f"row {row}: column {col.name!r} has a cell over the limit of {limit} bytes")


def encode_batch(schema: Schema, batch: OpBatch) -> memoryview:
    """The Write RPC's sidecar for ``batch`` against ``schema`` (which may be newer)."""
    columns = []
    for name in batch.data.column_names:
        _check_known(schema, name)
        target = schema.column(name).arrow_type
        column = batch.data.column(name)
        columns.append(column if column.type == target else column.cast(target))
    table = pa.Table.from_arrays([batch.ops, *columns], names=[OP_COLUMN, *batch.data.column_names])
    if any(c.num_chunks > 1 for c in columns):
        # A joined batch has a chunk per caller, and the stream would carry a record batch per
        # chunk, each decoded, checked and applied on its own on every replica.
        table = table.combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=IPC_WRITE_OPTIONS) as writer:
        writer.write_table(table)
    return memoryview(sink.getvalue())


class UnhandledRowErrors(NyalaError):
    """A session was closed (or its ``with`` block ended) with row errors nobody collected."""

    def __init__(self, errors: Sequence[RowError], dropped: int = 0) -> None:
        self.errors = list(errors)
        total = len(self.errors) + dropped
        sample = "; ".join(str(e) for e in self.errors[:5])
        super().__init__(f"{total} rows were not written; first errors: {sample}")
