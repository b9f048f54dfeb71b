"""The tablet server process: tablets, their services, scanners, heartbeats, maintenance."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from nyala.proto import common_pb2
from nyala.server import ServerBase
from nyala.tserver.admin import AdminService
from nyala.tserver.consensus_admin import ConsensusAdminService
from nyala.tserver.heartbeat import Heartbeater
from nyala.tserver.manager import TabletManager
from nyala.tserver.options import TabletServerOptions
from nyala.tserver.result_tracker import ResultTracker
from nyala.tserver.scanners import ScannerRegistry
from nyala.tserver.service import TabletService

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
        self.scanners = ScannerRegistry(options.scanner_ttl_ms)
        # Scan calls read their batches on as many threads as the storage may use: the
        # server's share of the cores.  The shared default executor spread them over up to
        # six threads: more CPU a row and about 10 % lower scan rates, measured.
        self.scan_pool = ThreadPoolExecutor(options.storage.threads, thread_name_prefix="tserver-scan")
        self.service = TabletService(self.tablets, self.scanners, self.scan_pool, options, self._identity)
        self.admin = AdminService(self.uuid, self.tablets, self.scanners, self.transport.directory)
        self.consensus_admin = ConsensusAdminService(self.uuid, self.tablets, self.transport.directory)
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
        )
        self.tablets.on_change = self.heartbeater.trigger
        self._maintenance: asyncio.Task[None] | None = None

    def _identity(self) -> tuple[common_pb2.NodeInstancePB, common_pb2.ServerRegistrationPB]:
        return self.instance, self.registration()

    async def _start(self) -> None:
        self.scanners.start()
        self.heartbeater.start()
        await self.tablets.open_all()
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain(), name="tserver-maintenance")

    async def _stop(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
            await asyncio.gather(self._maintenance, return_exceptions=True)
        await self.heartbeater.stop()
        await self.scanners.stop()
        self.scan_pool.shutdown(wait=True)  # quick: the stopped scanners wait for their calls
        await self.tablets.close()

    async def _maintain(self) -> None:
        interval = self.tserver_options.maintenance_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.tablets.flush_old_memrowsets(self.tserver_options.storage.flush_threshold_secs)
            await self.tablets.checkpoint_large_tablets(self.tserver_options.tablet_checkpoint_wal_size_bytes)
