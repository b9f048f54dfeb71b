"""What a tablet report changes in the catalog, and who the reported leader is."""

from __future__ import annotations

from nyala.catalog import NewTablet, TabletInfo, encode_partition, new_tablet_entry
from nyala.master.heartbeats import tablet_update
from nyala.master.replicas import ReplicaReport, ReplicaView
from nyala.proto import common_pb2, consensus_pb2, consensus_rpc_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import Partitioner, PartitionSchema

from .helpers import table_schema

A, B, C = "a" * 32, "b" * 32, "c" * 32


def creating_tablet() -> TabletInfo:
    partition = Partitioner(table_schema(), PartitionSchema()).partitions[0]
    entry = new_tablet_entry("t" * 32, NewTablet("x" * 32, partition, (A, B, C)))
    assert entry.partition == encode_partition(partition)
    return TabletInfo.of("x" * 32, entry)


def reported(
    tablet: TabletInfo,
    leader: str,
    role: common_pb2.RaftRolePB,
    *,
    term: int = 1,
    opid_index: int = 0,
    peers: tuple[str, ...] = (A, B, C),
    state: tpb.TabletStatePB = tpb.RUNNING,
) -> mpb.ReportedTabletPB:
    config = consensus_pb2.RaftConfigPB(opid_index=opid_index)
    for p in peers:
        config.peers.add(permanent_uuid=p, member_type=consensus_pb2.VOTER)
    return mpb.ReportedTabletPB(
        tablet_id=tablet.tablet_id,
        state=state,
        consensus_state=consensus_rpc_pb2.ConsensusStatePB(
            current_term=term,
            leader_uuid=leader,
            role=role,
            committed_config=config,
        ),
    )


def test_a_creating_tablet_becomes_running_when_any_replica_reports_a_leader() -> None:
    tablet = creating_tablet()
    assert tablet_update(tablet, B, reported(tablet, "", common_pb2.FOLLOWER)) is None
    entry = tablet_update(tablet, B, reported(tablet, A, common_pb2.FOLLOWER, term=3))
    assert entry is not None
    assert (entry.state, entry.leader_uuid, entry.reported_term) == (mpb.SysTabletsEntryPB.RUNNING, A, 3)
    assert tablet.creating  # the committed entry is untouched
    tombstoned = reported(tablet, A, common_pb2.FOLLOWER, state=tpb.TOMBSTONED)
    assert tablet_update(tablet, B, tombstoned) is None


def test_only_the_leaders_newer_committed_config_is_persisted() -> None:
    creating = creating_tablet()
    first = tablet_update(creating, A, reported(creating, A, common_pb2.LEADER))
    assert first is not None
    running = TabletInfo.of("x" * 32, first)
    assert running.running
    assert tablet_update(running, A, reported(running, A, common_pb2.LEADER)) is None  # same config
    newer = reported(running, A, common_pb2.LEADER, term=2, opid_index=7, peers=(A, B))
    assert (
        tablet_update(running, B, reported(running, A, common_pb2.FOLLOWER, term=2, opid_index=7, peers=(A, B))) is None
    )
    entry = tablet_update(running, A, newer)
    assert entry is not None
    assert [p.permanent_uuid for p in entry.committed_config.peers] == [A, B]
    assert entry.committed_config.opid_index == 7
    stale = TabletInfo.of("x" * 32, entry)
    assert tablet_update(stale, A, reported(stale, A, common_pb2.LEADER, term=1, opid_index=3)) is None


def test_the_leader_is_the_highest_term_report_and_a_self_report_wins_ties() -> None:
    view = ReplicaView()
    view.record(B, "t", ReplicaReport(tpb.RUNNING, common_pb2.FOLLOWER, 2, A, 0))
    view.record(C, "t", ReplicaReport(tpb.RUNNING, common_pb2.FOLLOWER, 3, C, 5))
    assert view.leader("t") == (C, 3)
    view.record(A, "t", ReplicaReport(tpb.RUNNING, common_pb2.LEADER, 3, A, 4))
    assert view.leader("t") == (A, 3)
    assert view.leader_schema_version("t") == 4
    view.set_schema_version(A, "t", 6)
    assert view.leader_schema_version("t") == 6
    view.forget_tablet("t")
    assert view.leader("t") == ("", 0)
    assert view.tablets_of(A) == set()
