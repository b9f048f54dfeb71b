"""Raft's metrics, summed over every replica of a server: label sets stay bounded.

A tablet server may host thousands of replicas; a series per tablet would make every scrape
as large as the tablet list (the web pages show each tablet's term, role and indexes).  So
the counters here are per server: leader changes seen, elections started (pre-elections
included) and won, and a commit latency histogram (proposal to commit, on leaders).  Gauges
are read from the replicas at scrape time: replicas by role, replicas that know no leader,
the highest term, and the lag of followers behind their leaders in entries (the largest, and
the sum).  The WAL metrics of the replicas' logs travel with these (:attr:`RaftMetrics.wal`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from prometheus_client.registry import CollectorRegistry

from nyala.consensus.core import PeerProgress, Role
from nyala.metrics import LoopMetrics
from nyala.wal.metrics import WalMetrics

__all__ = ["COMMIT_BUCKETS_S", "ObservedReplica", "RaftMetrics"]


class ObservedReplica(Protocol):
    """What the gauges read of a replica (a :class:`~nyala.consensus.runtime.RaftReplica`)."""

    role: Role
    leader_id: str
    term: int

    @property
    def peer_id(self) -> str: ...

    @property
    def last_index(self) -> int: ...

    def peer_progress(self) -> tuple[PeerProgress, ...]: ...


COMMIT_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class RaftMetrics:
    """Counters the replicas update on the event loop, and gauges read from them when scraped."""

    def __init__(self, registry: CollectorRegistry | None = None, enabled: bool = True) -> None:
        self._set = metrics = LoopMetrics(enabled)
        self.wal = WalMetrics(registry, enabled)
        self.leader_changes = metrics.counter(
            "nyala_raft_leader_changes_total", "Times a replica of this server learned of a new leader."
        ).child()
        self.elections_started = metrics.counter(
            "nyala_raft_elections_started_total",
            "Elections (and pre-elections) this server's replicas started as candidates.",
        ).child()
        self.elections_won = metrics.counter(
            "nyala_raft_elections_won_total", "Elections this server's replicas won: times one became leader."
        ).child()
        self.commit_latency = metrics.histogram(
            "nyala_raft_commit_duration_seconds",
            "Time from a leader's proposal of an entry until the entry is committed.",
            buckets=COMMIT_BUCKETS_S,
        ).child()
        self._replicas: Callable[[], Iterable[ObservedReplica]] = list
        metrics.gauge("nyala_raft_replicas", "Raft replicas of this server, by role.", self._by_role, ["role"])
        metrics.gauge(
            "nyala_raft_replicas_without_leader",
            "Replicas that know no leader in their current term (a tablet without a leader shows here on "
            "every replica).",
            lambda: [((), float(sum(1 for r in self._replicas() if not r.leader_id)))],
        )
        metrics.gauge(
            "nyala_raft_term_max", "The highest term among this server's replicas.", lambda: [((), self._max_term())]
        )
        metrics.gauge(
            "nyala_raft_follower_lag_entries",
            "Entries the followers of this server's leaders lack behind the leader's last entry: the "
            "largest lag of one follower (stat=max) and the sum over followers (stat=sum).",
            self._lag,
            ["stat"],
        )
        metrics.register_on(registry)

    def watch(self, replicas: Callable[[], Iterable[ObservedReplica]]) -> None:
        """Where the gauges find the replicas at scrape time."""
        self._replicas = replicas

    def _by_role(self) -> list[tuple[Sequence[str], float]]:
        counts = Counter(r.role.value for r in self._replicas())
        return [((role.value,), float(counts.get(role.value, 0))) for role in Role]

    def _max_term(self) -> float:
        return float(max((r.term for r in self._replicas()), default=0))

    def _lag(self) -> list[tuple[Sequence[str], float]]:
        largest = total = 0
        for replica in self._replicas():
            if replica.role is not Role.LEADER:
                continue
            last = replica.last_index
            for progress in replica.peer_progress():
                if progress.peer_id == replica.peer_id:
                    continue
                lag = max(0, last - progress.match)
                largest = max(largest, lag)
                total += lag
        return [(("max",), float(largest)), (("sum",), float(total))]

    def note_soft_state(self, old: tuple[Role, str, int], new: tuple[Role, str, int]) -> None:
        """Count what a change of (role, leader, term) means: an election, a win, a new leader."""
        old_role, old_leader, old_term = old
        role, leader, term = new
        if role is Role.CANDIDATE and (old_role is not Role.CANDIDATE or term != old_term):
            self.elections_started.value += 1
        if role is Role.LEADER and old_role is not Role.LEADER:
            self.elections_won.value += 1
        if leader and (leader != old_leader or term != old_term):
            self.leader_changes.value += 1
