"""A deterministic simulator that drives the pure Raft core and attacks it.

Theory of operation
-------------------
A whole Raft group runs in one thread on a virtual clock (``loop.py``): every tick, message
delivery, fsync completion, client call and fault is an event in one heap, run in time order
with ties broken by scheduling order.  All randomness comes from ``random.Random`` instances
derived from one seed, so a seed replays a run exactly, bug included.

Each replica (``node.py``) is a :class:`~nyala.consensus.core.RaftCore` driven by the same
contract as production: persist a Ready (after a simulated fsync delay, losing it if the node
crashes first), then send its after-sync messages, apply its committed entries and advance.
A *pipelined* replica sends the leader's early messages before its own sync and keeps taking
Readies meanwhile; a *sequential* one sends everything after the sync.  Replicas with
*aligned* heartbeats pass their process tick counter to ``tick()``.  The network
(``network.py``) delays, drops, duplicates, reorders and partitions messages.  Clients
(``workload.py``) write unique values and read keys of a replicated key-value store through
the leader (writes as log entries, reads by read-index) and record a history.  Nemeses
(``nemesis.py``) partition, crash (sometimes with torn writes), pause, skew clocks, compact
logs into tablet copies, change membership, slow disks down and crash a leader between its
early sends and its own sync.

Checks: after every step the safety invariants of ``checker.py`` (one leader per term, log
matching, leader completeness, state machine safety, no committed entry lost) and, at every
commit, that a majority of voters hold the entry on disk (``Cluster.check_commit_is_durable``);
at the end of a run, liveness after healing, every acknowledged write present, and
linearizability of each key's history (``nyala.testing.linearizability``).

Use :class:`Cluster` directly for scenario tests (``tests/sim``), :func:`run_seed` for random
runs, and the ``nyala-sim`` command for many seeds (see ``docs/consensus.md``).
"""

from nyala.testing.sim.checker import SafetyChecker, SafetyViolation
from nyala.testing.sim.cluster import Cluster
from nyala.testing.sim.loop import MS, SECOND, EventLoop
from nyala.testing.sim.nemesis import ALL_NEMESES, Nemesis
from nyala.testing.sim.network import Network, NetworkProfile
from nyala.testing.sim.node import PendingOp, SimNode
from nyala.testing.sim.runner import SeedResult, SimOptions, parse_nemeses, replay_command, run_seed
from nyala.testing.sim.workload import Workload

__all__ = [
    "ALL_NEMESES",
    "MS",
    "SECOND",
    "Cluster",
    "EventLoop",
    "Nemesis",
    "Network",
    "NetworkProfile",
    "PendingOp",
    "SafetyChecker",
    "SafetyViolation",
    "SeedResult",
    "SimNode",
    "SimOptions",
    "Workload",
    "parse_nemeses",
    "replay_command",
    "run_seed",
]
