"""Membership changes, promotion, transfer, unsafe recovery and tablet copy, end to end."""

from __future__ import annotations

import pytest

from nyala.consensus.core import ChangeKind, ConfigChange, MemberType, RaftConfig, Role
from nyala.errors import NotTheLeader, ServiceUnavailable
from nyala.testing.sim import Cluster, SimNode

V, NV = MemberType.VOTER, MemberType.NON_VOTER


def change(cluster: Cluster, *changes: ConfigChange) -> int:
    """Run one config change through the leader and wait until it is committed; returns its index."""
    leader = cluster.check_one_leader()
    assert leader.core is not None
    cas = leader.core.committed_config.opid_index
    op = leader.call(lambda core: core.change_config(list(changes), cas))
    assert cluster.run_until(lambda: _committed_config(cluster).opid_index >= op.index, 5_000)
    return int(op.index)


def _committed_config(cluster: Cluster) -> RaftConfig:
    leader = cluster.leader()
    assert leader is not None
    assert leader.core is not None
    return leader.core.committed_config


def new_replica(cluster: Cluster) -> SimNode:
    return cluster.add_node(cluster.new_peer_id())


def test_one_by_one_membership_change_grows_and_shrinks_the_group_with_writes_in_between() -> None:
    cluster = Cluster(3, seed=51)
    cluster.one(b"start", 3)
    for _ in range(2):
        node = new_replica(cluster)
        change(cluster, ConfigChange(ChangeKind.ADD_PEER, node.peer_id, V))
        cluster.one(f"after-add-{node.peer_id}".encode(), len(cluster.nodes))
    assert _committed_config(cluster).voters == ("n1", "n2", "n3", "n4", "n5")
    leader = cluster.check_one_leader()
    for peer_id in [p for p in ("n1", "n2") if p != leader.peer_id]:
        change(cluster, ConfigChange(ChangeKind.REMOVE_PEER, peer_id))
        cluster.retire(peer_id)
        cluster.one(f"after-remove-{peer_id}".encode(), len(cluster.nodes))
    config = _committed_config(cluster)
    assert len(config.voters) in (3, 4)
    assert all(cluster.nodes[p].applied == cluster.nodes[config.voters[0]].applied for p in config.voters)


def test_a_second_change_is_refused_while_one_is_pending() -> None:
    cluster = Cluster(3, seed=52)
    leader = cluster.check_one_leader()
    others = [p for p in cluster.nodes if p != leader.peer_id]
    for peer_id in others:
        cluster.disconnect(peer_id)
    leader.call(lambda core: core.change_config([ConfigChange(ChangeKind.ADD_PEER, "n9", NV)]))
    with pytest.raises(Exception, match="pending"):
        leader.call(lambda core: core.change_config([ConfigChange(ChangeKind.ADD_PEER, "n8", NV)]))


def test_a_non_voter_is_promoted_once_caught_up_and_counts_only_then() -> None:
    cluster = Cluster(3, seed=53)
    for i in range(20):
        cluster.one(f"w{i}".encode(), 3)
    node = new_replica(cluster)
    change(cluster, ConfigChange(ChangeKind.ADD_PEER, node.peer_id, NV, promote=True))
    assert cluster.run_until(lambda: _committed_config(cluster).is_voter(node.peer_id), 5_000)
    assert node.core is not None
    assert node.core.role is Role.FOLLOWER
    assert node.applied >= 20


def test_an_unpromoted_non_voter_never_makes_a_majority() -> None:
    cluster = Cluster(3, seed=54)
    cluster.one(b"start", 3)
    learner = new_replica(cluster)
    change(cluster, ConfigChange(ChangeKind.ADD_PEER, learner.peer_id, NV))
    leader = cluster.check_one_leader()
    voters = [p for p in ("n1", "n2", "n3") if p != leader.peer_id]
    cluster.disconnect(voters[0])
    cluster.disconnect(voters[1])
    op = cluster.propose(b"needs-a-voter", via=leader)
    assert op is not None
    cluster.run_for(1_000)
    assert learner.disk.last_index >= op.index, "the learner has the entry"
    assert cluster.n_committed(op.index)[0] == 0, "but leader + learner is no majority"


def test_graceful_transfer_to_a_named_voter() -> None:
    cluster = Cluster(3, seed=55)
    cluster.one(b"start", 3)
    leader = cluster.check_one_leader()
    target = next(p for p in cluster.nodes if p != leader.peer_id)
    assert leader.call(lambda core: core.transfer_leadership(target)) == target
    with pytest.raises(ServiceUnavailable, match="transferring"):
        leader.propose(b"refused during the window")
    assert cluster.run_until(lambda: cluster.running_leader() is cluster.nodes[target], 3_000)
    cluster.one(b"after", 3)


def test_transfer_without_a_name_picks_the_most_caught_up_voter() -> None:
    cluster = Cluster(5, seed=56)
    cluster.one(b"start", 5)
    leader = cluster.check_one_leader()
    others = [p for p in cluster.nodes if p != leader.peer_id]
    for peer_id in others[:3]:
        cluster.disconnect(peer_id)
    cluster.propose(b"only-one-follower-has-this", via=leader)
    cluster.run_for(200)
    target = leader.call(lambda core: core.transfer_leadership())
    assert target == others[3]


def test_removing_the_leader_hands_over_leadership_first() -> None:
    cluster = Cluster(3, seed=57)
    cluster.one(b"start", 3)
    leader = cluster.check_one_leader()
    removal = ConfigChange(ChangeKind.REMOVE_PEER, leader.peer_id)
    with pytest.raises(NotTheLeader) as refused:
        leader.call(lambda core: core.change_config([removal]))
    new_leader = cluster.nodes[refused.value.leader_hint]
    assert cluster.run_until(lambda: cluster.running_leader() is new_leader, 3_000)
    change(cluster, removal)
    assert not _committed_config(cluster).contains(leader.peer_id)
    cluster.one(b"after", 2)


def test_abrupt_step_down_lets_another_voter_win() -> None:
    cluster = Cluster(3, seed=58)
    cluster.one(b"start", 3)
    leader = cluster.check_one_leader()
    leader.call(lambda core: core.step_down())
    new_leader = cluster.check_one_leader()
    assert new_leader is not leader
    cluster.one(b"after", 3)


def test_unsafe_config_change_restores_availability_after_losing_a_majority() -> None:
    cluster = Cluster(5, seed=59)
    for i in range(5):
        last = cluster.one(f"w{i}".encode(), 5)
    doomed = sorted(cluster.nodes)[:3]
    for peer_id in doomed:
        cluster.retire(peer_id)  # permanently lost
    survivors = sorted(cluster.nodes)
    op = cluster.propose(b"stuck")
    cluster.run_for(3_000)
    assert op is None or cluster.n_committed(op.index)[0] == 0, "no majority, no progress"
    best = max(survivors, key=lambda p: cluster.nodes[p].disk.last_index)  # the most up-to-date survivor
    cluster.nodes[best].call(lambda core: core.unsafe_change_config(survivors))
    index = cluster.one(b"recovered", 2, timeout_ms=10_000)
    assert index > last
    config = _committed_config(cluster)
    assert config.unsafe_config_change
    assert config.voters == tuple(survivors)


def test_a_replica_behind_the_leaders_compacted_log_is_rebuilt_by_tablet_copy() -> None:
    cluster = Cluster(3, seed=60)
    cluster.one(b"start", 3)
    leader = cluster.check_one_leader()
    laggard = next(p for p in cluster.nodes if p != leader.peer_id)
    cluster.crash(laggard)
    for i in range(30):
        cluster.one(f"w{i}".encode(), 2)
    for node in cluster.up_nodes():
        node.take_snapshot_and_compact(retention=0)
    assert leader.core is not None
    assert leader.core.first_index > 2
    cluster.restart(laggard)
    index = cluster.one(b"after", 3, timeout_ms=10_000)
    assert cluster.tablet_copies == 1
    assert cluster.nodes[laggard].applied == index
    assert cluster.nodes[laggard].kv == leader.kv


def test_a_config_entry_lost_with_its_leader_is_rolled_back() -> None:
    cluster = Cluster(5, seed=61)
    cluster.one(b"start", 5)
    leader = cluster.check_one_leader()
    follower, *rest = (p for p in sorted(cluster.nodes) if p != leader.peer_id)
    cluster.partition([leader.peer_id, follower], rest)
    leader.call(lambda core: core.change_config([ConfigChange(ChangeKind.ADD_PEER, "n9", NV)]))
    cluster.run_for(300)
    follower_core = cluster.nodes[follower].core
    assert follower_core is not None
    assert follower_core.active_config.contains("n9"), "effective on append, though never committed"
    cluster.crash(leader.peer_id)
    new_leader = cluster.check_one_leader(10_000)
    assert new_leader.peer_id in rest
    cluster.one(b"majority side", 3)
    cluster.heal()
    cluster.one(b"healed", 4)
    assert not follower_core.active_config.contains("n9"), "the truncated entry's config was rolled back"
    assert follower_core.active_config == follower_core.committed_config
