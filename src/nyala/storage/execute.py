"""Runs an :class:`~.plan.ApplyPlan` as SQL on one tablet, inside the caller's transaction."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from nyala.errors import AlreadyPresent, NotFound, NyalaError
from nyala.schema import DataType, Schema

from .plan import (
    MODE,
    MODE_COLUMN,
    ROW_COLUMN,
    ApplyPlan,
    Part,
    fill_defaults,
    mode_scalar,
    plan_apply,
    repeated_rows,
    show_key,
)
from .sql import duck_table, quote

__all__ = ["Conflict", "PlanExecutor"]


class Conflict(Exception):
    """A statement touched fewer rows than planned: redo the group, naming the failing rows."""


class PlanExecutor:
    """Plans and runs one apply attempt.

    Optimistic (``careful=False``): plain statements, and :class:`Conflict` when a row fails.
    Careful: statements that name failing rows.
    The Arrow tables reach DuckDB by local variable name (replacement scans), so each
    statement runs in the method that holds its table.
    """

    def __init__(
        self, cursor: duckdb.DuckDBPyConnection, schema: Schema, rows: str, tablet_id: str, careful: bool
    ) -> None:
        self._cur = cursor
        self._schema = schema
        self._rows = rows
        self._tablet_id = tablet_id
        self._careful = careful

    def apply_parts(self, parts: list[Part]) -> dict[int, NyalaError]:
        if not parts:
            return {}
        if not self._careful and all(p.inserts_only for p in parts):
            # A key inserted twice is a Conflict (see _insert), and the careful attempt folds it.
            repeated = None
        else:
            repeated = repeated_rows(self._schema, parts)
        existing: set[tuple[Any, ...]] = set()
        if repeated is not None:
            keys = self._schema.key_names
            probe = pa.concat_tables(
                [p.table.filter(pc.is_in(p.table[ROW_COLUMN], repeated)).select(keys) for p in parts]
            )
            existing = {self._canonical_key(k) for k in self._existing_keys(probe)}
        plan = plan_apply(self._schema, parts, repeated, existing)
        return self._execute(plan)

    def _execute(self, plan: ApplyPlan) -> dict[int, NyalaError]:
        errors = dict(plan.errors)
        if plan.deletes is not None:
            self._delete(plan.deletes, errors)
        inserts = [plan.inserts] if plan.inserts is not None else []
        for group in plan.updates:
            missed = self._update(group.columns, group.table, errors)
            if missed is not None:
                inserts.append(missed)
        if inserts:
            self._insert(inserts[0] if len(inserts) == 1 else pa.concat_tables(inserts), errors)
        return errors

    def _key_join(self, other: str) -> str:
        return " AND ".join(f"r.{quote(k)} = {other}.{quote(k)}" for k in self._schema.key_names)

    def _returning(self) -> str:
        return " RETURNING " + ", ".join(quote(k) for k in self._schema.key_names)

    def _existing_keys(self, keys: pa.Table) -> set[tuple[Any, ...]]:
        _p = duck_table(keys)
        cols = ", ".join(f"r.{quote(k)}" for k in self._schema.key_names)
        return set(
            self._cur.execute(f"SELECT {cols} FROM {self._rows} AS r, _p WHERE {self._key_join('_p')}").fetchall()
        )

    def _canonical_key(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """A key read from DuckDB in the form Arrow's ``to_pylist`` gives (UTC-aware times)."""
        return tuple(
            v.replace(tzinfo=datetime.UTC) if c.type.type is DataType.TIMESTAMP else v
            for c, v in zip(self._schema.key_columns, key, strict=True)
        )

    def _missing(self, table: pa.Table, found: set[tuple[Any, ...]]) -> list[bool]:
        """Per row of ``table`` (in DuckDB form): whether its key is not in ``found``."""
        keys = self._schema.key_names
        return [k not in found for k in zip(*(table[k].to_pylist() for k in keys), strict=True)]

    def _delete(self, deletes: pa.Table, errors: dict[int, NyalaError]) -> None:
        keys = self._schema.key_names
        _d = duck_table(deletes.select(keys))
        report = deletes.filter(pc.equal(deletes[MODE_COLUMN], mode_scalar(MODE.REPORT)))
        counted = report.num_rows == deletes.num_rows and not self._careful
        returning = self._returning() if report.num_rows and not counted else ""
        if len(keys) == 1:
            sql = f"DELETE FROM {self._rows} AS r WHERE r.{quote(keys[0])} = ANY(?){returning}"
            self._cur.execute(sql, [_d.column(0).to_pylist()])
        else:
            self._cur.execute(f"DELETE FROM {self._rows} AS r USING _d WHERE {self._key_join('_d')}{returning}")
        if counted:
            if self._cur.fetchall()[0][0] != deletes.num_rows:
                raise Conflict
        elif report.num_rows:
            found = set(self._cur.fetchall())
            self._record(report, self._missing(duck_table(report), found), errors, NotFound, "not found")

    def _update(self, columns: tuple[str, ...], table: pa.Table, errors: dict[int, NyalaError]) -> pa.Table | None:
        """Run one UPDATE; return the UPSERT rows it missed, to be inserted."""
        keys = self._schema.key_names
        _u = duck_table(table.select([*keys, *columns]))
        counted = not self._careful and bool(pc.all(pc.equal(table[MODE_COLUMN], mode_scalar(MODE.REPORT))).as_py())
        if columns and counted:
            sets = ", ".join(f"{quote(c)} = _u.{quote(c)}" for c in columns)
            self._cur.execute(f"UPDATE {self._rows} AS r SET {sets} FROM _u WHERE {self._key_join('_u')}")
            if self._cur.fetchall()[0][0] != table.num_rows:
                raise Conflict
            return None
        if columns:
            sets = ", ".join(f"{quote(c)} = _u.{quote(c)}" for c in columns)
            self._cur.execute(
                f"UPDATE {self._rows} AS r SET {sets} FROM _u WHERE {self._key_join('_u')}{self._returning()}"
            )
            found = set(self._cur.fetchall())
        else:
            found = self._existing_keys(table.select(keys))
        if len(found) == table.num_rows:
            return None
        missing = pa.array(self._missing(_u, found))
        missed = table.filter(missing)
        modes = missed[MODE_COLUMN].to_pylist()
        if MODE.MUST in modes:
            raise AssertionError(f"tablet {self._tablet_id}: an update of a known row found no row")
        report = missed.filter(pc.equal(missed[MODE_COLUMN], mode_scalar(MODE.REPORT)))
        self._record(report, [True] * report.num_rows, errors, NotFound, "not found")
        upserts = missed.filter(pc.equal(missed[MODE_COLUMN], mode_scalar(MODE.UPSERT)))
        if not upserts.num_rows:
            return None
        upserts = upserts.set_column(
            upserts.schema.get_field_index(MODE_COLUMN),
            MODE_COLUMN,
            pa.repeat(mode_scalar(MODE.MUST), upserts.num_rows),
        )
        return fill_defaults(self._schema, upserts)

    def _insert(self, inserts: pa.Table, errors: dict[int, NyalaError]) -> None:
        """Insert the planned rows, skipping (and reporting) keys already present.

        The table has no PRIMARY KEY constraint (see ``create_table_sql``), so nothing in
        DuckDB stops a second row with the same key: presence is checked here, with one join,
        unless the plan knows every key is absent (``MODE.MUST``).
        """
        keys = self._schema.key_names
        _i = duck_table(inserts.select(self._schema.names))
        if _i.group_by(keys).aggregate([]).num_rows != _i.num_rows:
            if not self._careful:
                raise Conflict("a key is inserted twice")  # the careful attempt folds repeated keys
            raise AssertionError(f"tablet {self._tablet_id}: a planned insert repeats a key")
        if not pc.all(pc.equal(inserts[MODE_COLUMN], mode_scalar(MODE.MUST))).as_py():
            found = self._existing_keys(_i.select(keys))
            if found:
                if not self._careful:
                    raise Conflict("an inserted key is already present")
                absent = pa.array(self._missing(_i, found))
                missed = inserts.filter(pc.invert(absent))
                if MODE.MUST in missed[MODE_COLUMN].to_pylist():
                    raise AssertionError(f"tablet {self._tablet_id}: an insert of a known-absent key found it present")
                report = missed.filter(pc.equal(missed[MODE_COLUMN], mode_scalar(MODE.REPORT)))
                self._record(report, [True] * report.num_rows, errors, AlreadyPresent, "already present")
                _i = _i.filter(absent)
        names = ", ".join(quote(c) for c in self._schema.names)
        self._cur.execute(f"INSERT INTO {self._rows} ({names}) SELECT * FROM _i")

    def _record(
        self,
        table: pa.Table,
        mask: list[bool],
        errors: dict[int, NyalaError],
        error: Callable[[str], NyalaError],
        what: str,
    ) -> None:
        keys = self._schema.key_names
        for row, key, hit in zip(
            table[ROW_COLUMN].to_pylist(), zip(*(table[k].to_pylist() for k in keys), strict=True), mask, strict=True
        ):
            if hit:
                errors[row] = error(f"key {show_key(self._schema, key)} {what}")

    # --- schema changes ---------------------------------------------------------------
