"""Heartbeats on a shared tick phase: ``tick(now_tick)``.

The transport ticks every replica of a process from one timer.  Given the process's tick
number, every leader sends its periodic heartbeats on the same ticks, so the heartbeats of
all groups between two servers leave together and share one call.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from nyala.consensus.core import (
    AppendRequest,
    Heartbeat,
    Message,
    PersistentState,
    RaftConfig,
    RaftCore,
    RaftOptions,
)
from nyala.errors import InvalidArgument

from .helpers import Net, make_core

OPTIONS = RaftOptions()
HEARTBEAT = OPTIONS.timing().heartbeat_ticks  # 5
ELECTION = OPTIONS.timing().election_ticks  # 15


def tick_all(net: Net, now: int | None) -> None:
    for core in net.cores.values():
        core.tick(now)


def elected() -> Net:
    """Three replicas; "a" has just won its election."""
    net = Net(make_core(p) for p in "abc")
    net.elect("a")
    return net


def contacts_of_b(net: Net, ticks: Iterable[int | None]) -> tuple[list[int], list[int]]:
    """Run the ticks (delivering everything at once); return the positions of the ticks on
    which b heard from the leader, and of those on which the leader sent heartbeats."""
    heard: list[int] = []
    beats: list[int] = []
    for position, now in enumerate(ticks):
        tick_all(net, now)
        net.collect()
        while net.outbox:
            to_b = [m for m in net.outbox if m.recipient == "b"]
            if any(isinstance(m, AppendRequest | Heartbeat) for m in to_b):
                heard.append(position)
            if any(isinstance(m, Heartbeat) for m in to_b):
                beats.append(position)
            net.deliver()
    return heard, beats


@pytest.mark.parametrize("phase", range(HEARTBEAT))
def test_leaders_beat_on_the_shared_phase_whenever_they_were_elected(phase: int) -> None:
    net = elected()  # ... right after tick number ``phase`` of the shared clock
    now_ticks = list(range(phase + 1, phase + 1 + 10 * HEARTBEAT))
    heard, beats = contacts_of_b(net, now_ticks)
    assert beats, "the leader sent periodic heartbeats"
    assert all(now_ticks[p] % HEARTBEAT == 0 for p in beats), [now_ticks[p] for p in beats]
    gaps = [b - a for a, b in zip([-1, *heard], heard, strict=False)]
    assert max(gaps) <= HEARTBEAT, "a follower hears from its leader at least every heartbeat interval"
    assert net.cores["a"].is_leader
    assert {c.term for c in net.cores.values()} == {1}, "no election while the leader beats"


def test_a_follower_hears_from_its_leader_every_interval_even_if_the_driver_skips_tick_numbers() -> None:
    net = elected()
    rng = random.Random(5)
    now, ticks = 0, []
    for _ in range(200):
        now += rng.choice((1, 1, 2, 3, 7))  # a driver that lost count: never more than one period apart
        ticks.append(now)
    heard, _ = contacts_of_b(net, ticks)
    gaps = [b - a for a, b in zip([-1, *heard], heard, strict=False)]
    assert max(gaps) <= HEARTBEAT


def test_read_index_rounds_still_send_immediate_heartbeats_off_the_phase() -> None:
    net = elected()
    leader = net.cores["a"]
    tick_all(net, 1)
    net.stabilize()
    leader.read_index(1)
    beats = net.sent(Heartbeat)
    assert {m.recipient for m in beats} == {"b", "c"}, "the read round does not wait for the phase"
    net.stabilize()
    assert [s.request_id for rd in net.readies["a"] for s in rd.read_states] == [1]


def steps_down_after(aligned: bool) -> int:
    net = elected()
    leader = net.cores["a"]
    net.cut = {"b", "c"}
    for n in range(1, 10 * ELECTION):
        leader.tick(n if aligned else None)
        net.deliver()
        if not leader.is_leader:
            return n
    raise AssertionError("the isolated leader never stepped down")


def test_check_quorum_deposes_an_isolated_leader_after_the_same_number_of_ticks_either_way() -> None:
    aligned, own = steps_down_after(True), steps_down_after(False)
    assert aligned == own
    assert ELECTION <= aligned <= 2 * ELECTION


def campaigns_after(now_tick: bool) -> int:
    core = make_core("b", seed=42)
    for n in range(1, 100 * ELECTION):
        core.tick(n if now_tick else None)
        if core.has_ready() and core.ready().messages:
            return n
    raise AssertionError("the follower never campaigned")


def test_election_timeouts_do_not_depend_on_the_shared_clock() -> None:
    assert campaigns_after(True) == campaigns_after(False) >= ELECTION


def test_a_tick_number_must_be_a_non_negative_int() -> None:
    core = make_core("a")
    with pytest.raises(InvalidArgument, match="now_tick"):
        core.tick(-1)
    with pytest.raises(InvalidArgument, match="now_tick"):
        core.tick(1.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- many groups


SERVERS = ("s1", "s2", "s3")
GROUPS = 24


class Process:
    """Every replica of 24 three-way groups on three servers, driven like the transport does:
    one shared tick for all, then messages batched per (sender server, recipient server)."""

    def __init__(self) -> None:
        config = RaftConfig.of_voters(SERVERS)
        self.cores = {
            (g, s): RaftCore(f"t{g}", s, PersistentState.bootstrap(config), random.Random(g * 10 + i))
            for g in range(GROUPS)
            for i, s in enumerate(SERVERS)
        }
        self.heartbeat_calls = 0

    def exchange(self, count: bool) -> None:
        """Deliver until quiet; count the calls that carry heartbeats."""
        while True:
            batches: dict[tuple[str, str], list[Message]] = {}
            for core in self.cores.values():
                while core.has_ready():
                    rd = core.ready()
                    for m in rd.messages:
                        batches.setdefault((m.sender, m.recipient), []).append(m)
                    core.advance(rd)
            if not batches:
                return
            for batch in batches.values():
                if count and any(isinstance(m, Heartbeat) for m in batch):
                    self.heartbeat_calls += 1
                for m in batch:
                    self.cores[(int(m.group_id[1:]), m.recipient)].step(m)

    def elect_leaders_at_different_phases(self, aligned: bool) -> None:
        """Group g is led by server g % 3 and elected at tick g: their phases differ."""
        for now in range(GROUPS):
            self.cores[(now, SERVERS[now % 3])].campaign()
            self.exchange(count=False)
            self.tick(now, aligned, count=False, groups=now + 1)  # groups without a leader yet wait
        assert all(self.cores[(g, SERVERS[g % 3])].is_leader for g in range(GROUPS))

    def tick(self, now: int, aligned: bool, count: bool = True, groups: int = GROUPS) -> None:
        for (group, _), core in self.cores.items():
            if group < groups:
                core.tick(now if aligned else None)
        self.exchange(count)


@pytest.mark.parametrize("aligned", [True, False], ids=["shared-phase", "own-phase"])
def test_heartbeats_of_many_groups_between_two_servers_share_one_call_per_interval(aligned: bool) -> None:
    process = Process()
    process.elect_leaders_at_different_phases(aligned)
    intervals = 10
    start = GROUPS + 1
    for now in range(start, start + intervals * HEARTBEAT):
        process.tick(now, aligned)
    pairs = len(SERVERS) * (len(SERVERS) - 1)
    if aligned:
        assert process.heartbeat_calls == pairs * intervals, "one call per ordered server pair per interval"
    else:
        # Without the shared phase the same heartbeats spread over every tick of the interval.
        assert process.heartbeat_calls >= 4 * pairs * intervals
