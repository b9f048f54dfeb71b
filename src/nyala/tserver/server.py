"""The tablet server process: tablets, their services, scanners, heartbeats, maintenance."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from nyala.proto import common_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.server import ServerBase
from nyala.tserver.admin import AdminService
from nyala.tserver.consensus_admin import ConsensusAdminService
from nyala.tserver.heartbeat import MASTERS_FILE, Heartbeater
from nyala.tserver.manager import TabletManager
from nyala.tserver.metrics import TabletServerMetrics
from nyala.tserver.options import TabletServerOptions
from nyala.tserver.result_tracker import ResultTracker
from nyala.tserver.scanners import ScannerRegistry
from nyala.tserver.service import TabletService
from nyala.tserver.tablet import TabletReplica
from nyala.tserver.tablet_copy_client import CopyCounters, TabletCopyClient, Throttler
from nyala.tserver.tablet_copy_leader import TabletCopyRequester
from nyala.tserver.tablet_copy_service import TabletCopyService
from nyala.tserver.tablet_copy_source import TabletCopySourceManager
from nyala.tserver.web import TabletServerPages
from nyala.web import WebServer
from nyala.web.view import Cell

__all__ = ["TabletServer"]

log = logging.getLogger("nyala.tserver")


class TabletServer(ServerBase):
    """Hosts tablet replicas and serves writes, scans and the master's admin calls.

    Construct inside a running event loop; ``run()`` serves until SIGTERM, ``start()`` and
    ``stop()`` drive it from tests.
    """

    kind = "tserver"

    def __init__(self, options: TabletServerOptions) -> None:
        super().__init__(options)
        self.tserver_options = options
        self.tablets = TabletManager(
            self.data_dir.path,
            self.uuid,
            self.transport,
            self.apply_pool,
            options.replica_options(),
            options.storage,
            lambda: ResultTracker(options.remember_responses_ttl_ms / 1000, options.remember_clients_ttl_ms / 1000),
        )
        self.metrics = TabletServerMetrics(self.metrics_registry, options.metrics_enabled)
        self.tablets.write_metrics = self.metrics.writes
        self.scanners = ScannerRegistry(options.scanner_ttl_ms)
        # Scan calls read their batches on as many threads as the storage may use: the
        # server's share of the cores.  The shared default executor spread them over up to
        # six threads: more CPU a row and about 10 % lower scan rates, measured.
        self.scan_pool = ThreadPoolExecutor(options.storage.threads, thread_name_prefix="tserver-scan")
        self.service = TabletService(
            self.tablets, self.scanners, self.scan_pool, options, self._identity, self._copy_status
        )
        self.admin = AdminService(self.uuid, self.tablets, self.scanners, self.transport.directory)
        self.consensus_admin = ConsensusAdminService(self.uuid, self.tablets, self.transport.directory)
        self.service.metrics = self.metrics
        self.service.register(self.rpc)
        self.admin.register(self.rpc)
        self.consensus_admin.register(self.rpc)
        self.heartbeater = Heartbeater(
            options.masters(),
            self.messenger,
            self.instance,
            self.registration,
            self.tablets.tablets,
            self.transport.directory,
            interval_ms=options.heartbeat_interval_ms,
            rpc_timeout_ms=options.heartbeat_rpc_timeout_ms,
            masters_file=self.data_dir.path / MASTERS_FILE,
        )
        self.tablets.on_change = self.heartbeater.trigger
        self.tablets.before_delete = self.scanners.close_tablet
        # Tablet copy: this server as a source, as a destination, and as a leader that asks.
        self.copy_sources = TabletCopySourceManager(
            self.data_dir.path,
            self.tablets,
            chunk_size_bytes=options.tablet_copy_transfer_chunk_size_bytes,
            idle_timeout_s=options.tablet_copy_idle_timeout_sec,
            location=lambda: self.heartbeater.own_location,
        )
        self.tablets.max_copies = options.num_tablets_to_copy_simultaneously
        self.tablets.copy_client = TabletCopyClient(
            self.messenger,
            self.uuid,
            chunk_size_bytes=options.tablet_copy_transfer_chunk_size_bytes,
            fetches_in_flight=options.tablet_copy_download_threads_nums_per_session,
            max_retries=options.tablet_copy_fetch_max_retries,
            throttler=Throttler(options.tablet_copy_throttler_bytes_per_sec),
            counters=CopyCounters(),
            location=lambda: self.heartbeater.own_location,
        )
        self.copy_requester = TabletCopyRequester(
            self.uuid,
            self.messenger,
            self.transport.directory,
            self.heartbeater.location_of,
            lambda: self.address,
            interval_s=options.tablet_copy_start_interval_ms / 1000,
        )
        self.tablets.on_copy_needed = self._copy_needed
        self.transport.on_unknown_group = self._unknown_group
        TabletCopyService(self.uuid, self.copy_sources, self.tablets).register(self.rpc)
        self.metrics.watch(
            tablets=self.tablets.tablets,
            flushes=lambda: self.tablets.stores.flushes,
            scanners_open=lambda: len(self.scanners.sessions()),
            scanners_expired=lambda: self.scanners.expired,
            copy_counters=lambda: self.tablets.copy_client.counters if self.tablets.copy_client else None,
            copy_source=lambda: self.copy_sources,
            copies_in_progress=lambda: len(self.tablets.copies_in_progress()),
        )
        self._maintenance: asyncio.Task[None] | None = None
        self.pages = TabletServerPages(
            self.tablets,
            self.scanners,
            self.heartbeater,
            self.transport.directory,
            options,
            lambda: self.heartbeater.own_location,
        )

    def _add_pages(self, web: WebServer) -> None:
        self.pages.add_to(web)

    def status_fields(self) -> dict[str, Cell]:
        return self.pages.status_fields()

    def not_ready(self) -> list[str]:
        return self.pages.not_ready()

    def _identity(self) -> tuple[common_pb2.NodeInstancePB, common_pb2.ServerRegistrationPB]:
        return self.instance, self.registration()

    def _copy_needed(self, tablet: TabletReplica, peer_id: str) -> None:
        """A tablet this server leads cannot catch ``peer_id`` up from its log any more."""
        if not self.tserver_options.enable_tablet_copy:
            return
        self.copy_requester.copy_needed(tablet, peer_id, replace_live=True)

    def _unknown_group(self, peer_id: str, tablet_id: str) -> None:
        """``peer_id`` answered Raft messages of ``tablet_id`` saying it does not host it."""
        tablet = self.tablets.find(tablet_id)
        if tablet is None:
            return
        raft = tablet.raft
        if raft is not None:
            raft.note_contact(peer_id)  # reachable (being copied, or waiting for a copy): not failed
        if self.tserver_options.enable_tablet_copy:
            self.copy_requester.copy_needed(tablet, peer_id, replace_live=False)

    def _copy_status(self, response: tpb.GetTabletServerStatusResponsePB) -> None:
        client = self.tablets.copy_client
        if client is not None:
            counters = client.counters
            response.tablet_copies_started = counters.started
            response.tablet_copies_completed = counters.completed
            response.tablet_copies_failed = counters.failed
            response.tablet_copy_bytes_within_location = counters.bytes_within_location
            response.tablet_copy_bytes_across_locations = counters.bytes_across_locations
        response.tablet_copy_bytes_served = self.copy_sources.bytes_served
        response.location = self.heartbeater.own_location
        response.tablet_copies.extend(status.to_pb() for status in self.tablets.copy_statuses())

    async def _start(self) -> None:
        self.scanners.start()
        await asyncio.to_thread(self.copy_sources.clear_leftovers)
        self.copy_sources.start()
        self.heartbeater.start()
        await self.tablets.open_all()
        await self.metrics.refresh_disk_bytes()
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain(), name="tserver-maintenance")

    async def _stop(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
            await asyncio.gather(self._maintenance, return_exceptions=True)
        await self.heartbeater.stop()
        await self.copy_requester.close()
        await self.copy_sources.stop()
        await self.scanners.stop()
        self.scan_pool.shutdown(wait=True)  # quick: the stopped scanners wait for their calls
        await self.tablets.close()

    async def _maintain(self) -> None:
        interval = self.tserver_options.maintenance_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.tablets.flush_old_memrowsets(self.tserver_options.storage.flush_threshold_secs)
            await self.tablets.checkpoint_large_tablets(self.tserver_options.tablet_checkpoint_wal_size_bytes)
            await self.metrics.refresh_disk_bytes()
