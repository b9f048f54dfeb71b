"""Leader election under the simulator (MIT 6.5840 3A, plus pre-vote), with heartbeats on each
leader's own phase and on the process's shared tick phase (``tick(now_tick)``): failure
detection, check quorum and election timeouts must mean the same either way."""

from __future__ import annotations

import random

import pytest

from nyala.consensus.core import RaftOptions
from nyala.testing.sim import Cluster
from nyala.testing.sim.network import NetworkProfile

TICKS = pytest.mark.parametrize("ticks", ["own", "aligned"])


def terms(cluster: Cluster) -> set[int]:
    return {n.core.term for n in cluster.nodes.values() if n.core is not None}


@TICKS
def test_initial_election_within_5s_and_nothing_changes_without_faults(ticks: str) -> None:
    cluster = Cluster(3, seed=11, ticks=ticks)
    leader = cluster.check_one_leader(timeout_ms=5_000)
    assert cluster.now_ms <= 5_000
    first_terms = terms(cluster)
    assert len(first_terms) == 1
    assert min(first_terms) >= 1
    cluster.run_for(2_000)
    assert terms(cluster) == first_terms, "no election without a failure"
    assert cluster.leader() is leader


@TICKS
def test_re_election_after_the_leader_is_cut_off_and_none_without_a_quorum(ticks: str) -> None:
    cluster = Cluster(3, seed=12, ticks=ticks)
    leader1 = cluster.check_one_leader()
    cluster.disconnect(leader1.peer_id)
    leader2 = cluster.check_one_leader()
    assert leader2 is not leader1
    cluster.reconnect(leader1.peer_id)  # the old leader rejoins quietly
    cluster.run_for(2_000)
    assert cluster.check_one_leader() is leader2
    others = [p for p in cluster.nodes if p != leader2.peer_id]
    cluster.disconnect(leader2.peer_id)
    cluster.disconnect(others[0])
    cluster.run_for(5_000)  # long enough for check-quorum to depose an isolated leader
    assert cluster.leaders() == [], "no leader without a quorum"
    cluster.reconnect(others[0])
    assert cluster.check_one_leader() is not None
    cluster.reconnect(leader2.peer_id)
    cluster.run_for(1_000)
    assert len({n.core.leader_id for n in cluster.nodes.values() if n.core is not None}) == 1


@TICKS
def test_many_elections_among_seven_with_three_cut_off_each_round(ticks: str) -> None:
    cluster = Cluster(7, seed=13, ticks=ticks)
    rng = random.Random(13)
    cluster.check_one_leader()
    for _ in range(10):
        cut = rng.sample(sorted(cluster.nodes), 3)
        for peer_id in cut:
            cluster.disconnect(peer_id)
        leader = cluster.check_one_leader()
        assert leader.peer_id not in cut or cluster.running_leader() is leader
        for peer_id in cut:
            cluster.reconnect(peer_id)
    cluster.check_one_leader()


@TICKS
def test_pre_vote_keeps_a_partitioned_server_from_disrupting_the_leader(ticks: str) -> None:
    cluster = Cluster(3, seed=14, ticks=ticks)
    leader = cluster.check_one_leader()
    term = leader.core.term if leader.core else -1
    follower = next(n for n in cluster.nodes.values() if n is not leader)
    cluster.disconnect(follower.peer_id)
    cluster.run_for(10_000)  # many election timeouts alone
    assert follower.core is not None
    assert follower.core.term == term, "pre-elections that cannot win raise no term"
    cluster.reconnect(follower.peer_id)
    cluster.run_for(3_000)
    assert cluster.leader() is leader
    assert leader.core is not None
    assert leader.core.term == term, "the returning server did not disrupt the leader"


def test_without_pre_vote_the_returning_server_does_disrupt_the_leader() -> None:
    # The contrast that shows the pre-vote test above can fail.
    cluster = Cluster(3, seed=14, options=RaftOptions(raft_enable_pre_election=False))
    leader = cluster.check_one_leader()
    term = leader.core.term if leader.core else -1
    follower = next(n for n in cluster.nodes.values() if n is not leader)
    cluster.disconnect(follower.peer_id)
    cluster.run_for(10_000)
    assert follower.core is not None
    assert follower.core.term > term + 2
    cluster.reconnect(follower.peer_id)
    cluster.run_for(3_000)
    assert min(terms(cluster)) > term, "the stale leader was deposed by the higher term"


@pytest.mark.parametrize("max_delay_ms", [3, 30])
def test_a_crashed_leader_is_replaced_about_one_election_timeout_later_without_split_votes(max_delay_ms: int) -> None:
    # The followers of a crashed leader time out together, T = 1.5 s after its last message
    # (Kudu's failure detector), one tick phase apart.  With messages taking up to 30 ms, as
    # on a busy server, two of them often campaign within one delivery of each other: the
    # rank tie-break and the late pre-vote grant must still give one leader in one term.
    # Virtual time: the bound is on the protocol, not on this machine's speed.
    elections_ms = []
    for seed in range(40):
        profile = NetworkProfile(min_delay_us=200, max_delay_us=max_delay_ms * 1_000)
        cluster = Cluster(3, seed=seed, ticks="aligned", profile=profile, fsync_us=(500, 8_000))
        cluster.check_one_leader()
        cluster.run_for(1_000 + cluster.rng.random() * 600)
        for i in range(20):  # writes flow until the crash: the followers heard the leader just now
            cluster.propose(b"w%d" % i)
            cluster.run_for(5)
        leader = cluster.running_leader()
        assert leader is not None
        assert leader.core is not None
        term, crashed_at = leader.core.term, cluster.now_ms
        cluster.crash(leader.peer_id)
        successor = cluster.wait_for_leader(10_000)
        assert successor is not None
        assert successor.core is not None
        assert successor.core.term == term + 1, f"seed {seed}: a split vote cost a term"
        elections_ms.append(cluster.now_ms - crashed_at)
    assert max(elections_ms) < 1_800, sorted(elections_ms)[-5:]
    assert min(elections_ms) >= 1_390, "no follower gives up on its leader before T (minus one tick)"
