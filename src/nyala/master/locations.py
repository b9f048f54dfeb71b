"""Tablet locations for clients: which tablet servers hold each tablet, and in which role.

The replica set is the tablet's committed Raft config from the catalog (persistent, so a new
leader master answers correctly at once); the roles come from the latest reports (the leader
as reported, else the leader last persisted), VOTERs being FOLLOWERs and NON_VOTERs
LEARNERs otherwise.  Replicas on tablet servers this master has never heard from are left
out: a client could not reach them.  A follower master answering a read within a staleness
bound (:mod:`.follower_reads`) has no reports: its roles come from the leader persisted in the
catalog, which the leader master writes whenever a tablet's report shows a new leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nyala.catalog import CatalogState, TableInfo, TabletInfo
from nyala.errors import InvalidArgument, ServiceUnavailable
from nyala.master.ts_manager import TSManager
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import master_pb2 as mpb

__all__ = ["CatalogReadView", "table_locations", "tablet_locations"]


class CatalogReadView(Protocol):
    """What catalog reads are answered from: the leader's view, or a follower's applied catalog."""

    @property
    def catalog(self) -> CatalogState: ...

    def leader_of(self, tablet: TabletInfo) -> str: ...

    def create_done(self, table: TableInfo) -> bool: ...


TABLET = mpb.SysTabletsEntryPB


class _Builder:
    def __init__(self, view: CatalogReadView, ts_manager: TSManager) -> None:
        self.view = view
        self.ts = ts_manager
        self.ts_infos: list[common_pb2.TSInfoPB] = []
        self._index: dict[str, int] = {}

    def locations(self, tablet: TabletInfo) -> mpb.TabletLocationsPB:
        out = mpb.TabletLocationsPB(tablet_id=tablet.tablet_id, partition=tablet.entry.partition)
        leader = self.view.leader_of(tablet)
        for peer in tablet.entry.committed_config.peers:
            index = self._ts_index(peer.permanent_uuid)
            if index is None:
                continue
            if peer.permanent_uuid == leader:
                role = common_pb2.LEADER
            elif peer.member_type == consensus_pb2.VOTER:
                role = common_pb2.FOLLOWER
            else:
                role = common_pb2.LEARNER
            out.replicas.add(ts_info_idx=index, role=role)
        return out

    def _ts_index(self, uuid: str) -> int | None:
        index = self._index.get(uuid)
        if index is None:
            descriptor = self.ts.get(uuid)
            if descriptor is None:
                return None
            index = self._index[uuid] = len(self.ts_infos)
            self.ts_infos.append(descriptor.ts_info())
        return index


def table_locations(
    view: CatalogReadView, ts_manager: TSManager, request: mpb.GetTableLocationsRequestPB, ttl_ms: int
) -> mpb.GetTableLocationsResponsePB:
    """RUNNING tablets of the table overlapping the partition-key range, in partition-key order.

    The answer stops before the first tablet that is not RUNNING yet, so it never shows a gap
    that is not there; when the very first tablet of the range is still being created the
    answer is ServiceUnavailable (retry), as in Kudu.
    """
    table = view.catalog.find_table(request.table)
    start, end = request.partition_key_start, request.partition_key_end
    if end and start >= end:
        raise InvalidArgument(f"partition key range [{start.hex()}, {end.hex()}) is empty")
    builder = _Builder(view, ts_manager)
    response = mpb.GetTableLocationsResponsePB(ttl_millis=ttl_ms)
    limit = request.max_returned_locations
    for tablet in view.catalog.iter_tablets_in_range(table.table_id, start, end):
        if not tablet.running:
            if not response.tablet_locations:
                state = TABLET.State.Name(tablet.state)
                raise ServiceUnavailable(
                    f"tablet {tablet.tablet_id} of table {table.name!r} is not running yet ({state}); retry"
                )
            break
        response.tablet_locations.append(builder.locations(tablet))
        if limit and len(response.tablet_locations) >= limit:
            break
    response.ts_infos.extend(builder.ts_infos)
    return response


def tablet_locations(
    view: CatalogReadView, ts_manager: TSManager, tablet_ids: Sequence[str]
) -> mpb.GetTabletLocationsResponsePB:
    """Locations of the named tablets; an unknown or deleted one is an error entry, not a failure."""
    builder = _Builder(view, ts_manager)
    response = mpb.GetTabletLocationsResponsePB()
    for tablet_id in tablet_ids:
        tablet = view.catalog.tablet(tablet_id)
        if tablet is None:
            response.errors.add(tablet_id=tablet_id, message=f"tablet {tablet_id} not found")
        elif tablet.dead:
            response.errors.add(
                tablet_id=tablet_id, message=f"tablet {tablet_id} was deleted: {tablet.entry.state_msg}"
            )
        else:
            response.tablet_locations.append(builder.locations(tablet))
    response.ts_infos.extend(builder.ts_infos)
    return response
