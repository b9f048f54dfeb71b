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
- re-replication (:mod:`.replica_management`): the config change a tablet leader's last
  report calls for, sent to that leader (ChangeConfig with CAS, or a graceful LeaderStepDown);
  the server of a new replica is placed just before the change is sent.
- replicas no longer in their tablet's committed config: DeleteTablet(tombstone, CAS) to
  their server while it is live; a dead server's replicas wait until it reports again.
- moves the auto rebalancer (:mod:`.auto_rebalancer`) asks for: one BulkChangeConfig (CAS)
  to the tablet's leader that starts a 3-4-3 move; not retried (the next round plans again).
- leader affinity (a table's or range's placement policy naming a leader location): a leader
  reported outside that location is asked to hand leadership over gracefully (LeaderStepDown
  naming a live voter inside it, which the leader first brings up to date), at most once per
  ``LEADER_TRANSFER_PAUSE_ROUNDS`` intervals per tablet so the new leader's report can arrive.

At most one call per (kind, tablet, server) is in flight, and a failed one is retried no
sooner than one interval later.  Everything is idempotent on the tablet server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nyala.catalog import TableInfo, TabletInfo
from nyala.consensus.change_requests import bulk_change_request, change_item_pb, start_move_changes
from nyala.consensus.core import ChangeKind
from nyala.errors import Aborted, NotFound, NyalaError
from nyala.master.catalog_manager import CatalogManager
from nyala.master.leader import DEFAULT_LOCATION, LeaderView
from nyala.master.metrics import MasterMetrics
from nyala.master.replica_management import Repair, RepairKind
from nyala.master.ts_manager import TSManager
from nyala.placement import Move, place_replacement
from nyala.placement.constraint import in_subtree
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.services import (
    ALTER_SCHEMA,
    BULK_CHANGE_CONFIG,
    CHANGE_CONFIG,
    CREATE_TABLET,
    DELETE_TABLET,
    LEADER_STEP_DOWN,
)

__all__ = ["TabletTasks"]

log = logging.getLogger("nyala.master")

TaskKey = tuple[str, str, str]  # (kind, tablet id, server uuid)

#: Intervals to wait after asking for a leader transfer before asking again for the same tablet.
LEADER_TRANSFER_PAUSE_ROUNDS = 5


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
        kinds = ("create", "delete", "alter", "evict", "add", "step_down", "tombstone", "move", "leader")
        self.sent = dict.fromkeys(kinds, 0)
        self._unplaceable_logged: set[str] = set()  # tablets whose replacement found no server
        self._leader_asked: dict[str, float] = {}  # tablet id -> when a leader transfer was last sent
        #: Where placements are counted (the server's metrics).
        self.metrics = MasterMetrics()

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
        if view.repairs:
            view.sync_tservers(self._ts)  # placement's liveness, for replacements
        for tablet_id, repair in list(view.repairs.items()):
            tablet = catalog.tablet(tablet_id)
            if tablet is None or tablet.dead:
                view.repairs.pop(tablet_id, None)
                continue
            self._repair(view, tablet, repair)
        self._leader_affinity(view, now)
        if not self._manager.options.master_tombstone_evicted_tablet_replicas:
            view.evicted.clear()
        for (tablet_id, uuid), (reason, cas) in list(view.evicted.items()):
            descriptor = self._ts.get(uuid)
            if descriptor is None:
                del view.evicted[(tablet_id, uuid)]  # unregistered; a report would queue it again
            elif self._ts.is_live(descriptor):
                self._spawn(
                    ("tombstone", tablet_id, uuid),
                    functools.partial(self._tombstone, view, tablet_id, uuid, reason, cas),
                )

    def _repair(self, view: LeaderView, tablet: TabletInfo, repair: Repair) -> None:
        key = (repair.kind.value, tablet.tablet_id, repair.leader)
        if not self._due(key):
            return
        dest = ""
        if repair.kind is RepairKind.ADD:
            dest = self._place_replacement(view, tablet, repair)
            if not dest:
                return
        self._spawn(key, functools.partial(self._change, view, repair, dest))

    def _place_replacement(self, view: LeaderView, tablet: TabletInfo, repair: Repair) -> str:
        """A live server for the tablet's new replica ("" when there is none, logged once)."""
        table = view.catalog.table(tablet.table_id)
        if table is None:
            return ""
        current = [m.uuid for m in repair.members]
        try:
            # A strict table policy places inside its subtrees or nowhere: the tablet then stays
            # under-replicated (logged once; ksck says why) rather than leave its locations.
            placed = place_replacement(
                view.placement,
                tablet.table_id,
                tablet.range_key,
                table.num_replicas,
                [u for u in current if u in view.placement.by_uuid],
                now_s=time.monotonic(),
                leaving=[u for u in repair.leaving if u in view.placement.by_uuid],
                constraint=table.placement.for_range(tablet.partition.range),
            )
        except NyalaError as e:
            self.metrics.placed("replacement", "no_server")
            if tablet.tablet_id not in self._unplaceable_logged:
                self._unplaceable_logged.add(tablet.tablet_id)
                log.warning("tablet %s is under-replicated and no server can take a replica: %s", tablet.tablet_id, e)
            return ""
        self._unplaceable_logged.discard(tablet.tablet_id)
        self.metrics.placed("replacement", "policy_met" if placed.policy_met else "policy_violated")
        if not placed.policy_met:
            log.warning("replacement replica of tablet %s: %s", tablet.tablet_id, placed.explain())
        return placed.tserver_uuids[0]

    def _location_of(self, uuid: str) -> str | None:
        """A live server's location; None when it is not registered or not live."""
        descriptor = self._ts.get(uuid)
        if descriptor is None or not self._ts.is_live(descriptor):
            return None
        return descriptor.location or DEFAULT_LOCATION

    def _leader_affinity(self, view: LeaderView, now: float) -> None:
        """Ask leaders outside their tablet's leader location to hand over to a voter inside it."""
        pause = LEADER_TRANSFER_PAUSE_ROUNDS * self._interval_s
        self._leader_asked = {t: at for t, at in self._leader_asked.items() if now - at < pause}
        for table in view.catalog.all_tables():
            placement = table.placement
            if table.removed or placement.empty:
                continue
            for tablet in view.catalog.tablets_of(table.table_id):
                wanted = placement.for_range(tablet.partition.range).leader_location
                if not wanted or not tablet.running or tablet.tablet_id in self._leader_asked:
                    continue
                if tablet.tablet_id in view.repairs:
                    continue  # a config change is owed first
                leader, _ = view.replicas.leader(tablet.tablet_id)
                where = self._location_of(leader) if leader else None
                if where is None or in_subtree(where, wanted):
                    continue
                voters = [
                    p.permanent_uuid
                    for p in tablet.entry.committed_config.peers
                    if p.member_type == consensus_pb2.VOTER and p.permanent_uuid != leader
                ]
                inside = sorted(u for u in voters if (loc := self._location_of(u)) and in_subtree(loc, wanted))
                if not inside:
                    continue  # nobody to hand over to: the leader stays where it is
                self._leader_asked[tablet.tablet_id] = now
                key = ("leader", tablet.tablet_id, leader)
                self._spawn(key, functools.partial(self._transfer_leader, tablet.tablet_id, leader, inside[0], wanted))

    async def _transfer_leader(self, tablet_id: str, leader: str, target: str, wanted: str) -> None:
        request = cpb.LeaderStepDownRequestPB(dest_uuid=leader, tablet_id=tablet_id, new_leader_uuid=target)
        await self._call(leader, LEADER_STEP_DOWN, request)
        log.info("leader affinity: asked %s to hand tablet %s over to %s in %s", leader, tablet_id, target, wanted)

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

    def _due(self, key: TaskKey) -> bool:
        """No call for ``key`` in flight, and no retry pending."""
        return key not in self._calls and asyncio.get_running_loop().time() >= self._retry_at.get(key, 0.0)

    def _spawn(self, key: TaskKey, call: Callable[[], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        if not self._due(key):
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

    def in_flight(self) -> list[TaskKey]:
        """(kind, tablet id, server uuid) of the calls running now."""
        return list(self._calls)

    def retries_pending(self) -> dict[TaskKey, float]:
        """Calls that failed and wait to be retried, with the loop time of the retry."""
        return dict(self._retry_at)

    def start_move(self, tablet_id: str, leader: str, cas_config_index: int, move: Move) -> bool:
        """Send the BulkChangeConfig that starts ``move`` to the tablet's ``leader``, unless a
        move of that tablet is in flight or failed within the last interval; True when sent."""
        key = ("move", tablet_id, leader)
        if not self._due(key):
            return False
        self._spawn(key, functools.partial(self._move, tablet_id, leader, cas_config_index, move))
        return True

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

    async def _change(self, view: LeaderView, repair: Repair, dest: str) -> None:
        """Send one re-replication step to the tablet's leader."""
        tablet_id, leader = repair.tablet_id, repair.leader
        if repair.kind is RepairKind.STEP_DOWN:
            step_down = cpb.LeaderStepDownRequestPB(dest_uuid=leader, tablet_id=tablet_id)  # graceful
            await self._call(leader, LEADER_STEP_DOWN, step_down)
            log.info("asked the leader %s of tablet %s, marked for replacement, to step down", leader, tablet_id)
        else:
            request = cpb.ChangeConfigRequestPB(
                dest_uuid=leader, tablet_id=tablet_id, cas_config_opid_index=repair.cas_config_index
            )
            if repair.kind is RepairKind.EVICT:
                request.type = cpb.REMOVE_PEER
                request.peer.permanent_uuid = repair.target
            else:
                address = self._ts.address_of(dest)
                if address is None:
                    raise NotFound(f"tablet server {dest} is not registered")
                request.type = cpb.ADD_PEER
                request.peer.permanent_uuid = dest
                request.peer.member_type = consensus_pb2.NON_VOTER
                request.peer.promote = True
                request.peer.last_known_addr.host, request.peer.last_known_addr.port = address.host, address.port
            try:
                await self._call(leader, CHANGE_CONFIG, request)
            except Aborted as e:  # CAS_FAILED: the config moved on; its leader's next report decides again
                log.info("re-replication of tablet %s skipped: %s", tablet_id, e)
            else:
                what = f"removed {repair.target} from" if repair.kind is RepairKind.EVICT else f"added {dest} to"
                log.info("re-replication: %s tablet %s (config index %d)", what, tablet_id, repair.cas_config_index)
        if view.repairs.get(tablet_id) is repair:
            del view.repairs[tablet_id]

    async def _move(self, tablet_id: str, leader: str, cas_config_index: int, move: Move) -> None:
        items = [
            change_item_pb(change, self._address(change.peer_id) if change.kind is ChangeKind.ADD_PEER else "")
            for change in start_move_changes(move.from_uuid, move.to_uuid)
        ]
        request = bulk_change_request(leader, tablet_id, items, cas_config_index)
        try:
            await self._call(leader, BULK_CHANGE_CONFIG, request)
        except Aborted as e:  # CAS_FAILED: the config moved on; the next round plans again
            log.info("auto rebalancing: move of tablet %s not started: %s", tablet_id, e)
            return
        log.info(
            "auto rebalancing: moving tablet %s from %s to %s (%s, config index %d)",
            tablet_id,
            move.from_uuid,
            move.to_uuid,
            move.phase,
            cas_config_index,
        )

    async def _tombstone(self, view: LeaderView, tablet_id: str, uuid: str, reason: str, cas: int) -> None:
        request = tpb.DeleteTabletRequestPB(
            dest_uuid=uuid, tablet_id=tablet_id, reason=reason, tombstone=True, cas_config_opid_index_less_or_equal=cas
        )
        try:
            await self._call(uuid, DELETE_TABLET, request)
            log.info("tombstoned the replica of tablet %s on %s: %s", tablet_id, uuid, reason)
        except (NotFound, Aborted) as e:  # gone already, or it knows a newer config: its report decides
            log.debug("replica of tablet %s on %s not tombstoned: %s", tablet_id, uuid, e)
        if view.evicted.get((tablet_id, uuid), (reason, cas)) == (reason, cas):
            view.evicted.pop((tablet_id, uuid), None)

    async def _call(self, uuid: str, method: Any, request: Any) -> Any:
        return await self._messenger.call(self._address(uuid), method, request, timeout=self._rpc_timeout_s)


def _partition_schema_json(table: TableInfo) -> bytes:
    return json.dumps(table.partitioner.partition_schema.to_dict(), sort_keys=True).encode()
