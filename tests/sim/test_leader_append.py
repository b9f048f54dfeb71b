"""The leader appends locally in parallel with replication (Raft thesis 10.2.1).

A pipelined leader sends its AppendEntries before its own write is synced.  Its own copy
counts toward commit only once synced, so a leader that crashes before its sync loses
nothing that was committed.  Slow disks make the orderings explicit: the leader's fsync
takes far longer than a follower's round trip, and longer than a tick (followers learn a
commit index no append carries at the leader's next tick).
"""

from __future__ import annotations

import pytest

from nyala.consensus.core import _replication
from nyala.testing.sim import MS, Cluster, SimNode

SLOW = (300 * MS, 300 * MS)
TICK_MS = 100  # the default raft_tick_interval_ms


def followers(cluster: Cluster, leader: SimNode) -> list[str]:
    return [p for p in cluster.nodes if p != leader.peer_id]


def test_a_leaders_unsynced_entry_is_not_counted_toward_commit() -> None:
    cluster = Cluster(3, seed=71, driver="pipelined")
    leader = cluster.check_one_leader()
    b, c = followers(cluster, leader)
    cluster.disconnect(c)
    leader.fsync_us = SLOW
    op = cluster.propose(b"x", leader)
    assert op is not None
    cluster.run_for(20)
    assert cluster.nodes[b].disk.holds(op.index, op.term), "the follower has x on disk: it was sent before the sync"
    assert not leader.disk.holds(op.index, op.term)
    assert leader.core is not None
    assert leader.core.commit_index < op.index, "one follower's copy is no majority of three"
    cluster.run_for(300)
    assert leader.core.commit_index >= op.index, "committed once the leader's own copy is durable"
    assert cluster.run_until(lambda: cluster.n_committed(op.index) == (2, b"x"), 2 * TICK_MS)


def test_an_entry_committed_by_followers_survives_the_leader_crashing_before_its_fsync() -> None:
    cluster = Cluster(3, seed=72, driver="pipelined")
    leader = cluster.check_one_leader()
    leader.fsync_us = SLOW
    op = cluster.propose(b"x", leader)
    assert op is not None
    assert leader.core is not None
    assert cluster.run_until(lambda: leader.core is not None and leader.core.commit_index >= op.index, 50)
    # The followers learn the commit index at the leader's next tick, still before its sync.
    assert cluster.run_until(lambda: cluster.n_committed(op.index) == (2, b"x"), 2 * TICK_MS)
    assert not leader.disk.holds(op.index, op.term), "both followers applied x before the leader synced it"
    cluster.crash(leader.peer_id)
    new_leader = cluster.check_one_leader()
    assert new_leader is not leader
    cluster.restart(leader.peer_id)
    cluster.one(b"after", 3)
    assert cluster.checker.applied[op.index].payload == b"x"
    assert leader.disk.holds(op.index, op.term), "the old leader got x back like any lagging follower"


def test_single_voter_config_commits_only_after_the_local_fsync() -> None:
    cluster = Cluster(1, seed=73, driver="pipelined")
    (node,) = cluster.nodes.values()
    cluster.check_one_leader()
    node.fsync_us = (30 * MS, 30 * MS)
    op = cluster.propose(b"x", node)
    assert op is not None
    assert node.core is not None
    cluster.run_for(20)
    assert node.core.commit_index < op.index
    assert node.applied < op.index
    cluster.run_for(20)
    assert node.core.commit_index >= op.index
    assert node.applied >= op.index


@pytest.mark.parametrize("counts_unsynced", [False, True], ids=["correct", "planted-bug"])
def test_a_leader_counting_its_own_unsynced_copy_would_lose_a_committed_entry(
    monkeypatch: pytest.MonkeyPatch, counts_unsynced: bool
) -> None:
    """x reaches one follower, b; the leader crashes before its sync; the others elect a
    leader without x.  Correct: x was never committed, so nothing is lost.  With the leader's
    unsynced copy counted, x commits, b applies it, and the new leader lacks it."""
    if counts_unsynced:
        counted = _replication.ReplicationMixin._maybe_commit

        def counting_unsynced(self: _replication.ReplicationMixin) -> None:
            durable, self._durable_index = self._durable_index, self._log.last_index
            try:
                counted(self)
            finally:
                self._durable_index = durable

        monkeypatch.setattr(_replication.ReplicationMixin, "_maybe_commit", counting_unsynced)
        # Leave the damage to the end-to-end checks, not the commit-time durability check.
        monkeypatch.setattr(Cluster, "check_commit_is_durable", lambda self, core: None)
    cluster = Cluster(3, seed=74, driver="pipelined")
    leader = cluster.check_one_leader()
    b, c = followers(cluster, leader)
    cluster.disconnect(c)
    leader.fsync_us = SLOW
    op = cluster.propose(b"x", leader)
    assert op is not None
    cluster.run_for(1.5 * TICK_MS)  # b has had a tick's commit notice, the leader no sync
    assert cluster.nodes[b].disk.holds(op.index, op.term)
    assert cluster.nodes[b].applied == (op.index if counts_unsynced else op.index - 1)
    cluster.crash(leader.peer_id)
    cluster.disconnect(b)
    cluster.reconnect(c)
    cluster.restart(leader.peer_id)

    def elect_without_x_then_rejoin() -> None:
        cluster.check_one_leader(10_000)
        cluster.reconnect(b)
        cluster.one(b"after", 3)

    if counts_unsynced:
        with pytest.raises(AssertionError, match=r"leader completeness|state machine safety|committed entry|conflicts"):
            elect_without_x_then_rejoin()
    else:
        elect_without_x_then_rejoin()
        assert cluster.checker.applied[op.index].payload != b"x", "x was never committed; a new entry took its place"
