"""Everything a leader master keeps in memory for one term, built when it becomes leader-ready.

A :class:`LeaderView` holds the catalog (rebuilt from the sys catalog), the placement view,
the replica reports, and the work the background tasks still owe tablet servers: tablets
being created, replicas to delete, tables whose tablets lag the table's schema version.  It
is thrown away when the master stops leading; the next term builds a fresh one, so stale
memory never outlives a leadership.

:meth:`LeaderView.commit` is seed 002's commit step: called only after a write replicated, it
applies the write to the catalog and derives the follow-up work from what changed.
"""

from __future__ import annotations

import dataclasses
import logging
import random

from nyala.catalog import CatalogState, TableInfo, TabletInfo
from nyala.errors import NotFound
from nyala.master.replica_management import Repair
from nyala.master.replicas import ReplicaReport, ReplicaView
from nyala.master.ts_manager import TSManager
from nyala.placement import ClusterState, PlacementOptions
from nyala.proto import master_pb2 as mpb

__all__ = ["LeaderView"]

log = logging.getLogger("nyala.master")

#: Placement's location of tablet servers without one (Kudu's name for it); clients see "".
DEFAULT_LOCATION = "/default"


@dataclasses.dataclass
class LeaderView:
    term: int
    catalog: CatalogState
    placement: ClusterState
    replicas: ReplicaView = dataclasses.field(default_factory=ReplicaView)
    #: Tablets in CREATING: the tablet task sends CreateTablet to replicas that do not report them.
    creating: set[str] = dataclasses.field(default_factory=set)
    #: (tablet id, server uuid) -> reason: replicas of dead tablets still to be deleted.
    deletes: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    #: Tables whose tablets' leaders report an older schema version than the table's.
    altering: set[str] = dataclasses.field(default_factory=set)
    #: Tablet id -> the config change its leader's last report calls for (re-replication).
    repairs: dict[str, Repair] = dataclasses.field(default_factory=dict)
    #: (tablet id, server uuid) -> (reason, CAS index): replicas no longer in their tablet's
    #: committed config, to tombstone with DeleteTablet only while that index still holds.
    evicted: dict[tuple[str, str], tuple[str, int]] = dataclasses.field(default_factory=dict)
    #: Replicas counted in ``placement``: (server uuid, tablet id) -> (table id, range key).
    counted: dict[tuple[str, str], tuple[str, bytes]] = dataclasses.field(default_factory=dict)

    @classmethod
    def build(cls, term: int, catalog: CatalogState, placement_options: PlacementOptions) -> LeaderView:
        view = cls(term, catalog, ClusterState(random.Random(), placement_options))
        view.creating = {t.tablet_id for t in catalog.all_tablets() if t.creating}
        return view

    # -- commit --------------------------------------------------------------------------

    def commit(self, write: mpb.CatalogWritePB) -> None:
        """Apply a replicated write to memory and queue the tablet-server work it implies."""
        old_tablets = {
            m.entry_id: self.catalog.tablet(m.entry_id) for m in write.mutations if m.entry_type == mpb.TABLETS_ENTRY
        }
        old_tables = {
            m.entry_id: self.catalog.table(m.entry_id) for m in write.mutations if m.entry_type == mpb.TABLES_ENTRY
        }
        self.catalog.apply(write)
        for tablet_id, old in old_tablets.items():
            new = self.catalog.tablet(tablet_id)
            if new is None:
                continue
            if new.creating:
                self.creating.add(tablet_id)
            else:
                self.creating.discard(tablet_id)
            if new.dead and (old is None or not old.dead):
                self._tablet_died(new)
            elif old is not None and not new.dead:
                self._config_changed(old, new)
        for table_id, old_table in old_tables.items():
            table = self.catalog.table(table_id)
            if table is None or table.removed:
                self.altering.discard(table_id)
            elif old_table is not None and table.version != old_table.version:
                self.altering.add(table_id)

    def _config_changed(self, old: TabletInfo, new: TabletInfo) -> None:
        """Members the new committed config dropped are tombstoned (CAS: the config they knew)."""
        before = old.entry.committed_config
        after = new.entry.committed_config
        if after.opid_index <= before.opid_index:
            return
        gone = set(old.replicas) - set(new.replicas)
        for uuid in gone:
            reason = f"removed from the config of tablet {new.tablet_id} at index {after.opid_index}"
            self.evicted[(new.tablet_id, uuid)] = (reason, before.opid_index)
        # A repair decided on an older config is void: the next report decides again.  One decided
        # from the very report that carries this config stays: its leader reports again only when
        # something changes, and the report that made this write may be its last for a long while
        # (the eviction after a promotion was lost that way whenever the tablet tasks did not run
        # while this write replicated).
        repair = self.repairs.get(new.tablet_id)
        if repair is not None and repair.cas_config_index < after.opid_index:
            del self.repairs[new.tablet_id]

    def _tablet_died(self, tablet: TabletInfo) -> None:
        reason = tablet.entry.state_msg or "tablet deleted"
        for uuid in {*tablet.replicas, *self.replicas.reports(tablet.tablet_id)}:
            self.deletes[(tablet.tablet_id, uuid)] = reason
            self.uncount(uuid, tablet.tablet_id)
        self.replicas.forget_tablet(tablet.tablet_id)
        self.creating.discard(tablet.tablet_id)
        self.repairs.pop(tablet.tablet_id, None)
        for key in [k for k in self.evicted if k[0] == tablet.tablet_id]:
            del self.evicted[key]

    # -- placement counts ------------------------------------------------------------------

    def sync_tservers(self, ts_manager: TSManager) -> int:
        """Bring placement's servers and liveness up to date; returns the number of live servers."""
        live = 0
        for descriptor in ts_manager.all():
            is_live = ts_manager.is_live(descriptor)
            live += is_live
            location = descriptor.location or DEFAULT_LOCATION
            self.placement.register_tserver(descriptor.uuid, location, live=is_live)
        return live

    def ensure_tserver(self, uuid: str, location: str) -> None:
        """Make a heartbeating server known to placement (so its reported replicas count), where it is."""
        location = location or DEFAULT_LOCATION
        known = self.placement.by_uuid.get(uuid)
        if known is None or known.location != location:
            self.placement.register_tserver(uuid, location, live=True)

    def count(self, server_uuid: str, tablet: TabletInfo) -> None:
        """Count a reported replica in placement (once)."""
        key = (server_uuid, tablet.tablet_id)
        if key in self.counted or server_uuid not in self.placement.by_uuid:
            return
        value = (tablet.table_id, tablet.range_key)
        self.placement.add_replica(*value, server_uuid)
        self.counted[key] = value

    def uncount(self, server_uuid: str, tablet_id: str) -> None:
        value = self.counted.pop((server_uuid, tablet_id), None)
        if value is not None:
            try:
                self.placement.remove_replica(*value, server_uuid)
            except NotFound:  # the server was removed from placement meanwhile
                log.debug("replica of %s on %s was no longer counted", tablet_id, server_uuid)

    def record_report(self, server_uuid: str, tablet: TabletInfo, report: ReplicaReport) -> None:
        self.replicas.record(server_uuid, tablet.tablet_id, report)
        if report.tombstoned:
            self.uncount(server_uuid, tablet.tablet_id)
        else:
            self.count(server_uuid, tablet)

    def forget_report(self, server_uuid: str, tablet_id: str) -> None:
        self.replicas.forget(server_uuid, tablet_id)
        self.uncount(server_uuid, tablet_id)

    def forget_tserver(self, uuid: str) -> None:
        """Drop an unregistered tablet server: its reports, counted replicas, queued deletes and placement."""
        for tablet_id in self.replicas.tablets_of(uuid):
            self.forget_report(uuid, tablet_id)
        for server_uuid, tablet_id in [k for k in self.counted if k[0] == uuid]:
            self.uncount(server_uuid, tablet_id)
        for key in [k for k in self.deletes if k[1] == uuid]:
            del self.deletes[key]
        for key in [k for k in self.evicted if k[1] == uuid]:
            del self.evicted[key]
        if uuid in self.placement.by_uuid:
            self.placement.remove_tserver(uuid)

    # -- questions --------------------------------------------------------------------------

    def in_maintenance(self, uuid: str) -> bool:
        """True while the tablet server is in maintenance mode (persisted in the sys catalog, so a
        new leader master knows it at once): its replicas are not to be re-replicated."""
        return self.catalog.in_maintenance(uuid)

    def leader_of(self, tablet: TabletInfo) -> str:
        """The tablet's leader as last reported, else the one persisted in the catalog."""
        leader, _ = self.replicas.leader(tablet.tablet_id)
        return leader or tablet.leader_uuid

    def create_done(self, table: TableInfo) -> bool:
        return all(t.running for t in self.catalog.tablets_of(table.table_id))

    def alter_done(self, table: TableInfo) -> bool:
        """Every live tablet RUNNING with its leader at the table's schema version."""
        for t in self.catalog.tablets_of(table.table_id):
            version = self.replicas.leader_schema_version(t.tablet_id)
            if not t.running or version is None or version < table.version:
                return False
        return True
