"""The leader master's background work on tablet servers: create, delete and alter tablets.

Seed 002, step 7 of the ordering contract: RPCs go out only after the catalog write that
calls for them has replicated and been committed to memory, and "the work done by an RPC must
take place, either by retrying the RPC until it succeeds, or through some other mechanism".
One loop per leadership term scans the :class:`~nyala.master.leader.LeaderView`'s owed work
every ``heartbeat_interval_ms`` (and at once when kicked after a commit or a report):

- CREATING tablets: CreateTablet to each replica of the committed config that has not
  reported the tablet yet, until a report shows a leader (the tablet becomes RUNNING).
- replicas of DELETED tablets: DeleteTablet(tombstone) until it succeeds; a replica that
  shows up in a report later is queued again by the report.
- tables whose tablets lag the table's schema version: AlterSchema to each lagging tablet's
  leader until it acknowledges.

At most one call per (kind, tablet, server) is in flight, and a failed one is retried no
sooner than one interval later.  Everything is idempotent on the tablet server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Callable

from nyala.catalog import TableInfo, TabletInfo
from nyala.errors import NotFound, NyalaError
from nyala.master.catalog_manager import CatalogManager
from nyala.master.leader import LeaderView
from nyala.master.ts_manager import TSManager
from nyala.proto import common_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.services import ALTER_SCHEMA, CREATE_TABLET, DELETE_TABLET

__all__ = ["TabletTasks"]

log = logging.getLogger("nyala.master")

TaskKey = tuple[str, str, str]  # (kind, tablet id, server uuid)


class TabletTasks:
    """Sends the tablet-server RPCs the leader's catalog calls for, with retries."""

    def __init__(
        self,
        manager: CatalogManager,
        ts_manager: TSManager,
        messenger: Messenger,
        *,
        interval_s: float,
        rpc_timeout_s: float,
    ) -> None:
        self._manager = manager
        self._ts = ts_manager
        self._messenger = messenger
        self._interval_s = interval_s
        self._rpc_timeout_s = rpc_timeout_s
        self._loop_task: asyncio.Task[None] | None = None
        self._calls: dict[TaskKey, asyncio.Task[None]] = {}
        self._retry_at: dict[TaskKey, float] = {}
        self._kick = asyncio.Event()
        #: Counters, for tests and logs.
        self.sent = {"create": 0, "delete": 0, "alter": 0}

    def start(self, view: LeaderView) -> None:
        self.stop()
        self._loop_task = asyncio.get_running_loop().create_task(self._run(view), name="tablet-tasks")

    def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None
        for task in self._calls.values():
            task.cancel()
        self._calls.clear()
        self._retry_at.clear()

    async def close(self) -> None:
        tasks = [t for t in (self._loop_task, *self._calls.values()) if t is not None]
        self.stop()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def kick(self) -> None:
        self._kick.set()

    async def _run(self, view: LeaderView) -> None:
        while True:
            self._kick.clear()
            try:
                self._round(view)
            except Exception:  # a bug in one round must not stop the retries of the next
                log.exception("tablet task round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self._interval_s)

    def _round(self, view: LeaderView) -> None:
        now = asyncio.get_running_loop().time()
        self._retry_at = {k: t for k, t in self._retry_at.items() if t > now}  # forget settled work
        catalog = view.catalog
        for tablet_id in list(view.creating):
            tablet = catalog.tablet(tablet_id)
            table = catalog.table(tablet.table_id) if tablet is not None else None
            if tablet is None or table is None or not tablet.creating:
                view.creating.discard(tablet_id)
                continue
            for uuid in tablet.replicas:
                if view.replicas.report(uuid, tablet_id) is None:
                    self._spawn(("create", tablet_id, uuid), functools.partial(self._create, tablet, table, uuid))
        for (tablet_id, uuid), reason in list(view.deletes.items()):
            if self._ts.get(uuid) is None:
                del view.deletes[(tablet_id, uuid)]  # unreachable; its next report queues it again
                continue
            self._spawn(("delete", tablet_id, uuid), functools.partial(self._delete, view, tablet_id, uuid, reason))
        for table_id in list(view.altering):
            self._alter_table(view, table_id)

    def _alter_table(self, view: LeaderView, table_id: str) -> None:
        table = view.catalog.table(table_id)
        if table is None or table.removed:
            view.altering.discard(table_id)
            return
        lagging = False
        for tablet in view.catalog.tablets_of(table_id):
            version = view.replicas.leader_schema_version(tablet.tablet_id)
            if tablet.creating or (version is not None and version >= table.version):
                continue
            lagging = True
            leader = view.leader_of(tablet)
            if leader:
                self._spawn(
                    ("alter", tablet.tablet_id, leader), functools.partial(self._alter, view, tablet, table, leader)
                )
        if not lagging:
            view.altering.discard(table_id)
            self._manager.changed()

    def _spawn(self, key: TaskKey, call: Callable[[], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        if key in self._calls or loop.time() < self._retry_at.get(key, 0.0):
            return
        self.sent[key[0]] += 1

        async def run() -> None:
            try:
                await call()
                self._retry_at.pop(key, None)
            except NyalaError as e:
                log.info("%s of tablet %s on %s failed, will retry: %s", key[0], key[1], key[2], e)
                self._retry_at[key] = loop.time() + self._interval_s
            finally:
                self._calls.pop(key, None)

        self._calls[key] = loop.create_task(run(), name=f"{key[0]}-{key[1][:8]}-{key[2][:8]}")

    # -- the calls -----------------------------------------------------------------------------

    def _address(self, uuid: str) -> str:
        address = self._ts.address_of(uuid)
        if address is None:
            raise NotFound(f"tablet server {uuid} is not registered")
        return str(address)

    async def _create(self, tablet: TabletInfo, table: TableInfo, uuid: str) -> None:
        peers = []
        for peer_uuid in tablet.replicas:
            address = self._ts.address_of(peer_uuid)
            if address is None:
                raise NotFound(f"replica {peer_uuid} of tablet {tablet.tablet_id} is not registered yet")
            peers.append(
                tpb.PeerAddressPB(
                    permanent_uuid=peer_uuid, rpc_address=common_pb2.HostPortPB(host=address.host, port=address.port)
                )
            )
        request = tpb.CreateTabletRequestPB(
            dest_uuid=uuid,
            table_id=table.table_id,
            table_name=table.name,
            tablet_id=tablet.tablet_id,
            partition=tablet.entry.partition,
            partition_schema=_partition_schema_json(table),
            schema=table.schema.to_json(),
            schema_version=table.version,
            config=tablet.entry.committed_config,
            peer_addresses=peers,
        )
        await self._messenger.call(self._address(uuid), CREATE_TABLET, request, timeout=self._rpc_timeout_s)
        log.debug("created replica of tablet %s (table %s) on %s", tablet.tablet_id, table.name, uuid)

    async def _delete(self, view: LeaderView, tablet_id: str, uuid: str, reason: str) -> None:
        request = tpb.DeleteTabletRequestPB(dest_uuid=uuid, tablet_id=tablet_id, reason=reason, tombstone=True)
        try:
            await self._messenger.call(self._address(uuid), DELETE_TABLET, request, timeout=self._rpc_timeout_s)
        except NotFound:
            pass  # the server never had it: nothing to delete
        view.deletes.pop((tablet_id, uuid), None)
        log.debug("deleted replica of tablet %s on %s (%s)", tablet_id, uuid, reason)

    async def _alter(self, view: LeaderView, tablet: TabletInfo, table: TableInfo, uuid: str) -> None:
        request = tpb.AlterSchemaRequestPB(
            dest_uuid=uuid, tablet_id=tablet.tablet_id, schema=table.schema.to_json(), schema_version=table.version
        )
        await self._messenger.call(self._address(uuid), ALTER_SCHEMA, request, timeout=self._rpc_timeout_s)
        view.replicas.set_schema_version(uuid, tablet.tablet_id, table.version)
        self._manager.changed()
        self.kick()


def _partition_schema_json(table: TableInfo) -> bytes:
    return json.dumps(table.partitioner.partition_schema.to_dict(), sort_keys=True).encode()
