"""One random run per seed: chaos, then heal, then the end-of-run checks.

1. A cluster of ``nodes`` voters starts with clients and the chosen nemeses.  By default each
   replica draws its driver (pipelined or sequential) and whether its heartbeats follow a
   shared tick phase (``SimOptions.driver``, ``SimOptions.ticks``).
2. After ``duration_ms`` of virtual time every fault is healed.
3. Liveness: within ``heal_timeout_ms`` a leader must commit a final entry and every
   replica of its config must apply everything it committed.
4. Every write a client saw acknowledged must be in the final leader's log.
5. The client history of every key must be linearizable.

Safety invariants are checked at every step meanwhile (``checker.py``).  Any failure, or any
exception out of the core, is reported with the seed and the command that replays it.
"""

from __future__ import annotations

import random
import time
import traceback
from dataclasses import dataclass, field
from functools import partial

from nyala.errors import NyalaError
from nyala.testing.linearizability import check_kv_history, format_history
from nyala.testing.sim.cluster import Cluster
from nyala.testing.sim.loop import MS
from nyala.testing.sim.nemesis import ALL_NEMESES, Nemesis
from nyala.testing.sim.workload import Workload

__all__ = ["SeedResult", "SimOptions", "parse_nemeses", "replay_command", "run_seed"]


@dataclass(frozen=True)
class SimOptions:
    duration_ms: int = 15_000
    nodes: int = 5
    clients: int = 4
    keys: int = 6
    nemeses: frozenset[str] = frozenset(ALL_NEMESES)
    heal_timeout_ms: int = 60_000
    driver: str = "mixed"  # see Cluster: pipelined, sequential or mixed
    ticks: str = "mixed"  # see Cluster: own, aligned or mixed


@dataclass
class SeedResult:
    seed: int
    violation: str | None
    steps: int
    sim_ms: float
    wall_s: float
    operations: int = 0
    unknown_operations: int = 0
    tablet_copies: int = 0
    terms: int = 0
    messages: int = 0
    actions: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.violation is None


def parse_nemeses(text: str) -> frozenset[str]:
    """``all``, ``none`` or a comma-separated list of nemesis names."""
    text = text.strip()
    if text == "all":
        return frozenset(ALL_NEMESES)
    if text in ("", "none"):
        return frozenset()
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = kinds - set(ALL_NEMESES)
    if unknown:
        raise ValueError(f"unknown nemeses {sorted(unknown)}; choose from all, none, {', '.join(ALL_NEMESES)}")
    return kinds


def replay_command(seed: int, options: SimOptions) -> str:
    nemeses = "all" if options.nemeses == frozenset(ALL_NEMESES) else ",".join(sorted(options.nemeses)) or "none"
    return (
        f"nyala-sim --seed {seed} --nemesis {nemeses} --duration-ms {options.duration_ms} "
        f"--nodes {options.nodes} --clients {options.clients} --keys {options.keys} "
        f"--driver {options.driver} --ticks {options.ticks}"
    )


def run_seed(seed: int, options: SimOptions | None = None) -> SeedResult:
    options = options or SimOptions()
    started = time.perf_counter()
    rng = random.Random(seed)
    cluster = Cluster(options.nodes, seed=seed, driver=options.driver, ticks=options.ticks)
    workload = Workload(cluster, random.Random(rng.random()), options.clients, options.keys)
    nemesis = Nemesis(cluster, random.Random(rng.random()), options.nemeses)
    violation = None
    try:
        if "skew" in options.nemeses:
            for node in cluster.nodes.values():
                node.tick_us = int(cluster.tick_us * rng.uniform(0.8, 1.25))
        workload.start()
        nemesis.start()
        cluster.run_for(options.duration_ms)
        nemesis.heal()
        violation = _converge(cluster, options.heal_timeout_ms)
        workload.stop()
        cluster.run_until(lambda: workload.idle, 10_000)
        violation = violation or _check_acked(cluster, workload) or _check_linearizable(workload)
    except AssertionError as exc:  # SafetyViolation, or an invariant inside the core
        violation = f"{type(exc).__name__}: {exc}\n{_where(exc)}"
    except NyalaError as exc:  # the core refused a well-formed message of the simulation: a bug
        violation = f"unexpected {type(exc).__name__}: {exc}\n{_where(exc)}"
    return SeedResult(
        seed=seed,
        violation=violation,
        steps=cluster.loop.steps,
        sim_ms=cluster.loop.now / MS,
        wall_s=time.perf_counter() - started,
        operations=sum(len(ops) for ops in workload.history.values()),
        unknown_operations=workload.unknown,
        tablet_copies=cluster.tablet_copies,
        terms=len(cluster.checker.leaders),
        messages=cluster.network.sent,
        actions=dict(nemesis.actions),
    )


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    return "".join(traceback.format_list(frames)).rstrip()


def _converge(cluster: Cluster, timeout_ms: int) -> str | None:
    """After healing: a leader commits a final entry and every member applies all of it."""
    final = b"final-marker"
    deadline = cluster.loop.now + timeout_ms * MS
    committed_at = 0
    while cluster.loop.now < deadline and not committed_at:
        if cluster.wait_for_leader(2_000) is None:
            continue
        op_id = cluster.propose(final)
        if op_id is not None and cluster.run_until(
            partial(_applied_by_leader, cluster, op_id.index, op_id.term), 3_000
        ):
            committed_at = op_id.index
    if not committed_at:
        return f"liveness: no leader committed a new entry within {timeout_ms} ms after healing: {_state(cluster)}"
    remaining = max(deadline - cluster.loop.now, 10_000 * MS) / MS
    if not cluster.run_until(lambda: _all_caught_up(cluster), remaining):
        return f"liveness: replicas did not catch up with the leader after healing: {_state(cluster)}"
    return None


def _applied_by_leader(cluster: Cluster, index: int, term: int) -> bool:
    leader = cluster.leader()
    entry = cluster.checker.applied.get(index)
    return leader is not None and leader.applied >= index and entry is not None and entry.term == term


def _all_caught_up(cluster: Cluster) -> bool:
    leader = cluster.running_leader()
    if leader is None or leader.core is None:
        return False
    core = leader.core
    if core.commit_index != core.last_index:
        return False
    for peer_id in core.active_config.peer_ids:
        node = cluster.nodes.get(peer_id)
        if node is None or not node.up or node.applied < core.commit_index:
            return False
    return True


def _state(cluster: Cluster) -> str:
    return ", ".join(repr(n) for n in cluster.nodes.values())


def _check_acked(cluster: Cluster, workload: Workload) -> str | None:
    leader = cluster.leader()
    assert leader is not None
    assert leader.core is not None
    core = leader.core
    for op_id in workload.acked_writes:
        if op_id.index <= core.first_index - 1:
            continue  # compacted away by the leader: committed, and chain-checked when appended
        if core.term_at(op_id.index) != op_id.term:
            return f"acknowledged write lost: {op_id.index}@{op_id.term} is not in leader {leader.peer_id}'s log"
    return None


def _check_linearizable(workload: Workload) -> str | None:
    for result in check_kv_history(workload.history):
        if not result.ok:
            return f"linearizability: key {result.key} ({result.operations} ops):\n{format_history(result.history)}"
    return None
