"""The runtime's tablet copy path, deterministic: real replicas, an in-memory network, a virtual
clock (:mod:`nyala.testing.raft_network`).

A follower is cut off while the leader writes on and compacts its in-memory log past the
follower's next entry.  The leader's ``on_copy_needed`` hook (what the tablet server's copy
requester hangs on) must then name that follower, and again exactly once every four election
timeouts while the need lasts, never on every tick or message.  The copy itself is done as a
destination's install does it: the leader's state machine, WAL and committed config copied
into the follower's directory, with the higher term and the commit index at the copied
applied index; the follower restarted from that must rejoin and catch up to the leader.

A copy taken before a follower's last acknowledgements (an operator's copy onto a live
member) gives it a log shorter than what the leader counted for it: the leader must notice,
stop counting those entries for it, and catch it up again rather than probe for ever.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nyala.consensus.core import HardState, LogEntry, RaftConfig, RaftOptions, Role
from nyala.consensus.runtime import ConsensusMetadata, RaftReplica, ReplicaOptions
from nyala.consensus.runtime.replica import WAL_DIR
from nyala.rpc.loop import run
from nyala.testing.raft_network import LocalRaftNetwork

pytestmark = pytest.mark.timeout(120)

GROUP = "tablet-copy"
#: A short in-memory log, so that a few dozen writes compact past a follower left behind.
CACHE = 8
OPTIONS = ReplicaOptions(follower_apply_linger_ms=0, log_cache_entries=CACHE)
#: How often the core names a peer that still needs a copy (four election timeouts).
NOTICE_TICKS = 4 * RaftOptions().timing().election_ticks


class DurableMachine:
    """Applies durably at once (so the replica compacts behind it) and keeps every payload."""

    def __init__(self, applied: Sequence[bytes] = (), index: int = 0) -> None:
        self.applied = list(applied)
        self.index = index

    def applied_index(self) -> int:
        return self.index

    def apply(self, entries: Sequence[LogEntry]) -> Sequence[Any]:
        self.applied.extend(e.payload for e in entries)
        self.index = entries[-1].index
        return [e.index for e in entries]

    def copy(self) -> DurableMachine:
        return DurableMachine(self.applied, self.index)


class Group:
    """Three replicas of one group, a, b and c, on a :class:`LocalRaftNetwork`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.net = LocalRaftNetwork()
        self.replicas: dict[str, RaftReplica] = {}
        self.machines: dict[str, DurableMachine] = {}

    async def open(self, uuid: str, machine: DurableMachine, config: RaftConfig | None = None) -> RaftReplica:
        self.machines[uuid] = machine
        rng = random.Random(sum(uuid.encode()))  # fixed, distinct seeds: the same jitter every run
        transport = self.net.transport(uuid)
        if config is not None:
            replica = await RaftReplica.create(
                self.root / uuid, GROUP, uuid, config, machine, transport, options=OPTIONS, rng=rng
            )
        else:
            replica = await RaftReplica.open(
                self.root / uuid, GROUP, uuid, machine, transport, options=OPTIONS, rng=rng
            )
        self.replicas[uuid] = replica
        return replica

    async def close(self) -> None:
        for replica in self.replicas.values():
            await replica.close()

    async def leader(self) -> RaftReplica:
        def running() -> bool:
            leaders = [r for r in self.replicas.values() if r.role is Role.LEADER]
            return len(leaders) == 1 and leaders[0].applied_index >= leaders[0].last_index > 0

        await self.net.run_until(running, 300, "a running leader")
        return next(r for r in self.replicas.values() if r.role is Role.LEADER)

    async def write(self, leader: RaftReplica, start: int, count: int) -> None:
        """Write ``count`` entries one by one, each to its commit, while the clock ticks."""
        for i in range(start, start + count):
            task = asyncio.ensure_future(leader.replicate(f"row-{i}".encode()))
            try:
                await self.net.run_until(task.done, 100, f"write {i}")
            finally:
                if not task.done():
                    task.cancel()
            await task

    async def snapshot(self, source: RaftReplica) -> Snapshot:
        """What a copy session of ``source`` holds now: its machine, WAL and committed config."""
        await self.net.settle()  # every Ready durable: the source's WAL and machine agree
        wal = self.root / f"snapshot-{self.net.now_tick}"
        shutil.copytree(self.root / source.peer_id / WAL_DIR, wal)
        return Snapshot(self.machines[source.peer_id].copy(), wal, source.term, source.committed_config)

    async def install(self, snapshot: Snapshot, dest: str) -> None:
        """Replace ``dest``'s replica with ``snapshot``, as a destination installs a copy."""
        await self.replicas.pop(dest).close()
        directory = self.root / dest
        local = ConsensusMetadata.load(directory).hard_state
        shutil.rmtree(directory / WAL_DIR)
        shutil.copytree(snapshot.wal, directory / WAL_DIR)
        # Terms never go back, and a vote stands only in the term it was cast in; the copied
        # applied index is committed, so it is the commit hint.
        term, vote = (local.term, local.vote) if local.term >= snapshot.term else (snapshot.term, "")
        ConsensusMetadata(HardState(term, vote, snapshot.machine.index), snapshot.config).save(directory)
        await self.open(dest, snapshot.machine.copy())

    async def copy_from(self, source: RaftReplica, dest: str) -> None:
        await self.install(await self.snapshot(source), dest)


@dataclass(frozen=True)
class Snapshot:
    machine: DurableMachine
    wal: Path
    term: int
    config: RaftConfig


def test_a_follower_behind_the_leaders_compacted_log_is_named_for_a_copy_once_per_interval_then_rejoins(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        group = Group(tmp_path)
        try:
            config = RaftConfig.of_voters("abc")
            for uuid in "abc":
                await group.open(uuid, DurableMachine(), config)
            leader = await group.leader()
            notices: list[tuple[int, str]] = []
            leader.on_copy_needed = lambda replica, peer: notices.append((group.net.now_tick, peer))
            await group.write(leader, 0, 5)
            lagging = next(u for u in "abc" if u != leader.peer_id)
            other = next(u for u in "abc" if u not in (leader.peer_id, lagging))
            await group.net.run_until(
                lambda: group.replicas[lagging].applied_index == leader.applied_index, 50, "replication"
            )
            behind = group.replicas[lagging].last_index
            group.net.isolate(lagging)
            # The other two write on, and the leader compacts past what the lagging one holds.
            await group.write(leader, 5, 40)
            assert leader.first_log_index > behind + 1, (leader.first_log_index, behind)
            assert notices == [] or {p for _, p in notices} == {lagging}
            group.net.heal()
            await group.net.run_until(lambda: bool(notices), 3 * NOTICE_TICKS, "the first copy notice")
            first = notices[0][0]
            # While the need lasts: once per interval, not on every tick, heartbeat or answer.
            await group.net.run_until(lambda: group.net.now_tick >= first + 3 * NOTICE_TICKS + 1, 4 * NOTICE_TICKS)
            assert [p for _, p in notices] == [lagging] * 4, notices
            assert [t - first for t, _ in notices] == [0, NOTICE_TICKS, 2 * NOTICE_TICKS, 3 * NOTICE_TICKS]
            assert group.replicas[lagging].last_index == behind  # replication cannot reach it
            progress = {p.peer_id: p for p in leader.peer_progress()}
            assert progress[lagging].state == "NEEDS_COPY"
            assert group.replicas[other].role is Role.FOLLOWER

            # The copy: the follower restarts from the leader's state, rejoins, and catches up.
            await group.copy_from(leader, lagging)
            copied = group.replicas[lagging]
            count = len(notices)

            def caught_up() -> bool:
                return copied.commit_index == leader.commit_index and copied.applied_index == leader.applied_index

            await group.net.run_until(caught_up, 2 * NOTICE_TICKS, "the copied follower to catch up")
            await group.write(leader, 45, 5)  # and it follows by replication alone
            await group.net.run_until(caught_up, 50, "replication to the copied follower")
            assert group.machines[lagging].applied == group.machines[leader.peer_id].applied
            assert len(group.machines[lagging].applied) == 50
            assert copied.role is Role.FOLLOWER
            assert {p.peer_id: p.state for p in leader.peer_progress()}[lagging] == "REPLICATE"
            await group.net.run_until(lambda: group.net.now_tick >= first + 8 * NOTICE_TICKS, 8 * NOTICE_TICKS)
            assert len(notices) == count  # no notice once the copy has landed
        finally:
            await group.close()

    run(main())


def test_a_follower_whose_log_is_replaced_by_an_older_copy_is_caught_up_again(tmp_path: Path) -> None:
    async def main() -> None:
        group = Group(tmp_path)
        try:
            for uuid in "abc":
                await group.open(uuid, DurableMachine(), RaftConfig.of_voters("abc"))
            leader = await group.leader()
            follower = next(u for u in "abc" if u != leader.peer_id)
            await group.write(leader, 0, 5)
            older = await group.snapshot(leader)
            await group.write(leader, 5, 5)  # the follower acknowledges these after the snapshot

            def matched() -> int:
                return {p.peer_id: p.match for p in leader.peer_progress()}[follower]

            await group.net.run_until(lambda: matched() == leader.last_index, 50, "the acknowledgements")
            acknowledged = matched()
            await group.install(older, follower)
            replaced = group.replicas[follower]
            assert replaced.last_index < acknowledged
            # The leader learns that the follower lost what it acknowledged, counts it no more,
            # and sends the entries again.
            await group.net.run_until(
                lambda: replaced.last_index == leader.last_index and replaced.applied_index == leader.applied_index,
                100,
                "the follower to be caught up again",
            )
            assert matched() == leader.last_index
            await group.write(leader, 10, 3)
            await group.net.run_until(lambda: replaced.applied_index == leader.applied_index, 50, "replication")
            assert group.machines[follower].applied == group.machines[leader.peer_id].applied
        finally:
            await group.close()

    run(main())
