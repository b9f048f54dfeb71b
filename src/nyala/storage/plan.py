"""Turn a group of row-operation batches into a few set-based statements.

Applying ops one at a time in SQL costs ~0.5 ms per statement, so a group of entries is
reduced to one DELETE, one UPDATE per set of updated columns, and one INSERT, with the same
result as applying every op in order:

- A key that appears once in the group maps straight to a statement, vectorised in Arrow:
  DELETE -> delete; INSERT -> insert; UPDATE -> update; UPSERT of every column -> delete and
  insert (DuckDB's ``INSERT OR REPLACE`` keeps the *first* duplicate and is slower); UPSERT
  of some columns -> update, then insert the keys the update did not find.
- A key that appears several times is folded in Python, in order, starting from whether the
  key exists before the group (one probe query), into one net effect and its row errors.

Every planned row carries its global row number and a mode saying what a miss means: the
executor reports NotFound / AlreadyPresent for REPORT rows, skips IGNORE rows, inserts
UPSERT rows, and treats a miss on a MUST row as a broken invariant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from nyala.errors import AlreadyPresent, NotFound, NyalaError
from nyala.schema import OP_COLUMN, OpType, RowOperations, Schema

__all__ = [
    "MODE",
    "MODE_COLUMN",
    "ROW_COLUMN",
    "ApplyPlan",
    "Part",
    "UpdateGroup",
    "mode_scalar",
    "plan_apply",
    "repeated_rows",
]

ROW_COLUMN = "__row"
MODE_COLUMN = "__mode"


def mode_scalar(mode: int) -> pa.Scalar:
    # Typed scalars: a bare Python int makes pyarrow.compute try (and fail) to import numpy
    # on every call, which costs ~0.5 ms.
    return pa.scalar(mode, pa.int8())


class MODE:
    MUST = 0  # the key's state is known: a miss is a bug
    REPORT = 1  # a miss is a row error
    IGNORE = 2  # a miss is skipped (_IGNORE ops)
    UPSERT = 3  # an update that misses becomes an insert


_ROW_NUMBERS = pa.array([], pa.int64())


def _row_numbers(n: int) -> pa.Array:
    """0..n-1, sliced from a cached array (building one from a Python range is slow)."""
    global _ROW_NUMBERS
    if len(_ROW_NUMBERS) < n:
        _ROW_NUMBERS = pa.array(list(range(max(n, 2 * len(_ROW_NUMBERS), 4096))), pa.int64())
    return _ROW_NUMBERS.slice(0, n)


@dataclasses.dataclass(frozen=True)
class Part:
    """One entry's rows: its set columns plus ``__op`` and the global ``__row`` numbers."""

    table: pa.Table
    only_op: OpType | None  # the op of every row, when they share one

    @classmethod
    def of(cls, ops: RowOperations, first_row: int) -> Part:
        positions = _row_numbers(len(ops)) if ops.positions is None else ops.positions
        rows = pc.add(positions, pa.scalar(first_row, pa.int64()))
        data = ops.data
        if any(not f.nullable for f in data.schema):
            # Nullability flags differ between clients; drop them so parts concatenate.
            data = data.cast(pa.schema([pa.field(f.name, f.type) for f in data.schema]))
        return cls(data.append_column(OP_COLUMN, ops.ops).append_column(ROW_COLUMN, rows), ops.only_op)

    @property
    def inserts_only(self) -> bool:
        return self.only_op in (OpType.INSERT, OpType.INSERT_IGNORE)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.table.column_names if c not in (OP_COLUMN, ROW_COLUMN))


@dataclasses.dataclass
class UpdateGroup:
    columns: tuple[str, ...]  # non-key columns to set; may be empty (an existence probe)
    table: pa.Table  # key columns, those columns, __row, __mode


@dataclasses.dataclass
class ApplyPlan:
    deletes: pa.Table | None = None  # key columns, __row, __mode
    updates: list[UpdateGroup] = dataclasses.field(default_factory=list)
    inserts: pa.Table | None = None  # every column in schema order, __row, __mode
    errors: dict[int, NyalaError] = dataclasses.field(default_factory=dict)  # global row -> error


def repeated_rows(schema: Schema, parts: Sequence[Part]) -> pa.Array | None:
    """Global row numbers whose key occurs more than once in the group, or None."""
    keys = schema.key_names
    table = pa.concat_tables([p.table.select([*keys, ROW_COLUMN]) for p in parts])
    if len(keys) == 1 and pc.count_distinct(table.column(0)).as_py() == table.num_rows:
        return None
    counts = table.group_by(keys).aggregate([(ROW_COLUMN, "count")])
    repeated = counts.filter(pc.greater(counts[f"{ROW_COLUMN}_count"], pa.scalar(1, pa.int64())))
    if repeated.num_rows == 0:
        return None
    rows = table.join(repeated.select(keys), keys=keys, join_type="left semi")[ROW_COLUMN]
    return rows.combine_chunks()


def key_tuples(table: pa.Table, keys: Sequence[str]) -> list[tuple[Any, ...]]:
    return list(zip(*(table[k].to_pylist() for k in keys), strict=True))


def plan_apply(
    schema: Schema, parts: Sequence[Part], repeated: pa.Array | None, existing: set[tuple[Any, ...]]
) -> ApplyPlan:
    """Plan the group; ``existing`` holds which repeated keys exist before it."""
    plan = ApplyPlan()
    deletes: list[pa.Table] = []
    inserts: list[pa.Table] = []
    updates: dict[tuple[str, ...], list[pa.Table]] = {}
    by_columns: dict[tuple[str, ...], list[Part]] = {}
    for part in parts:
        table = part.table
        if repeated is not None:
            table = table.filter(pc.invert(pc.is_in(table[ROW_COLUMN], repeated)))
        if table.num_rows:
            by_columns.setdefault(part.columns, []).append(Part(table, part.only_op))
    for columns, group in by_columns.items():
        ops = {p.only_op for p in group}
        only = ops.pop() if len(ops) == 1 else None
        table = group[0].table if len(group) == 1 else pa.concat_tables([p.table for p in group])
        _plan_single(schema, columns, table, only, deletes, inserts, updates)
    if repeated is not None:
        _plan_repeated(schema, parts, repeated, existing, plan, deletes, inserts, updates)
    plan.deletes = pa.concat_tables(deletes) if deletes else None
    plan.inserts = pa.concat_tables(inserts) if inserts else None
    plan.updates = [UpdateGroup(cols, pa.concat_tables(ts)) for cols, ts in updates.items()]
    return plan


def _with_mode(table: pa.Table, mode: pa.Array | int) -> pa.Table:
    if isinstance(mode, int):
        mode = pa.repeat(mode_scalar(mode), table.num_rows)
    return table.append_column(MODE_COLUMN, mode)


def _plan_single(
    schema: Schema,
    columns: tuple[str, ...],
    table: pa.Table,
    only: OpType | None,
    deletes: list[pa.Table],
    inserts: list[pa.Table],
    updates: dict[tuple[str, ...], list[pa.Table]],
) -> None:
    keys = schema.key_names
    ops = table[OP_COLUMN]
    if only is not None:  # the usual case: one op for the whole group
        mode = MODE.IGNORE if only.ignores_errors else MODE.REPORT
        table = table.append_column(MODE_COLUMN, pa.repeat(mode_scalar(mode), table.num_rows))
        empty = table.slice(0, 0)

        def rows(op: OpType) -> pa.Table:
            return table if op is only.base else empty

    else:
        ignoring = pc.greater_equal(ops, pa.scalar(int(OpType.INSERT_IGNORE), pa.int8()))
        base = pc.if_else(ignoring, pc.subtract(ops, pa.scalar(4, pa.int8())), ops)  # X_IGNORE = X + 4
        table = table.append_column(
            MODE_COLUMN, pc.if_else(ignoring, mode_scalar(MODE.IGNORE), mode_scalar(MODE.REPORT))
        )

        def rows(op: OpType) -> pa.Table:
            return table.filter(pc.equal(base, pa.scalar(int(op), pa.int8())))

    non_key = tuple(c for c in columns if not schema.is_key(c))
    full_upsert = set(non_key) == {c.name for c in schema.columns[schema.key_column_count :]}

    deleted = rows(OpType.DELETE)
    if deleted.num_rows:
        deletes.append(deleted.select([*keys, ROW_COLUMN, MODE_COLUMN]))
    inserted = rows(OpType.INSERT)
    if inserted.num_rows:
        inserts.append(fill_defaults(schema, inserted))
    upserted = rows(OpType.UPSERT)
    if upserted.num_rows and full_upsert:
        deletes.append(_with_mode(upserted.select([*keys, ROW_COLUMN]), MODE.IGNORE))
        inserts.append(fill_defaults(schema, _with_mode(upserted.drop_columns([MODE_COLUMN]), MODE.MUST)))
    elif upserted.num_rows:
        cols = [*keys, *non_key, ROW_COLUMN]
        updates.setdefault(non_key, []).append(_with_mode(upserted.select(cols), MODE.UPSERT))
    updated = rows(OpType.UPDATE)
    if updated.num_rows:
        updates.setdefault(non_key, []).append(updated.select([*keys, *non_key, ROW_COLUMN, MODE_COLUMN]))


def fill_defaults(schema: Schema, table: pa.Table) -> pa.Table:
    """Every schema column in order (defaults for unset ones), then __row and __mode."""
    if set(table.column_names).issuperset(schema.names):  # every column set: nothing to fill
        return table.select([*schema.names, ROW_COLUMN, MODE_COLUMN])
    arrays = [*whole_row_columns(schema, table), table[ROW_COLUMN], table[MODE_COLUMN]]
    return pa.table(arrays, names=[*schema.names, ROW_COLUMN, MODE_COLUMN])


def whole_row_columns(schema: Schema, table: pa.Table) -> list[pa.ChunkedArray | pa.Array]:
    """``table``'s columns for every schema column, in order; the default (or nulls) for unset ones."""
    n = table.num_rows
    present = set(table.column_names)
    arrays: list[pa.ChunkedArray | pa.Array] = []
    for col in schema.columns:
        if col.name in present:
            arrays.append(table[col.name])
        elif col.default is None:
            arrays.append(pa.nulls(n, col.arrow_type))
        else:
            arrays.append(pa.repeat(pa.scalar(col.default, col.arrow_type), n))
    return arrays


@dataclasses.dataclass
class _KeyState:
    existed: bool
    exists: bool
    row: dict[str, Any] | None = None  # full new row: delete the old one (if any) and insert it
    changes: dict[str, Any] | None = None  # columns to update on the pre-existing row


def _plan_repeated(
    schema: Schema,
    parts: Sequence[Part],
    repeated: pa.Array,
    existing: set[tuple[Any, ...]],
    plan: ApplyPlan,
    deletes: list[pa.Table],
    inserts: list[pa.Table],
    updates: dict[tuple[str, ...], list[pa.Table]],
) -> None:
    """Fold the ops of keys that occur several times, in order, into one effect per key."""
    keys = schema.key_names
    ops: list[dict[str, Any]] = []
    for part in parts:
        ops += part.table.filter(pc.is_in(part.table[ROW_COLUMN], repeated)).to_pylist()
    ops.sort(key=lambda r: r[ROW_COLUMN])
    states: dict[tuple[Any, ...], _KeyState] = {}
    for op in ops:
        key = tuple(op[k] for k in keys)
        state = states.get(key)
        if state is None:
            state = states[key] = _KeyState(key in existing, key in existing)
        error = _fold(schema, state, op)
        if error is not None and op[OP_COLUMN] < OpType.INSERT_IGNORE:
            plan.errors[op[ROW_COLUMN]] = error
    _emit(schema, states, deletes, inserts, updates)


def _fold(schema: Schema, state: _KeyState, op: dict[str, Any]) -> NyalaError | None:
    base = OpType(op[OP_COLUMN]).base
    values = {k: v for k, v in op.items() if k not in (OP_COLUMN, ROW_COLUMN)}
    if base is OpType.INSERT and state.exists:
        return AlreadyPresent(f"key {_show_key(schema, values)} already present")
    if base in (OpType.UPDATE, OpType.DELETE) and not state.exists:
        return NotFound(f"key {_show_key(schema, values)} not found")
    if base is OpType.DELETE:
        state.exists, state.row, state.changes = False, None, None
    elif not state.exists:  # INSERT, or UPSERT of an absent key
        state.exists = True
        state.row = {c.name: values.get(c.name, c.default) for c in schema.columns}
    elif state.row is not None:  # UPDATE or UPSERT of a row created in this group
        state.row.update(values)
    else:  # UPDATE or UPSERT of the pre-existing row
        state.changes = {**(state.changes or {}), **values}
    return None


def _emit(
    schema: Schema,
    states: dict[tuple[Any, ...], _KeyState],
    deletes: list[pa.Table],
    inserts: list[pa.Table],
    updates: dict[tuple[str, ...], list[pa.Table]],
) -> None:
    keys = schema.key_names
    key_schema = pa.schema([pa.field(c.name, c.arrow_type) for c in schema.key_columns])
    doomed = [k for k, s in states.items() if s.existed and (not s.exists or s.row is not None)]
    if doomed:
        table = pa.Table.from_pylist([dict(zip(keys, k, strict=True)) for k in doomed], key_schema)
        deletes.append(_with_mode(table.append_column(ROW_COLUMN, pa.nulls(len(doomed), pa.int64())), MODE.MUST))
    created = [s.row for s in states.values() if s.exists and s.row is not None]
    if created:
        table = pa.Table.from_pylist(created, pa.schema([pa.field(c.name, c.arrow_type) for c in schema.columns]))
        table = table.append_column(ROW_COLUMN, pa.nulls(len(created), pa.int64()))
        inserts.append(_with_mode(table, MODE.MUST))
    by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for s in states.values():
        if s.exists and s.row is None and s.changes:
            cols = tuple(c for c in schema.names if c in s.changes and not schema.is_key(c))
            if cols:
                by_columns.setdefault(cols, []).append(s.changes)
    for cols, rows in by_columns.items():
        fields = [pa.field(c, schema.column(c).arrow_type) for c in (*keys, *cols)]
        table = pa.Table.from_pylist(rows, pa.schema(fields))
        table = table.append_column(ROW_COLUMN, pa.nulls(len(rows), pa.int64()))
        updates.setdefault(cols, []).append(_with_mode(table, MODE.MUST))


def _show_key(schema: Schema, values: dict[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={values[k]!r}" for k in schema.key_names) + ")"


def show_key(schema: Schema, key: Sequence[Any]) -> str:
    return _show_key(schema, dict(zip(schema.key_names, key, strict=True)))
