"""The leader's in-memory view: what a committed tablet config change does to the owed work."""

from __future__ import annotations

from nyala.catalog import CatalogState, TabletInfo, copy_tablet_entry, tablet_mutation
from nyala.consensus.core import PeerHealth
from nyala.master.leader import LeaderView
from nyala.master.quorum import Member
from nyala.master.replica_management import Repair, RepairKind
from nyala.placement import PlacementOptions
from nyala.proto import consensus_pb2
from nyala.proto import master_pb2 as mpb
from tests.unit.catalog.helpers import created, servers

NEW = "f" * 32


def with_config(state: CatalogState, tablet: TabletInfo, uuids: tuple[str, ...], index: int) -> mpb.CatalogWritePB:
    entry = copy_tablet_entry(tablet.entry)
    entry.state = mpb.SysTabletsEntryPB.RUNNING
    entry.committed_config.CopyFrom(
        consensus_pb2.RaftConfigPB(
            opid_index=index,
            peers=[consensus_pb2.RaftPeerPB(permanent_uuid=u, member_type=consensus_pb2.VOTER) for u in uuids],
        )
    )
    return mpb.CatalogWritePB(mutations=[tablet_mutation(tablet.tablet_id, entry)])


def evict(tablet_id: str, cas: int) -> Repair:
    leader, _, failed = servers()
    config = tuple(Member(u, True, PeerHealth.FAILED if u == failed else PeerHealth.HEALTHY) for u in (*servers(), NEW))
    return Repair(RepairKind.EVICT, tablet_id, leader, cas, config, failed)


def test_a_repair_decided_on_the_newly_committed_config_survives_its_catalog_write() -> None:
    """The report that carries a new config both decides the next step and persists the config:
    the step must outlive the write, or nothing would ever be decided again for a quiet tablet."""
    state = CatalogState()
    tablet = state.tablets_of(created(state))[0]
    view = LeaderView.build(1, state, PlacementOptions())
    view.commit(with_config(state, tablet, servers(), 2))
    fresh = evict(tablet.tablet_id, 3)
    view.repairs[tablet.tablet_id] = fresh
    tablet = view.catalog.tablet(tablet.tablet_id) or tablet
    view.commit(with_config(state, tablet, (*servers(), NEW), 3))
    assert view.repairs[tablet.tablet_id] is fresh


def test_a_repair_decided_on_an_older_config_is_dropped_when_a_newer_one_commits() -> None:
    state = CatalogState()
    tablet = state.tablets_of(created(state))[0]
    view = LeaderView.build(1, state, PlacementOptions())
    view.commit(with_config(state, tablet, (*servers(), NEW), 3))
    view.repairs[tablet.tablet_id] = evict(tablet.tablet_id, 3)
    tablet = view.catalog.tablet(tablet.tablet_id) or tablet
    view.commit(with_config(state, tablet, (*servers()[:2], NEW), 4))
    assert tablet.tablet_id not in view.repairs
    assert (tablet.tablet_id, servers()[2]) in view.evicted
