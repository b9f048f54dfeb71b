"""The sys catalog's durable state machine: catalog entries in a DuckDB tablet (Kudu's sys catalog).

The catalog is stored as a tablet of ``nyala.storage`` with the fixed schema
``(entry_type int8, entry_id string, value binary)``, primary key ``(entry_type, entry_id)``,
like Kudu's sys catalog tablet.  Each committed Raft entry is one ``CatalogWritePB``; applying
a batch of them turns every mutation into an UPSERT (a value) or a DELETE_IGNORE (an empty
value) row operation and hands the whole batch to the store, which writes the rows and the
applied Raft index in ONE DuckDB transaction.  After a crash the store therefore holds exactly
the entries up to its applied index and the replica replays the Raft log after it.

The state machine also remembers the cluster id as entries carrying it are applied, so every
master (followers too) can answer ConnectToMaster with it, hands every applied write to
:attr:`on_applied` (the master's follower-read view), and hands the tablet servers a
write unregisters (``CatalogWritePB.unregistered_tservers``) to :attr:`on_unregistered`, so
every master forgets them from its in-memory registry, a master that was away included.
Master address book entries (``MASTER_ENTRY``) go to :attr:`on_masters` the same way, so
every master learns where a newly added master listens before it replicates to it.

:meth:`SysCatalogStore.snapshot` copies the store's file for a tablet copy of the sys
catalog (a master joining the cluster, ``nyala.master.catalog_copy``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
from google.protobuf.message import DecodeError

from nyala.catalog import CatalogState, state_from_entries
from nyala.consensus.core import LogEntry
from nyala.errors import Corruption, NotFound
from nyala.proto import master_pb2 as mpb
from nyala.schema import OP_COLUMN, ColumnSchema, OpType, Schema, encode_row_operations
from nyala.storage import ApplyEntry, DuckDBTabletStore, ScanSpec, StorageOptions, TabletSnapshot, TabletStoreManager

__all__ = ["SYS_CATALOG_ID", "SysCatalogStore", "catalog_schema"]

log = logging.getLogger("nyala.master")

#: The sys catalog's tablet id and Raft group id (Kudu's: 32 zeros).
SYS_CATALOG_ID = "0" * 32


def catalog_schema() -> Schema:
    return Schema.of(
        [
            ColumnSchema.of("entry_type", "int8", nullable=False),
            ColumnSchema.of("entry_id", "string", nullable=False),
            ColumnSchema.of("value", "binary", nullable=False),
        ],
        ["entry_type", "entry_id"],
    )


class SysCatalogStore:
    """The sys catalog tablet as a Raft state machine (``nyala.consensus.runtime.StateMachine``)."""

    def __init__(self, manager: TabletStoreManager, store: DuckDBTabletStore, checkpoint_wal_bytes: int) -> None:
        self.checkpoint_wal_bytes = checkpoint_wal_bytes
        self._manager = manager
        self._store = store
        self._lock = threading.Lock()  # apply runs on the apply pool, loads on another thread
        self.cluster_id = ""
        #: Called on the apply thread, after the write is stored, with the uuids of the tablet
        #: servers that the applied writes unregister.
        self.on_unregistered: Callable[[list[str]], None] | None = None
        #: Called on the apply thread, after they are stored, with the writes applied, in log
        #: order (a follower's catalog view is folded from them).
        self.on_applied: Callable[[list[mpb.CatalogWritePB]], None] | None = None
        #: Called on the apply thread, after the write is stored, with the master address book
        #: entries the applied writes set (uuid -> entry).
        self.on_masters: Callable[[dict[str, mpb.SysMasterEntryPB]], None] | None = None

    @classmethod
    def open(cls, directory: Path, *, checkpoint_wal_bytes: int = 16 << 20) -> SysCatalogStore:
        """Open the catalog tablet in ``directory``, creating it empty on first start."""
        # One thread and a small buffer pool: the catalog is small, and DuckDB would take 80% of RAM.
        # No MemRowSet: catalog writes are few, and each must be durable once applied.
        options = StorageOptions(storage_threads=1, storage_memory_limit_bytes=256 << 20, flush_threshold_rows=0)
        manager = TabletStoreManager(str(directory), options)
        try:
            try:
                store = manager.open_tablet(SYS_CATALOG_ID)
            except NotFound:
                store = manager.create_tablet(SYS_CATALOG_ID, catalog_schema(), small=True)
            if store.schema != catalog_schema():
                raise Corruption(f"sys catalog in {directory} has schema {store.schema!r}, not the catalog's")
            catalog = cls(manager, store, checkpoint_wal_bytes)
            catalog.cluster_id = catalog.load().cluster_id
            return catalog
        except BaseException:
            manager.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._manager.close()

    # -- StateMachine ------------------------------------------------------------------------

    def applied_index(self) -> int:
        return self._store.durable_index()  # no MemRowSet here: every apply is durable

    def apply(self, entries: Sequence[LogEntry]) -> list[None]:
        """Apply committed catalog writes in one store transaction (rows + applied index)."""
        batch = []
        cluster_id = ""
        unregistered: list[str] = []
        writes = []
        masters: dict[str, mpb.SysMasterEntryPB] = {}
        for entry in entries:
            write = _decode_write(entry)
            writes.append(write)
            batch.append(ApplyEntry(entry.index, self._row_operations(write)))
            unregistered.extend(write.unregistered_tservers)
            for m in write.mutations:
                if m.entry_type == mpb.CLUSTER_ID and m.value:
                    cluster_id = _cluster_id(m.value)
                elif m.entry_type == mpb.MASTER_ENTRY and m.value:
                    masters[m.entry_id] = _master_entry(m.value)
        with self._lock:
            results = self._store.apply(batch)
            for result in results:
                if result.error is not None or result.row_failures:
                    raise AssertionError(f"sys catalog entry {result.index} did not apply: {result}")
            if self._store.wal_size_bytes() > self.checkpoint_wal_bytes:
                self._store.checkpoint()
        if cluster_id:
            self.cluster_id = cluster_id
        if unregistered and self.on_unregistered is not None:
            self.on_unregistered(unregistered)
        if self.on_applied is not None:
            self.on_applied(writes)
        if masters and self.on_masters is not None:
            self.on_masters(masters)
        return [None] * len(entries)

    def _row_operations(self, write: mpb.CatalogWritePB) -> bytes:
        # One row per (type, id), the last mutation winning, so a batch never repeats a key.
        last: dict[tuple[int, str], bytes] = {}
        for m in write.mutations:
            last[(m.entry_type, m.entry_id)] = m.value
        ops = [int(OpType.UPSERT if value else OpType.DELETE_IGNORE) for value in last.values()]
        batch = pa.record_batch(
            {
                OP_COLUMN: pa.array(ops, pa.int8()),
                "entry_type": pa.array([k[0] for k in last], pa.int8()),
                "entry_id": pa.array([k[1] for k in last], pa.string()),
                "value": pa.array(list(last.values()), pa.binary()),
            }
        )
        return encode_row_operations(batch)

    # -- reading -------------------------------------------------------------------------

    def snapshot(self, directory: Path) -> TabletSnapshot:
        """Copy the store's file(s) into ``directory`` (not synced: a tablet copy's staging)."""
        with self._lock:
            return self._store.snapshot(str(directory), durable=False)

    def load(self) -> CatalogState:
        """Every stored entry folded into a fresh :class:`CatalogState` (a leader's rebuild)."""
        with self._lock, self._store.scan(ScanSpec()) as scanner:
            table = scanner.read_all()
        mutations = [
            mpb.CatalogMutationPB(entry_type=t, entry_id=i, value=v)
            for t, i, v in zip(
                table.column("entry_type").to_pylist(),
                table.column("entry_id").to_pylist(),
                table.column("value").to_pylist(),
                strict=True,
            )
        ]
        return state_from_entries(mutations)


def _decode_write(entry: LogEntry) -> mpb.CatalogWritePB:
    write = mpb.CatalogWritePB()
    try:
        write.ParseFromString(entry.payload)
    except DecodeError as e:
        raise Corruption(f"sys catalog log entry {entry.index} is not a catalog write: {e}") from e
    return write


def _master_entry(value: bytes) -> mpb.SysMasterEntryPB:
    entry = mpb.SysMasterEntryPB()
    try:
        entry.ParseFromString(value)
    except DecodeError as e:
        raise Corruption(f"master entry does not parse: {e}") from e
    return entry


def _cluster_id(value: bytes) -> str:
    entry = mpb.SysClusterIdEntryPB()
    try:
        entry.ParseFromString(value)
    except DecodeError as e:
        raise Corruption(f"cluster id entry does not parse: {e}") from e
    return entry.cluster_id
