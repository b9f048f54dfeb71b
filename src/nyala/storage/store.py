"""One tablet in DuckDB: applies, schema changes, checkpoints, snapshots and scans.

A tablet lives in a process-wide DuckDB instance that it does not own.  What it needs from
that instance (its settings, new connections for scans, the switch that lets a large commit
checkpoint, and detaching on close) is the small :class:`TabletHost` interface defined here;
:class:`~nyala.storage.manager.TabletStoreManager` implements it and imports this module, never
the other way round.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from nyala.errors import (
    AlreadyPresent,
    Corruption,
    IllegalState,
    InvalidArgument,
    IOFailure,
    NyalaError,
    StorageError,
)
from nyala.files import copy_durably, copy_file, fsync_dir
from nyala.schema import OpType, RowFailure, Schema, decode_row_operations
from nyala.schema.types import INT_BITS

from .alter import alter_statements
from .api import ApplyEntry, EntryResult, ScanSpec, TabletSnapshot
from .diskkeys import DiskKeys
from .execute import Conflict, PlanExecutor
from .memrowset import IntKeyMemRowSet, Key, MemRowSet, key_list
from .options import StorageOptions
from .plan import ROW_COLUMN, Part, show_key, whole_row_columns
from .scanner import DuckDBScanner
from .sortedints import IntArray, has_repeats
from .sql import create_table_sql, duck_table, quote, where_clause

__all__ = ["FORMAT_VERSION", "DuckDBTabletStore", "PinnedFiles", "TabletHost", "create_tables", "storage_error"]

FORMAT_VERSION = 1
ROWS = "rows"
META = "nyala_meta"
T = TypeVar("T")
# What the MemRowSet takes: whole new rows.  UPDATE and DELETE go to DuckDB (after a flush).
_IN_MEMORY_OPS = frozenset({OpType.INSERT, OpType.INSERT_IGNORE, OpType.UPSERT, OpType.UPSERT_IGNORE})
_NAIVE_TS = pa.timestamp("us")

AnyMemRowSet = MemRowSet | IntKeyMemRowSet


class TabletHost(Protocol):
    """What a tablet needs from the DuckDB instance that holds it."""

    @property
    def options(self) -> StorageOptions: ...

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new connection to the instance, for one scan."""
        ...

    def checkpointing_commits(self) -> AbstractContextManager[None]:
        """While inside, a large commit checkpoints its tablet instead of writing DuckDB's WAL."""
        ...

    def close_tablet(self, tablet_id: str) -> None:
        """Detach the tablet (calling its :meth:`DuckDBTabletStore.release`) and forget it."""
        ...

    def note_flush(self) -> None:
        """Count one MemRowSet written to DuckDB (the server's flush metric)."""
        ...


def _shadowed_keys(mrs: AnyMemRowSet, frozen: AnyMemRowSet | None) -> pa.Table:
    """The keys whose DuckDB rows the MemRowSet or the frozen one have replaced."""
    if isinstance(mrs, IntKeyMemRowSet):
        assert frozen is None or isinstance(frozen, IntKeyMemRowSet)
        return mrs.shadowed_keys(frozen)
    assert frozen is None or isinstance(frozen, MemRowSet)
    return mrs.shadowed_keys(frozen)


class PinnedFiles:
    """A tablet's DuckDB file(s), kept byte for byte as they are until :meth:`release`.

    ``snapshot`` names the live files and the index they hold (the store's durable index at
    the pin); ``applied_index`` is how far the store had applied then (the MemRowSet's rows
    beyond the files are in the owner's Raft log); ``locked_s`` is how long the pin held the
    tablet's lock.  Release it as soon as the files are copied: while it lasts, whatever
    writes the file waits (see :meth:`DuckDBTabletStore.pin`).
    """

    def __init__(
        self, snapshot: TabletSnapshot, applied_index: int, locked_s: float, release: Callable[[], None]
    ) -> None:
        self.snapshot = snapshot
        self.applied_index = applied_index
        self.locked_s = locked_s
        self._release: Callable[[], None] | None = release
        self._lock = threading.Lock()

    def release(self) -> None:
        """Let writes to the files go on; a second call does nothing."""
        with self._lock:
            release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> PinnedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


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
        self, host: TabletHost, tablet_id: str, alias: str, path: str, cursor: duckdb.DuckDBPyConnection
    ) -> None:
        self._host = host
        self._tablet_id = tablet_id
        self.alias = alias
        self.path = path
        self._cur = cursor
        self._lock = threading.Lock()
        self._failed: StorageError | None = None
        self._closed = False
        self._rows = f"{alias}.{ROWS}"
        self._schema, self._applied = self._read_meta()
        self._durable = self._applied
        options = host.options
        self._flush_rows = options.flush_threshold_rows
        self._flush_bytes = options.flush_threshold_mb << 20
        self._mrs = self._new_memrowset() if self._flush_rows > 0 else None
        self._mrs_since = 0.0  # monotonic time of the MemRowSet's oldest row
        # A full MemRowSet is frozen and written to DuckDB by a background thread while a new
        # one takes applies (Kudu does the same).
        self._frozen: AnyMemRowSet | None = None
        # Notified when a frozen MemRowSet is written and when the last pin goes.
        self._flush_ended = threading.Condition(self._lock)
        # Pins on the file (see pin): while any lasts, nothing writes the file.
        self._pins = 0
        # Only keys this index cannot rule out are looked up in DuckDB.
        self._disk_keys = self._read_disk_keys() if self._mrs is not None else DiskKeys()

    @property
    def tablet_id(self) -> str:
        return self._tablet_id

    @property
    def schema(self) -> Schema:
        return self._schema

    def applied_index(self) -> int:
        """The last index applied; scans see it.  Beyond :meth:`durable_index` it lives only in
        the MemRowSet."""
        return self._applied

    def durable_index(self) -> int:
        """The last index whose effects are in the DuckDB file: a restart replays the Raft log
        after it."""
        return self._durable

    def memrowset_rows(self) -> int:
        """Rows held in memory: the MemRowSet's and a frozen one's still being flushed."""
        frozen = len(self._frozen) if self._frozen is not None else 0
        return frozen + (len(self._mrs) if self._mrs is not None else 0)

    def memrowset_bytes(self) -> int:
        """Arrow buffer bytes of the rows held in memory (the MemRowSet and a frozen one)."""
        frozen = self._frozen.nbytes if self._frozen is not None else 0
        return frozen + (self._mrs.nbytes if self._mrs is not None else 0)

    def file_size_bytes(self) -> int:
        """Bytes of the tablet's DuckDB file and its WAL on disk."""
        total = 0
        for path in (self.path, self.path + ".wal"):
            try:
                total += os.path.getsize(path)
            except FileNotFoundError:
                pass
        return total

    def wal_size_bytes(self) -> int:
        """Size of this tablet's DuckDB WAL: what a checkpoint would fold into the file."""
        try:
            return os.path.getsize(self.path + ".wal")
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        self._host.close_tablet(self._tablet_id)

    def release(self) -> None:
        """The host's part of closing: wait for a running flush, then close the tablet's cursor.

        Called by :meth:`TabletHost.close_tablet` before it detaches the file; others call
        :meth:`close`.
        """
        with self._lock:
            self._wait_for_frozen()  # the flush thread uses the database being detached
            while self._pins:  # DuckDB may checkpoint the file as it detaches it
                self._flush_ended.wait()
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
            errors = self._apply_in_memory(parts)
            if errors is None:
                errors = self._apply_optimistically(parts, entries[-1].index)
            for row, error in errors.items():
                i = bisect.bisect_right(starts, row) - 1
                results[owners[i]].row_failures.append(RowFailure(row - starts[i], error))
            for r in results:
                r.row_failures.sort(key=lambda e: e.row)
            self._applied = entries[-1].index
            if self._mrs_full():
                # A flush writes the file, so a pinned tablet's MemRowSet grows on, up to twice
                # its threshold, without one; past that applies wait for the pins to go.
                if self._pins and not self._mrs_full(2):
                    return results
                self._wait_for_file()  # back-pressure: one frozen MemRowSet at a time
                self._check_usable()
                if self._mrs_full() and self._frozen is None:
                    self._freeze()
            return results

    def _mrs_full(self, factor: int = 1) -> bool:
        mrs = self._mrs
        return mrs is not None and (len(mrs) >= factor * self._flush_rows or mrs.nbytes >= factor * self._flush_bytes)

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

        self._wait_for_file()  # the planned statements must see every row held in memory; they write the file
        self._check_usable()

        def attempt(careful: bool) -> dict[int, NyalaError]:
            executor = PlanExecutor(self._cur, self._schema, self._rows, self._tablet_id, careful)

            def body() -> dict[int, NyalaError]:
                self._write_memrowset()  # the plan must see the rows held in memory
                return executor.apply_parts(parts)

            return self._transaction(body, index)

        try:
            errors = self._guard("apply", lambda: attempt(False))
        except (Conflict, duckdb.ConstraintException):
            try:
                errors = self._guard("apply", lambda: attempt(True))
            except duckdb.ConstraintException as e:
                raise AssertionError(f"tablet {self._tablet_id}: planned statements broke a key constraint: {e}") from e
        self._flushed(index, [self._keys_of(p.table) for p in parts] if self._mrs is not None else ())
        return errors

    # --- the MemRowSet ----------------------------------------------------------------

    def _new_memrowset(self) -> AnyMemRowSet:
        fields = [
            pa.field(c.name, _NAIVE_TS if pa.types.is_timestamp(c.arrow_type) else c.arrow_type)
            for c in self._schema.columns
        ]
        if self._integer_key:
            return IntKeyMemRowSet(self._schema.key_names[0], pa.schema(fields))
        return MemRowSet(self._schema.key_names, pa.schema(fields))

    @property
    def _integer_key(self) -> bool:
        """Whether the key is one integer column: its keys are then handled as numpy arrays."""
        keys = self._schema.key_columns
        return len(keys) == 1 and keys[0].type.type in INT_BITS

    def _read_disk_keys(self) -> DiskKeys:
        """Index every key in the file, a batch at a time (Python objects for all keys of a
        large tablet at once would take far more memory than the index)."""
        names = self._schema.key_names
        sql = f"SELECT {', '.join(quote(k) for k in names)} FROM {self._rows}"

        def read() -> DiskKeys:
            batches = self._cur.sql(sql).to_arrow_reader(1 << 20)
            if self._integer_key:
                return DiskKeys((b.column(0).to_numpy() for b in batches), integer_keys=True)
            return DiskKeys(key_list(pa.Table.from_batches([b]), names) for b in batches)

        return self._guard("read keys", read)

    def _keys_of(self, table: pa.Table) -> list[Key]:
        key_names = self._schema.key_names
        return key_list(duck_table(table.select(key_names)), key_names)

    def _key_values(self, table: pa.Table) -> IntArray:
        """The keys of ``table``'s rows, in row order, for a tablet keyed by one integer column."""
        return np.asarray(table.column(self._schema.key_names[0]).to_numpy(), np.int64)

    def _apply_in_memory(self, parts: list[Part]) -> dict[int, NyalaError] | None:
        """Apply inserts and whole-row upserts to the MemRowSet, or return None when the group
        needs DuckDB (updates, deletes, partial upserts, a key twice in the group)."""
        mrs = self._mrs
        if mrs is None or not parts:
            return None
        non_key = {c.name for c in self._schema.columns[self._schema.key_column_count :]}
        for part in parts:
            if part.only_op not in _IN_MEMORY_OPS:
                return None
            if part.only_op.base is OpType.UPSERT and not non_key.issubset(part.columns):
                return None
        if isinstance(mrs, IntKeyMemRowSet):
            return self._apply_integer_keys_in_memory(mrs, parts)
        frozen = self._frozen
        assert frozen is None or isinstance(frozen, MemRowSet)
        keys = [self._keys_of(part.table) for part in parts]
        distinct: set[Key] = set().union(*keys)
        if len(distinct) != sum(map(len, keys)):
            return None
        fresh = mrs.not_held(distinct)
        not_frozen = frozen.not_held(fresh) if frozen is not None else fresh
        maybe = self._disk_keys.maybe_held(not_frozen)
        # Rows an upsert replaces below this MemRowSet: in DuckDB, or in the frozen MemRowSet
        # (which will be in DuckDB by the time this one is flushed).
        on_disk = (fresh - not_frozen) | self._guard("probe keys", lambda: self._probe(maybe))
        # No key repeats within the group, so what exists is what existed before it.
        present = (distinct - fresh) | on_disk
        errors: dict[int, NyalaError] = {}
        for part, part_keys in zip(parts, keys, strict=True):
            assert part.only_op is not None
            self._add_part(mrs, part, part.only_op, part_keys, present, on_disk, errors)
        if not self._mrs_since:
            self._mrs_since = time.monotonic()
        return errors

    def _add_part(
        self,
        mrs: MemRowSet,
        part: Part,
        op: OpType,
        keys: list[Key],
        exist: set[Key],
        on_disk: set[Key],
        errors: dict[int, NyalaError],
    ) -> None:
        """Add one part's rows; ``exist`` holds the keys already present, ``on_disk`` those whose
        rows are below the MemRowSet (in DuckDB or in the frozen MemRowSet): upserts shadow them."""
        table = part.table
        if op.base is OpType.UPSERT:
            mrs.add(self._whole_rows(table), keys, on_disk.intersection(keys) if on_disk else ())
            return
        if exist and not exist.isdisjoint(keys):
            present = [k in exist for k in keys]
            if not op.ignores_errors:
                rows = table.column(ROW_COLUMN).to_pylist()
                for row, key, hit in zip(rows, keys, present, strict=True):
                    if hit:
                        shown = key if isinstance(key, tuple) else (key,)
                        errors[row] = AlreadyPresent(f"key {show_key(self._schema, shown)} already present")
            table = table.filter(pa.array([not p for p in present]))
            keys = [k for k, p in zip(keys, present, strict=True) if not p]
        if keys:
            mrs.add(self._whole_rows(table), keys, ())

    def _apply_integer_keys_in_memory(self, mrs: IntKeyMemRowSet, parts: list[Part]) -> dict[int, NyalaError] | None:
        """:meth:`_apply_in_memory` for a tablet keyed by one integer column: the same steps
        with the keys as arrays and masks over them."""
        keys = [self._key_values(part.table) for part in parts]
        every = np.concatenate(keys) if len(keys) > 1 else keys[0]
        if has_repeats(every):
            return None
        in_mrs = mrs.held(every)
        frozen = self._frozen
        assert frozen is None or isinstance(frozen, IntKeyMemRowSet)
        # Rows an upsert replaces below this MemRowSet: in the frozen MemRowSet or in DuckDB.
        on_disk = frozen.held(every) & ~in_mrs if frozen is not None else np.zeros(len(every), np.bool_)
        below = ~(in_mrs | on_disk)
        candidates = every[below]
        maybe = candidates[self._disk_keys.holds(candidates)].tolist()
        found = self._guard("probe keys", lambda: self._probe(maybe))
        if found:
            on_disk |= below & np.isin(every, np.fromiter(found, np.int64, len(found)))
        # No key repeats within the group, so what exists is what existed before it.
        errors: dict[int, NyalaError] = {}
        start = 0
        for part, part_keys in zip(parts, keys, strict=True):
            assert part.only_op is not None
            mine = slice(start, start + len(part_keys))
            self._add_integer_key_part(mrs, part, part.only_op, part_keys, in_mrs[mine], on_disk[mine], errors)
            start = mine.stop
        if not self._mrs_since:
            self._mrs_since = time.monotonic()
        return errors

    def _add_integer_key_part(
        self,
        mrs: IntKeyMemRowSet,
        part: Part,
        op: OpType,
        keys: IntArray,
        in_mrs: npt.NDArray[np.bool_],
        on_disk: npt.NDArray[np.bool_],
        errors: dict[int, NyalaError],
    ) -> None:
        """:meth:`_add_part` with the keys as an array and masks for which keys the MemRowSet
        holds and which are below it (in the frozen MemRowSet or in DuckDB)."""
        table = part.table
        if op.base is OpType.UPSERT:
            mrs.add(self._whole_rows(table), keys, in_mrs, keys[on_disk] if on_disk.any() else None)
            return
        exist = in_mrs | on_disk
        if exist.any():
            if not op.ignores_errors:
                rows = table.column(ROW_COLUMN).to_numpy()[exist].tolist()
                for row, key in zip(rows, keys[exist].tolist(), strict=True):
                    errors[row] = AlreadyPresent(f"key {show_key(self._schema, (key,))} already present")
            keep = ~exist
            table = table.filter(pa.array(keep))
            keys = keys[keep]
        if len(keys):
            mrs.add(self._whole_rows(table), keys, np.zeros(len(keys), np.bool_))

    def _whole_rows(self, table: pa.Table) -> pa.Table:
        """Every schema column in order (defaults for unset ones), in the MemRowSet's form."""
        mrs = self._mrs
        assert mrs is not None
        whole = duck_table(pa.table(whole_row_columns(self._schema, table), names=self._schema.names))
        return pa.Table.from_arrays(whole.columns, schema=mrs.schema)

    def _probe(self, keys: list[Key]) -> set[Key]:
        """Which of ``keys`` DuckDB holds (one query)."""
        if not keys:
            return set()
        mrs = self._mrs
        assert mrs is not None
        key_names = self._schema.key_names
        key_fields = [mrs.schema.field(k) for k in key_names]
        columns = [keys] if len(key_names) == 1 else [list(c) for c in zip(*keys, strict=True)]
        _p = pa.table([pa.array(c, f.type) for c, f in zip(columns, key_fields, strict=True)], names=key_names)
        cols = ", ".join(f"r.{quote(k)}" for k in key_names)
        join = " AND ".join(f"r.{quote(k)} = _p.{quote(k)}" for k in key_names)
        sql = f"SELECT {cols} FROM {self._rows} AS r, _p WHERE {join}"
        found = self._cur.sql(sql).to_arrow_table()  # finds ``_p`` in this frame
        return set(key_list(found.rename_columns(key_names), key_names))

    def _write_memrowset(self) -> None:
        """Inside the caller's transaction: write the MemRowSet to DuckDB."""
        if self._mrs is not None:
            self._write_rows(self._cur, self._mrs)

    def _write_rows(self, cursor: duckdb.DuckDBPyConnection, mrs: AnyMemRowSet) -> None:
        """Inside ``cursor``'s transaction: replace the shadowed DuckDB rows and insert the
        MemRowSet's rows."""
        if not len(mrs):
            return
        key_names = self._schema.key_names
        if mrs.has_shadowed:
            _s = mrs.shadowed_keys()
            join = " AND ".join(f"r.{quote(k)} = _s.{quote(k)}" for k in key_names)
            cursor.execute(f"DELETE FROM {self._rows} AS r USING _s WHERE {join}")
        _m = mrs.live_rows()
        names = ", ".join(quote(c) for c in self._schema.names)
        cursor.execute(f"INSERT INTO {self._rows} ({names}) SELECT * FROM _m")

    # --- the frozen MemRowSet ---------------------------------------------------------

    def _freeze(self) -> None:
        """Hand the full MemRowSet to a flush thread and start a new one (lock held, nothing frozen)."""
        mrs = self._mrs
        assert mrs is not None
        assert self._frozen is None
        # A cursor of the tablet's own connection: the host's lock is not needed (and is
        # taken before this one when the host closes).
        cursor = self._cur.cursor()
        self._frozen = mrs
        self._mrs, self._mrs_since = self._new_memrowset(), 0.0
        thread = threading.Thread(
            target=self._flush_frozen, args=(cursor, mrs, self._applied), name=f"flush-{self._tablet_id}", daemon=True
        )
        thread.start()

    def _flush_frozen(self, cursor: duckdb.DuckDBPyConnection, frozen: AnyMemRowSet, index: int) -> None:
        """The flush thread: write the frozen rows while applies and scans go on, then commit
        and retire them under the lock, so that a scan sees them either here or in DuckDB."""
        try:
            cursor.execute("BEGIN")
            self._write_rows(cursor, frozen)
            with self._lock:
                with self._host.checkpointing_commits():
                    cursor.execute(f"UPDATE {self.alias}.{META} SET applied_index = {int(index)}; COMMIT")
                cursor.close()
                self._disk_keys.add(frozen.keys())
                self._frozen = None
                self._durable = index
                self._flush_ended.notify_all()
            self._host.note_flush()
        except BaseException as e:  # no caller to tell: the tablet fails, the Raft log keeps the rows
            with self._lock:
                self._failed = storage_error(self._tablet_id, "flush", e)
                with contextlib.suppress(duckdb.Error):
                    cursor.close()
                self._flush_ended.notify_all()

    def _wait_for_frozen(self) -> None:
        """Until the frozen MemRowSet is in DuckDB (lock held; released while waiting)."""
        while self._frozen is not None and self._failed is None:
            self._flush_ended.wait()

    def _wait_for_file(self) -> None:
        """Until nothing else may write the file: no frozen MemRowSet being written, no pin
        (lock held; released while waiting)."""
        while (self._frozen is not None or self._pins) and self._failed is None:
            self._flush_ended.wait()

    def _wait_for_unpinned(self) -> None:
        while self._pins and self._failed is None:
            self._flush_ended.wait()

    def _flushed(self, index: int, other_keys: Sequence[Sequence[Key]] = ()) -> None:
        """After a commit that wrote the MemRowSet (and maybe ``other_keys``) to DuckDB."""
        mrs = self._mrs
        if mrs is None:
            self._durable = index
            return
        self._disk_keys.add(mrs.keys())
        for keys in other_keys:
            self._disk_keys.add(keys)
        mrs.clear()
        self._mrs_since = 0.0
        self._durable = index

    def _flush_locked(self) -> None:
        self._wait_for_file()
        self._check_usable()
        if self._durable == self._applied:
            return
        with self._host.checkpointing_commits():
            self._guard("flush", lambda: self._transaction(self._write_memrowset, self._applied))
        self._flushed(self._applied)
        self._host.note_flush()

    def flush(self, older_than_s: float = 0.0) -> bool:
        """Write the MemRowSet to DuckDB in one transaction when its oldest row is at least
        ``older_than_s`` old; True when it did.  Afterwards ``durable_index() == applied_index()``."""
        with self._lock:
            self._wait_for_file()  # a frozen MemRowSet's rows become durable when it is written
            self._check_usable()
            if self._durable == self._applied:
                return False
            if older_than_s and self._mrs_since and time.monotonic() - self._mrs_since < older_than_s:
                return False
            self._flush_locked()
            return True

    def alter_schema(self, new_schema: Schema, index: int) -> None:
        """Move to ``new_schema`` (columns matched by id) in one transaction with ``index``."""
        with self._lock:
            self._check_usable()
            self._check_indices([index])
            self._wait_for_file()  # a frozen MemRowSet's rows are in the old schema
            self._check_usable()
            statements = alter_statements(self._rows, self._schema, new_schema)

            def body() -> None:
                self._write_memrowset()  # in the old schema, before the columns change
                for sql, params in statements:
                    self._cur.execute(sql, params)
                self._cur.execute(f"UPDATE {self.alias}.{META} SET schema = ?", [new_schema.to_json().decode()])

            self._guard("alter schema", lambda: self._transaction(body, index))
            self._flushed(index)
            self._schema, self._applied = new_schema, index
            if self._mrs is not None:
                self._mrs = self._new_memrowset()

    # --- maintenance ------------------------------------------------------------------

    def checkpoint(self) -> bool:
        """Fold this tablet's DuckDB WAL into its file (bounds restart time, frees space).

        Returns False when DuckDB defers it because other transactions are active (it does
        so after a schema change while older scans are open); the caller retries later.
        """
        with self._lock:
            self._wait_for_unpinned()
            self._check_usable()
            return self._checkpoint_locked()

    def _checkpoint_locked(self) -> bool:
        try:
            self._guard("checkpoint", lambda: self._cur.execute(f"CHECKPOINT {self.alias}"))
        except duckdb.TransactionException:
            return False
        return True

    def pin(self) -> PinnedFiles:
        """Keep the tablet's DuckDB file(s) byte for byte as they are until the pin is released,
        without stopping inserts and upserts: a tablet copy source copies them meanwhile.

        Under the tablet's lock: wait until a frozen MemRowSet is written (the flush thread
        writes row groups into the file before it commits; applies go on meanwhile), fold
        DuckDB's WAL into the file when it holds anything (left as it is when DuckDB defers
        the checkpoint: the file and its WAL are as consistent), and count the pin.  Nothing
        is flushed: the files hold the tablet as of :meth:`durable_index`, and the MemRowSet's
        rows after it are in the owner's Raft log, which a copy carries (Kudu copies a tablet
        the same way, without its MemRowSet).

        While any pin lasts, nothing writes the file, because all that does holds the lock and
        waits for the pins first: a full MemRowSet is not frozen (it grows on up to twice its
        threshold, then applies wait), applies that need DuckDB (updates, deletes, partial
        upserts), flushes, checkpoints, schema changes, snapshots and closing wait.  Inserts
        and whole-row upserts into the MemRowSet, key probes and scans only read the file, and
        DuckDB writes a database file only when it commits to it, checkpoints it or detaches
        it.  So writes to the tablet wait only for the checkpoint under the lock here, and
        ``tests/unit/storage/test_store.py`` checks the bytes stay the same under all of that.
        """
        with self._lock:
            self._wait_for_frozen()
            self._check_usable()
            started = time.perf_counter()
            # Under another pin nothing has committed since it checkpointed (or could not).
            if not self._pins and self.wal_size_bytes() > 0:
                self._checkpoint_locked()
            files = tuple(p for p in (self.path, self.path + ".wal") if os.path.exists(p) and os.path.getsize(p) > 0)
            self._pins += 1
            snapshot = TabletSnapshot(self._tablet_id, self._durable, self._schema, files)
            return PinnedFiles(snapshot, self._applied, time.perf_counter() - started, self._unpin)

    def _unpin(self) -> None:
        with self._lock:
            self._pins -= 1
            if not self._pins:
                self._flush_ended.notify_all()

    def snapshot(self, dest_dir: str, *, durable: bool = True) -> TabletSnapshot:
        """Copy the tablet's file(s) into ``dest_dir``; writes wait meanwhile.

        The MemRowSet is flushed and the file checkpointed first when DuckDB allows;
        otherwise the file and its WAL are copied as they are, which is as consistent (every
        commit is in the WAL) but longer to open.  The copy runs inside the kernel
        (``copy_file_range``).  ``durable=False`` skips the fsyncs: for a throwaway staging
        copy (a tablet copy source's), so that writes wait only for the copy into the page
        cache, never for the disk.
        """
        with self._lock:
            self._check_usable()
            self._flush_locked()
            self._checkpoint_locked()
            os.makedirs(dest_dir, exist_ok=True)
            files = []
            try:
                for src in (self.path, self.path + ".wal"):
                    if os.path.exists(src) and os.path.getsize(src) > 0:
                        dst = os.path.join(dest_dir, os.path.basename(src))
                        if durable:
                            copy_durably(src, dst)
                        else:
                            copy_file(src, dst)
                        files.append(dst)
                if durable:
                    fsync_dir(dest_dir)
            except OSError as e:
                raise IOFailure(f"tablet {self._tablet_id}: cannot write snapshot to {dest_dir}: {e}") from e
            return TabletSnapshot(self._tablet_id, self._applied, self._schema, tuple(files))

    # --- reads ------------------------------------------------------------------------

    def scan(self, spec: ScanSpec) -> DuckDBScanner:
        while True:
            scanner = self._try_scan(spec)
            if scanner is not None:
                return scanner

    def _try_scan(self, spec: ScanSpec) -> DuckDBScanner | None:
        """A scanner, or None when the schema changed while it started (bind again)."""
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
        cursor = self._host.cursor()
        try:
            reader = self._guard("scan", lambda: self._start_scan(cursor, spec, schema, projection, where, params))
        except BaseException:
            cursor.close()
            raise
        if reader is None:
            cursor.close()
            return None
        return DuckDBScanner(self._guard, cursor, reader, pa.schema(fields))

    def _start_scan(
        self,
        cursor: duckdb.DuckDBPyConnection,
        spec: ScanSpec,
        schema: Schema,
        projection: list[str],
        where: str,
        params: list[object],
    ) -> pa.RecordBatchReader | None:
        if not self.memrowset_rows():
            # Everything applied so far is in DuckDB; rows a later flush adds are a newer
            # consistent state, which a scan starting now may see.
            return self._run_scan(cursor, spec, schema, projection, self._rows, where, params)
        with self._lock:
            if self._schema is not schema:  # the rows in memory may have columns this scan lacks
                return None
            mrs, frozen = self._mrs, self._frozen
            if mrs is None or not self.memrowset_rows():  # flushed meanwhile
                return self._run_scan(cursor, spec, schema, projection, self._rows, where, params)
            # DuckDB's snapshot and the rows in memory must be of the same moment: pin the
            # snapshot with a first read before a flush can commit.
            cursor.execute("BEGIN")
            cursor.execute(f"SELECT 1 FROM {self._rows} LIMIT 0").fetchall()
            layers = [self._scan_layer(cursor, "rows", self._rows, _shadowed_keys(mrs, frozen))]
            if frozen is not None:
                # The frozen rows an upsert has replaced since are shadowed by the new MemRowSet.
                cursor.register("_nyala_frozen", frozen.live_rows())
                layers.append(self._scan_layer(cursor, "frozen", "_nyala_frozen", mrs.shadowed_keys()))
            cursor.register("_nyala_mrs", mrs.live_rows())
            layers.append(f"SELECT {', '.join(map(quote, schema.names))} FROM _nyala_mrs")
        union = f"({' UNION ALL '.join(layers)}) AS nyala_rows"
        return self._run_scan(cursor, spec, schema, projection, union, where, params)

    def _scan_layer(self, cursor: duckdb.DuckDBPyConnection, name: str, source: str, hidden: pa.Table) -> str:
        """``SELECT`` of every column of ``source`` but the rows whose keys are in ``hidden``."""
        select = f"SELECT {', '.join(map(quote, self._schema.names))} FROM {source}"
        if not hidden.num_rows:
            return select
        cursor.register(f"_nyala_hidden_{name}", hidden)
        join = " AND ".join(f"r.{quote(k)} = h.{quote(k)}" for k in self._schema.key_names)
        return f"{select} AS r ANTI JOIN _nyala_hidden_{name} AS h ON {join}"

    @staticmethod
    def _run_scan(
        cursor: duckdb.DuckDBPyConnection,
        spec: ScanSpec,
        schema: Schema,
        projection: list[str],
        source: str,
        where: str,
        params: list[object],
    ) -> pa.RecordBatchReader:
        sql = f"SELECT {', '.join(quote(c) for c in projection)} FROM {source}{where}"
        if spec.ordered:
            sql += " ORDER BY " + ", ".join(quote(k) for k in schema.key_names)
        if spec.limit is not None:
            sql += " LIMIT ?"
            params.append(spec.limit)
        return cursor.sql(sql, params=params).to_arrow_reader(spec.batch_size_rows)
