"""Agreement under the simulator (MIT 6.5840 3B).

Index 1 of every log is the first leader's NO_OP, so client commands start at index 2.
"""

from __future__ import annotations

import random

from nyala.consensus.core import EntryType, HardState
from nyala.testing.sim import Cluster


def test_basic_agreement_commits_commands_in_order_and_nothing_before_them() -> None:
    cluster = Cluster(3, seed=21)
    cluster.check_one_leader()
    assert cluster.n_committed(2) == (0, None), "nothing committed before a command"
    indexes = [cluster.one(f"cmd{i}".encode(), 3) for i in range(3)]
    assert indexes == [2, 3, 4]


def test_each_entry_is_sent_once_per_peer() -> None:
    cluster = Cluster(3, seed=22)
    cluster.check_one_leader()
    cluster.one(b"warm-up", 3)
    before = cluster.network.entry_bytes
    for i in range(10):
        cluster.one(bytes([i]) * 5_000, 3)
    sent = cluster.network.entry_bytes - before
    assert sent <= 2 * 10 * 5_000 + 5_000, f"{sent} payload bytes for 100,000 expected"


def test_progress_with_one_follower_down_and_none_with_two() -> None:
    cluster = Cluster(3, seed=23)
    leader = cluster.check_one_leader()
    cluster.one(b"a", 3)
    followers = [p for p in cluster.nodes if p != leader.peer_id]
    cluster.disconnect(followers[0])
    cluster.one(b"b", 2)
    cluster.disconnect(followers[1])
    op = cluster.propose(b"c", via=leader)
    assert op is not None
    cluster.run_for(2_000)
    assert cluster.n_committed(op.index) == (0, None)


def test_a_new_leader_makes_progress_after_the_leader_fails_but_not_after_two_fail() -> None:
    cluster = Cluster(3, seed=24)
    leader1 = cluster.check_one_leader()
    cluster.one(b"a", 3)
    cluster.disconnect(leader1.peer_id)
    index_b = cluster.one(b"b", 2)
    leader2 = cluster.check_one_leader()
    cluster.disconnect(leader2.peer_id)
    for node in cluster.nodes.values():
        cluster.propose(b"c", via=node)
    cluster.run_for(2_000)
    assert cluster.n_committed(index_b + 1) == (0, None)


def test_a_disconnected_follower_catches_up_after_reconnecting() -> None:
    cluster = Cluster(3, seed=25)
    leader = cluster.check_one_leader()
    cluster.one(b"a", 3)
    follower = next(p for p in cluster.nodes if p != leader.peer_id)
    cluster.disconnect(follower)
    for i in range(4):
        cluster.one(f"x{i}".encode(), 2)
    cluster.reconnect(follower)
    cluster.one(b"y", 3)


def test_no_agreement_without_a_majority_then_recovery() -> None:
    cluster = Cluster(5, seed=26)
    leader = cluster.check_one_leader()
    cluster.one(b"a", 5)
    followers = [p for p in cluster.nodes if p != leader.peer_id][:3]
    for peer_id in followers:
        cluster.disconnect(peer_id)
    op = cluster.propose(b"b", via=leader)
    assert op is not None
    cluster.run_for(2_000)
    assert cluster.n_committed(op.index) == (0, None)
    for peer_id in followers:
        cluster.reconnect(peer_id)
    index = cluster.one(b"c", 5)
    assert index in range(op.index, op.index + 4)
    count, payload = cluster.n_committed(op.index)
    assert count == 5
    assert payload in (b"b", b"", b"c"), "the uncommitted command either survived or was replaced"


def test_concurrent_proposals_in_one_term_all_commit() -> None:
    cluster = Cluster(3, seed=27)
    leader = cluster.check_one_leader()
    cluster.one(b"warm-up", 3)
    assert leader.core is not None
    term = leader.core.term
    ops = [cluster.propose(f"c{i}".encode(), via=leader) for i in range(5)]
    assert all(op is not None and op.term == term for op in ops)
    indexes = [op.index for op in ops if op is not None]
    assert cluster.run_until(lambda: all(cluster.n_committed(i)[0] == 3 for i in indexes), 2_000)
    assert [cluster.n_committed(i)[1] for i in indexes] == [f"c{i}".encode() for i in range(5)]


def test_a_partitioned_leader_rejoins_and_its_uncommitted_entries_are_overwritten() -> None:
    cluster = Cluster(3, seed=28)
    cluster.one(b"101", 3)
    leader1 = cluster.check_one_leader()
    cluster.disconnect(leader1.peer_id)
    stale = [cluster.propose(f"stale{i}".encode(), via=leader1) for i in range(3)]
    cluster.one(b"103", 2)
    leader2 = cluster.check_one_leader()
    cluster.disconnect(leader2.peer_id)
    cluster.reconnect(leader1.peer_id)
    cluster.one(b"104", 2)
    cluster.reconnect(leader2.peer_id)
    cluster.one(b"105", 3)
    payloads = {cluster.n_committed(i)[1] for i in range(1, leader1.applied + 1)}
    assert not any(op is not None and f"stale{k}".encode() in payloads for k, op in enumerate(stale))


def test_fast_backtracking_over_many_divergent_entries() -> None:
    cluster = Cluster(5, seed=29)
    rng = random.Random(29)
    cluster.one(b"start", 5)
    leader1 = cluster.check_one_leader()
    ids = sorted(cluster.nodes)
    others = [p for p in ids if p != leader1.peer_id]
    # Leader and one follower alone: 50 commands that cannot commit.
    cluster.partition([leader1.peer_id, others[0]], others[1:])
    for i in range(50):
        cluster.propose(f"lost{i}".encode(), via=leader1)
    cluster.run_for(500)
    # The other three commit 50 commands of their own.
    for i in range(50):
        cluster.one(f"ok{i}".encode(), 3)
    # Now one of the three is cut off too, and the other two get 50 more that cannot commit.
    leader2 = cluster.running_leader()
    assert leader2 is not None
    rest = [p for p in others[1:] if p != leader2.peer_id]
    cluster.partition([leader2.peer_id, rest[0]], [rest[1]], [leader1.peer_id, others[0]])
    for i in range(50):
        cluster.propose(f"lost2-{i}".encode(), via=leader2)
    cluster.run_for(500)
    # The first pair plus the cut-off one form a majority with stale logs; they must catch up.
    cluster.partition([leader1.peer_id, others[0], rest[1]], [leader2.peer_id, rest[0]])
    for i in range(50):
        cluster.one(f"ok2-{i}".encode(), 3)
    cluster.heal()
    start = cluster.now_ms
    sent_before = cluster.network.sent
    cluster.one(f"final{rng.random()}".encode(), 5)
    assert cluster.now_ms - start < 5_000
    assert cluster.network.sent - sent_before < 400, "backtracking must skip whole terms, not entries"


def test_message_counts_stay_small() -> None:
    cluster = Cluster(3, seed=30)
    cluster.check_one_leader()
    election = cluster.network.sent
    assert election <= 30, f"{election} messages to elect a leader"
    cluster.one(b"warm-up", 3)
    before = cluster.network.sent
    for i in range(10):
        cluster.one(f"c{i}".encode(), 3)
    per_command = (cluster.network.sent - before) / 10
    assert per_command <= 10, f"{per_command} messages per agreement on 3 replicas"
    before = cluster.network.sent
    cluster.run_for(1_000)
    assert cluster.network.sent - before <= 12, "idle traffic is heartbeats only (2 per second per follower)"


def test_a_leader_never_commits_an_older_terms_entry_by_counting() -> None:
    # Figure 8 in miniature, driven through the simulator's network; the checker's leader
    # completeness and state-machine checks would fail if 5.4.2 were violated.
    cluster = Cluster(5, seed=31)
    for i in range(30):
        leader = cluster.check_one_leader()
        cluster.propose(f"f{i}".encode(), via=leader)
        cluster.run_for(random.Random(i).randint(0, 300))
        cluster.crash(leader.peer_id)
        cluster.run_for(300)
        down = [p for p, n in cluster.nodes.items() if not n.up]
        if len(down) > 1:
            cluster.restart(down[0])
    for peer_id, node in cluster.nodes.items():
        if not node.up:
            cluster.restart(peer_id)
    cluster.one(b"end", 5)
    noops = sum(1 for e in cluster.checker.applied.values() if e.type is EntryType.NO_OP)
    assert noops >= 2
    assert all(isinstance(n.disk.hard_state, HardState) for n in cluster.nodes.values())
