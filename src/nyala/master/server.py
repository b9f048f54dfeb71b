"""The master process: the server base plus the sys catalog, the registries and the services."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from nyala.common.hostport import parse_address
from nyala.consensus.core import RaftConfig
from nyala.consensus.runtime import RaftReplica, ReplicaOptions
from nyala.consensus.runtime.cmeta import CMETA_FILE
from nyala.errors import NyalaError
from nyala.master.auto_rebalancer import AutoRebalancer
from nyala.master.catalog_copy import CatalogCopySource
from nyala.master.catalog_manager import CatalogManager
from nyala.master.ddl import Ddl
from nyala.master.follower_reads import FollowerCatalog
from nyala.master.heartbeats import HeartbeatHandler
from nyala.master.joining import existing_masters, join_cluster
from nyala.master.leader import LeaderView
from nyala.master.location_mapping import LocationMapper
from nyala.master.membership import MasterMembership
from nyala.master.metrics import MasterMetrics
from nyala.master.options import MasterOptions
from nyala.master.peers import MasterPeers, own_and_all_addresses
from nyala.master.rebalance_lease import RebalanceLease
from nyala.master.service import MasterService
from nyala.master.sys_catalog import SYS_CATALOG_ID, SysCatalogStore
from nyala.master.tablet_tasks import TabletTasks
from nyala.master.ts_manager import TSManager
from nyala.master.tserver_lifecycle import TServerLifecycle
from nyala.master.unsafe_rebuild import REBUILD_FILE, load_rebuild
from nyala.master.web import MasterPages
from nyala.proto import master_pb2 as mpb
from nyala.server import ServerBase
from nyala.web import WebServer
from nyala.web.view import Cell

__all__ = ["Master"]

log = logging.getLogger("nyala.master")

SYS_CATALOG_DIR = "sys-catalog"
COPY_SESSIONS_DIR = "tablet-copy-sessions"


class Master(ServerBase):
    """A Nyala master.  ``await start()`` listens at once; the catalog opens in the background."""

    kind = "master"

    def __init__(self, options: MasterOptions) -> None:
        super().__init__(options.server)
        self.master_options = options
        bind = parse_address(options.server.rpc_bind_address)
        self.peers = MasterPeers(
            self.uuid, bind, own_and_all_addresses(options.master_addresses, bind), self.data_dir.path
        )
        self.ts_manager = TSManager(options.tserver_unresponsive_timeout_ms)
        self.catalog_manager = CatalogManager(options, self.peers)
        self.follower_catalog = FollowerCatalog()
        self.tablet_tasks = TabletTasks(
            self.catalog_manager,
            self.ts_manager,
            self.messenger,
            interval_s=options.heartbeat_interval_ms / 1000,
            rpc_timeout_s=options.tserver_rpc_timeout_ms / 1000,
        )
        self.rebalance_lease = RebalanceLease()
        self.auto_rebalancer = AutoRebalancer(
            self.ts_manager,
            self.tablet_tasks,
            self.rebalance_lease,
            interval_s=options.auto_rebalancing_interval_sec,
            max_moves_per_server=options.auto_rebalancing_max_moves_per_server,
            options=options.auto_rebalancing_options(),
            settle_s=3 * options.heartbeat_interval_ms / 1000,
        )
        self.catalog_manager.on_leadership = self._on_leadership
        self.ddl = Ddl(self.catalog_manager, self.ts_manager, self.tablet_tasks)
        self.tserver_lifecycle = TServerLifecycle(self.catalog_manager, self.ts_manager)
        self.locations = (
            LocationMapper(options.location_mapping_cmd, options.location_mapping_timeout_ms / 1000)
            if options.location_mapping_cmd
            else None
        )
        self.heartbeats = HeartbeatHandler(
            self.instance, self.ts_manager, self.catalog_manager, self.tablet_tasks, self.locations
        )
        self.metrics = MasterMetrics(self.metrics_registry, options.server.metrics_enabled)
        self.heartbeats.metrics = self.ddl.metrics = self.tablet_tasks.metrics = self.metrics
        self.metrics.watch(
            view=self.catalog_manager.leader,
            ts_manager=self.ts_manager,
            tasks_sent=lambda: self.tablet_tasks.sent,
            tasks_in_flight=self.tablet_tasks.in_flight,
            rebalance=lambda: (self.auto_rebalancer.rounds, self.auto_rebalancer.moves_started),
        )
        raft = options.server.raft
        self.membership = MasterMembership(
            self.uuid,
            self.catalog_manager,
            self.peers,
            self.transport.directory,
            self.messenger,
            # Two election timeouts: a follower silent that long has lost the leader too.
            liveness_window_s=2 * raft.timing().election_ticks * raft.raft_tick_interval_ms / 1000,
            poll_interval_s=raft.raft_tick_interval_ms / 1000,
        )
        self.catalog_copy = CatalogCopySource(self.data_dir.path / COPY_SESSIONS_DIR)
        self.catalog_copy.register(self.rpc)
        MasterService(self).register(self.rpc)
        self._opening: asyncio.Task[None] | None = None
        self._rebuild: asyncio.Task[None] | None = None
        #: Set when the catalog cannot be opened; ``run`` then exits with it.
        self.fatal: BaseException | None = None
        self._fatal_event = asyncio.Event()
        self.pages = MasterPages(
            self.uuid,
            self.catalog_manager,
            self.ts_manager,
            self.peers,
            self.messenger,
            lambda: self.fatal,
            self.tablet_tasks,
            self.auto_rebalancer,
        )

    def _add_pages(self, web: WebServer) -> None:
        self.pages.add_to(web)

    def status_fields(self) -> dict[str, Cell]:
        return self.pages.status_fields()

    def not_ready(self) -> list[str]:
        return self.pages.not_ready()

    @property
    def catalog_dir(self) -> Path:
        return self.data_dir.path / SYS_CATALOG_DIR

    async def _start(self) -> None:
        if self.peers.self_address.port == 0:  # a lone master on an ephemeral port (tests)
            self.peers.self_address = self.address
            self.peers.addresses = [self.address]
        self._opening = asyncio.get_running_loop().create_task(self._open_catalog(), name="open-sys-catalog")

    async def _open_catalog(self) -> None:
        try:
            options = self.master_options
            loaded = await asyncio.to_thread(self.peers.load)
            await asyncio.to_thread(self.catalog_copy.clear_leftovers)
            joined = not (self.catalog_dir / "raft" / CMETA_FILE).exists() and await self._join_if_new()
            if not loaded and not joined:
                await self.peers.discover(self.messenger, options.master_registration_timeout_ms / 1000)
            for uuid, address in self.peers.by_uuid.items():
                if uuid != self.uuid:
                    self.transport.directory.learn(uuid, address)
            store = await asyncio.to_thread(
                SysCatalogStore.open,
                self.catalog_dir / "store",
                checkpoint_wal_bytes=options.sys_catalog_checkpoint_wal_bytes,
            )
            loop = asyncio.get_running_loop()

            def unregistered(uuids: list[str]) -> None:  # on the apply thread
                loop.call_soon_threadsafe(self._forget_tservers, uuids)

            store.on_unregistered = unregistered

            def masters(entries: dict[str, mpb.SysMasterEntryPB]) -> None:  # on the apply thread
                loop.call_soon_threadsafe(self.membership.learn, entries)

            store.on_masters = masters
            self.membership.book.update(self.peers.by_uuid)
            catalog = await asyncio.to_thread(store.load)
            try:
                # The follower-read view starts from what is stored and folds every write applied
                # after it, in order, on this loop (before the replica counts it applied).
                self.follower_catalog.open(catalog)

                def applied(writes: list[mpb.CatalogWritePB]) -> None:  # on the apply thread
                    loop.call_soon_threadsafe(self.follower_catalog.writes_applied, writes)

                store.on_applied = applied
                replica = await self._open_replica(store)
            except BaseException:
                await asyncio.to_thread(store.close)
                raise
            self.follower_catalog.attach(lambda: replica.applied_index)
            replica.on_leader_contact = self.follower_catalog.heard_from_leader
            self.catalog_manager.on_replica_change = self.membership.sync
            self.catalog_manager.start(replica, store)
            self.catalog_copy.replica, self.catalog_copy.store = replica, store
            self.membership.learn(dict(catalog.masters))
            log.info("sys catalog open: masters %s", {u[:8]: str(a) for u, a in self.peers.by_uuid.items()})
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.critical("cannot open the sys catalog: %s", e, exc_info=not isinstance(e, NyalaError))
            self.fatal = e
            self._fatal_event.set()

    async def _join_if_new(self) -> bool:
        """At first start: if the other masters run a cluster that does not count this master,
        join it (wait to be added, copy the catalog) instead of creating a catalog; True then.
        The other masters' addresses come with the copied catalog (its address book), so they
        need not all answer, unlike at the first start of a new cluster."""
        others = [a for a in self.peers.addresses if a != self.peers.self_address]
        if not others:
            return False
        masters = await existing_masters(self.messenger, self.peers.self_address, others)
        if masters is None:
            return False
        log.info("the masters %s run a cluster without this master: joining it", ", ".join(map(str, masters)))
        await join_cluster(
            self.messenger,
            self.uuid,
            self.peers.self_address,
            masters,
            auto_join=self.master_options.master_auto_join,
            catalog_dir=self.catalog_dir,
            store_dir=self.catalog_dir / "store",
            raft_dir=self.catalog_dir / "raft",
        )
        return True

    async def _open_replica(self, store: SysCatalogStore) -> RaftReplica:
        directory = self.catalog_dir / "raft"
        replica_options = ReplicaOptions(raft=self.master_options.server.raft)
        if (directory / CMETA_FILE).exists():
            return await RaftReplica.open(
                directory,
                SYS_CATALOG_ID,
                self.uuid,
                store,
                self.transport,
                executor=self.apply_pool,
                options=replica_options,
            )
        config = RaftConfig.of_voters(sorted(self.peers.by_uuid))
        return await RaftReplica.create(
            directory,
            SYS_CATALOG_ID,
            self.uuid,
            config,
            store,
            self.transport,
            executor=self.apply_pool,
            options=replica_options,
        )

    def _forget_tservers(self, uuids: list[str]) -> None:
        """Tablet servers a committed catalog write unregistered: forget them here too."""
        try:
            view: LeaderView | None = self.catalog_manager.leader()
        except NyalaError:
            view = None
        for uuid in uuids:
            if self.ts_manager.forget(uuid):
                log.info("forgot unregistered tablet server %s", uuid)
            if view is not None:
                view.forget_tserver(uuid)

    def _on_leadership(self, view: LeaderView | None) -> None:
        if view is None:
            self.tablet_tasks.stop()
            self.auto_rebalancer.stop()
        else:
            if (self.data_dir.path / REBUILD_FILE).exists() and (self._rebuild is None or self._rebuild.done()):
                self._rebuild = asyncio.get_running_loop().create_task(self._apply_rebuild(), name="unsafe-rebuild")
            self.tablet_tasks.start(view)
            self.membership.start_backfill()
            self.rebalance_lease.new_leadership()
            if self.master_options.auto_rebalancing_enabled:
                self.auto_rebalancer.start(view)

    async def _apply_rebuild(self) -> None:
        """Replicate a catalog rebuilt by ``nyala master unsafe-rebuild``, into an empty catalog only."""
        path = self.data_dir.path / REBUILD_FILE
        try:
            write = await asyncio.to_thread(load_rebuild, self.data_dir.path)
            if write is None:
                return
            cm = self.catalog_manager

            async def body() -> bool:
                view = cm.leader()
                if any(True for _ in view.catalog.all_tables()):
                    return False
                await cm.replicate(view, write)
                return True

            if await cm.exclusive(body):
                log.warning("sys catalog rebuilt from the tablet servers' metadata (%s)", path)
            else:
                log.error("not applying %s: the catalog already has tables; remove the file", path)
                return
            await asyncio.to_thread(path.rename, path.with_name(path.name + ".applied"))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # retried at the next leadership; the file stays
            log.error("could not apply the rebuilt catalog %s: %s", path, e)

    async def _stop(self) -> None:
        if self._rebuild is not None:
            self._rebuild.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rebuild
        if self._opening is not None:
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        await self.auto_rebalancer.close()
        await self.tablet_tasks.close()
        await self.catalog_copy.close()
        await self.catalog_manager.stop()

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT (clean stop), or until the catalog fails to open (raises)."""
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_requested.set)
        await self.start()
        try:
            waits = [loop.create_task(stop_requested.wait()), loop.create_task(self._fatal_event.wait())]
            _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
        finally:
            await self.stop()
        if self.fatal is not None:
            raise self.fatal
