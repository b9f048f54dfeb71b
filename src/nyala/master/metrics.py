"""The master's own metrics: heartbeats, catalog operations, placement, replica work, health.

Per server and bounded, like every Nyala metric: no series names a table, tablet or server.

- Counted where it happens (on the event loop, lock-free): heartbeats processed; catalog
  operations (create, alter, delete table) by outcome with a latency histogram; placement
  decisions by kind (a new tablet's replicas, a replacement replica) and outcome.
- Read from their owners when scraped: tablet tasks sent by kind (the re-replication steps
  ``add``, ``evict``, ``step_down``, and ``create``, ``delete``, ``alter``, ``tombstone``,
  ``move``), rebalancing rounds and moves started, replica work in flight.
- Gauges computed when scraped, on the leader only (a follower has no catalog to count):
  tablet servers by liveness and maintenance state, and tablets by health, one pass over the
  catalog (tens of milliseconds for 10,000 tablets, docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.registry import CollectorRegistry

from nyala.catalog import TabletInfo
from nyala.errors import NyalaError
from nyala.master.leader import LeaderView
from nyala.master.replica_cache import ReplicaCache
from nyala.master.ts_manager import TSManager
from nyala.metrics import LoopMetrics
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb

__all__ = ["CATALOG_OPERATIONS", "TABLET_HEALTH", "MasterMetrics", "tablet_health"]

CATALOG_OPERATIONS = ("create_table", "alter_table", "delete_table")
#: Health of a tablet, worst first: what an operator alerts on.
TABLET_HEALTH = ("leaderless", "under_replicated", "creating", "healthy")
TASK_KINDS = ("create", "delete", "alter", "evict", "add", "step_down", "tombstone", "move")


def tablet_health(
    view: LeaderView, tablet: TabletInfo, live: Callable[[str], bool], rf: int, replicas: tuple[str, ...] | None = None
) -> str:
    """One of :data:`TABLET_HEALTH` for a live tablet of the catalog (``replicas``: its
    replicas when the caller has them already)."""
    members = tablet.replicas if replicas is None else replicas
    if tablet.creating:
        return "creating"
    if not view.leader_of(tablet):
        return "leaderless"
    report = view.replicas.report
    running = sum(
        1 for uuid in members
        if live(uuid) and (r := report(uuid, tablet.tablet_id)) is not None and r.state == tpb.RUNNING and not r.error
    )  # fmt: skip
    return "healthy" if running >= rf and len(members) >= rf else "under_replicated"


class MasterMetrics:
    """Every master metric beyond RPC and Raft; :meth:`watch` says where to read the rest."""

    def __init__(self, registry: CollectorRegistry | None = None, enabled: bool = True) -> None:
        self._set = metrics = LoopMetrics(enabled)
        self.heartbeats = metrics.counter(
            "nyala_master_heartbeats_total", "Tablet server heartbeats this master processed (leader or not)."
        ).child()
        self.catalog_operations = metrics.counter(
            "nyala_master_catalog_operations_total",
            "Catalog operations (create, alter, delete table) this master answered, by outcome (ok, error).",
            ["operation", "outcome"],
        )
        self.catalog_latency = metrics.histogram(
            "nyala_master_catalog_operation_duration_seconds",
            "Time to answer a catalog operation, waiting for its tablets when the client asked to wait.",
            ["operation"],
        )
        self.placements = metrics.counter(
            "nyala_master_placement_decisions_total",
            "Replica placements decided: kind new_tablet (a new tablet's replicas) or replacement (a "
            "re-replication); outcome policy_met, policy_violated (placed anyway) or no_server.",
            ["kind", "outcome"],
        )
        self._view: Callable[[], LeaderView] = _no_view
        self._ts: TSManager | None = None
        self._tasks_sent: Callable[[], dict[str, int]] = dict
        self._tasks_in_flight: Callable[[], Sequence[tuple[str, str, str]]] = list
        self._rebalance: Callable[[], tuple[int, int]] = lambda: (0, 0)
        self._replicas = ReplicaCache()
        metrics.counter_callback(
            "nyala_master_tablet_tasks_total",
            "Tablet server calls the leader sent for its catalog, by kind: create, delete, alter; the "
            "re-replication steps add (a NON_VOTER to copy and promote), evict, step_down; tombstone; move "
            "(rebalancing).",
            lambda: [((kind,), float(n)) for kind, n in self._tasks_sent().items()],
            ["kind"],
        )
        metrics.counter_callback(
            "nyala_master_re_replications_total",
            "Replacement replicas added for tablets with a failed or excess member (tablet tasks of kind add).",
            lambda: [((), float(self._tasks_sent().get("add", 0)))],
        )
        metrics.counter_callback(
            "nyala_master_rebalance_rounds_total",
            "Rounds of the auto-rebalancer (not counting rounds paused by a rebalance lease).",
            lambda: [((), float(self._rebalance()[0]))],
        )
        metrics.counter_callback(
            "nyala_master_rebalance_moves_total",
            "Replica moves the auto-rebalancer started.",
            lambda: [((), float(self._rebalance()[1]))],
        )
        metrics.gauge(
            "nyala_master_tablet_tasks_in_flight",
            "Tablet server calls of the leader running now, by kind.",
            self._in_flight,
            ["kind"],
        )
        metrics.gauge(
            "nyala_master_tablet_servers",
            "Registered tablet servers, by liveness (live, dead) and maintenance state (NONE, "
            "MAINTENANCE_MODE; UNKNOWN on a master that is not the leader).",
            self._tservers,
            ["liveness", "state"],
        )
        metrics.gauge(
            "nyala_master_tablets",
            "Live tablets of the catalog by health (leader only): leaderless (no leader reported), "
            "under_replicated (fewer RUNNING replicas on live servers than the replication factor), "
            "creating, healthy.",
            self._tablets,
            ["health"],
        )
        metrics.register_on(registry)

    def watch(
        self,
        *,
        view: Callable[[], LeaderView],
        ts_manager: TSManager,
        tasks_sent: Callable[[], dict[str, int]],
        tasks_in_flight: Callable[[], Sequence[tuple[str, str, str]]],
        rebalance: Callable[[], tuple[int, int]],
    ) -> None:
        """Where the scrape-time values are read; ``view`` raises on a master that does not lead."""
        self._view = view
        self._ts = ts_manager
        self._tasks_sent = tasks_sent
        self._tasks_in_flight = tasks_in_flight
        self._rebalance = rebalance

    @contextlib.contextmanager
    def catalog_operation(self, operation: str) -> Iterator[None]:
        """Count and time one catalog operation (an exception counts as ``error`` and goes on)."""
        start = time.perf_counter()
        outcome = "error"
        try:
            yield
            outcome = "ok"
        finally:
            self.catalog_operations.inc(operation, outcome)
            self.catalog_latency.observe(time.perf_counter() - start, operation)

    def placed(self, kind: str, outcome: str) -> None:
        self.placements.inc(kind, outcome)

    def _leader_view(self) -> LeaderView | None:
        try:
            return self._view()
        except NyalaError:
            return None

    def _in_flight(self) -> list[tuple[Sequence[str], float]]:
        counts = Counter(kind for kind, _, _ in self._tasks_in_flight())
        return [((kind,), float(counts.get(kind, 0))) for kind in TASK_KINDS]

    def _tservers(self) -> list[tuple[Sequence[str], float]]:
        ts = self._ts
        if ts is None:
            return []
        view = self._leader_view()
        counts: Counter[tuple[str, str]] = Counter()
        for d in ts.all():
            state = "UNKNOWN" if view is None else str(mpb.TServerStatePB.Name(view.catalog.tserver_state(d.uuid)))
            counts["live" if ts.is_live(d) else "dead", state] += 1
        return [(key, float(n)) for key, n in sorted(counts.items())]

    def _tablets(self) -> list[tuple[Sequence[str], float]]:
        view = self._leader_view()
        ts = self._ts
        if view is None or ts is None:
            return []
        live = {d.uuid for d in ts.all() if ts.is_live(d)}
        rf = {t.table_id: t.num_replicas for t in view.catalog.live_tables()}
        counts: Counter[str] = Counter()
        for tablet, replicas in self._replicas.walk(view.catalog.all_tablets()):
            if tablet.dead or tablet.table_id not in rf:
                continue
            counts[tablet_health(view, tablet, live.__contains__, rf[tablet.table_id], replicas)] += 1
        return [((health,), float(counts.get(health, 0))) for health in TABLET_HEALTH]


def _no_view() -> LeaderView:
    raise NyalaError("no catalog is watched")
