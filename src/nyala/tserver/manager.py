"""The tablets of one server: creation, bootstrap, deletion with tombstones, shutdown.

On-disk layout under the server's data directory::

    tablets/<tablet_id>/tablet_meta.json   metadata (see :mod:`.metadata`)
    tablets/<tablet_id>/cmeta              consensus metadata (term, vote, committed config)
    tablets/<tablet_id>/wal/               the tablet's write-ahead log
    stores/<tablet_id>.duckdb              the tablet's rows, ATTACHed to the one DuckDB instance

Creation writes the metadata (CREATING) first, then the store, then the Raft replica
(consensus metadata and WAL), then flips the metadata to READY.  Deletion closes the replica
and writes TOMBSTONED before deleting the store and the WAL; the consensus metadata stays, so
the tablet is still reported (as TOMBSTONED) and can be recognised.  Startup finishes any
interrupted creation or deletion, then bootstraps every READY tablet: open the store (its
applied index), open the Raft replica (which replays the WAL after that index), RUNNING.  A
tablet that cannot open is FAILED with its error; the others carry on.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from nyala.consensus.core import RaftConfig
from nyala.consensus.runtime import ConsensusMetadata, RaftReplica, RaftTransport, ReplicaOptions
from nyala.consensus.runtime.cmeta import CMETA_FILE
from nyala.errors import Aborted, AlreadyPresent, NotFound, NyalaError
from nyala.proto import tserver_pb2 as tpb
from nyala.storage import DuckDBTabletStore, StorageOptions, TabletStoreManager
from nyala.tserver.metadata import META_FILE, TABLET_ID_PATTERN, DataState, MetadataFile, TabletMetadata
from nyala.tserver.result_tracker import ResultTracker
from nyala.tserver.state_machine import TabletStateMachine
from nyala.tserver.tablet import TabletReplica

__all__ = ["TabletManager"]

log = logging.getLogger("nyala.tserver")
_FLUSHABLE = frozenset({tpb.RUNNING, tpb.STOPPING})

TABLETS_DIR = "tablets"
STORES_DIR = "stores"
WAL_DIR = "wal"


class TabletManager:
    """Creates, bootstraps, deletes and closes this server's tablet replicas."""

    def __init__(
        self,
        root: Path,
        uuid: str,
        transport: RaftTransport,
        executor: Executor,
        replica_options: ReplicaOptions,
        storage_options: StorageOptions,
        new_tracker: Callable[[], ResultTracker] = ResultTracker,
    ) -> None:
        self.uuid = uuid
        self._new_tracker = new_tracker
        self._dir = root / TABLETS_DIR
        self._dir.mkdir(parents=True, exist_ok=True)
        self.stores = TabletStoreManager(str(root / STORES_DIR), storage_options)
        self._transport = transport
        self._executor = executor
        self._replica_options = replica_options
        self._tablets: dict[str, TabletReplica] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._loop = asyncio.get_running_loop()
        #: Tablet directories whose metadata could not be read at startup, with the error.
        self.unreadable: dict[str, str] = {}
        #: Called (on the event loop) when a tablet's state, role, leader, config or schema changed.
        self.on_change: Callable[[], None] = lambda: None

    # -- lookups ----------------------------------------------------------------------------

    def get(self, tablet_id: str) -> TabletReplica:
        tablet = self._tablets.get(tablet_id)
        if tablet is None:
            raise NotFound(f"tablet {tablet_id!r} is not hosted on this server")
        return tablet

    def tablets(self) -> list[TabletReplica]:
        return list(self._tablets.values())

    def _lock(self, tablet_id: str) -> asyncio.Lock:
        return self._locks.setdefault(tablet_id, asyncio.Lock())

    def _changed(self) -> None:
        self.on_change()

    def _changed_from_thread(self) -> None:
        self._loop.call_soon_threadsafe(self._changed)

    # -- startup ------------------------------------------------------------------------------

    async def open_all(self) -> None:
        """Load every tablet directory, finish interrupted work, then bootstrap each tablet."""
        directories = await asyncio.to_thread(lambda: sorted(p for p in self._dir.iterdir() if p.is_dir()))
        for directory in directories:
            if not TABLET_ID_PATTERN.match(directory.name):
                log.warning("ignoring %s: not a tablet directory", directory)
                continue
            tablet = await asyncio.to_thread(self._load, directory)
            if tablet is not None:
                self._tablets[tablet.tablet_id] = tablet
        await asyncio.to_thread(self._remove_orphan_stores)
        self._changed()
        for tablet in self.tablets():
            if tablet.state == tpb.BOOTSTRAPPING:
                async with self._lock(tablet.tablet_id):
                    await self._bootstrap(tablet)
        log.info("bootstrapped %d tablets", len(self._tablets))

    def _load(self, directory: Path) -> TabletReplica | None:
        try:
            meta = TabletMetadata.load(directory)
        except NotFound:
            log.warning("removing %s: a tablet creation that never finished", directory)
            self._remove_files(directory.name, directory)
            return None
        except NyalaError as e:
            # Its files stay untouched for an operator to look at; it is not served.
            log.error("cannot load tablet in %s: %s", directory, e)
            self.unreadable[directory.name] = str(e)
            return None
        if meta.data_state is DataState.CREATING:
            if not (directory / CMETA_FILE).exists():
                log.warning("removing %s: a tablet creation that never finished", directory)
                self._remove_files(meta.tablet_id, directory)
                return None
            meta = meta.with_state(DataState.READY)
            meta.save(directory)
        tablet = TabletReplica(directory, MetadataFile(directory, meta), self._new_tracker())
        if meta.data_state is DataState.TOMBSTONED:
            self._delete_data(meta.tablet_id, directory)
            tablet.set_state(tpb.TOMBSTONED)
        return tablet

    def _remove_orphan_stores(self) -> None:
        for tablet_id in self.stores.tablet_ids_on_disk():
            tablet = self._tablets.get(tablet_id)
            if tablet_id in self.unreadable:
                continue
            if tablet is None or tablet.state == tpb.TOMBSTONED:
                log.warning("removing the store of tablet %s: no tablet owns it", tablet_id)
                self.stores.delete_tablet(tablet_id)

    async def _bootstrap(self, tablet: TabletReplica) -> None:
        store: DuckDBTabletStore | None = None
        try:
            store = await asyncio.to_thread(self.stores.open_tablet, tablet.tablet_id)
            applied = store.applied_index()
            await asyncio.to_thread(tablet.metadata.update, lambda m: m.settle_alter(applied))
            machine = TabletStateMachine(store, tablet.metadata, self._changed_from_thread, tablet.tracker)
            raft = await RaftReplica.open(
                tablet.directory,
                tablet.tablet_id,
                self.uuid,
                machine,
                self._transport,
                executor=self._executor,
                options=self._replica_options,
            )
        except NyalaError as e:
            log.error("tablet %s failed to bootstrap: %s", tablet.tablet_id, e)
            if store is not None:
                await asyncio.to_thread(self.stores.close_tablet, tablet.tablet_id)
            tablet.set_state(tpb.FAILED, f"bootstrap failed: {e}")
            self._changed()
            return
        log.info(
            "tablet %s bootstrapped: store applied up to index %d, log replayed up to index %d",
            tablet.tablet_id,
            applied,
            raft.last_index,
        )
        self._start_serving(tablet, store, raft)

    def _start_serving(self, tablet: TabletReplica, store: DuckDBTabletStore, raft: RaftReplica) -> None:
        raft.on_change = lambda _replica: self._changed()
        tablet.attach(store, raft)
        self._changed()

    # -- creation ------------------------------------------------------------------------------

    async def create(self, meta: TabletMetadata, config: RaftConfig) -> TabletReplica:
        """Create a new replica; an existing one with the same table, partition and members is
        returned as is (a retried request), a tombstone is replaced."""
        async with self._lock(meta.tablet_id):
            existing = self._tablets.get(meta.tablet_id)
            if existing is not None:
                if existing.state != tpb.TOMBSTONED:
                    _check_same_tablet(existing, meta, config)
                    return existing
                del self._tablets[meta.tablet_id]
                await asyncio.to_thread(self._remove_files, meta.tablet_id, existing.directory)
            return await self._create_new(meta.with_state(DataState.CREATING), config)

    async def _create_new(self, meta: TabletMetadata, config: RaftConfig) -> TabletReplica:
        directory = self._dir / meta.tablet_id
        await asyncio.to_thread(self._prepare_directory, meta, directory)
        tablet = TabletReplica(directory, MetadataFile(directory, meta), self._new_tracker())
        self._tablets[meta.tablet_id] = tablet
        raft: RaftReplica | None = None
        try:
            store = await asyncio.to_thread(self.stores.create_tablet, meta.tablet_id, meta.schema)
            machine = TabletStateMachine(store, tablet.metadata, self._changed_from_thread, tablet.tracker)
            raft = await RaftReplica.create(
                directory,
                meta.tablet_id,
                self.uuid,
                config,
                machine,
                self._transport,
                executor=self._executor,
                options=self._replica_options,
            )
            await asyncio.to_thread(tablet.metadata.update, lambda m: m.with_state(DataState.READY))
        except BaseException:
            del self._tablets[meta.tablet_id]
            if raft is not None:
                await raft.close()
            await asyncio.to_thread(self._remove_files, meta.tablet_id, directory)
            raise
        self._start_serving(tablet, store, raft)
        log.info("created tablet %s of table %s (%s)", meta.tablet_id, meta.table_name, meta.table_id)
        return tablet

    def _prepare_directory(self, meta: TabletMetadata, directory: Path) -> None:
        if directory.exists():  # left by a failed attempt: nothing in it was ever used
            shutil.rmtree(directory)
        self.stores.delete_tablet(meta.tablet_id)
        directory.mkdir(parents=True)
        meta.save(directory)

    # -- deletion ---------------------------------------------------------------------------------

    async def delete(self, tablet_id: str, *, tombstone: bool, reason: str, cas_config_index: int | None) -> None:
        """Delete a replica, keeping a tombstone when asked; deleting a tombstone again is a no-op."""
        tablet = self.get(tablet_id)
        async with self._lock(tablet_id):
            if tablet.state == tpb.TOMBSTONED and tombstone:
                return
            if cas_config_index is not None:
                _check_config_cas(tablet, cas_config_index)
            tablet.set_state(tpb.STOPPING)
            raft, tablet.raft, tablet.store = tablet.raft, None, None
            if raft is not None:
                await raft.close()
            if tombstone:
                await asyncio.to_thread(self._tombstone, tablet, reason)
                tablet.set_state(tpb.TOMBSTONED)
            else:
                await asyncio.to_thread(self._remove_files, tablet_id, tablet.directory)
                del self._tablets[tablet_id]
        log.info("deleted tablet %s (%s): %s", tablet_id, "tombstoned" if tombstone else "removed", reason)
        self._changed()

    def _tombstone(self, tablet: TabletReplica, reason: str) -> None:
        tablet.metadata.update(lambda m: m.with_state(DataState.TOMBSTONED, reason))
        self._delete_data(tablet.tablet_id, tablet.directory)

    def _delete_data(self, tablet_id: str, directory: Path) -> None:
        """Remove rows and log; the metadata and consensus metadata stay (a tombstone)."""
        self.stores.delete_tablet(tablet_id)
        shutil.rmtree(directory / WAL_DIR, ignore_errors=True)

    def _remove_files(self, tablet_id: str, directory: Path) -> None:
        """Remove every trace of a tablet; the metadata file goes first, so a crash midway
        leaves a directory that startup recognises as garbage."""
        (directory / META_FILE).unlink(missing_ok=True)
        self.stores.delete_tablet(tablet_id)
        shutil.rmtree(directory, ignore_errors=True)

    # -- maintenance and shutdown ---------------------------------------------------------------------

    async def flush_old_memrowsets(self, older_than_s: float) -> None:
        """Flush MemRowSets whose oldest row has waited ``older_than_s``: bounds the Raft log
        a restart replays and the log segments kept for it."""
        for tablet in self.tablets():
            store = tablet.store
            if store is not None and tablet.state in _FLUSHABLE and store.durable_index() < store.applied_index():
                try:
                    await asyncio.to_thread(store.flush, older_than_s)
                except NyalaError as e:
                    log.warning("flush of tablet %s failed: %s", tablet.tablet_id, e)

    async def checkpoint_large_tablets(self, threshold_bytes: int) -> None:
        """Fold big storage WALs into their files: bounds restart time and reclaims space."""
        for tablet in self.tablets():
            store = tablet.store
            if store is not None and tablet.state == tpb.RUNNING and store.wal_size_bytes() > threshold_bytes:
                try:
                    await asyncio.to_thread(store.checkpoint)
                except NyalaError as e:
                    log.warning("checkpoint of tablet %s failed: %s", tablet.tablet_id, e)

    async def close(self) -> None:
        for tablet in self.tablets():
            if tablet.raft is not None:
                await tablet.raft.close()
            tablet.set_state(tpb.STOPPING)
        await self.flush_old_memrowsets(0.0)  # so a clean restart has no log to replay
        await asyncio.to_thread(self.stores.close)


def _check_same_tablet(existing: TabletReplica, meta: TabletMetadata, config: RaftConfig) -> None:
    current = existing.meta
    if (current.table_id, current.partition) != (meta.table_id, meta.partition):
        raise AlreadyPresent(
            f"tablet {meta.tablet_id} already exists here for table {current.table_id} with another partition"
        )
    members = existing.raft.committed_config.peer_ids if existing.raft is not None else None
    if members is not None and set(members) != set(config.peer_ids):
        raise AlreadyPresent(
            f"tablet {meta.tablet_id} already exists here with Raft members {sorted(members)}, "
            f"not {sorted(config.peer_ids)}"
        )


def _check_config_cas(tablet: TabletReplica, cas_config_index: int) -> None:
    if tablet.raft is not None:
        index = tablet.raft.committed_config.opid_index
    else:
        try:
            index = ConsensusMetadata.load(tablet.directory).committed_config.opid_index
        except NyalaError:
            return
    if index > cas_config_index:
        raise Aborted(
            f"tablet {tablet.tablet_id}: committed config index {index} is above the requested "
            f"cas_config_opid_index_less_or_equal {cas_config_index}; not deleted"
        )
