"""A simulated Raft group: replicas, network, clock, checker, and the controls tests use.

Everything random comes from ``random.Random`` instances derived from the cluster's seed, and
nothing iterates over hash-ordered sets, so a seed replays a run exactly.

``driver`` chooses how replicas run the driver contract: ``pipelined`` (the leader's
AppendEntries leave before its own sync, Readies are taken while earlier ones are written),
``sequential`` (everything waits for the sync, one Ready at a time) or ``mixed`` (each
replica draws one).  ``ticks`` chooses whether replicas pass their process tick counter to
``tick()`` so that heartbeats fall on a shared phase: ``own``, ``aligned`` or ``mixed``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from nyala.consensus.core import LeaderState, Message, OpId, RaftConfig, RaftCore, RaftOptions
from nyala.errors import NyalaError
from nyala.testing.sim.checker import SafetyChecker, SafetyViolation
from nyala.testing.sim.disk import SimDisk
from nyala.testing.sim.loop import MS, EventLoop
from nyala.testing.sim.network import Network, NetworkProfile
from nyala.testing.sim.node import SimNode

__all__ = ["DRIVERS", "TICK_MODES", "Cluster"]

DRIVERS = ("pipelined", "sequential", "mixed")
TICK_MODES = ("own", "aligned", "mixed")


class Cluster:
    """``voters`` replicas named n1..nN bootstrapped with one config, on a virtual clock."""

    group_id = "sim-tablet"

    def __init__(
        self,
        voters: int = 3,
        seed: int = 0,
        options: RaftOptions | None = None,
        profile: NetworkProfile | None = None,
        fsync_us: tuple[int, int] = (100, 2 * MS),
        driver: str = "pipelined",
        ticks: str = "own",
    ) -> None:
        if driver not in DRIVERS:
            raise ValueError(f"unknown driver {driver!r}; choose from {', '.join(DRIVERS)}")
        if ticks not in TICK_MODES:
            raise ValueError(f"unknown tick mode {ticks!r}; choose from {', '.join(TICK_MODES)}")
        self.seed = seed
        self.driver = driver
        self.ticks = ticks
        self._mode_rng = random.Random(seed * 15485863 + 5)
        self.rng = random.Random(seed)
        self.loop = EventLoop()
        self.checker = SafetyChecker()
        self.network = Network(self.loop, random.Random(seed * 7919 + 1), self._deliver)
        if profile is not None:
            self.network.profile = profile
        self.options = options or RaftOptions()
        self.tick_us = self.options.raft_tick_interval_ms * MS
        self.fsync_us = fsync_us
        self.nodes: dict[str, SimNode] = {}
        self.retired: dict[str, SimNode] = {}  # deleted replicas, kept for the durability check
        self.disconnected: set[str] = set()  # cut off by disconnect(); partitions are the network's
        self.tablet_copies = 0
        self._fsync_rng = random.Random(seed * 104729 + 3)
        self._next_id = 1
        ids = [self.new_peer_id() for _ in range(voters)]
        config = RaftConfig.of_voters(ids)
        for peer_id in ids:
            self.add_node(peer_id, config)

    # ------------------------------------------------------------------ nodes

    def new_peer_id(self) -> str:
        peer_id = f"n{self._next_id}"
        self._next_id += 1
        return peer_id

    def add_node(self, peer_id: str, config: RaftConfig | None = None, tick_us: int | None = None) -> SimNode:
        """Create and start a replica; without ``config`` it knows no config (a new, empty replica)."""
        disk = SimDisk.fresh(config if config is not None else RaftConfig(()))
        seed = self.seed * 1_000_033 + int(peer_id.lstrip("n") or 0)
        pipelined = self.driver == "pipelined" or (self.driver == "mixed" and self._mode_rng.random() < 0.5)
        aligned = self.ticks == "aligned" or (self.ticks == "mixed" and self._mode_rng.random() < 0.5)
        node = SimNode(self, peer_id, disk, seed, tick_us or self.tick_us, pipelined, aligned)
        self.nodes[peer_id] = node
        node.start()
        return node

    def retire(self, peer_id: str) -> None:
        """Stop a replica for good and forget it (a tombstoned, deleted replica)."""
        node = self.nodes.pop(peer_id)
        node.crash()
        self.retired[peer_id] = node
        self.network.reconnect(peer_id)

    def node(self, peer_id: str) -> SimNode:
        return self.nodes[peer_id]

    def up_nodes(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.up]

    def _deliver(self, m: Message) -> None:
        node = self.nodes.get(m.recipient)
        if node is not None:
            node.deliver(m)

    def fsync_delay(self, fsync_us: tuple[int, int] | None = None) -> int:
        low, high = fsync_us or self.fsync_us
        return self._fsync_rng.randint(low, high)

    def check_commit_is_durable(self, core: RaftCore) -> None:
        """A leader's commit index must be on the *disks* of a majority of its voters.

        This is what makes the leader's early sends safe: its own unsynced copy must not have
        counted.  (Raft guarantees an acknowledged entry stays on the follower's disk at least
        until the leader learns it is committed, so checking at commit time is exact.)
        """
        index = core.commit_index
        term = core.term_at(index)
        if index == 0 or term is None:
            return
        # The commit was counted under the active config of that moment; a promotion may have
        # been appended since (one change at a time, so it was then the committed config).
        configs = (core.active_config, core.committed_config)
        for config in configs:
            holders = [v for v in config.voters if self._holds_durably(v, index, term)]
            if len(holders) >= config.majority:
                return
        raise SafetyViolation(
            f"commit without a durable majority: leader {core.peer_id} of term {core.term} committed "
            f"{index}@{term}, but no majority of the voters of {[list(c.voters) for c in configs]} hold it on disk"
        )

    def _holds_durably(self, peer_id: str, index: int, term: int) -> bool:
        node = self.nodes.get(peer_id) or self.retired.get(peer_id)
        return node is not None and node.disk.holds(index, term)

    # ------------------------------------------------------------------ time

    @property
    def now_ms(self) -> float:
        return self.loop.now / MS

    def run_for(self, ms: float) -> None:
        self.loop.run_until(self.loop.now + int(ms * MS))

    def run_until(self, predicate: Callable[[], bool], timeout_ms: float) -> bool:
        """Run until ``predicate()`` holds (checked after each step) or the timeout passes."""
        if predicate():
            return True
        return self.loop.run_until(self.loop.now + int(timeout_ms * MS), predicate)

    # ------------------------------------------------------------------ leaders

    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.up and n.core is not None and n.core.is_leader]

    def leader(self) -> SimNode | None:
        """The leader of the highest term among running replicas, if any."""
        leaders = self.leaders()
        if not leaders:
            return None
        return max(leaders, key=lambda n: n.core.term if n.core is not None else -1)

    def running_leader(self) -> SimNode | None:
        """A connected leader that accepts writes (RUNNING, not paused, not transferring)."""
        candidates = [n for n in self.leaders() if n.peer_id not in self.disconnected and not n.paused]
        if not candidates:
            return None
        node = max(candidates, key=lambda n: n.core.term if n.core is not None else -1)
        core = node.core
        if core is None or core.leader_state is not LeaderState.RUNNING or core.transfer_target:
            return None
        return node

    def wait_for_leader(self, timeout_ms: float = 5_000) -> SimNode | None:
        self.run_until(lambda: self.running_leader() is not None, timeout_ms)
        return self.running_leader()

    # ------------------------------------------------------------------ faults

    def crash(self, peer_id: str, torn: bool = False) -> None:
        self.nodes[peer_id].crash(self.rng if torn else None)

    def restart(self, peer_id: str) -> None:
        self.nodes[peer_id].start()

    def pause(self, peer_id: str) -> None:
        self.nodes[peer_id].pause()

    def resume(self, peer_id: str) -> None:
        self.nodes[peer_id].resume()

    def disconnect(self, peer_id: str) -> None:
        """Cut a replica off from every other (MIT 6.5840's disconnect)."""
        self.disconnected.add(peer_id)
        self.network.isolate(peer_id, list(self.nodes))

    def reconnect(self, peer_id: str) -> None:
        self.disconnected.discard(peer_id)
        self.network.reconnect(peer_id)
        for other in sorted(self.disconnected):  # replicas still cut off stay cut off
            self.network.isolate(other, list(self.nodes))

    def partition(self, *groups: Iterable[str]) -> None:
        self.network.partition(groups)

    def heal(self) -> None:
        self.disconnected.clear()
        self.network.heal()

    # ------------------------------------------------------------------ tablet copy (the driver's job)

    def request_tablet_copy(self, source_id: str, target_id: str, term: int) -> None:
        self.loop.call_later(self.rng.randint(10 * MS, 200 * MS), self._tablet_copy, (source_id, target_id, term))

    def _tablet_copy(self, arg: tuple[str, str, int]) -> None:
        source_id, target_id, term = arg
        source = self.nodes.get(source_id)
        target = self.nodes.get(target_id)
        if source is None or target is None or source.core is None or source.paused:
            return
        core = source.core
        if not core.is_leader or core.term != term:
            return  # only a current leader may start a copy (Kudu sends its caller_term)
        target_term = target.core.term if target.core is not None else target.disk.hard_state.term
        base_index = core.first_index - 1
        base_term = core.term_at(base_index)
        assert base_term is not None
        if target_term > term or target.holds(base_index, base_term):
            return  # a newer leader exists, or the target no longer needs the copy
        snapshot = source.disk.snapshot
        chain = source.disk.chain_at(snapshot.index)
        assert chain is not None, f"{source_id} has no chain hash at its snapshot {snapshot.index}"
        target.install_tablet_copy(snapshot, chain)
        self.tablet_copies += 1

    # ------------------------------------------------------------------ MIT 6.5840-style helpers

    def check_one_leader(self, timeout_ms: float = 5_000) -> SimNode:
        """Wait for a running leader among connected replicas; fail otherwise."""
        node = self.wait_for_leader(timeout_ms)
        assert node is not None, f"no leader within {timeout_ms} ms (virtual)"
        return node

    def n_committed(self, index: int) -> tuple[int, bytes | None]:
        """How many running replicas applied ``index``, and its payload."""
        entry = self.checker.applied.get(index)
        count = sum(1 for n in self.nodes.values() if n.up and n.applied >= index)
        return (count, entry.payload if entry is not None else None)

    def propose(self, payload: bytes, via: SimNode | None = None) -> OpId | None:
        """Propose on ``via`` (default: the running leader); None if refused."""
        node = via or self.running_leader()
        if node is None or node.core is None or node.paused:
            return None
        try:
            return node.propose(payload)
        except NyalaError:
            return None

    def one(self, payload: bytes, expected: int, timeout_ms: float = 10_000, retry: bool = True) -> int:
        """MIT 6.5840's ``one()``: get ``payload`` committed on at least ``expected`` replicas."""
        deadline = self.loop.now + int(timeout_ms * MS)
        while self.loop.now < deadline:
            op_id = None
            for node in list(self.nodes.values()):
                if node.up and node.core is not None and node.core.is_leader and node.peer_id not in self.disconnected:
                    op_id = self.propose(payload, node)
                    if op_id is not None:
                        break
            if op_id is not None:
                index = op_id.index

                def done(index: int = index) -> bool:
                    count, got = self.n_committed(index)
                    return count >= expected and got == payload

                if self.run_until(done, 2_000):
                    return index
                if not retry:
                    raise AssertionError(f"{payload!r} at index {index} did not commit on {expected} replicas")
            else:
                self.run_for(50)
        raise AssertionError(f"one({payload!r}) failed to reach agreement on {expected} replicas")
