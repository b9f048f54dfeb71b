"""From a tablet leader's report to one re-replication step, and the tombstones of replicas
that left their tablet's config."""

from __future__ import annotations

from nyala.master.replica_management import RepairKind, decide, stale_replica_cas
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb

A, B, C, D = "a" * 32, "b" * 32, "c" * 32, "d" * 32
TABLET = "x" * 32


def config(*voters: str, index: int = 5, non_voters: tuple[str, ...] = ()) -> consensus_pb2.RaftConfigPB:
    pb = consensus_pb2.RaftConfigPB(opid_index=index)
    for uuid in voters:
        pb.peers.add(permanent_uuid=uuid, member_type=consensus_pb2.VOTER)
    for uuid in non_voters:
        pb.peers.add(permanent_uuid=uuid, member_type=consensus_pb2.NON_VOTER).attrs.promote = True
    return pb


def leader_state(
    committed: consensus_pb2.RaftConfigPB, health: dict[str, int], *, leader: str = A
) -> cpb.ConsensusStatePB:
    state = cpb.ConsensusStatePB(tablet_id=TABLET, current_term=2, leader_uuid=leader, role=common_pb2.LEADER)
    state.committed_config.CopyFrom(committed)
    for uuid, h in health.items():
        state.peers.add(permanent_uuid=uuid, health=h)
    return state


def test_a_leaders_report_with_a_failed_voter_asks_for_a_non_voter_then_the_eviction() -> None:
    failed = leader_state(config(A, B, C), {B: cpb.HEALTHY, C: cpb.FAILED})
    repair = decide(A, tpb.RUNNING, failed, 3)
    assert repair is not None
    assert (repair.kind, repair.leader, repair.cas_config_index, repair.leaving) == (RepairKind.ADD, A, 5, (C,))
    promoted = leader_state(config(A, B, C, D, index=9), {B: cpb.HEALTHY, C: cpb.FAILED, D: cpb.HEALTHY})
    repair = decide(A, tpb.RUNNING, promoted, 3)
    assert repair is not None
    assert (repair.kind, repair.target, repair.cas_config_index) == (RepairKind.EVICT, C, 9)


def test_only_a_running_leader_without_a_pending_config_is_acted_on() -> None:
    failed = leader_state(config(A, B, C), {B: cpb.HEALTHY, C: cpb.FAILED})
    assert decide(B, tpb.RUNNING, failed, 3) is None  # the reporter does not lead
    assert decide(A, tpb.BOOTSTRAPPING, failed, 3) is None
    failed.pending_config.CopyFrom(config(A, B, C, index=6, non_voters=(D,)))
    assert decide(A, tpb.RUNNING, failed, 3) is None
    healthy = leader_state(config(A, B, C), {B: cpb.HEALTHY, C: cpb.HEALTHY})
    assert decide(A, tpb.RUNNING, healthy, 3) is None


def test_failures_on_servers_in_maintenance_are_not_replaced() -> None:
    failed = leader_state(config(A, B, C), {B: cpb.HEALTHY, C: cpb.FAILED})
    assert decide(A, tpb.RUNNING, failed, 3, in_maintenance=frozenset({C})) is None


def test_a_replica_outside_a_newer_catalog_config_is_tombstoned_with_that_index_as_cas() -> None:
    catalog = config(A, B, D, index=9)
    assert stale_replica_cas(C, tpb.RUNNING, config(A, B, C, index=5), catalog) == 9
    assert stale_replica_cas(C, tpb.FAILED, None, catalog) == 9  # no consensus state at all
    assert stale_replica_cas(C, tpb.TOMBSTONED, config(A, B, C, index=5), catalog) is None
    assert stale_replica_cas(C, tpb.COPYING, config(A, B, C, index=5), catalog) is None
    assert stale_replica_cas(A, tpb.RUNNING, config(A, B, C, index=5), catalog) is None  # a member
    # As new as the catalog's: maybe a member being added, whose copy predates its addition.
    assert stale_replica_cas(C, tpb.RUNNING, config(A, B, D, index=9), catalog) is None
