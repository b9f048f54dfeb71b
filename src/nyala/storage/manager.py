"""The process-wide DuckDB instance and the tablets attached to it."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator, Sequence

import duckdb

from nyala.errors import AlreadyPresent, IllegalState, InvalidArgument, IOFailure, NotFound
from nyala.files import copy_durably, fsync_dir, fsync_file
from nyala.schema import Schema

from .options import StorageOptions
from .sql import quote
from .store import DuckDBTabletStore, create_tables, storage_error

__all__ = ["TabletStoreManager"]

_TABLET_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
# Below what DuckDB estimates for a full MemRowSet's commit, so that it checkpoints.  DuckDB's
# estimate ignores string lengths (measured: a commit of 5,000 rows of three columns including
# 100-byte strings stayed below 256 KiB, 10,000 passed it; 20,000 stayed below 1 MiB).
_FLUSH_CHECKPOINT_THRESHOLD = "256KiB"


class TabletStoreManager:
    """Owns the DuckDB instance; creates, opens, copies and drops the tablets in ``data_dir``.

    Thread-safe.  Each tablet is the file ``<data_dir>/<tablet_id>.duckdb``, attached under
    the alias ``t_<tablet_id>``.
    """

    def __init__(self, data_dir: str, options: StorageOptions | None = None) -> None:
        self.options = options or StorageOptions()
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        config: dict[str, str | bool | int | float | list[str]] = {
            "threads": str(self.options.threads),
            "checkpoint_threshold": f"{max(1, self.options.storage_checkpoint_threshold_bytes >> 20)}MiB",
            "temp_directory": os.path.join(self.data_dir, ".duckdb_tmp"),
        }
        if self.options.storage_memory_limit_bytes:
            config["memory_limit"] = f"{max(1, self.options.storage_memory_limit_bytes >> 20)}MiB"
        self._conn = duckdb.connect(":memory:", config=config)
        self._lock = threading.Lock()
        # ``checkpointing_commits``: how many threads are inside, and the connection that
        # flips the (instance-wide) threshold; its lock is only ever taken last.
        self._threshold = config["checkpoint_threshold"]
        self._threshold_lock = threading.Lock()
        self._threshold_cursor = self._conn.cursor()
        self._checkpointing = 0
        self._tablets: dict[str, DuckDBTabletStore] = {}
        self._closed = False
        #: MemRowSets written to DuckDB by every tablet (flush threads and maintenance).
        self.flushes = 0
        self._flushes_lock = threading.Lock()

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

    def note_flush(self) -> None:
        with self._flushes_lock:  # flush threads of several tablets may finish at once
            self.flushes += 1

    @contextlib.contextmanager
    def checkpointing_commits(self) -> Iterator[None]:
        """While inside, a large commit checkpoints its tablet instead of writing DuckDB's WAL.

        A MemRowSet flush commits up to 100,000 rows or more.  DuckDB would write them to its WAL
        (~220 ns a row, measured) and the next checkpoint would write them again, compressed;
        when a commit's WAL would pass ``checkpoint_threshold``, DuckDB checkpoints instead and
        skips the WAL (the data are as durable: the checkpoint fsyncs).  The threshold stays
        high otherwise, because a small UPDATE commit can estimate itself above any low
        threshold and would then checkpoint every time (docs/storage.md).  The threshold is
        instance-wide, so a commit of another tablet made meanwhile may checkpoint too: that
        only brings forward a checkpoint its tablet would take later anyway.
        """
        self._set_threshold(+1)
        try:
            yield
        finally:
            self._set_threshold(-1)

    def _set_threshold(self, step: int) -> None:
        with self._threshold_lock:
            self._checkpointing += step
            first_in = step > 0 and self._checkpointing == 1
            last_out = step < 0 and self._checkpointing == 0
            if self._closed or not (first_in or last_out):
                return
            value = _FLUSH_CHECKPOINT_THRESHOLD if first_in else self._threshold
            self._threshold_cursor.execute(f"SET checkpoint_threshold = '{value}'")

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
                create_tables(self._conn, alias, tablet_id, schema)
            except BaseException:
                self._conn.execute(f"DETACH {alias}")
                remove_tablet_files(path)
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
                raise storage_error(tablet_id, "cannot open", e) from e
            try:
                return self._register(tablet_id, alias, path)
            except BaseException:
                self._conn.execute(f"DETACH {alias}")
                raise

    def open_from_snapshot(self, tablet_id: str, files: Sequence[str]) -> DuckDBTabletStore:
        """Install files made by :meth:`DuckDBTabletStore.snapshot` as tablet ``tablet_id``."""
        self.install_snapshot(tablet_id, files)
        return self.open_tablet(tablet_id)

    def install_snapshot(self, tablet_id: str, files: Sequence[str], *, move: bool = False) -> None:
        """Put the files of a snapshot in place as tablet ``tablet_id``'s, durably, without opening it.

        ``move`` renames the files instead of copying them (they must be on this filesystem
        and are consumed): a tablet copy's download is installed that way.
        """
        path = self.path_of(tablet_id)
        if os.path.exists(path) or tablet_id in self._tablets:
            raise AlreadyPresent(f"tablet {tablet_id} already exists; delete it before copying it in")
        main = [f for f in files if f.endswith(".duckdb")]
        if len(main) != 1 or len(files) > 2:
            raise InvalidArgument(f"a tablet snapshot is one .duckdb file and maybe its WAL, got {list(files)}")
        wal = [f for f in files if f.endswith(".duckdb.wal")]
        if len(main) + len(wal) != len(files):
            raise InvalidArgument(f"a tablet snapshot is one .duckdb file and maybe its WAL, got {list(files)}")
        try:
            # Copy under temporary names, then rename: a crash mid-copy leaves no tablet file.
            # A stale WAL of an earlier replica must go, or DuckDB would replay it on this copy.
            # The WAL goes in first: a crash between the two renames leaves a WAL without a
            # file, which remove_tablet_files clears; never a file with a missing WAL.
            remove_tablet_files(path)
            for src, dst in ((w, path + ".wal") for w in wal):
                self._place(src, dst, move)
            self._place(main[0], path, move)
            fsync_dir(self.data_dir)
        except OSError as e:
            remove_tablet_files(path)
            raise IOFailure(f"tablet {tablet_id}: cannot install snapshot: {e}") from e

    @staticmethod
    def _place(src: str, dst: str, move: bool) -> None:
        if move:
            fsync_file(src)  # the rename must not outlive the data it names
            os.replace(src, dst)
        else:
            copy_durably(src, dst + ".copying")
            os.replace(dst + ".copying", dst)

    def close_tablet(self, tablet_id: str) -> None:
        with self._lock:
            store = self._tablets.pop(tablet_id, None)
            if store is not None:
                store.release()
                self._conn.execute(f"DETACH {store.alias}")

    def delete_tablet(self, tablet_id: str) -> None:
        """Detach the tablet and remove its files."""
        path = self.path_of(tablet_id)
        self.close_tablet(tablet_id)
        remove_tablet_files(path)
        fsync_dir(self.data_dir)

    def close(self) -> None:
        with self._lock:
            for store in self._tablets.values():
                store.release()
            self._tablets.clear()
            with self._threshold_lock:
                if self._closed:
                    return
                self._closed = True
            self._threshold_cursor.close()
            self._conn.close()

    def __enter__(self) -> TabletStoreManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _register(self, tablet_id: str, alias: str, path: str) -> DuckDBTabletStore:
        store = DuckDBTabletStore(self, tablet_id, alias, path, self._conn.cursor())
        self._tablets[tablet_id] = store
        return store


def remove_tablet_files(path: str) -> None:
    """Remove a tablet's file, its DuckDB WAL and any copy left half-installed."""
    for p in (path, path + ".wal", path + ".copying", path + ".wal.copying"):
        if os.path.exists(p):
            os.remove(p)


def _alias(tablet_id: str) -> str:
    return quote("t_" + tablet_id)


def _string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
