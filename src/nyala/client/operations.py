"""Write operations as the client buffers them, and the row errors it reports.

User rows (a dict, a list of dicts, or an Arrow table or record batch) become
:class:`OpBatch` objects when they are applied: the columns are checked against the table's
schema and cast to its Arrow types, key columns must be present and non-null, and INSERT and
UPSERT rows must set every non-null column without a default.  A mistake raises
``InvalidArgument`` naming the row and column, at the call that made it, and nothing of that
call is buffered.  Dicts that set different columns go in separate batches, in order.

A single dict row whose values all have the Python types Arrow gives back, and that passes
the checks, stays a Python dict until its batch is sent: the write batcher and a session's
flush put many such rows together and convert them in one ``Table.from_pylist`` call.  That
halved the client's CPU a write for 64 single-row writers on one tablet (docs/benchmarks.md).
Any other row is converted at once, so its errors are exactly those of a list of dicts.

Every row that the servers refuse comes back as a :class:`RowError` with its operation, the
row's values and the error; rows are never dropped silently.  It is the one row error the
client's users see (``nyala.client.RowError``).  The tablet servers and the Write answer name
a failed row only by its position in the batch (:class:`nyala.schema.RowFailure`, read from
the wire in :mod:`nyala.services`); :meth:`OpBatch.errors_at` adds the operation and the
values from the batch the client kept, which no server needs to send back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeAlias, cast

import pyarrow as pa
import pyarrow.compute as pc

from nyala.errors import InvalidArgument, NyalaError
from nyala.schema import IPC_WRITE_OPTIONS, OP_COLUMN, OpType, RowFailure, RowOperationOptions, Schema
from nyala.schema.types import INT_BITS, DataType

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


class OpBatch:
    """Rows that set the same columns, with one op code each, in the table's Arrow types.

    A batch made from single dict rows (:meth:`of_rows`) keeps them as Python values until
    its Arrow form is needed: the client's write batcher and a session's flush put many such
    batches together first, and converting them all at once costs little more than one row
    (``Table.from_pylist`` has about 10 us of fixed cost a call).  Only rows whose every value
    already has the Python type Arrow would give back are kept so (see :func:`_plain_row`),
    so the conversion cannot fail and gives what converting the row at once would.
    """

    __slots__ = ("_arrow_schema", "_data", "_nbytes", "_ops", "_python")

    def __init__(self, ops: pa.Array, data: pa.Table, _nbytes: int = -1) -> None:
        self._ops: pa.Array | None = ops
        self._data: pa.Table | None = data
        self._nbytes = _nbytes
        #: For a batch made by :meth:`of_rows`: its op codes and rows as Python values.
        self._python: tuple[list[int], list[dict[str, Any]]] | None = None
        self._arrow_schema: pa.Schema = data.schema

    @classmethod
    def of_rows(cls, codes: list[int], rows: list[dict[str, Any]], arrow_schema: pa.Schema, nbytes: int) -> OpBatch:
        """Rows that set exactly ``arrow_schema``'s columns, converted when first needed."""
        batch = cls.__new__(cls)
        batch._ops, batch._data, batch._nbytes = None, None, nbytes
        batch._python, batch._arrow_schema = (codes, rows), arrow_schema
        return batch

    @property
    def ops(self) -> pa.Array:  # int8
        if self._ops is None:
            self._convert()
        assert self._ops is not None
        return self._ops

    @property
    def data(self) -> pa.Table:
        if self._data is None:
            self._convert()
        assert self._data is not None
        return self._data

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of :attr:`data`, without converting the rows."""
        return self._arrow_schema

    def same_columns(self, other: OpBatch) -> bool:
        """Whether both set the same columns with the same types (so they can be joined)."""
        return self._arrow_schema is other._arrow_schema or self._arrow_schema.equals(other._arrow_schema)

    @property
    def rows(self) -> list[dict[str, Any]] | None:
        """The rows as Python values, for a batch made by :meth:`of_rows`; else None."""
        return self._python[1] if self._python is not None else None

    @property
    def num_rows(self) -> int:
        return len(self._python[1]) if self._python is not None else len(self.ops)

    @property
    def nbytes(self) -> int:
        # Remembered: Table.nbytes measures slices exactly, at ~20 us a call, and a write asks
        # several times (buffer accounting, splitting by size).
        if self._nbytes < 0:
            self._nbytes = int(self.data.nbytes) + len(self.ops)
        return self._nbytes

    def _convert(self) -> None:
        assert self._python is not None
        codes, rows = self._python
        self._ops = _op_array(codes)
        self._data = pa.Table.from_pylist(rows, schema=self._arrow_schema)

    def row_errors(self, error: NyalaError, *, tablet_id: str = "", ambiguous: bool = False) -> list[RowError]:
        """One RowError with ``error`` for every row."""
        failures = [RowFailure(i, error) for i in range(self.num_rows)]
        return self.errors_at(failures, tablet_id=tablet_id, ambiguous=ambiguous)

    def errors_at(
        self, failures: Sequence[RowFailure], *, tablet_id: str = "", ambiguous: bool = False
    ) -> list[RowError]:
        """The RowErrors of failed rows of this batch: each failure with its row's op and values.

        The one place a user's RowError is made: the Write answer (and every error the client
        meets on the way) names rows only by position, and the batch holds their values."""
        if not failures:
            return []
        if self._python is not None:
            codes, rows = self._python
            return [RowError(OpType(codes[f.row]), dict(rows[f.row]), f.error, tablet_id, ambiguous) for f in failures]
        indices = pa.array([f.row for f in failures], pa.int64())
        ops = self.ops.take(indices).to_pylist()
        values = self.data.take(indices).to_pylist()
        return [
            RowError(OpType(op), row, f.error, tablet_id, ambiguous)
            for op, row, f in zip(ops, values, failures, strict=True)
        ]

    @staticmethod
    def joined(batches: Sequence[OpBatch]) -> OpBatch:
        """``batches`` (all with the same columns) as one batch, rows in order."""
        if len(batches) == 1:
            return batches[0]
        rows: list[dict[str, Any]] = []
        codes: list[int] = []
        for b in batches:
            if b._python is None:
                return OpBatch(pa.concat_arrays([b.ops for b in batches]), pa.concat_tables([b.data for b in batches]))
            codes += b._python[0]
            rows += b._python[1]
        return OpBatch.of_rows(codes, rows, batches[0]._arrow_schema, sum(b.nbytes for b in batches))


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
        plain = _plain_row(schema, op, rows)
        if plain is not None:
            return [plain]
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
    return _op_array([int(op)] * rows)


def _op_array(codes: list[int]) -> pa.Array:
    if len(codes) != 1:
        return pa.array(codes, pa.int8())
    # A single-row write: Arrow arrays are immutable, so one array per op serves them all.
    array = _ONE_OP_CODE.get(codes[0])
    if array is None:
        array = _ONE_OP_CODE[codes[0]] = pa.array(codes, pa.int8())
    return array


_ONE_OP_CODE: dict[int, pa.Array] = {}

# The Python type Arrow gives back for each type's values (``to_pylist``); a dict row whose
# values all have these types (or are None where allowed) converts without surprises.  Not
# FLOAT: a Python float rounds to 32 bits there, and a row error would show the unrounded one.
_PLAIN_TYPES: dict[DataType, type] = {
    DataType.BOOL: bool,
    DataType.INT8: int,
    DataType.INT16: int,
    DataType.INT32: int,
    DataType.INT64: int,
    DataType.DOUBLE: float,
    DataType.STRING: str,
    DataType.BINARY: bytes,
}
_FIXED_WIDTHS = {DataType.BOOL: 1, DataType.DOUBLE: 8} | {t: b // 8 for t, b in INT_BITS.items()}
# A null takes at most this much in any column type (a decimal's 16 bytes), besides its bit.
_WIDEST_CELL = 16
_MAX_CELL_BYTES = RowOperationOptions().max_cell_size_bytes


def _plain_row(schema: Schema, op: OpType, row: Mapping[str, Any]) -> OpBatch | None:
    """``row`` as a batch that converts to Arrow later, or None when it needs the full path.

    That path (Arrow conversion now, then :func:`_check_rows`) is kept for every row that
    could be refused or changed by the conversion: a missing key or required column, a null in
    a non-null column, a cell over the size limit, an integer out of range, or any value whose
    Python type is not exactly the one Arrow gives back (a float for a double column, an int
    for an int column, and so on).  Those rows get the full path's errors, word for word.
    """
    values: dict[str, Any] = dict(row)  # a copy: the caller may change its dict while the row waits in a session
    arrow_schema = schema.arrow_schema_of(tuple(values))  # InvalidArgument names an unknown column
    for name in schema.key_names:
        if name not in values:
            return None
    if op.base in _CREATING:
        for column in schema.columns:
            if column.name not in values and not column.nullable and column.default is None:
                return None
    # The size never comes out below Arrow's once rows are joined (limits are checked on it):
    # a nullable column counts a byte a row for its validity bitmap, which Arrow builds for
    # the whole column as soon as one joined row is null, and a null counts the widest cell.
    nbytes = 1  # the op code
    for name, value in values.items():
        column = schema.column(name)
        kind = column.type.type
        if column.nullable:
            nbytes += 1
        if value is None:
            if not column.nullable:
                return None
            nbytes += _WIDEST_CELL
            continue
        if type(value) is not _PLAIN_TYPES.get(kind):
            return None
        value = cast(Any, value)  # mypy narrows the test above to object
        if kind in INT_BITS:
            half = 1 << (INT_BITS[kind] - 1)
            if not -half <= value < half:
                return None
        elif kind is DataType.STRING or kind is DataType.BINARY:
            size = len(value)
            if kind is DataType.STRING and not value.isascii():
                try:
                    size = len(value.encode())
                except UnicodeEncodeError:
                    return None
            if size > _MAX_CELL_BYTES:
                return None
            nbytes += size + 8  # and two offsets
            continue
        nbytes += _FIXED_WIDTHS[kind]
    return OpBatch.of_rows([int(op)], [values], arrow_schema, nbytes)


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
