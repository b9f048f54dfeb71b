"""Crashes, restarts and unreliable networks (MIT 6.5840 3C), with both drivers.

A crash loses every Ready whose fsync had not completed; a restart rebuilds the replica from
what reached the disk.  With the pipelined driver a leader's entries have already left when
it crashes before its sync; with the sequential one nothing leaves before the sync.  The
simulator's checker verifies log matching, leader completeness and state machine safety at
every step, so each test also asserts those by running at all.
"""

from __future__ import annotations

import random

import pytest

from nyala.testing.sim import Cluster, NetworkProfile, PendingOp

pytestmark = pytest.mark.parametrize("driver", ["pipelined", "sequential"])


def crash_and_restart(cluster: Cluster, *peer_ids: str) -> None:
    for peer_id in peer_ids:
        cluster.crash(peer_id)
    for peer_id in peer_ids:
        cluster.restart(peer_id)


def test_state_survives_crashes_of_everyone_the_leader_and_followers(driver: str) -> None:
    cluster = Cluster(3, seed=41, driver=driver)
    cluster.one(b"11", 3)
    crash_and_restart(cluster, *cluster.nodes)
    cluster.one(b"12", 3)
    leader = cluster.check_one_leader()
    crash_and_restart(cluster, leader.peer_id)
    cluster.one(b"13", 3)
    leader = cluster.check_one_leader()
    follower = next(p for p in cluster.nodes if p != leader.peer_id)
    cluster.crash(follower)
    cluster.one(b"14", 2)
    cluster.restart(follower)
    index = cluster.one(b"16", 3)
    assert all(n.applied >= index for n in cluster.nodes.values())


def test_more_persistence_with_five_replicas_losing_two_then_three(driver: str) -> None:
    cluster = Cluster(5, seed=42, driver=driver)
    index = 1
    for i in range(5):
        cluster.one(f"{10 + i}".encode(), 5)
        leader = cluster.check_one_leader()
        others = [p for p in cluster.nodes if p != leader.peer_id]
        cluster.crash(others[(i + 1) % 4])
        cluster.crash(others[(i + 2) % 4])
        cluster.one(f"{20 + i}".encode(), 3)
        cluster.crash(leader.peer_id)
        cluster.crash(others[(i + 3) % 4])
        for peer_id in (others[(i + 1) % 4], others[(i + 2) % 4]):
            cluster.restart(peer_id)
        cluster.run_for(1_000)
        cluster.restart(others[(i + 3) % 4])
        index = cluster.one(f"{30 + i}".encode(), 3)
        cluster.restart(leader.peer_id)
    assert cluster.one(b"end", 5) > index


def test_a_partitioned_leader_and_a_crashed_follower_recover(driver: str) -> None:
    cluster = Cluster(3, seed=43, driver=driver)
    cluster.one(b"101", 3)
    leader = cluster.check_one_leader()
    follower = next(p for p in cluster.nodes if p != leader.peer_id)
    cluster.disconnect(follower)
    cluster.one(b"102", 2)
    cluster.crash(leader.peer_id)
    cluster.crash(next(p for p in cluster.nodes if p not in (leader.peer_id, follower)))
    cluster.reconnect(follower)
    cluster.restart(leader.peer_id)
    cluster.one(b"103", 2)
    for peer_id, node in cluster.nodes.items():
        if not node.up:
            cluster.restart(peer_id)
    cluster.one(b"104", 3)


def _figure8(cluster: Cluster, rounds: int, rng: random.Random, crash: bool) -> None:
    """Propose on the leader, then take it down after a random delay; keep a majority alive."""
    down: list[str] = []
    for i in range(rounds):
        leader = cluster.leader()
        if leader is not None and leader.peer_id not in down:
            cluster.propose(f"f8-{i}".encode(), via=leader)
        cluster.run_for(rng.choice((rng.randint(0, 13), rng.randint(0, 500))))
        leader = cluster.leader()
        if leader is not None and leader.peer_id not in down:
            if crash:
                cluster.crash(leader.peer_id, torn=rng.random() < 0.5)
            else:
                cluster.disconnect(leader.peer_id)
            down.append(leader.peer_id)
        if len(cluster.nodes) - len(down) < 3:
            back = down.pop(rng.randrange(len(down)))
            cluster.restart(back) if crash else cluster.reconnect(back)
    for peer_id in down:
        cluster.restart(peer_id) if crash else cluster.reconnect(peer_id)


def test_figure_8_commit_rule_holds_under_repeated_leader_crashes(driver: str) -> None:
    cluster = Cluster(5, seed=44, driver=driver)
    cluster.one(b"start", 5)
    _figure8(cluster, 600, random.Random(44), crash=True)
    cluster.one(b"end", 5, timeout_ms=20_000)


def test_figure_8_on_an_unreliable_network_with_long_reordering(driver: str) -> None:
    cluster = Cluster(5, seed=45, profile=NetworkProfile.unreliable(), driver=driver)
    cluster.one(b"start", 1)
    _figure8(cluster, 200, random.Random(45), crash=False)
    cluster.network.profile = NetworkProfile.reliable()
    cluster.one(b"end", 5, timeout_ms=20_000)


def test_concurrent_agreement_on_an_unreliable_network(driver: str) -> None:
    cluster = Cluster(5, seed=46, profile=NetworkProfile.unreliable(), driver=driver)
    cluster.check_one_leader(10_000)
    for i in range(50):
        for j in range(4):
            cluster.propose(f"u{i}.{j}".encode())
        cluster.one(f"u{i}".encode(), 1)
    cluster.network.profile = NetworkProfile.reliable()
    cluster.one(b"done", 5)


def _churn(cluster: Cluster, rng: random.Random) -> None:
    """Three clients propose while replicas are disconnected, crashed and restarted; every
    value a client saw committed must be in the final log."""
    acked: list[tuple[int, bytes]] = []

    def client(state: dict[str, int]) -> None:
        if state["stop"]:
            return
        leader = cluster.running_leader()
        if leader is not None:
            payload = f"client{state['id']}-{state['n']}".encode()
            state["n"] += 1

            def done(outcome: str, value: object, payload: bytes = payload) -> None:
                if outcome == "ok":
                    acked.append((value.index, payload))  # type: ignore[attr-defined]

            leader.submit_write(payload, PendingOp(done))
        cluster.loop.call_later(rng.randint(1_000, 50_000), client, state)

    states = [{"id": i, "n": 0, "stop": 0} for i in range(3)]
    for state in states:
        client(state)
    for _ in range(20):
        ids = sorted(cluster.nodes)
        if rng.random() < 0.2:
            cluster.disconnect(rng.choice(ids))
        if rng.random() < 0.5:
            peer_id = rng.choice(ids)
            if not cluster.nodes[peer_id].up:
                cluster.restart(peer_id)
            cluster.reconnect(peer_id)
        if rng.random() < 0.2:
            peer_id = rng.choice(ids)
            if cluster.nodes[peer_id].up:
                cluster.crash(peer_id, torn=True)
        cluster.run_for(700)
    cluster.network.profile = NetworkProfile.reliable()
    for peer_id, node in cluster.nodes.items():
        if not node.up:
            cluster.restart(peer_id)
    cluster.heal()
    for state in states:
        state["stop"] = 1
    last = cluster.one(b"final", 5, timeout_ms=30_000)
    assert acked, "the clients got something committed"
    for index, payload in acked:
        assert index <= last
        assert cluster.checker.applied[index].payload == payload


def test_reliable_churn_loses_no_acknowledged_value(driver: str) -> None:
    _churn(Cluster(5, seed=47, driver=driver), random.Random(47))


def test_unreliable_churn_loses_no_acknowledged_value(driver: str) -> None:
    _churn(Cluster(5, seed=48, profile=NetworkProfile.unreliable(), driver=driver), random.Random(48))


def test_a_torn_write_that_keeps_only_the_hard_state_never_commits_stale_entries(driver: str) -> None:
    """c holds entries a cut-off leader could not commit; the new leader replaces them and
    commits its own.  c crashes with the hard state of that Ready on disk but not its entries
    (metadata and log are separate files): its stale entries must not count as committed."""
    cluster = Cluster(5, seed=49, driver=driver)
    old = cluster.check_one_leader()
    cluster.one(b"base", 5)
    c = next(p for p in sorted(cluster.nodes) if p != old.peer_id)
    majority = {p for p in cluster.nodes if p not in (old.peer_id, c)}
    cluster.partition([old.peer_id, c], sorted(majority))
    stale = [op for op in (cluster.propose(f"stale{i}".encode(), old) for i in range(3)) if op is not None]
    cluster.run_for(200)
    assert len(stale) == 3
    assert all(cluster.nodes[c].disk.holds(op.index, op.term) for op in stale)
    assert cluster.run_until(lambda: (n := cluster.running_leader()) is not None and n.peer_id in majority, 10_000)
    leader = cluster.running_leader()
    assert leader is not None
    for i in range(5):
        cluster.propose(f"new{i}".encode(), leader)
    assert cluster.run_until(lambda: all(op.index in cluster.checker.applied for op in stale), 2_000)
    node = cluster.nodes[c]
    cluster.heal()

    def replacing() -> bool:
        return any(rd.entries and rd.entries[0].index <= stale[0].index for rd in node.writing)

    assert cluster.run_until(replacing, 5_000), "c is writing the new leader's entries over its stale ones"
    rd = next(rd for rd in node.writing if rd.entries and rd.entries[0].index <= stale[0].index)
    if rd.hard_state is not None:
        node.disk.hard_state = rd.hard_state  # the metadata reached the disk, the log did not
    cluster.crash(c)
    cluster.restart(c)  # the checker raises if c now applies a stale entry
    cluster.one(b"after", 5)
    assert all(cluster.checker.applied[op.index].term != op.term for op in stale)
