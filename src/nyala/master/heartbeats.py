"""TSHeartbeat: registration and liveness on every master, tablet reports on the leader.

Every master records the heartbeat (:class:`~nyala.master.ts_manager.TSManager`), asks an
unknown or restarted tablet server to register again, and answers with whether it is the
leader and, when the server's copy is not the current version, where every tablet server is.
Only the ready leader processes tablet reports (seed 002); it asks for a full report on the
first heartbeat of each tablet server in its term and after a re-registration, so that its
in-memory replica view is complete.

A report is processed per tablet:

- no catalog record: left alone, only logged (seed 002: true orphans are never deleted, since
  deleted tablets are kept as tombstones);
- a DELETED tablet or a removed table: the replica is queued for DeleteTablet unless it
  already is a tombstone;
- otherwise the report is recorded (role, term, schema version) and, when the tablet leaves
  CREATING (a leader is reported), its leader reports a newer committed config, or a new
  leader reports itself, the tablet is persisted with one catalog write per report; a leader
  reporting an older schema version than the table's queues an AlterSchema.

A report whose catalog write fails is answered with ``needs_full_tablet_report`` so the
tablet server sends everything again.
"""

from __future__ import annotations

import logging
import time

from nyala.catalog import TabletInfo, copy_tablet_entry, tablet_mutation
from nyala.errors import NyalaError, ServiceUnavailable
from nyala.master.catalog_manager import CatalogManager
from nyala.master.leader import LeaderView
from nyala.master.location_mapping import LocationMapper, LocationMappingError
from nyala.master.metrics import MasterMetrics
from nyala.master.replica_management import decide, stale_replica_cas
from nyala.master.replicas import ReplicaReport
from nyala.master.tablet_tasks import TabletTasks
from nyala.master.ts_manager import TSManager, registration_address
from nyala.placement.constraint import PlacementConstraint
from nyala.proto import common_pb2, consensus_pb2, consensus_rpc_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext

__all__ = ["HeartbeatHandler", "tablet_update"]

log = logging.getLogger("nyala.master")

TABLET = mpb.SysTabletsEntryPB
_REFUSAL_LOG_INTERVAL_S = 60.0


class HeartbeatHandler:
    """The TSHeartbeat RPC handler."""

    def __init__(
        self,
        instance: common_pb2.NodeInstancePB,
        ts_manager: TSManager,
        manager: CatalogManager,
        tasks: TabletTasks,
        locations: LocationMapper | None = None,
    ) -> None:
        self._instance = instance
        self._ts = ts_manager
        self._manager = manager
        self._tasks = tasks
        self._locations = locations
        self._orphans_logged: set[str] = set()
        self._refusals_logged: dict[str, float] = {}  # tablet server uuid -> when last logged
        #: Where heartbeats are counted (the server's metrics; nothing exported by default).
        self.metrics = MasterMetrics()

    async def handle(self, request: mpb.TSHeartbeatRequestPB, ctx: CallContext) -> mpb.TSHeartbeatResponsePB:
        self.metrics.heartbeats.value += 1
        location = await self._registration_location(request) if request.HasField("registration") else ""
        outcome = self._ts.heartbeat(request, location)
        version = self._ts.addresses_version
        response = mpb.TSHeartbeatResponsePB(
            master_instance=self._instance,
            leader_master=self._manager.leader_ready,
            needs_reregister=outcome.needs_reregister,
            tablet_report_sequence_number=request.tablet_report.sequence_number,
            tserver_addresses_version=version,
        )
        if request.tserver_addresses_version != version:  # it lacks the current address book
            response.tserver_addresses.extend(self._ts.peer_addresses())
        if response.leader_master:  # the leader's members are the ones to follow (masters added or removed)
            response.master_addresses.extend(
                common_pb2.HostPortPB(host=a.host, port=a.port) for a in self._manager.peers.addresses
            )
        descriptor = outcome.descriptor
        if descriptor is None:
            return response
        response.location = descriptor.location
        try:
            view = self._manager.leader()
        except NyalaError:
            return response  # followers only track liveness
        view.ensure_tserver(descriptor.uuid, descriptor.location)
        report = request.tablet_report if request.HasField("tablet_report") else None
        full = report is not None and not report.is_incremental
        if descriptor.full_report_term != view.term and not full:
            response.needs_full_tablet_report = True
        if report is None:
            return response
        try:
            await self._process(view, descriptor.uuid, report)
        except NyalaError as e:
            log.warning("tablet report of %s not processed (%s); asking for a full report", descriptor.uuid, e)
            response.needs_full_tablet_report = True
            return response
        if full:
            descriptor.full_report_term = view.term
        return response

    async def _registration_location(self, request: mpb.TSHeartbeatRequestPB) -> str:
        """The location of a registering tablet server, resolved again now; refuses it on failure.

        The refusal is ServiceUnavailable: the tablet server keeps its registration pending and
        sends it again with a later heartbeat, which runs the command again.
        """
        if self._locations is None:
            return ""
        uuid = request.instance.permanent_uuid
        host = registration_address(uuid, request.registration).host
        try:
            location = await self._locations.location_of_tserver(host)
        except LocationMappingError as exc:
            # Logged at WARNING at most once a minute per server (Kudu's rate); retries in between at DEBUG.
            now = time.monotonic()
            loud = now - self._refusals_logged.get(uuid, -_REFUSAL_LOG_INTERVAL_S) >= _REFUSAL_LOG_INTERVAL_S
            if loud:
                self._refusals_logged[uuid] = now
            level = logging.WARNING if loud else logging.DEBUG
            log.log(level, "refused the registration of tablet server %s at %s: %s", uuid, host, exc)
            raise ServiceUnavailable(f"registration of tablet server {uuid} refused: {exc}") from None
        self._refusals_logged.pop(uuid, None)
        known = self._ts.get(uuid)
        if known is None or known.location != location:
            log.info("tablet server %s at %s is in location %s", uuid, host, location)
        return location

    async def _process(self, view: LeaderView, uuid: str, report: mpb.TabletReportPB) -> None:
        updates: dict[str, mpb.ReportedTabletPB] = {}
        for reported in report.updated_tablets:
            if self._record(view, uuid, reported):
                updates[reported.tablet_id] = reported
        for tablet_id in report.removed_tablet_ids:
            view.forget_report(uuid, tablet_id)
        if not report.is_incremental:
            listed = {r.tablet_id for r in report.updated_tablets}
            for tablet_id in view.replicas.tablets_of(uuid) - listed:
                view.forget_report(uuid, tablet_id)
        if updates:
            await self._persist(uuid, updates)
        self._manager.changed()
        self._tasks.kick()

    def _record(self, view: LeaderView, uuid: str, reported: mpb.ReportedTabletPB) -> bool:
        """Note one reported replica; True when its tablet needs a catalog write."""
        tablet = view.catalog.tablet(reported.tablet_id)
        if tablet is None:
            if reported.tablet_id not in self._orphans_logged:
                self._orphans_logged.add(reported.tablet_id)
                log.warning(
                    "tablet server %s reports tablet %s, which the catalog never had; leaving it",
                    uuid,
                    reported.tablet_id,
                )
            return False
        table = view.catalog.table(tablet.table_id)
        replica = ReplicaReport.of(reported)
        if tablet.dead or table is None or table.removed:
            view.forget_report(uuid, tablet.tablet_id)
            if not replica.tombstoned:
                view.deletes[(tablet.tablet_id, uuid)] = tablet.entry.state_msg or "the tablet was deleted"
            return False
        view.record_report(uuid, tablet, replica)
        cstate = reported.consensus_state if reported.HasField("consensus_state") else None
        cas = stale_replica_cas(
            uuid, reported.state, None if cstate is None else cstate.committed_config, tablet.entry.committed_config
        )
        if cas is not None:
            reason = f"not in the committed config of tablet {tablet.tablet_id} at index {cas}"
            view.evicted[(tablet.tablet_id, uuid)] = (reason, cas)
        leads = replica.role == common_pb2.LEADER and replica.leader_uuid == uuid
        if leads and replica.schema_version < table.version:
            view.altering.add(table.table_id)
        if leads and cstate is not None and not tablet.creating:
            constraint = table.placement.for_range(tablet.partition.range)
            self._consider_repair(view, uuid, reported.state, cstate, table.num_replicas, constraint)
        return tablet_update(tablet, uuid, reported) is not None

    def _consider_repair(
        self,
        view: LeaderView,
        uuid: str,
        state: int,
        cstate: consensus_rpc_pb2.ConsensusStatePB,
        rf: int,
        constraint: PlacementConstraint | None = None,
    ) -> None:
        """Remember the config change this leader's report calls for, or that none is due."""
        maintenance = frozenset(
            p.permanent_uuid for p in cstate.committed_config.peers if view.in_maintenance(p.permanent_uuid)
        )
        repair = decide(
            uuid, state, cstate, rf, in_maintenance=maintenance, location_of=self._location_of, constraint=constraint
        )
        if repair is None or not self._manager.options.replica_management_allows(repair.kind):
            view.repairs.pop(cstate.tablet_id, None)
        else:
            view.repairs[cstate.tablet_id] = repair

    def _location_of(self, uuid: str) -> str:
        descriptor = self._ts.get(uuid)
        return "" if descriptor is None else descriptor.location

    async def _persist(self, uuid: str, updates: dict[str, mpb.ReportedTabletPB]) -> None:
        async def write() -> None:
            view = self._manager.leader()
            write = mpb.CatalogWritePB()
            for tablet_id, reported in updates.items():
                tablet = view.catalog.tablet(tablet_id)  # re-read: it may have changed meanwhile
                entry = None if tablet is None or tablet.dead else tablet_update(tablet, uuid, reported)
                if entry is not None:
                    write.mutations.append(tablet_mutation(tablet_id, entry))
            if write.mutations:
                await self._manager.replicate(view, write)

        await self._manager.exclusive(write)


def tablet_update(tablet: TabletInfo, uuid: str, reported: mpb.ReportedTabletPB) -> mpb.SysTabletsEntryPB | None:
    """The tablet's new catalog entry after this report, or None when nothing persistent changed."""
    cs = reported.consensus_state
    usable = reported.state not in (tpb.TOMBSTONED, tpb.FAILED)
    entry: mpb.SysTabletsEntryPB | None = None
    if tablet.creating and cs.leader_uuid and usable:
        entry = copy_tablet_entry(tablet.entry)
        entry.state = TABLET.RUNNING
        entry.state_msg = "a replica reported a leader"
        entry.leader_uuid = cs.leader_uuid
        entry.reported_term = cs.current_term
    leads = cs.role == common_pb2.LEADER and cs.leader_uuid == uuid and usable
    if leads and cs.committed_config.peers and _newer_config(cs, tablet.entry):
        entry = entry or copy_tablet_entry(tablet.entry)
        entry.committed_config.CopyFrom(cs.committed_config)
        entry.leader_uuid = uuid
        entry.reported_term = cs.current_term
    elif leads and _new_leader(cs, entry or tablet.entry):
        # A new leader is persisted too (seed 002: the catalog holds each tablet's current
        # leader), so a follower master's locations, served from the catalog alone, name it.
        entry = entry or copy_tablet_entry(tablet.entry)
        entry.leader_uuid = uuid
        entry.reported_term = cs.current_term
    return entry


def _new_leader(cs: consensus_rpc_pb2.ConsensusStatePB, stored: mpb.SysTabletsEntryPB) -> bool:
    return stored.leader_uuid != cs.leader_uuid and cs.current_term >= stored.reported_term


def _newer_config(cs: consensus_rpc_pb2.ConsensusStatePB, stored: mpb.SysTabletsEntryPB) -> bool:
    reported, known = cs.committed_config, stored.committed_config
    if cs.current_term < stored.reported_term or reported.opid_index < known.opid_index:
        return False
    return _members(reported) != _members(known) or reported.opid_index != known.opid_index


def _members(config: consensus_pb2.RaftConfigPB) -> list[tuple[str, int, bool, bool]]:
    return [(p.permanent_uuid, p.member_type, p.attrs.promote, p.attrs.replace) for p in config.peers]
