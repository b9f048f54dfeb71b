"""The DuckDB tablet store: one DuckDB instance per process, one ATTACHed file per tablet."""

from __future__ import annotations

import bisect
import dataclasses
import datetime
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from nyala.common.config import setting
from nyala.common.errors import (
    AlreadyPresent,
    Corruption,
    IllegalState,
    InvalidArgument,
    IOFailure,
    NotFound,
    NyalaError,
    StorageError,
)
from nyala.schema import DataType, Schema, decode_row_operations

from .api import ApplyEntry, EntryResult, RowError, ScanSpec, TabletSnapshot
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
from .sql import column_sql, create_table_sql, duck_table, duck_value, quote, where_clause

__all__ = ["DuckDBScanner", "DuckDBTabletStore", "StorageOptions", "TabletStoreManager"]

FORMAT_VERSION = 1
ROWS = "rows"
META = "nyala_meta"
_TABLET_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class StorageOptions:
    """Settings of the process-wide DuckDB instance that holds every tablet."""

    storage_threads: int = setting(0, "DuckDB worker threads shared by all tablets; 0 means one per CPU core.")
    storage_memory_limit_bytes: int = setting(
        0, "One buffer-pool limit for all tablets of the process, in bytes; 0 keeps DuckDB's default (80% of RAM)."
    )
    storage_checkpoint_threshold_bytes: int = setting(
        1 << 30,
        "DuckDB WAL size that forces an automatic checkpoint, in bytes; kept high because the tablet server "
        "checkpoints each tablet explicitly and the 16 MiB default checkpoints on nearly every upsert commit.",
        "advanced",
    )
    tablet_block_size_bytes: int = setting(
        262144,
        "Block size of newly created tablet files, in bytes (DuckDB's default; measured faster and more "
        "compact than 16 KiB once a tablet holds a million rows).",
        "advanced",
    )
    small_tablet_block_size_bytes: int = setting(
        16384,
        "Block size of tablets created as small (such as the catalog tablet), in bytes; a 1,000-row "
        "tablet takes 108 KiB instead of 780 KiB.",
        "advanced",
    )


class TabletStoreManager:
    """Owns the DuckDB instance; creates, opens, copies and drops the tablets in ``data_dir``.

    Thread-safe.  Each tablet is the file ``<data_dir>/<tablet_id>.duckdb``, attached under
    the alias ``t_<tablet_id>``.
    """

    def __init__(self, data_dir: str, options: StorageOptions | None = None) -> None:
        self.options = options or StorageOptions()
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        threads = self.options.storage_threads or os.cpu_count() or 1
        config: dict[str, str | bool | int | float | list[str]] = {
            "threads": str(threads),
            "checkpoint_threshold": f"{max(1, self.options.storage_checkpoint_threshold_bytes >> 20)}MiB",
            "temp_directory": os.path.join(self.data_dir, ".duckdb_tmp"),
        }
        if self.options.storage_memory_limit_bytes:
            config["memory_limit"] = f"{max(1, self.options.storage_memory_limit_bytes >> 20)}MiB"
        self._conn = duckdb.connect(":memory:", config=config)
        self._lock = threading.Lock()
        self._tablets: dict[str, DuckDBTabletStore] = {}
        self._closed = False

    # --- paths ------------------------------------------------------------------------

    def path_of(self, tablet_id: str) -> str:
        if not _TABLET_ID.match(tablet_id):
            raise InvalidArgument(f"tablet id {tablet_id!r} must be 1-128 letters, digits, '_' or '-'")
        return os.path.join(self.data_dir, f"{tablet_id}.duckdb")

    def tablet_ids_on_disk(self) -> list[str]:
        return sorted(f[: -len(".duckdb")] for f in os.listdir(self.data_dir) if f.endswith(".duckdb"))

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new connection to the shared instance (one per thread or scanner)."""
        with self._lock:
            if self._closed:
                raise IllegalState("the tablet store manager is closed")
            return self._conn.cursor()

    # --- lifecycle ----------------------------------------------------------------------

    def create_tablet(self, tablet_id: str, schema: Schema, *, small: bool = False) -> DuckDBTabletStore:
        """Create an empty tablet; ``small`` picks the small block size for tablets expected to stay small."""
        path = self.path_of(tablet_id)
        with self._lock:
            if tablet_id in self._tablets or os.path.exists(path):
                raise AlreadyPresent(f"tablet {tablet_id} already exists at {path}")
            alias = _alias(tablet_id)
            options = self.options
            block = options.small_tablet_block_size_bytes if small else options.tablet_block_size_bytes
            self._conn.execute(f"ATTACH {_string_literal(path)} AS {alias} (BLOCK_SIZE {int(block)})")
            try:
                _create_tables(self._conn, alias, tablet_id, schema)
            except BaseException:
                self._conn.execute(f"DETACH {alias}")
                _remove_files(path)
                raise
            return self._register(tablet_id, alias, path)

    def open_tablet(self, tablet_id: str) -> DuckDBTabletStore:
        """Attach an existing tablet; a missing or damaged file fails only this tablet."""
        path = self.path_of(tablet_id)
        with self._lock:
            if tablet_id in self._tablets:
                return self._tablets[tablet_id]
            if not os.path.exists(path):
                raise NotFound(f"tablet {tablet_id}: no data file {path}")
            alias = _alias(tablet_id)
            try:
                self._conn.execute(f"ATTACH {_string_literal(path)} AS {alias}")
            except duckdb.Error as e:
                raise _storage_error(tablet_id, "cannot open", e) from e
            try:
                return self._register(tablet_id, alias, path)
            except BaseException:
                self._conn.execute(f"DETACH {alias}")
                raise

    def open_from_snapshot(self, tablet_id: str, files: Sequence[str]) -> DuckDBTabletStore:
        """Install files made by :meth:`DuckDBTabletStore.snapshot` as tablet ``tablet_id``."""
        path = self.path_of(tablet_id)
        if os.path.exists(path) or tablet_id in self._tablets:
            raise AlreadyPresent(f"tablet {tablet_id} already exists; delete it before copying it in")
        main = [f for f in files if f.endswith(".duckdb")]
        if len(main) != 1 or len(files) > 2:
            raise InvalidArgument(f"a tablet snapshot is one .duckdb file and maybe its WAL, got {list(files)}")
        wal = [f for f in files if f.endswith(".duckdb.wal")]
        try:
            # Copy under temporary names, then rename: a crash mid-copy leaves no tablet file.
            # A stale WAL of an earlier replica must go, or DuckDB would replay it on this copy.
            _remove_files(path)
            if wal:
                _copy_durably(wal[0], path + ".wal.copying")
                os.replace(path + ".wal.copying", path + ".wal")
            _copy_durably(main[0], path + ".copying")
            os.replace(path + ".copying", path)
            _fsync_dir(self.data_dir)
        except OSError as e:
            _remove_files(path)
            raise IOFailure(f"tablet {tablet_id}: cannot install snapshot: {e}") from e
        return self.open_tablet(tablet_id)

    def close_tablet(self, tablet_id: str) -> None:
        with self._lock:
            store = self._tablets.pop(tablet_id, None)
            if store is not None:
                store._release()
                self._conn.execute(f"DETACH {store.alias}")

    def delete_tablet(self, tablet_id: str) -> None:
        """Detach the tablet and remove its files."""
        path = self.path_of(tablet_id)
        self.close_tablet(tablet_id)
        _remove_files(path)
        _fsync_dir(self.data_dir)

    def close(self) -> None:
        with self._lock:
            for store in self._tablets.values():
                store._release()
            self._tablets.clear()
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> TabletStoreManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _register(self, tablet_id: str, alias: str, path: str) -> DuckDBTabletStore:
        store = DuckDBTabletStore(self, tablet_id, alias, path, self._conn.cursor())
        self._tablets[tablet_id] = store
        return store


def _alias(tablet_id: str) -> str:
    return quote("t_" + tablet_id)


def _string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _create_tables(conn: duckdb.DuckDBPyConnection, alias: str, tablet_id: str, schema: Schema) -> None:
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


def _storage_error(tablet_id: str, what: str, e: BaseException) -> StorageError:
    text = str(e)
    if "Corrupt" in text or "checksum" in text or "not a valid DuckDB database" in text:
        return Corruption(f"tablet {tablet_id}: {what}: {text}")
    return IOFailure(f"tablet {tablet_id}: {what}: {text}")


def _copy_durably(src: str, dst: str) -> None:
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_files(path: str) -> None:
    for p in (path, path + ".wal", path + ".copying", path + ".wal.copying"):
        if os.path.exists(p):
            os.remove(p)


class _Conflict(Exception):
    """A statement touched fewer rows than planned: redo the group, naming the failing rows."""


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
        self._careful = False  # whether this apply attempt must name failing rows
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
            raise _storage_error(self._tablet_id, "cannot read metadata", e) from e
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
                self._failed = _storage_error(self._tablet_id, what, e)
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
            self._cur.execute(f"UPDATE {self.alias}.{META} SET applied_index = ?", [index])
            self._cur.execute("COMMIT")
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
            self._careful = careful
            return self._transaction(lambda: self._apply_parts(parts), index)

        try:
            return self._guard("apply", lambda: attempt(False))
        except (_Conflict, duckdb.ConstraintException):
            pass
        try:
            return self._guard("apply", lambda: attempt(True))
        except duckdb.ConstraintException as e:
            raise AssertionError(f"tablet {self._tablet_id}: planned statements broke a key constraint: {e}") from e

    def _apply_parts(self, parts: list[Part]) -> dict[int, NyalaError]:
        if not parts:
            return {}
        if not self._careful and all(p.inserts_only for p in parts):
            # A key inserted twice breaks the primary key, and the careful attempt folds it.
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
                raise _Conflict
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
                raise _Conflict
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
        names = ", ".join(quote(c) for c in self._schema.names)
        _i = duck_table(inserts.select(self._schema.names))
        if not self._careful or not pc.any(pc.not_equal(inserts[MODE_COLUMN], mode_scalar(MODE.MUST))).as_py():
            # Optimistic: a duplicate key raises ConstraintException and the group is redone.
            self._cur.execute(f"INSERT INTO {self._rows} ({names}) SELECT * FROM _i")
            return
        self._cur.execute(f"INSERT OR IGNORE INTO {self._rows} ({names}) SELECT * FROM _i{self._returning()}")
        found = set(self._cur.fetchall())
        if len(found) == inserts.num_rows:
            return
        missed = inserts.filter(pa.array(self._missing(_i, found)))
        if MODE.MUST in missed[MODE_COLUMN].to_pylist():
            raise AssertionError(f"tablet {self._tablet_id}: an insert of a known-absent key found it present")
        report = missed.filter(pc.equal(missed[MODE_COLUMN], mode_scalar(MODE.REPORT)))
        self._record(report, [True] * report.num_rows, errors, AlreadyPresent, "already present")

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

    def alter_schema(self, new_schema: Schema, index: int) -> None:
        """Move to ``new_schema`` (columns matched by id) in one transaction with ``index``."""
        with self._lock:
            self._check_usable()
            self._check_indices([index])
            statements = _alter_statements(self._rows, self._schema, new_schema)

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
                        _copy_durably(src, dst)
                        files.append(dst)
                _fsync_dir(dest_dir)
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


class DuckDBScanner:
    """Streams one query's batches; the query's snapshot lasts until the scanner is closed."""

    def __init__(
        self,
        store: DuckDBTabletStore,
        cursor: duckdb.DuckDBPyConnection,
        reader: pa.RecordBatchReader,
        schema: pa.Schema,
    ) -> None:
        self._store = store
        self._cursor = cursor
        self._reader = reader
        self._schema = schema
        # DuckDB marks every field nullable; only a type difference (timestamps) needs a cast.
        self._cast = reader.schema.types != schema.types
        self._open = True

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            while self._open:
                batch = self._store._guard("scan", self._next)
                if batch is None:
                    break
                yield batch
        finally:
            self.close()

    def _next(self) -> pa.RecordBatch | None:
        try:
            batch = self._reader.read_next_batch()
        except StopIteration:
            return None
        if self._cast:
            return batch.cast(self._schema)
        return pa.RecordBatch.from_arrays(batch.columns, schema=self._schema)  # relabel, no copy

    def read_all(self) -> pa.Table:
        """The remaining rows as one table (read in C++, faster than iterating)."""
        if not self._open:
            return self._schema.empty_table()
        try:
            table = self._store._guard("scan", self._reader.read_all)
        finally:
            self.close()
        if self._cast:
            return table.cast(self._schema)
        return pa.Table.from_arrays(table.columns, schema=self._schema)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._reader.close()
            self._cursor.close()

    def __enter__(self) -> DuckDBScanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _alter_statements(table: str, old: Schema, new: Schema) -> list[tuple[str, list[Any]]]:
    """DDL turning ``old`` into ``new``: columns are matched by id, keys may not change."""
    if [(c.id, c.name, c.type) for c in old.key_columns] != [(c.id, c.name, c.type) for c in new.key_columns]:
        raise InvalidArgument("primary key columns cannot be altered")
    old_by_id = {c.id: c for c in old.columns}
    new_by_id = {c.id: c for c in new.columns}
    out: list[tuple[str, list[Any]]] = []
    for cid, col in old_by_id.items():
        if cid not in new_by_id:
            out.append((f"ALTER TABLE {table} DROP COLUMN {quote(col.name)}", []))
        elif (new_by_id[cid].type, new_by_id[cid].nullable) != (col.type, col.nullable):
            raise InvalidArgument(f"column {col.name!r}: changing the type or nullability is not supported")
    renamed = [
        (old_by_id[cid], col) for cid, col in new_by_id.items() if cid in old_by_id and old_by_id[cid].name != col.name
    ]
    # Two steps, so swapping two names never collides.
    for before, _ in renamed:
        out.append((f"ALTER TABLE {table} RENAME COLUMN {quote(before.name)} TO {quote(f'__rename_{before.id}')}", []))
    for before, after in renamed:
        out.append((f"ALTER TABLE {table} RENAME COLUMN {quote(f'__rename_{before.id}')} TO {quote(after.name)}", []))
    for cid, col in new_by_id.items():
        if cid not in old_by_id:
            if not col.nullable and col.default is None:
                raise InvalidArgument(f"new non-null column {col.name!r} needs a default")
            plain = dataclasses.replace(col, nullable=True)  # Nyala checks NOT NULL on write
            out.append((f"ALTER TABLE {table} ADD COLUMN {column_sql(plain)}", []))
            if col.default is not None:
                out.append((f"UPDATE {table} SET {quote(col.name)} = ?", [duck_value(col.default)]))
    return out
