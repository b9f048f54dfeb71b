"""The tablets of one server: creation, bootstrap, deletion with tombstones, shutdown.

On-disk layout under the server's data directory::

    tablets/<tablet_id>/tablet_meta.json   metadata (see :mod:`.metadata`)
    tablets/<tablet_id>/cmeta              consensus metadata (term, vote, committed config)
    tablets/<tablet_id>/wal/               the tablet's write-ahead log
    tablets/<tablet_id>.copy-tmp/          a tablet copy's download, until it is installed
    stores/<tablet_id>.duckdb              the tablet's rows, ATTACHed to the one DuckDB instance

Creation writes the metadata (CREATING) first, then the store, then the Raft replica
(consensus metadata and WAL), then flips the metadata to READY.  Deletion closes the replica
and writes TOMBSTONED before deleting the store and the WAL; the consensus metadata stays, so
the tablet is still reported (as TOMBSTONED) and can be recognised.  Startup finishes any
interrupted creation or deletion, then bootstraps every READY tablet: open the store (its
applied index), open the Raft replica (which replays the WAL after that index), RUNNING.  A
tablet that cannot open is FAILED with its error; the others carry on.

Tablet copy (a leader's StartTabletCopy; :mod:`.tablet_copy_client` fetches the files): the
request is checked at once (a live replica is refused unless the leader can no longer catch
it up; a caller whose term is below the local replica's is refused), then in the background
the source's session is opened, a live replica being replaced is tombstoned, the metadata is
written COPYING (reported as COPYING; the replica neither serves nor is registered with the
Raft transport), the files are downloaded into ``tablets/<id>.copy-tmp/`` and checked, then
installed: the store file and the WAL segments renamed into place, the consensus metadata
written (the higher of the local and the source's term, the local vote only with the local
term, the source's committed config), the metadata flipped to READY, and the tablet
bootstrapped as at startup.  A copy that fails leaves a tombstone (or nothing, when there was
no consensus metadata); one interrupted by a crash is found COPYING at startup and cleaned
the same way, and every ``*.copy-tmp`` directory is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from nyala.consensus.core import HardState, RaftConfig
from nyala.consensus.runtime import ConsensusMetadata, RaftReplica, RaftTransport, ReplicaOptions
from nyala.consensus.runtime.cmeta import CMETA_FILE
from nyala.errors import Aborted, AlreadyPresent, IllegalState, NotFound, NyalaError, ServiceUnavailable
from nyala.files import fsync_dir
from nyala.proto import tserver_pb2 as tpb
from nyala.storage import DuckDBTabletStore, StorageOptions, TabletStoreManager
from nyala.tserver.metadata import META_FILE, TABLET_ID_PATTERN, DataState, MetadataFile, TabletMetadata
from nyala.tserver.result_tracker import ResultTracker
from nyala.tserver.state_machine import TabletStateMachine
from nyala.tserver.tablet import TabletReplica
from nyala.tserver.tablet_copy_client import COPY_TMP_SUFFIX, CopyRequest, CopySource, Downloaded, TabletCopyClient
from nyala.tserver.write_metrics import WriteMetrics

__all__ = [
    "CopyStatus",
    "TabletManager",
    "delete_replica_data",
    "install_copied_replica",
    "remove_replica_files",
    "undo_copied_replica",
    "write_copying_metadata",
]

log = logging.getLogger("nyala.tserver")
_FLUSHABLE = frozenset({tpb.RUNNING, tpb.STOPPING})

TABLETS_DIR = "tablets"
STORES_DIR = "stores"
WAL_DIR = "wal"
#: Ended tablet copies whose outcome GetTabletServerStatus still reports.
COPY_HISTORY = 100


@dataclass
class CopyStatus:
    """One tablet copy into this server: running, or how it ended (for GetTabletServerStatus)."""

    tablet_id: str
    source_uuid: str
    state: tpb.TabletCopyStatusPB.State = tpb.TabletCopyStatusPB.IN_PROGRESS
    error: str = ""
    total_bytes: int = 0

    def to_pb(self) -> tpb.TabletCopyStatusPB:
        return tpb.TabletCopyStatusPB(
            tablet_id=self.tablet_id,
            source_uuid=self.source_uuid,
            state=self.state,
            error=self.error,
            total_bytes=self.total_bytes,
        )


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
        #: Called with (tablet, peer uuid) when a leading replica finds a peer needs a tablet copy.
        self.on_copy_needed: Callable[[TabletReplica, str], None] = lambda _tablet, _peer: None
        #: Called with a tablet id before its replica is closed for deletion (open scanners go).
        self.before_delete: Callable[[str], None] = lambda _tablet_id: None
        #: Fetches tablet copies into this server; None refuses StartTabletCopy.
        self.copy_client: TabletCopyClient | None = None
        #: Where the replicas count the rows of the writes they lead (the server's metrics).
        self.write_metrics = WriteMetrics()
        #: At most this many tablet copies run into this server at once.
        self.max_copies = 10
        self._copies: dict[str, asyncio.Task[None]] = {}
        #: The copy of each tablet that runs now or ended last, oldest first.
        self._copy_statuses: OrderedDict[str, CopyStatus] = OrderedDict()
        self._loaded = False
        self._closing = False

    # -- lookups ----------------------------------------------------------------------------

    def get(self, tablet_id: str) -> TabletReplica:
        tablet = self._tablets.get(tablet_id)
        if tablet is None:
            raise NotFound(f"tablet {tablet_id!r} is not hosted on this server")
        return tablet

    def find(self, tablet_id: str) -> TabletReplica | None:
        return self._tablets.get(tablet_id)

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
            if directory.name.endswith(COPY_TMP_SUFFIX):
                log.warning("removing %s: the download of a tablet copy that did not finish", directory)
                await asyncio.to_thread(shutil.rmtree, directory, True)
                continue
            if not TABLET_ID_PATTERN.match(directory.name):
                log.warning("ignoring %s: not a tablet directory", directory)
                continue
            tablet = await asyncio.to_thread(self._load, directory)
            if tablet is not None:
                self._tablets[tablet.tablet_id] = tablet
        await asyncio.to_thread(self._remove_orphan_stores)
        self._loaded = True
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
        if meta.data_state is DataState.COPYING:
            log.warning("%s: a tablet copy that did not finish; deleting what it installed", directory)
            self._delete_data(meta.tablet_id, directory)
            if not (directory / CMETA_FILE).exists():
                self._remove_files(meta.tablet_id, directory)
                return None
            meta = meta.with_state(DataState.TOMBSTONED, "a tablet copy did not finish")
            meta.save(directory)
        if meta.data_state is DataState.CREATING:
            if not (directory / CMETA_FILE).exists():
                log.warning("removing %s: a tablet creation that never finished", directory)
                self._remove_files(meta.tablet_id, directory)
                return None
            meta = meta.with_state(DataState.READY)
            meta.save(directory)
        tablet = TabletReplica(directory, MetadataFile(directory, meta), self._new_tracker(), self.write_metrics)
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

    async def _bootstrap(self, tablet: TabletReplica, apply_first: int = 0) -> None:
        """Open the tablet's store and Raft replica and serve it; with ``apply_first``, only once
        the replica has applied that far from its log (a copy: the entries its source had
        applied beyond the store file, so that it serves every row the source had)."""
        store: DuckDBTabletStore | None = None
        try:
            store = await asyncio.to_thread(self.stores.open_tablet, tablet.tablet_id)
            applied = store.applied_index()
            await asyncio.to_thread(tablet.metadata.update, lambda m: m.settle_alter(applied))
            machine = TabletStateMachine(
                store, tablet.metadata, self._changed_from_thread, tablet.tracker, tablet.checksums
            )
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
        if apply_first:
            try:
                await raft.wait_applied(min(apply_first, raft.last_index))
            except NyalaError as e:
                log.error("tablet %s failed to apply its log up to index %d: %s", tablet.tablet_id, apply_first, e)
                await raft.close()
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
        raft.on_copy_needed = lambda _replica, peer: self.on_copy_needed(tablet, peer)
        tablet.attach(store, raft)
        self._changed()

    # -- creation ------------------------------------------------------------------------------

    async def create(self, meta: TabletMetadata, config: RaftConfig) -> TabletReplica:
        """Create a new replica; an existing one with the same table, partition and members is
        returned as is (a retried request), a tombstone is replaced."""
        async with self._lock(meta.tablet_id):
            if meta.tablet_id in self._copies:
                raise IllegalState(f"a tablet copy of {meta.tablet_id} is in progress on this server")
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
        tablet = TabletReplica(directory, MetadataFile(directory, meta), self._new_tracker(), self.write_metrics)
        self._tablets[meta.tablet_id] = tablet
        raft: RaftReplica | None = None
        try:
            store = await asyncio.to_thread(self.stores.create_tablet, meta.tablet_id, meta.schema)
            machine = TabletStateMachine(
                store, tablet.metadata, self._changed_from_thread, tablet.tracker, tablet.checksums
            )
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
        """Delete a replica, keeping a tombstone when asked; deleting a tombstone again is a no-op.

        A tablet copy in progress is cancelled first (it leaves a tombstone or nothing).
        """
        if tablet_id in self._copies:
            self.get(tablet_id)  # NotFound for a copy that has not begun: nothing to delete yet
            await self._cancel_copy(tablet_id)
        self.get(tablet_id)
        async with self._lock(tablet_id):
            tablet = self.get(tablet_id)
            if tablet.state == tpb.TOMBSTONED and tombstone:
                return
            if cas_config_index is not None:
                _check_config_cas(tablet, cas_config_index)
            await self._delete_locked(tablet, tombstone=tombstone, reason=reason)
        log.info("deleted tablet %s (%s): %s", tablet_id, "tombstoned" if tombstone else "removed", reason)
        self._changed()

    async def _delete_locked(self, tablet: TabletReplica, *, tombstone: bool, reason: str) -> None:
        """Close the replica and tombstone or remove it (the tablet's lock held)."""
        self.before_delete(tablet.tablet_id)
        tablet.set_state(tpb.STOPPING)
        raft, tablet.raft, tablet.store = tablet.raft, None, None
        if raft is not None:
            await raft.close()
        if tombstone:
            await asyncio.to_thread(self._tombstone, tablet, reason)
            tablet.set_state(tpb.TOMBSTONED)
        else:
            await asyncio.to_thread(self._remove_files, tablet.tablet_id, tablet.directory)
            del self._tablets[tablet.tablet_id]

    def _tombstone(self, tablet: TabletReplica, reason: str) -> None:
        tablet.metadata.update(lambda m: m.with_state(DataState.TOMBSTONED, reason))
        self._delete_data(tablet.tablet_id, tablet.directory)

    def _delete_data(self, tablet_id: str, directory: Path) -> None:
        delete_replica_data(self.stores, tablet_id, directory)

    def _remove_files(self, tablet_id: str, directory: Path) -> None:
        remove_replica_files(self.stores, tablet_id, directory)

    # -- tablet copy (the destination) --------------------------------------------------------------

    def copies_in_progress(self) -> list[str]:
        """The tablets being copied into this server now."""
        return sorted(self._copies)

    def copy_statuses(self) -> list[CopyStatus]:
        """The copies running now and how the last copy of each tablet ended (at most
        ``COPY_HISTORY`` ended ones), oldest first."""
        return list(self._copy_statuses.values())

    def _note_copy(self, status: CopyStatus) -> None:
        self._copy_statuses.pop(status.tablet_id, None)
        self._copy_statuses[status.tablet_id] = status
        ended = [t for t, s in self._copy_statuses.items() if s.state != tpb.TabletCopyStatusPB.IN_PROGRESS]
        for tablet_id in ended[: max(0, len(ended) - COPY_HISTORY)]:
            del self._copy_statuses[tablet_id]

    async def start_copy(self, request: CopyRequest) -> None:
        """Check a StartTabletCopy and start the copy in the background; returns at once.

        Raises IllegalState when a copy of the tablet is already running or the caller's term
        is stale, AlreadyPresent for a live replica the request may not replace,
        ServiceUnavailable while this server is starting, stopping or already runs
        ``num_tablets_to_copy_simultaneously`` copies.
        """
        tablet_id = request.tablet_id
        if self.copy_client is None:
            raise IllegalState("this server does not take tablet copies")
        if not self._loaded or self._closing:
            raise ServiceUnavailable("this tablet server is starting or stopping; ask again")
        if tablet_id in self._copies:
            raise IllegalState(f"a tablet copy of {tablet_id} is already in progress on this server")
        if len(self._copies) >= self.max_copies:
            raise ServiceUnavailable(
                f"{len(self._copies)} tablet copies are running on this server, as many as "
                f"num_tablets_to_copy_simultaneously allows; ask again later"
            )
        existing = self._tablets.get(tablet_id)
        if existing is not None:
            self._check_copy_allowed(existing, request)
        status = CopyStatus(tablet_id, request.source_uuid)
        self._note_copy(status)
        self._copies[tablet_id] = self._loop.create_task(
            self._run_copy(request, status), name=f"tablet-copy-{tablet_id}"
        )
        log.info(
            "tablet copy of %s from %s (%s) started, asked by %s in term %d%s",
            tablet_id,
            request.source_uuid,
            request.source_address,
            request.caller_uuid,
            request.caller_term,
            "; it replaces the live replica" if existing is not None and existing.state != tpb.TOMBSTONED else "",
        )

    def _check_copy_allowed(self, existing: TabletReplica, request: CopyRequest) -> None:
        tablet_id = request.tablet_id
        state = existing.state
        if state == tpb.COPYING:
            raise IllegalState(f"a tablet copy of {tablet_id} is already in progress on this server")
        if state in (tpb.BOOTSTRAPPING, tpb.STOPPING):
            raise ServiceUnavailable(f"the replica of {tablet_id} here is {existing.state_name}; ask again")
        raft = existing.raft
        term = raft.term if raft is not None else _stored_term(existing)
        if term is not None and request.caller_term < term:
            raise IllegalState(
                f"tablet copy of {tablet_id} refused: caller {request.caller_uuid} asks in term {request.caller_term}, "
                f"but the replica here has seen term {term} (a newer leader exists)"
            )
        if state == tpb.TOMBSTONED:
            return
        if not request.replace_live:
            raise AlreadyPresent(
                f"tablet {tablet_id} already has a live replica here ({existing.state_name}); a tablet copy replaces "
                f"only a tombstone, or a replica the leader says it can no longer catch up"
            )
        first = request.leader_first_index
        if raft is not None and first > 0 and raft.commit_index >= first - 1:
            raise AlreadyPresent(
                f"the replica of {tablet_id} here has committed up to index {raft.commit_index}, and the leader's "
                f"log still holds index {first} on: replication can catch it up, so it is not replaced"
            )

    async def _cancel_copy(self, tablet_id: str) -> None:
        task = self._copies.get(tablet_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run_copy(self, request: CopyRequest, status: CopyStatus) -> None:
        client = self.copy_client
        assert client is not None
        tablet_id = request.tablet_id
        temporary = self._dir / (tablet_id + COPY_TMP_SUFFIX)
        source: CopySource | None = None
        tablet: TabletReplica | None = None
        outcome = "cancelled"
        client.counters.started += 1
        started_at = time.perf_counter()
        # The seconds of each step, logged once the copy is installed (the benchmark reads them).
        phases: dict[str, float] = {}
        mark = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal mark
            now = time.perf_counter()
            phases[name] = now - mark
            mark = now

        try:
            source = await client.begin(request)
            lap("begin")
            status.total_bytes = source.total_bytes
            tablet = await self._prepare_copy(request, source)
            lap("prepare")
            downloaded = await client.download(request, source, temporary)
            lap("download")
            done, source = source, None
            await client.end(request, done, True)
            lap("end session")
            log.info(
                "tablet copy of %s: fetched %d bytes in %d files from %s in %.2f s (%.2f s to fetch and write, "
                "%.2f s to sync and check: %s)",
                tablet_id,
                done.total_bytes,
                len(done.files),
                request.source_uuid,
                downloaded.fetch_s + downloaded.verify_s,
                downloaded.fetch_s,
                downloaded.verify_s,
                ", ".join(f"{name} {seconds:.3f} s" for name, seconds in downloaded.phases.items()),
            )
            await self._install_copy(tablet, done, downloaded, lap)
            outcome = "installed"
            log.info(
                "tablet copy of %s: phases: %s",
                tablet_id,
                ", ".join(f"{name} {seconds:.3f} s" for name, seconds in phases.items()),
            )
        except Exception as e:
            outcome = f"failed: {type(e).__name__}: {e}"
            log.warning("tablet copy of %s from %s %s", tablet_id, request.source_uuid, outcome)
        finally:
            try:
                if source is not None:
                    await client.end(request, source, False)
                if outcome != "installed":
                    await self._abandon_copy(tablet_id, tablet, temporary, f"tablet copy {outcome}")
            finally:
                # Counted and reported only once the cleanup is done: whoever sees the copy
                # failed (a test, remote-replica copy) finds nothing of it left.
                if outcome == "installed":
                    client.counters.completed += 1
                    client.counters.installed_s.observe(time.perf_counter() - started_at)
                    status.state = tpb.TabletCopyStatusPB.COMPLETED
                else:
                    client.counters.failed += 1
                    client.counters.failed_s.observe(time.perf_counter() - started_at)
                    status.state, status.error = tpb.TabletCopyStatusPB.FAILED, f"tablet copy {outcome}"
                self._copies.pop(tablet_id, None)
                self._note_copy(status)

    async def _prepare_copy(self, request: CopyRequest, source: CopySource) -> TabletReplica:
        """Tombstone a live replica being replaced and write the metadata COPYING (under the lock)."""
        tablet_id = request.tablet_id
        async with self._lock(tablet_id):
            existing = self._tablets.get(tablet_id)
            if existing is not None:
                self._check_copy_allowed(existing, request)  # again: it may have changed meanwhile
                if existing.state != tpb.TOMBSTONED:
                    await self._delete_locked(existing, tombstone=True, reason="replaced by a tablet copy")
            directory = self._dir / tablet_id
            await asyncio.to_thread(self._write_copying, directory, source)
            tablet = TabletReplica(
                directory, MetadataFile(directory, source.metadata), self._new_tracker(), self.write_metrics
            )
            tablet.set_state(tpb.COPYING)
            self._tablets[tablet_id] = tablet
        self._changed()
        return tablet

    def _write_copying(self, directory: Path, source: CopySource) -> None:
        write_copying_metadata(self.stores, directory, source)

    async def _install_copy(
        self,
        tablet: TabletReplica,
        source: CopySource,
        downloaded: Downloaded,
        lap: Callable[[str], None] = lambda _name: None,
    ) -> None:
        """Put the checked download in place, durably, then bootstrap the tablet as at startup;
        ``lap`` is called after each of the two."""
        tablet_id = tablet.tablet_id
        async with self._lock(tablet_id):
            if self._tablets.get(tablet_id) is not tablet or tablet.state != tpb.COPYING:
                raise Aborted(f"tablet {tablet_id} was deleted or replaced while it was being copied")
            await asyncio.to_thread(self._install_files, tablet, source, downloaded)
            lap("install")
            tablet.set_state(tpb.BOOTSTRAPPING)
            self._changed()
            await self._bootstrap(tablet, max(source.applied_index, source.committed_index))
            lap("bootstrap")
        log.info(
            "tablet copy of %s installed: applied index %d, term %d, members %s",
            tablet_id,
            source.applied_index,
            source.term,
            list(source.config.peer_ids),
        )

    def _install_files(self, tablet: TabletReplica, source: CopySource, downloaded: Downloaded) -> None:
        install_copied_replica(self.stores, tablet.metadata, source, downloaded)

    async def _abandon_copy(self, tablet_id: str, tablet: TabletReplica | None, temporary: Path, reason: str) -> None:
        """Remove what a failed copy left: its download, and a COPYING replica (to a tombstone)."""
        async with self._lock(tablet_id):
            await asyncio.to_thread(shutil.rmtree, temporary, True)
            if tablet is not None and self._tablets.get(tablet_id) is tablet and tablet.state == tpb.COPYING:
                await asyncio.to_thread(self._undo_copy, tablet, reason)
        self._changed()

    def _undo_copy(self, tablet: TabletReplica, reason: str) -> None:
        if undo_copied_replica(self.stores, tablet.metadata, reason):
            tablet.set_state(tpb.TOMBSTONED, reason)
        else:
            del self._tablets[tablet.tablet_id]

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
        self._closing = True
        for tablet_id in list(self._copies):
            await self._cancel_copy(tablet_id)
        for tablet in self.tablets():
            if tablet.raft is not None:
                await tablet.raft.close()
            tablet.set_state(tpb.STOPPING)
        await self.flush_old_memrowsets(0.0)  # so a clean restart has no log to replay
        await asyncio.to_thread(self.stores.close)


# -- the files of a replica, and of a tablet copy's install ----------------------------------------
#
# Plain functions of the data directory, so that ``nyala local-replica copy-from-remote`` installs
# a copy into a stopped server's directory with the very code the server runs.


def delete_replica_data(stores: TabletStoreManager, tablet_id: str, directory: Path) -> None:
    """Remove a replica's rows and log; the metadata and consensus metadata stay (a tombstone)."""
    stores.delete_tablet(tablet_id)
    shutil.rmtree(directory / WAL_DIR, ignore_errors=True)


def remove_replica_files(stores: TabletStoreManager, tablet_id: str, directory: Path) -> None:
    """Remove every trace of a replica; the metadata file goes first, so a crash midway leaves
    a directory that startup recognises as garbage."""
    (directory / META_FILE).unlink(missing_ok=True)
    stores.delete_tablet(tablet_id)
    shutil.rmtree(directory, ignore_errors=True)


def write_copying_metadata(stores: TabletStoreManager, directory: Path, source: CopySource) -> None:
    """Start installing a copy in ``directory``: no rows or log of an earlier replica left, the
    metadata written COPYING (from here on, an interrupted copy is recognised and undone)."""
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    if created:
        fsync_dir(directory.parent)
    delete_replica_data(stores, source.metadata.tablet_id, directory)  # a tombstone has none; be sure
    source.metadata.save(directory)


def install_copied_replica(
    stores: TabletStoreManager, metadata: MetadataFile, source: CopySource, downloaded: Downloaded
) -> None:
    """Put a checked download in place, durably, and flip the metadata to READY: the store
    file, the WAL segments, the consensus metadata (the higher of the local and the source's
    term, the local vote only with the local term, the source's committed config)."""
    directory = metadata.directory
    tablet_id = metadata.current.tablet_id
    stores.install_snapshot(tablet_id, [str(p) for p in downloaded.store_files], move=True)
    wal = directory / WAL_DIR
    shutil.rmtree(wal, ignore_errors=True)
    os.replace(downloaded.wal_dir, wal)  # its segments and the directory were synced by the download
    fsync_dir(directory)
    # Terms never go back, and a vote stands only in the term it was cast in.
    term, vote = source.term, ""
    try:
        local = ConsensusMetadata.load(directory)
    except NotFound:
        local = None
    if local is not None and local.hard_state.term >= source.term:
        term, vote = local.hard_state.term, local.hard_state.vote
    # The source applied A and the entries after it up to its committed index, which the
    # copied WAL holds: the hint has the bootstrap apply them at once, as after a restart.
    committed = max(source.applied_index, source.committed_index)
    ConsensusMetadata(HardState(term, vote, committed), source.config).save(directory)
    metadata.update(lambda m: m.with_state(DataState.READY))
    shutil.rmtree(downloaded.directory, ignore_errors=True)


def undo_copied_replica(stores: TabletStoreManager, metadata: MetadataFile, reason: str) -> bool:
    """Delete what a failed copy installed: a tombstone remains when the replica has consensus
    metadata (True), else every trace goes (False)."""
    directory = metadata.directory
    tablet_id = metadata.current.tablet_id
    delete_replica_data(stores, tablet_id, directory)
    if (directory / CMETA_FILE).exists():
        metadata.update(lambda m: m.with_state(DataState.TOMBSTONED, reason))
        return True
    remove_replica_files(stores, tablet_id, directory)
    return False


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


def _stored_term(tablet: TabletReplica) -> int | None:
    """The term in a replica's consensus metadata (a tombstone's), None when it has none."""
    try:
        return ConsensusMetadata.load(tablet.directory).hard_state.term
    except NyalaError:
        return None


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
