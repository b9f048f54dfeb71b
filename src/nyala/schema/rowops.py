"""Row operations: INSERT, UPDATE, DELETE, UPSERT and their _IGNORE variants, as Arrow batches.

Encoding: one Arrow IPC stream whose first column ``__op`` (int8, Kudu's op codes) gives each
row's operation and whose other columns are any subset of the table's columns, by name, with
exactly the table's Arrow types.  These bytes are the body of a Write RPC and the payload of
the Raft entry; decoding is zero-copy and :func:`decode_row_operations` checks them against
the table schema before anything is applied.

Semantics of a column that is present: it is *set* on every row of the batch (a null cell
sets NULL).  An absent column is *unset*: INSERT and UPSERT of a new row use the column's
default (or NULL), UPDATE and UPSERT of an existing row leave it unchanged.  DELETE uses only
the key columns.

Rows that set different columns carry an optional ``__isset`` column (Kudu's per-row "is
set" bitmap): ``fixed_size_binary(ceil(n / 8))`` where bit ``i`` (least significant first)
says whether the row sets the ``i``-th data column (the columns after ``__op``, in batch
order, ``__isset`` excluded).  A decoded batch splits into groups of rows that set the same
columns (:meth:`RowOperations.by_column_set`), each checked like a batch of its own.

A row operation that is not applied (an INSERT of a present key, an UPDATE or DELETE of a
missing one, a row outside the tablet's partition) is a :class:`RowFailure`: its position in
its batch and the error.  The store reports those per entry, the tablet renumbers them to the
client's batch, the Write answer carries them (``RowErrorPB``, converted in
:mod:`nyala.services` only), and the client turns each into the ``nyala.client.RowError`` its
users see, which adds the operation and the row's values.  The two stay apart because only
the client holds those values: a replica would decode every failed row back to Python and
send it, to tell the client what it already has.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from nyala.common.config import setting
from nyala.errors import InvalidArgument, NyalaError

from .schema import Schema
from .types import DataType

__all__ = [
    "IPC_WRITE_OPTIONS",
    "ISSET_COLUMN",
    "OP_COLUMN",
    "OpType",
    "RowFailure",
    "RowOperationOptions",
    "RowOperations",
    "decode_row_operations",
    "encode_row_operations",
    "make_row_operations",
]

OP_COLUMN = "__op"
ISSET_COLUMN = "__isset"


class OpType(enum.IntEnum):
    """Kudu's write operation codes."""

    INSERT = 1
    UPDATE = 2
    DELETE = 3
    UPSERT = 4
    INSERT_IGNORE = 5
    UPDATE_IGNORE = 6
    DELETE_IGNORE = 7
    UPSERT_IGNORE = 8

    @property
    def base(self) -> OpType:
        """The operation without _IGNORE."""
        return _BASE[self]

    @property
    def ignores_errors(self) -> bool:
        return self >= OpType.INSERT_IGNORE


_BASE = {
    OpType.INSERT: OpType.INSERT,
    OpType.UPDATE: OpType.UPDATE,
    OpType.DELETE: OpType.DELETE,
    OpType.UPSERT: OpType.UPSERT,
    OpType.INSERT_IGNORE: OpType.INSERT,
    OpType.UPDATE_IGNORE: OpType.UPDATE,
    OpType.DELETE_IGNORE: OpType.DELETE,
    OpType.UPSERT_IGNORE: OpType.UPSERT,
}
_MIN_OP, _MAX_OP = int(min(OpType)), int(max(OpType))
_FEW_OPS = 64  # up to this many rows, op codes are checked in Python
_INT8 = pa.int8()
#: Op codes that create rows.  A tuple, not an Arrow array built at import: any ``pa.array``
#: call makes pyarrow import pandas (a quarter of a second), and processes that only plan, such
#: as Spark's planning workers, never build a batch.
_CREATING = tuple(int(o) for o in OpType if o.base in (OpType.INSERT, OpType.UPSERT))


@dataclasses.dataclass(frozen=True, slots=True)
class RowFailure:
    """A row operation that was not applied: its position in its batch, and why."""

    row: int
    error: NyalaError


@dataclasses.dataclass(frozen=True)
class RowOperationOptions:
    """Limits on one batch of row operations."""

    max_row_operations_bytes: int = setting(
        64 << 20, "Largest encoded batch of row operations accepted in one write, in bytes."
    )
    max_cell_size_bytes: int = setting(64 << 10, "Largest string or binary cell accepted, in bytes (Kudu's name).")


@dataclasses.dataclass(frozen=True)
class RowOperations:
    """A decoded, validated batch: one op code per row and the columns it carries.

    Without an ``__isset`` column every row sets every column of ``data``; otherwise
    :meth:`by_column_set` gives the groups of rows that set the same columns.
    """

    ops: pa.Array  # int8 op codes
    data: pa.Table  # the columns, a subset of the table's, with the table's types
    only_op: OpType | None = None  # the op of every row, when they all share one
    positions: pa.Array | None = None  # int64 row positions in the encoded batch; None: 0..n-1
    groups: tuple[RowOperations, ...] = ()  # the column-set groups, when rows set different columns

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def columns(self) -> list[str]:
        return list(self.data.column_names)

    def by_column_set(self) -> tuple[RowOperations, ...]:
        """Groups of rows that set the same columns; each has only those columns."""
        return self.groups or (self,)


def make_row_operations(
    schema: Schema,
    op: OpType | Sequence[OpType],
    rows: Sequence[Mapping[str, Any]] | pa.Table | pa.RecordBatch,
) -> bytes:
    """Encode rows (dicts that all set the same columns, or an Arrow table) for ``op``."""
    if isinstance(rows, pa.Table | pa.RecordBatch):
        table = pa.table(rows) if isinstance(rows, pa.RecordBatch) else rows
        # pa.record_batch needs Arrays; a Table holds ChunkedArrays.
        columns = {name: _cast(schema, name, table.column(name).combine_chunks()) for name in table.column_names}
        n = table.num_rows
    else:
        names = list(dict.fromkeys(name for r in rows for name in r)) if rows else schema.key_names
        columns = {
            name: pa.array([r.get(name) for r in rows], schema.column(name).arrow_type)
            if schema.has_column(name)
            else pa.array([r.get(name) for r in rows])
            for name in names
        }
        n = len(rows)
        if any(len(r) != len(names) for r in rows):  # rows set different columns
            columns[ISSET_COLUMN] = isset_bitmap([[name in r for name in names] for r in rows])
    codes = [int(op)] * n if isinstance(op, OpType) else [int(o) for o in op]
    if len(codes) != n:
        raise InvalidArgument(f"{len(codes)} op codes for {n} rows")
    batch = pa.record_batch({OP_COLUMN: pa.array(codes, pa.int8()), **columns})
    return encode_row_operations(batch)


def isset_bitmap(rows: Sequence[Sequence[bool]]) -> pa.Array:
    """The ``__isset`` column for rows given as one flag per data column."""
    width = max(1, (len(rows[0]) + 7) // 8) if rows else 1
    values = []
    for flags in rows:
        bits = sum(1 << i for i, flag in enumerate(flags) if flag)
        values.append(bits.to_bytes(width, "little"))
    return pa.array(values, pa.binary(width))


def _cast(schema: Schema, name: str, column: Any) -> Any:
    if not schema.has_column(name):
        return column
    target = schema.column(name).arrow_type
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidArgument(f"column {name!r}: cannot convert {column.type} to {target}: {e}") from None


#: Arrow IPC options for every stream Nyala writes.  Without them, each ``new_stream`` reads
#: two environment variables and builds its options again: 2 of a one-row stream's 6 us.
IPC_WRITE_OPTIONS = pa.ipc.IpcWriteOptions()


def encode_row_operations(batch: pa.RecordBatch | pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=IPC_WRITE_OPTIONS) as writer:
        writer.write(batch)
    return bytes(sink.getvalue().to_pybytes())


def decode_row_operations(
    payload: bytes | memoryview | pa.Buffer, schema: Schema, options: RowOperationOptions | None = None
) -> RowOperations:
    """Read and check a batch against ``schema``; InvalidArgument names what is wrong."""
    options = options or RowOperationOptions()
    size = payload.size if isinstance(payload, pa.Buffer) else len(payload)
    if size > options.max_row_operations_bytes:
        raise InvalidArgument(
            f"row operations of {size} bytes exceed the limit of {options.max_row_operations_bytes} bytes"
        )
    try:
        table = pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
        table.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as e:
        raise InvalidArgument(f"row operations are not a valid Arrow IPC stream: {e}") from None
    names = table.column_names  # builds a list on every call: once here
    ops, only_op = _check_ops(table, names)
    isset = _check_isset(table, names)
    data = table.drop_columns([OP_COLUMN, ISSET_COLUMN] if isset is not None else [OP_COLUMN])
    _check_columns(data, schema, "lack primary key column" if isset is None else "")
    if isset is None:
        _check_values(data, ops, schema, options)
        return RowOperations(ops, data, only_op)
    groups = tuple(_split(ops, data, isset))
    for group in groups:
        _check_columns(group.data, schema, "have rows that do not set primary key column")
        _check_values(group.data, group.ops, schema, options)
    return RowOperations(ops, data, only_op, None, groups)


def _check_isset(table: pa.Table, names: list[str]) -> pa.Array | None:
    if ISSET_COLUMN not in names:
        return None
    column = table.column(ISSET_COLUMN)
    width = max(1, (table.num_columns - 2 + 7) // 8)
    if column.type != pa.binary(width):
        raise InvalidArgument(f"column {ISSET_COLUMN!r} must be fixed_size_binary({width}), not {column.type}")
    if column.null_count:
        raise InvalidArgument(f"column {ISSET_COLUMN!r} has nulls")
    return column.combine_chunks()


def _split(ops: pa.Array, data: pa.Table, isset: pa.Array) -> Iterator[RowOperations]:
    """One RowOperations per distinct ``__isset`` value, holding only the columns it sets."""
    positions = pa.array(list(range(len(ops))), pa.int64())
    for bitmap in pc.unique(isset).to_pylist():
        rows = pc.equal(isset, pa.scalar(bitmap, isset.type))
        bits = int.from_bytes(bitmap, "little")
        names = [name for i, name in enumerate(data.column_names) if bits >> i & 1]
        group_ops = ops.filter(rows)
        bounds = pc.min_max(group_ops).as_py()
        only = OpType(bounds["min"]) if bounds["min"] == bounds["max"] else None
        yield RowOperations(group_ops, data.filter(rows).select(names), only, positions.filter(rows))


def _check_ops(table: pa.Table, names: list[str]) -> tuple[pa.Array, OpType | None]:
    if not names or names[0] != OP_COLUMN:
        raise InvalidArgument(f"row operations need {OP_COLUMN!r} as their first column")
    if names.count(OP_COLUMN) != 1:
        raise InvalidArgument(f"row operations repeat the {OP_COLUMN!r} column")
    column = table.column(0)
    if column.type != _INT8:
        raise InvalidArgument(f"column {OP_COLUMN!r} must be int8, not {column.type}")
    ops = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if ops.null_count:
        raise InvalidArgument(f"column {OP_COLUMN!r} has nulls")
    if not len(ops):
        return ops, None
    # Every write is checked, and most carry few rows: for those Python's min and max beat
    # numpy's reductions (whose per-call cost dominated), which beat pyarrow.compute.
    if len(ops) <= _FEW_OPS:
        codes = ops.to_pylist()
        low, high = min(codes), max(codes)
    else:
        array = ops.to_numpy()
        low, high = int(array.min()), int(array.max())
    if low < _MIN_OP or high > _MAX_OP:
        raise InvalidArgument(f"column {OP_COLUMN!r} has unknown op codes; known: {[int(o) for o in OpType]}")
    return ops, OpType(low) if low == high else None


def _check_columns(data: pa.Table, schema: Schema, missing_key: str) -> None:
    """Names and types; with ``missing_key`` (the error's wording), key columns must be there."""
    names = tuple(data.schema.names)
    if (
        _known_columns(schema, names)
        and data.schema.types == schema.arrow_schema_of(names).types
        and (not missing_key or set(schema.key_names) <= set(names))
    ):
        return  # the usual case, in one comparison of remembered types
    # Something is wrong: find it column by column, for the message.
    seen: set[str] = set()
    for field in data.schema:
        if field.name in seen:
            raise InvalidArgument(f"row operations repeat column {field.name!r}")
        seen.add(field.name)
        if not schema.has_column(field.name):
            raise InvalidArgument(f"row operations set unknown column {field.name!r}; columns are {schema.names}")
        expected = schema.column(field.name).arrow_type
        if field.type != expected:
            raise InvalidArgument(f"column {field.name!r} has type {field.type}, expected {expected}")
    for name in schema.key_names:
        if missing_key and name not in seen:
            raise InvalidArgument(f"row operations {missing_key} {name!r}")


def _known_columns(schema: Schema, names: tuple[str, ...]) -> bool:
    """Whether every name is one of the schema's, once each."""
    return len(set(names)) == len(names) and all(schema.has_column(name) for name in names)


def _check_values(data: pa.Table, ops: pa.Array, schema: Schema, options: RowOperationOptions) -> None:
    # Each compute call costs tens of microseconds, so the cheap tests come first.
    present = set(data.column_names)
    for col in schema.columns:
        if col.name not in present:
            if not col.nullable and col.default is None and pc.any(pc.is_in(ops, pa.array(_CREATING, _INT8))).as_py():
                raise InvalidArgument(f"INSERT and UPSERT rows must set non-null column {col.name!r} (no default)")
            continue
        binary = col.type.type in (DataType.STRING, DataType.BINARY)
        if col.nullable and not binary:
            continue  # nothing to check (and fetching the column costs microseconds)
        values = data.column(col.name)
        # DELETE rows may carry nulls in non-key columns they do not use.
        if (not col.nullable and values.null_count) and (
            schema.is_key(col.name) or _nulls_outside_deletes(values, ops)
        ):
            raise InvalidArgument(f"column {col.name!r} is not nullable but has nulls")
        # The buffers' total bounds every cell and, unlike nbytes, costs nothing per row.
        if binary and values.get_total_buffer_size() > options.max_cell_size_bytes:
            longest = pc.max(pc.binary_length(values)).as_py() or 0
            if longest > options.max_cell_size_bytes:
                raise InvalidArgument(
                    f"column {col.name!r} has a cell of {longest} bytes, over the limit of "
                    f"{options.max_cell_size_bytes} bytes"
                )


def _nulls_outside_deletes(values: pa.ChunkedArray, ops: pa.Array) -> bool:
    is_delete = pc.is_in(ops, pa.array([int(OpType.DELETE), int(OpType.DELETE_IGNORE)], pa.int8()))
    return bool(pc.any(pc.and_(pc.is_null(values.combine_chunks()), pc.invert(is_delete))).as_py())
