"""The runtime tells a follower what its leader had committed (what follower reads prove freshness by)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nyala.consensus.runtime import RaftReplica
from nyala.rpc.loop import run

from .test_runtime_config_change import group_of, write

pytestmark = pytest.mark.timeout(120)


def test_followers_hear_the_leaders_commit_index_only_once_it_covers_the_leaders_own_term(tmp_path: Path) -> None:
    async def main() -> None:
        async with group_of(tmp_path) as group:
            heard: dict[str, list[tuple[int, int | None, int]]] = {u: [] for u in group.replicas}

            def listen(replica: RaftReplica) -> None:
                def contact(commit: int) -> None:
                    # (the commit index heard, the term of that entry here, this replica's term)
                    heard[replica.peer_id].append((commit, replica._core.term_at(commit), replica.term))

                replica.on_leader_contact = contact

            for replica in group.replicas.values():
                listen(replica)
            leader = await group.leader()
            await write(group, leader, 5)
            await group.net.run_until(
                lambda: all(heard[u] and heard[u][-1][0] == leader.commit_index for u in heard if u != leader.peer_id),
                100,
                "the followers to hear the leader's commit index",
            )
            assert heard[leader.peer_id] == []  # a leader hears from no leader
            # A new leader: its messages count only once its own NO_OP committed, so no follower
            # ever takes a commit index of an earlier term from it.
            old = leader.peer_id
            await group.kill(old)
            for u in heard:
                heard[u].clear()
            new = await group.leader()
            await write(group, new, 2)
            follower = next(u for u in group.replicas if u != new.peer_id)
            await group.net.run_until(
                lambda: bool(heard[follower]) and heard[follower][-1][0] == new.commit_index, 100, "the new leader's"
            )
            assert all(entry_term == term == new.term for _, entry_term, term in heard[follower])

    run(main())
