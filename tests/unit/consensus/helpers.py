"""A tiny synchronous driver for unit tests of the core (in the spirit of etcd's rafttest).

Messages are collected from every replica's Ready and delivered only when a test says so,
which lets a test stop the world between any two steps, drop or rewrite messages, and look at
each Ready.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TypeVar

from nyala.consensus.core import (
    HardState,
    LogEntry,
    Message,
    OpId,
    PersistentState,
    RaftConfig,
    RaftCore,
    RaftOptions,
    Ready,
)

GROUP = "tablet-1"
M = TypeVar("M")


def make_core(
    peer_id: str,
    voters: Iterable[str] = ("a", "b", "c"),
    *,
    config: RaftConfig | None = None,
    state: PersistentState | None = None,
    seed: int | None = None,
    options: RaftOptions | None = None,
) -> RaftCore:
    config = config or RaftConfig.of_voters(voters)
    # Each replica draws its own election jitter; identical seeds would split votes forever.
    rng = random.Random(int.from_bytes(peer_id.encode(), "big") if seed is None else seed)
    return RaftCore(GROUP, peer_id, state or PersistentState.bootstrap(config), rng, options)


def persisted(
    config: RaftConfig,
    entries: Iterable[tuple[int, int]] = (),
    term: int = 0,
    vote: str = "",
    commit: int = 0,
) -> PersistentState:
    """A state with WRITE entries given as (index, term) pairs after base 0."""
    from nyala.consensus.core import EntryType

    log = tuple(LogEntry(t, i, EntryType.WRITE, f"e{i}@{t}".encode()) for i, t in entries)
    return PersistentState(HardState(term, vote, commit), config, OpId(0, 0), log, 0)


class Net:
    """Replicas by id, an outbox of undelivered messages, and helpers to move them."""

    def __init__(self, cores: Iterable[RaftCore]) -> None:
        self.cores = {c.peer_id: c for c in cores}
        self.outbox: list[Message] = []
        self.readies: dict[str, list[Ready]] = {p: [] for p in self.cores}
        self.applied: dict[str, list[LogEntry]] = {p: [] for p in self.cores}
        self.cut: set[str] = set()

    def collect(self) -> None:
        """Take every pending Ready (persist = nothing to do here, apply, advance)."""
        for peer_id, core in self.cores.items():
            while core.has_ready():
                rd = core.ready()
                self.readies[peer_id].append(rd)
                self.outbox.extend(rd.messages)
                self.applied[peer_id].extend(rd.committed_entries)
                core.advance(rd)

    def deliver(self, keep: Callable[[Message], bool] = lambda m: True) -> int:
        """Deliver every collected message that ``keep`` accepts and that is not cut off."""
        self.collect()
        batch, self.outbox = self.outbox, []
        delivered = 0
        for m in batch:
            if m.sender in self.cut or m.recipient in self.cut or m.recipient not in self.cores or not keep(m):
                continue
            self.cores[m.recipient].step(m)
            delivered += 1
        self.collect()
        return delivered

    def stabilize(self, keep: Callable[[Message], bool] = lambda m: True, rounds: int = 50) -> None:
        for _ in range(rounds):
            if not self.deliver(keep) and not self.outbox:
                return

    def tick(self, peer_id: str, n: int = 1) -> None:
        for _ in range(n):
            self.cores[peer_id].tick()
        self.collect()

    def notify_commit(self, leader_id: str) -> None:
        """Tick the leader once and deliver: followers learn a commit index no append carried."""
        self.tick(leader_id)
        self.stabilize()

    def elect(self, peer_id: str) -> RaftCore:
        """Make ``peer_id`` leader and commit its NO_OP."""
        core = self.cores[peer_id]
        core.campaign()
        self.stabilize()
        assert core.is_leader, f"{peer_id} did not win: {core.role}"
        return core

    def sent(self, kind: type[M]) -> list[M]:
        """Collected, undelivered messages of one type."""
        self.collect()
        return [m for m in self.outbox if isinstance(m, kind)]
