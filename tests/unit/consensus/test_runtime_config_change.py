"""The runtime's config-change paths, deterministic: real replicas, an in-memory network, a
virtual clock.

Every replica is a real :class:`RaftReplica` (WAL and consensus metadata in a temporary
directory, the asyncio pipeline) but they share one event loop and talk through
:class:`LocalRaftNetwork`, which is ticked explicitly and settles (every message delivered,
every Ready durable and applied) between ticks.  Elections and promotions therefore happen
after the same number of ticks whatever the machine's speed, and every wait is bounded in
ticks.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from nyala.consensus.core import ChangeKind, ConfigChange, LogEntry, MemberType, RaftConfig, Role
from nyala.consensus.runtime import RaftReplica, ReplicaOptions
from nyala.errors import Aborted, AlreadyPresent, IllegalState, InvalidArgument, NotFound, NotTheLeader
from nyala.rpc.loop import run
from nyala.testing.raft_network import LocalRaftNetwork

pytestmark = pytest.mark.timeout(120)

GROUP = "tablet-cc"
OPTIONS = ReplicaOptions(follower_apply_linger_ms=0)
T = TypeVar("T")


class Machine:
    """Keeps every applied payload; its durable applied index stays 0 (replays the WAL)."""

    def __init__(self) -> None:
        self.applied: list[bytes] = []

    def applied_index(self) -> int:
        return 0

    def apply(self, entries: Sequence[LogEntry]) -> Sequence[Any]:
        self.applied.extend(e.payload for e in entries)
        return [e.index for e in entries]


class Group:
    """One Raft group's replicas on a :class:`LocalRaftNetwork`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.net = LocalRaftNetwork()
        self.replicas: dict[str, RaftReplica] = {}
        self.machines: dict[str, Machine] = {}

    async def add(self, uuid: str, config: RaftConfig) -> RaftReplica:
        machine = self.machines[uuid] = Machine()
        # Distinct, fixed seeds: the same jitter in every run, never the same on two replicas.
        rng = random.Random(sum(uuid.encode()))
        replica = await RaftReplica.create(
            self.root / uuid, GROUP, uuid, config, machine, self.net.transport(uuid), options=OPTIONS, rng=rng
        )
        self.replicas[uuid] = replica
        return replica

    async def kill(self, uuid: str) -> None:
        await self.replicas.pop(uuid).close()

    async def close(self) -> None:
        for replica in self.replicas.values():
            await replica.close()

    def leaders(self) -> list[RaftReplica]:
        return [r for r in self.replicas.values() if r.role is Role.LEADER]

    async def leader(self) -> RaftReplica:
        """The one leader, once it has committed its NO_OP (it then takes writes and changes)."""

        def running() -> bool:
            leaders = self.leaders()
            return len(leaders) == 1 and leaders[0].applied_index >= leaders[0].last_index > 0

        await self.net.run_until(running, 300, "a running leader")
        return self.leaders()[0]

    async def finish(self, work: Awaitable[T], max_ticks: int = 300) -> T:
        """Run ``work`` to its end while the clock ticks."""
        task = asyncio.ensure_future(work)
        try:
            await self.net.run_until(task.done, max_ticks, "the call")
        finally:
            if not task.done():
                task.cancel()
        return await task


@asynccontextmanager
async def group_of(root: Path, voters: Sequence[str] = ("a", "b", "c")) -> AsyncIterator[Group]:
    group = Group(root)
    try:
        config = RaftConfig.of_voters(voters)
        for uuid in voters:
            await group.add(uuid, config)
        yield group
    finally:
        await group.close()


async def write(group: Group, leader: RaftReplica, n: int) -> None:
    for i in range(n):
        await group.finish(leader.replicate(f"row-{i}".encode()))


def add(peer: str, member_type: MemberType, promote: bool = False) -> ConfigChange:
    return ConfigChange(ChangeKind.ADD_PEER, peer, member_type, promote=promote)


def members(config: RaftConfig) -> dict[str, tuple[str, bool]]:
    return {m.peer_id: (m.member_type.name, m.promote) for m in config.members}


def test_a_non_voter_with_promote_is_added_then_promoted_once_caught_up(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            await write(group, leader, 20)
            # The new replica starts from the group's first config, as a copied tablet would
            # from its source's metadata; it is no member yet (NON_PARTICIPANT).
            newcomer = await group.add("d", RaftConfig.of_voters("abc"))
            assert newcomer.role.name == "NON_PARTICIPANT"
            cas = leader.committed_config.opid_index
            added = await group.finish(leader.change_config([add("d", MemberType.NON_VOTER, promote=True)], cas))
            assert members(added)["d"] == ("NON_VOTER", True)
            assert added.opid_index > cas
            assert leader.committed_config.opid_index >= added.opid_index

            def promoted() -> bool:
                return leader.committed_config.is_voter("d") and newcomer.committed_config.is_voter("d")

            await group.net.run_until(promoted, 300, "the promotion of d")
            assert members(leader.committed_config)["d"] == ("VOTER", False)
            assert newcomer.role is Role.FOLLOWER
            assert len(group.machines["d"].applied) == 20  # it caught up on every write
            progress = {p.peer_id: p for p in leader.peer_progress()}
            assert set(progress) == {"a", "b", "c", "d"} - {leader.peer_id}
            assert progress["d"].match == leader.last_index

    run(main())


def test_removing_a_follower_commits_and_the_group_writes_on_without_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            victim = next(u for u in "abc" if u != leader.peer_id)
            removed = ConfigChange(ChangeKind.REMOVE_PEER, victim)
            config = await group.finish(leader.change_config([removed], leader.committed_config.opid_index))
            assert victim not in config.peer_ids
            assert len(config.voters) == 2
            assert leader.committed_config == config
            group.net.isolate(victim)  # the remaining two are a majority of the new config
            await write(group, leader, 5)
            survivor = next(u for u in "abc" if u not in (leader.peer_id, victim))
            await group.net.run_until(lambda: len(group.machines[survivor].applied) == 5, 100, "replication")

    run(main())


def test_a_stale_cas_is_aborted_and_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            before = leader.committed_config
            with pytest.raises(Aborted, match="CAS_FAILED"):
                await leader.change_config([add("d", MemberType.NON_VOTER)], before.opid_index + 7)
            await group.net.settle()
            assert leader.committed_config == before
            assert leader.active_config == before

    run(main())


def test_bad_changes_are_refused_at_once_and_change_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            follower = next(r for r in group.replicas.values() if r is not leader)
            before = leader.committed_config
            other = next(u for u in "abc" if u != leader.peer_id)
            cases: list[tuple[list[ConfigChange], type[Exception]]] = [
                ([add(other, MemberType.VOTER)], AlreadyPresent),
                ([ConfigChange(ChangeKind.REMOVE_PEER, "zz")], NotFound),
                ([ConfigChange(ChangeKind.MODIFY_PEER, other, MemberType.VOTER)], InvalidArgument),  # a no-op
                ([add("d", MemberType.VOTER), add("e", MemberType.VOTER)], InvalidArgument),  # two voters
                ([], InvalidArgument),
            ]
            for changes, error in cases:
                with pytest.raises(error):
                    await leader.change_config(changes)
            with pytest.raises(NotTheLeader) as refused:
                await follower.change_config([add("d", MemberType.NON_VOTER)])
            assert refused.value.leader_hint == leader.peer_id
            await group.net.settle()
            assert leader.committed_config == before == leader.active_config

    run(main())


def test_a_pending_change_refuses_a_second_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            first = asyncio.ensure_future(leader.change_config([add("d", MemberType.NON_VOTER)]))
            await asyncio.sleep(0)  # proposed, not committed: no follower has answered yet
            assert not first.done()
            with pytest.raises(IllegalState, match="pending"):
                await leader.change_config([add("e", MemberType.NON_VOTER)])
            config = await group.finish(first)
            assert set(config.peer_ids) == {"a", "b", "c", "d"}
            assert "e" not in leader.committed_config.peer_ids

    run(main())


def test_a_change_replaced_by_a_new_leader_is_aborted(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            old = await group.leader()
            before = old.committed_config
            group.net.isolate(old.peer_id)
            change = asyncio.ensure_future(old.change_config([add("d", MemberType.NON_VOTER)]))
            # The others elect a leader of a later term, which overwrites the isolated
            # leader's entry once the partition heals.
            await group.net.run_until(lambda: any(r is not old for r in group.leaders()), 300, "a new leader")
            group.net.heal()
            with pytest.raises(Aborted, match="replaced by a new leader"):
                await group.finish(change)
            new = next(r for r in group.leaders() if r is not old)
            await group.net.run_until(lambda: old.committed_config == new.committed_config, 100, "agreement")
            assert "d" not in new.committed_config.peer_ids
            assert new.committed_config.peer_ids == before.peer_ids

    run(main())


def test_removing_the_leader_itself_answers_not_the_leader_and_hands_over(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            before = leader.committed_config
            with pytest.raises(NotTheLeader) as refused:
                await leader.change_config([ConfigChange(ChangeKind.REMOVE_PEER, leader.peer_id)])
            target = refused.value.leader_hint
            assert target in before.voters
            assert target != leader.peer_id
            assert leader.transfer_target == target
            await group.net.run_until(lambda: group.replicas[target].role is Role.LEADER, 100, "the transfer")
            assert group.replicas[target].committed_config.peer_ids == before.peer_ids  # not removed

    run(main())


def test_run_leader_election_makes_a_follower_lead(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            term = leader.term
            assert leader.campaign() is False  # already leads: nothing to do
            follower = next(r for r in group.replicas.values() if r is not leader)
            assert follower.campaign() is True  # even though it hears from a live leader
            await group.net.run_until(lambda: group.leaders() == [follower], 100, "the election")
            assert follower.term > term
            outsider = await group.add("d", RaftConfig.of_voters("abc"))  # not a member
            with pytest.raises(IllegalState, match="not a voter"):
                outsider.campaign()

    run(main())


def test_unsafe_change_config_on_a_survivor_restores_a_writable_group(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            leader = await group.leader()
            await write(group, leader, 3)
            survivor = next(r for r in group.replicas.values() if r is not leader)
            lost = [u for u in "abc" if u != survivor.peer_id]
            for uuid in lost:  # a majority is gone for good
                await group.kill(uuid)
            with pytest.raises(NotFound, match="committed config"):
                survivor.unsafe_change_config([survivor.peer_id, "zz"])
            op = survivor.unsafe_change_config([survivor.peer_id])
            await group.net.run_until(lambda: survivor.role is Role.LEADER, 100, "the survivor's election")
            await group.net.run_until(lambda: survivor.committed_config.opid_index >= op.index, 100, "commit")
            forced = survivor.committed_config
            assert forced.peer_ids == (survivor.peer_id,)
            assert forced.unsafe_config_change
            await group.finish(survivor.replicate(b"after"))  # a majority of one: writes commit again
            assert group.machines[survivor.peer_id].applied[-1] == b"after"

    run(main())
