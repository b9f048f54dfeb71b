"""Fault injection for random runs, in Jepsen's vocabulary.

Each enabled nemesis is a recurring event that starts a fault and schedules its end:

- ``partition``: random halves, one isolated node, the leader isolated, a majorities ring
  (each node sees a majority, no two the same) or a bridge (two halves joined by one node);
- ``crash``: one node, the leader, a minority or now and then a majority, each killed
  (half the time with a torn last write) and restarted later; or the leader killed *mid-write*:
  after its AppendEntries left, before its own sync completed (a pipelined leader loses
  entries its followers may hold and commit);
- ``pause``: a node or the leader stops (SIGSTOP) and resumes;
- ``net``: lost, duplicated and long-delayed (hence reordered) messages all along;
- ``churn``: membership changes through the leader: add a NON_VOTER to be promoted, remove
  a voter or a non-voter, demote a voter, graceful transfer (named or automatic), abrupt
  step-down; removed replicas keep running a while (disruptive servers), then are deleted;
- ``compact``: aggressive log compaction, so lagging replicas need tablet copies;
- ``skew``: replicas tick at rates up to 25% apart;
- ``disk``: a replica's (often the leader's) fsyncs turn slow for a while, so that followers
  acknowledge, and commit, entries before a pipelined leader's own sync completes.

``heal()`` ends every fault: the network heals and turns reliable, paused nodes resume,
crashed nodes restart.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

from nyala.consensus.core import ChangeKind, ConfigChange, MemberType, RaftCore
from nyala.errors import NyalaError
from nyala.testing.sim.cluster import Cluster
from nyala.testing.sim.loop import MS, SECOND
from nyala.testing.sim.network import NetworkProfile

__all__ = ["ALL_NEMESES", "Nemesis"]

ALL_NEMESES = ("partition", "crash", "pause", "net", "churn", "compact", "skew", "disk")
MAX_MEMBERS = 7
MIN_VOTERS = 3


class Nemesis:
    def __init__(self, cluster: Cluster, rng: random.Random, kinds: frozenset[str]) -> None:
        unknown = kinds - set(ALL_NEMESES)
        if unknown:
            raise ValueError(f"unknown nemeses {sorted(unknown)}; known: {', '.join(ALL_NEMESES)}")
        self.cluster = cluster
        self.kinds = kinds
        self._rng = rng
        self._stopped = False
        self._partitioned = False
        self._absent_since: dict[str, int] = {}
        self.actions: dict[str, int] = {}

    def start(self) -> None:
        if "net" in self.kinds:
            self.cluster.network.profile = NetworkProfile.unreliable()
        schedule = {
            "partition": self._partition,
            "crash": self._crash,
            "pause": self._pause,
            "churn": self._churn,
            "disk": self._slow_disk,
        }
        for kind, action in schedule.items():
            if kind in self.kinds:
                self._later(self._rng.randint(500 * MS, 3 * SECOND), action)
        self._later(SECOND, self._compact)
        if "churn" in self.kinds:
            self._later(SECOND, self._retire_removed)

    def heal(self) -> None:
        """Stop injecting faults and undo every fault in place."""
        self._stopped = True
        cluster = self.cluster
        cluster.network.heal()
        cluster.network.profile = NetworkProfile.reliable()
        for node in list(cluster.nodes.values()):
            node.fsync_us = None
            node.arm_crash_before_sync(None)
            if node.paused:
                node.resume()
            if not node.up:
                node.start()

    def _later(self, delay: int, action: Callable[[None], None]) -> None:
        self.cluster.loop.call_later(delay, self._guarded, action)

    def _guarded(self, action: Callable[[None], None]) -> None:
        if not self._stopped:
            action(None)

    def _count(self, action: str) -> None:
        self.actions[action] = self.actions.get(action, 0) + 1

    # ------------------------------------------------------------------ partitions

    def _partition(self, _: None) -> None:
        cluster, rng = self.cluster, self._rng
        if self._partitioned:
            cluster.heal()
            self._partitioned = False
            self._later(rng.randint(500 * MS, 3 * SECOND), self._partition)
            return
        ids = list(cluster.nodes)
        rng.shuffle(ids)
        shape = rng.choice(("halves", "isolate", "leader", "ring", "bridge"))
        leader = cluster.leader()
        if shape == "leader" and leader is not None:
            cluster.network.isolate(leader.peer_id, ids)
        elif shape == "ring" and len(ids) >= 4:
            cluster.network.allow_only(_ring_links(ids), ids)
        elif shape == "bridge" and len(ids) >= 3:
            half = len(ids) // 2
            bridge, left, right = ids[0], ids[1 : half + 1], ids[half + 1 :]
            links = [(a, b) for group in (left, right) for a in [*group, bridge] for b in [*group, bridge] if a < b]
            cluster.network.allow_only(links, ids)
        elif shape == "isolate":
            cluster.network.isolate(ids[0], ids)
        else:
            cut = rng.randint(1, len(ids) - 1)
            cluster.partition(ids[:cut], ids[cut:])
        self._count(f"partition-{shape}")
        self._partitioned = True
        self._later(rng.randint(300 * MS, 4 * SECOND), self._partition)

    # ------------------------------------------------------------------ crashes and pauses

    def _crash(self, _: None) -> None:
        cluster, rng = self.cluster, self._rng
        up = [n for n in cluster.nodes.values() if n.up]
        roll = rng.random()
        leader = cluster.leader()
        if roll < 0.15 and leader is not None:
            leader.arm_crash_before_sync(partial(self._crash_mid_write, leader.peer_id, leader.incarnation))
            self._later(rng.randint(1 * SECOND, 5 * SECOND), self._crash)
            return
        if roll < 0.35 and cluster.leader() is not None:
            victims = [cluster.leader()]
            self._count("crash-leader")
        elif roll < 0.85 or len(up) < 3:
            victims = rng.sample(up, min(1, len(up)))
            self._count("crash-one")
        else:
            size = len(up) // 2 + (1 if rng.random() < 0.3 else 0)  # a minority, sometimes a majority
            victims = rng.sample(up, size)
            self._count(f"crash-{size}")
        for node in victims:
            if node is not None and node.up:
                node.crash(rng if rng.random() < 0.5 else None)
                cluster.loop.call_later(rng.randint(200 * MS, 4 * SECOND), self._restart, node.peer_id)
        self._later(rng.randint(1 * SECOND, 5 * SECOND), self._crash)

    def _crash_mid_write(self, peer_id: str, incarnation: int, until_sync_us: int) -> None:
        """Armed on the leader: its early messages are out; crash it before its write is synced."""
        self._count("crash-leader-mid-write")
        delay = self._rng.randint(0, max(0, until_sync_us - 1))
        self.cluster.loop.call_later(delay, self._crash_now, (peer_id, incarnation))

    def _crash_now(self, arg: tuple[str, int]) -> None:
        peer_id, incarnation = arg
        node = self.cluster.nodes.get(peer_id)
        if node is None or not node.up or node.incarnation != incarnation or self._stopped:
            return
        node.crash(self._rng if self._rng.random() < 0.5 else None)
        self.cluster.loop.call_later(self._rng.randint(200 * MS, 4 * SECOND), self._restart, peer_id)

    def _restart(self, peer_id: str) -> None:
        node = self.cluster.nodes.get(peer_id)
        if node is not None and not node.up and not self._stopped:
            node.start()

    def _pause(self, _: None) -> None:
        cluster, rng = self.cluster, self._rng
        leader = cluster.leader()
        candidates = [n for n in cluster.nodes.values() if n.up and not n.paused]
        if candidates:
            node = leader if leader is not None and rng.random() < 0.5 else rng.choice(candidates)
            node.pause()
            self._count("pause")
            cluster.loop.call_later(rng.randint(200 * MS, 3 * SECOND), self._resume, node.peer_id)
        self._later(rng.randint(1 * SECOND, 5 * SECOND), self._pause)

    def _resume(self, peer_id: str) -> None:
        node = self.cluster.nodes.get(peer_id)
        if node is not None:
            node.resume()

    # ------------------------------------------------------------------ slow disks

    def _slow_disk(self, _: None) -> None:
        cluster, rng = self.cluster, self._rng
        leader = cluster.leader()
        candidates = [n for n in cluster.nodes.values() if n.up]
        if candidates:
            node = leader if leader is not None and rng.random() < 0.6 else rng.choice(candidates)
            low = rng.randint(3 * MS, 20 * MS)
            node.fsync_us = (low, low + rng.randint(0, 60 * MS))
            self._count("disk-slow")
            cluster.loop.call_later(rng.randint(300 * MS, 4 * SECOND), self._fast_disk, node.peer_id)
        self._later(rng.randint(1 * SECOND, 4 * SECOND), self._slow_disk)

    def _fast_disk(self, peer_id: str) -> None:
        node = self.cluster.nodes.get(peer_id)
        if node is not None:
            node.fsync_us = None

    # ------------------------------------------------------------------ compaction

    def _compact(self, _: None) -> None:
        aggressive = "compact" in self.kinds
        threshold, retention = (8, self._rng.randint(0, 5)) if aggressive else (400, 200)
        for node in list(self.cluster.nodes.values()):
            if node.up and not node.paused and node.applied - node.disk.snapshot.index >= threshold:
                node.take_snapshot_and_compact(retention)
        self._later(self._rng.randint(200 * MS, 1 * SECOND), self._compact)

    # ------------------------------------------------------------------ membership churn

    def _churn(self, _: None) -> None:
        self._later(self._rng.randint(700 * MS, 3 * SECOND), self._churn)
        leader = self.cluster.running_leader()
        if leader is None or leader.core is None:
            return
        action = self._rng.choice(("add", "add", "remove", "remove", "demote", "transfer", "step_down"))
        try:
            getattr(self, f"_churn_{action}")(leader.call)
            self._count(f"churn-{action}")
        except NyalaError:
            self._count(f"churn-{action}-refused")

    def _churn_add(self, call: Callable[[Callable[[RaftCore], object]], object]) -> None:
        cluster = self.cluster
        leader = cluster.running_leader()
        assert leader is not None
        assert leader.core is not None
        config = leader.core.committed_config
        if len(config.members) >= MAX_MEMBERS:
            return
        peer_id = cluster.new_peer_id()
        cluster.add_node(peer_id, tick_us=self._tick_us())
        change = ConfigChange(ChangeKind.ADD_PEER, peer_id, MemberType.NON_VOTER, promote=True)
        try:
            call(lambda core: core.change_config([change], config.opid_index))
        except NyalaError:
            cluster.retire(peer_id)
            raise

    def _churn_remove(self, call: Callable[[Callable[[RaftCore], object]], object]) -> None:
        leader = self.cluster.running_leader()
        assert leader is not None
        assert leader.core is not None
        config = leader.core.committed_config
        removable = [m.peer_id for m in config.members if not m.is_voter or len(config.voters) > MIN_VOTERS]
        if removable:
            victim = self._rng.choice(removable)
            change = ConfigChange(ChangeKind.REMOVE_PEER, victim)
            call(lambda core: core.change_config([change], config.opid_index))

    def _churn_demote(self, call: Callable[[Callable[[RaftCore], object]], object]) -> None:
        leader = self.cluster.running_leader()
        assert leader is not None
        assert leader.core is not None
        config = leader.core.committed_config
        if len(config.voters) > MIN_VOTERS:
            victim = self._rng.choice(config.voters)
            change = ConfigChange(ChangeKind.MODIFY_PEER, victim, MemberType.NON_VOTER, promote=True)
            call(lambda core: core.change_config([change], config.opid_index))

    def _churn_transfer(self, call: Callable[[Callable[[RaftCore], object]], object]) -> None:
        leader = self.cluster.running_leader()
        assert leader is not None
        assert leader.core is not None
        others = [p for p in leader.core.active_config.voters if p != leader.peer_id]
        target = self._rng.choice(others) if others and self._rng.random() < 0.5 else ""
        call(lambda core: core.transfer_leadership(target))

    def _churn_step_down(self, call: Callable[[Callable[[RaftCore], object]], object]) -> None:
        call(lambda core: core.step_down())

    def _retire_removed(self, _: None) -> None:
        """Delete replicas that have been out of the leader's settled config for a while."""
        self._later(SECOND, self._retire_removed)
        leader = self.cluster.running_leader()
        if leader is None or leader.core is None or leader.core.has_pending_config:
            return
        config = leader.core.committed_config
        now = self.cluster.loop.now
        for peer_id in list(self.cluster.nodes):
            if config.contains(peer_id):
                self._absent_since.pop(peer_id, None)
            elif now - self._absent_since.setdefault(peer_id, now) >= 5 * SECOND:
                self.cluster.retire(peer_id)
                self._absent_since.pop(peer_id)
                self._count("retire")

    def _tick_us(self) -> int:
        if "skew" not in self.kinds:
            return self.cluster.tick_us
        return int(self.cluster.tick_us * self._rng.uniform(0.8, 1.25))


def _ring_links(ids: list[str]) -> list[tuple[str, str]]:
    """Links of a majorities ring: each node reaches its nearest neighbours, enough for a majority."""
    n = len(ids)
    reach = -(-(n // 2) // 2)  # ceil(floor(n/2) / 2) on each side
    links = []
    for i, a in enumerate(ids):
        for step in range(1, reach + 1):
            links.append((a, ids[(i + step) % n]))
    return links
