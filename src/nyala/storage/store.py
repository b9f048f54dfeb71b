"""One tablet in DuckDB: applies, schema changes, checkpoints, snapshots and scans."""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import duckdb
import pyarrow as pa

from nyala.common.errors import Corruption, IllegalState, InvalidArgument, IOFailure, NyalaError, StorageError
from nyala.schema import Schema, decode_row_operations

from .alter import alter_statements
from .api import ApplyEntry, EntryResult, RowError, ScanSpec, TabletSnapshot
from .execute import Conflict, PlanExecutor
from .files import copy_durably, fsync_dir
from .plan import Part
from .scanner import DuckDBScanner
from .sql import create_table_sql, quote, where_clause

if TYPE_CHECKING:
    from .manager import TabletStoreManager

__all__ = ["FORMAT_VERSION", "DuckDBTabletStore", "create_tables", "storage_error"]

FORMAT_VERSION = 1
ROWS = "rows"
META = "nyala_meta"
T = TypeVar("T")


def create_tables(conn: duckdb.DuckDBPyConnection, alias: str, tablet_id: str, schema: Schema) -> None:
    """Create a new tablet's tables in the attached database ``alias`` and checkpoint them."""
    conn.execute("BEGIN")
    conn.execute(create_table_sql(f"{alias}.{ROWS}", schema))
    conn.execute(
        f"CREATE TABLE {alias}.{META} (format_version INTEGER, tablet_id VARCHAR, applied_index BIGINT, schema VARCHAR)"
    )
    conn.execute(
        f"INSERT INTO {alias}.{META} VALUES (?, ?, 0, ?)", [FORMAT_VERSION, tablet_id, schema.to_json().decode()]
    )
    conn.execute("COMMIT")
    conn.execute(f"CHECKPOINT {alias}")


def storage_error(tablet_id: str, what: str, e: BaseException) -> StorageError:
    """Corruption when DuckDB says the file is damaged, IOFailure otherwise."""
    text = str(e)
    if "Corrupt" in text or "checksum" in text or "not a valid DuckDB database" in text:
        return Corruption(f"tablet {tablet_id}: {what}: {text}")
    return IOFailure(f"tablet {tablet_id}: {what}: {text}")


class DuckDBTabletStore:
    """One tablet: the ``rows`` table and a one-row ``nyala_meta`` table (applied index, schema).

    Writes (apply, alter, checkpoint, snapshot) take the tablet's lock and use the tablet's
    own cursor.  Each scan opens its own cursor, so it reads from DuckDB's MVCC snapshot of
    the moment it started for as long as it lives.
    """

    def __init__(
        self, manager: TabletStoreManager, tablet_id: str, alias: str, path: str, cursor: duckdb.DuckDBPyConnection
    ) -> None:
        self._manager = manager
        self._tablet_id = tablet_id
        self.alias = alias
        self.path = path
        self._cur = cursor
        self._lock = threading.Lock()
        self._failed: StorageError | None = None
        self._closed = False
        self._rows = f"{alias}.{ROWS}"
        self._schema, self._applied = self._read_meta()

    @property
    def tablet_id(self) -> str:
        return self._tablet_id

    @property
    def schema(self) -> Schema:
        return self._schema

    def applied_index(self) -> int:
        return self._applied

    def wal_size_bytes(self) -> int:
        """Size of this tablet's DuckDB WAL: what a checkpoint would fold into the file."""
        try:
            return os.path.getsize(self.path + ".wal")
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        self._manager.close_tablet(self._tablet_id)

    def _release(self) -> None:
        with self._lock:
            self._closed = True
            self._cur.close()

    def _read_meta(self) -> tuple[Schema, int]:
        try:
            rows = self._cur.execute(
                f"SELECT format_version, tablet_id, applied_index, schema FROM {self.alias}.{META}"
            ).fetchall()
        except duckdb.CatalogException as e:
            raise Corruption(f"tablet {self._tablet_id}: no metadata table in {self.path}: {e}") from e
        except duckdb.Error as e:
            raise storage_error(self._tablet_id, "cannot read metadata", e) from e
        if len(rows) != 1:
            raise Corruption(f"tablet {self._tablet_id}: metadata has {len(rows)} rows, expected 1")
        version, stored_id, applied, schema_json = rows[0]
        if version != FORMAT_VERSION:
            raise Corruption(f"tablet {self._tablet_id}: unknown format version {version}")
        if stored_id != self._tablet_id:
            raise Corruption(f"tablet {self._tablet_id}: file {self.path} holds tablet {stored_id}")
        try:
            schema = Schema.from_json(schema_json)
        except InvalidArgument as e:
            raise Corruption(f"tablet {self._tablet_id}: stored schema is unreadable: {e}") from e
        return schema, int(applied)

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self._closed:
            raise IllegalState(f"tablet {self._tablet_id} is closed")

    def _guard(self, what: str, action: Callable[[], T]) -> T:
        """Run a DuckDB action; storage errors fail this tablet (not the process)."""
        try:
            return action()
        except (duckdb.Error, OSError) as e:
            # Streaming readers report DuckDB's errors through Arrow, as OSError.
            if isinstance(e, duckdb.IOException | OSError) or "Corrupt" in str(e):
                self._failed = storage_error(self._tablet_id, what, e)
                raise self._failed from e
            raise

    # --- writes -----------------------------------------------------------------------

    def apply(self, entries: Sequence[ApplyEntry]) -> list[EntryResult]:
        """Apply committed entries in one transaction that also records the last index."""
        with self._lock:
            self._check_usable()
            self._check_indices([e.index for e in entries])
            if not entries:
                return []
            results = [EntryResult(e.index) for e in entries]
            parts, starts, owners = self._decode(entries, results)
            errors = self._apply_optimistically(parts, entries[-1].index)
            for row, error in errors.items():
                i = bisect.bisect_right(starts, row) - 1
                results[owners[i]].row_errors.append(RowError(row - starts[i], error))
            for r in results:
                r.row_errors.sort(key=lambda e: e.row)
            self._applied = entries[-1].index
            return results

    def _check_indices(self, indices: Sequence[int]) -> None:
        last = self._applied
        for index in indices:
            if index <= last:
                raise IllegalState(f"tablet {self._tablet_id}: entry {index} is not after the applied index {last}")
            last = index

    def _decode(
        self, entries: Sequence[ApplyEntry], results: list[EntryResult]
    ) -> tuple[list[Part], list[int], list[int]]:
        parts: list[Part] = []
        starts: list[int] = []
        owners: list[int] = []
        next_row = 0
        for i, entry in enumerate(entries):
            try:
                ops = decode_row_operations(entry.payload, self._schema)
            except InvalidArgument as e:
                results[i].error = e
                continue
            if len(ops):
                parts.extend(Part.of(group, next_row) for group in ops.by_column_set())
                starts.append(next_row)
                owners.append(i)
                next_row += len(ops)
        return parts, starts, owners

    def _transaction(self, body: Callable[[], T], index: int) -> T:
        self._cur.execute("BEGIN")
        try:
            out = body()
            # One call for both: every DuckDB call costs ~0.3 ms of CPU even for SELECT 1 (measured).
            self._cur.execute(f"UPDATE {self.alias}.{META} SET applied_index = {int(index)}; COMMIT")
        except BaseException:
            try:
                self._cur.execute("ROLLBACK")
            except duckdb.Error:
                pass  # the original error says more; DuckDB may already have ended the transaction
            raise
        return out

    def _apply_optimistically(self, parts: list[Part], index: int) -> dict[int, NyalaError]:
        """Apply assuming no row errors (plain statements, as fast as hand-written SQL); on a
        conflict roll back and apply again with statements that say which rows failed."""

        def attempt(careful: bool) -> dict[int, NyalaError]:
            executor = PlanExecutor(self._cur, self._schema, self._rows, self._tablet_id, careful)
            return self._transaction(lambda: executor.apply_parts(parts), index)

        try:
            return self._guard("apply", lambda: attempt(False))
        except (Conflict, duckdb.ConstraintException):
            pass
        try:
            return self._guard("apply", lambda: attempt(True))
        except duckdb.ConstraintException as e:
            raise AssertionError(f"tablet {self._tablet_id}: planned statements broke a key constraint: {e}") from e

    def alter_schema(self, new_schema: Schema, index: int) -> None:
        """Move to ``new_schema`` (columns matched by id) in one transaction with ``index``."""
        with self._lock:
            self._check_usable()
            self._check_indices([index])
            statements = alter_statements(self._rows, self._schema, new_schema)

            def body() -> None:
                for sql, params in statements:
                    self._cur.execute(sql, params)
                self._cur.execute(f"UPDATE {self.alias}.{META} SET schema = ?", [new_schema.to_json().decode()])

            self._guard("alter schema", lambda: self._transaction(body, index))
            self._schema, self._applied = new_schema, index

    # --- maintenance ------------------------------------------------------------------

    def checkpoint(self) -> bool:
        """Fold this tablet's DuckDB WAL into its file (bounds restart time, frees space).

        Returns False when DuckDB defers it because other transactions are active (it does
        so after a schema change while older scans are open); the caller retries later.
        """
        with self._lock:
            self._check_usable()
            return self._checkpoint_locked()

    def _checkpoint_locked(self) -> bool:
        try:
            self._guard("checkpoint", lambda: self._cur.execute(f"CHECKPOINT {self.alias}"))
        except duckdb.TransactionException:
            return False
        return True

    def snapshot(self, dest_dir: str) -> TabletSnapshot:
        """Copy the tablet's file(s) into ``dest_dir``; writes wait meanwhile.

        The file is checkpointed first when DuckDB allows; otherwise the file and its WAL are
        copied as they are, which is as consistent (every commit is in the WAL) but longer
        to open.
        """
        with self._lock:
            self._check_usable()
            self._checkpoint_locked()
            os.makedirs(dest_dir, exist_ok=True)
            files = []
            try:
                for src in (self.path, self.path + ".wal"):
                    if os.path.exists(src) and os.path.getsize(src) > 0:
                        dst = os.path.join(dest_dir, os.path.basename(src))
                        copy_durably(src, dst)
                        files.append(dst)
                fsync_dir(dest_dir)
            except OSError as e:
                raise IOFailure(f"tablet {self._tablet_id}: cannot write snapshot to {dest_dir}: {e}") from e
            return TabletSnapshot(self._tablet_id, self._applied, self._schema, tuple(files))

    # --- reads ------------------------------------------------------------------------

    def scan(self, spec: ScanSpec) -> DuckDBScanner:
        self._check_usable()
        schema = self._schema
        projection = list(spec.projection) if spec.projection is not None else schema.names
        if not projection:
            raise InvalidArgument("a scan needs at least one column")
        fields = [pa.field(c.name, c.arrow_type, c.nullable) for c in map(schema.column, projection)]
        predicates = [p.bind(schema) for p in spec.predicates]
        key_range = spec.key_range.bind(schema) if spec.key_range is not None else None
        if spec.limit is not None and spec.limit < 0:
            raise InvalidArgument(f"scan limit must be >= 0, got {spec.limit}")
        if spec.batch_size_rows < 1:
            raise InvalidArgument(f"scan batch size must be >= 1, got {spec.batch_size_rows}")
        where, params = where_clause(predicates, key_range, schema)
        sql = f"SELECT {', '.join(quote(c) for c in projection)} FROM {self._rows}{where}"
        if spec.ordered:
            sql += " ORDER BY " + ", ".join(quote(k) for k in schema.key_names)
        if spec.limit is not None:
            sql += " LIMIT ?"
            params.append(spec.limit)
        cursor = self._manager.cursor()
        try:
            reader = self._guard("scan", lambda: cursor.sql(sql, params=params).to_arrow_reader(spec.batch_size_rows))
        except BaseException:
            cursor.close()
            raise
        return DuckDBScanner(self, cursor, reader, pa.schema(fields))
