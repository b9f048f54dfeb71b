"""The leader master's always-on rebalancer: the CLI rebalancer's planner and moves, every interval.

Every ``--auto-rebalancing-interval-sec`` the ready leader master

1. takes a **snapshot** of its own memory (:func:`snapshot_of`): the registered tablet servers
   (location, live, maintenance mode) and every running tablet's committed config as the
   catalog holds it, with the leader its replicas last reported;
2. builds the planner's **model** (:func:`build_cluster`, pure): live servers not in
   maintenance mode take part; a tablet is *busy* (none of its moves start) while a config
   change is under way or might be: a non-voter, a member marked ``replace``, fewer or more
   voters than the replication factor, no reported leader, a member on a server that is dead,
   unregistered or in maintenance mode (so a server in maintenance keeps its replicas), a
   re-replication step owed (``LeaderView.repairs``), or a move this master started that has
   not shown up in the catalog yet;
3. **plans** with :func:`nyala.placement.plan_moves`: the placement-policy fixer always, then
   balancing across locations (acting on a skew above ``--auto-rebalancing-load-imbalance-threshold``)
   and within each location;
4. **selects** with :func:`nyala.placement.select_moves`: each tablet's first move, at most
   ``--auto-rebalancing-max-moves-per-server`` from each server and as many to each;
5. **starts** each move as the CLI does: one BulkChangeConfig to the tablet's leader, CAS on
   the committed config's index, marking the source ``replace`` and adding the destination as
   a NON_VOTER with ``promote`` (sent by :meth:`TabletTasks.start_move`).  The tablet's leader
   copies and promotes the destination, and re-replication (:mod:`.replica_management`)
   evicts the source.

Nothing is persisted: a move's state lives in the tablet's config, so a new leader master
plans again from its reports.  Rounds are skipped while a CLI rebalance holds a lease
(:mod:`.rebalance_lease`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Collection

from nyala.master.leader import DEFAULT_LOCATION, LeaderView
from nyala.master.rebalance_lease import RebalanceLease
from nyala.master.tablet_tasks import TabletTasks
from nyala.master.ts_manager import TSManager
from nyala.placement import (
    ClusterInfo,
    Move,
    PlacementConstraint,
    RebalanceOptions,
    TabletInfo,
    plan_moves,
    select_moves,
)
from nyala.proto import consensus_pb2

__all__ = [
    "AutoRebalancer",
    "AutoSnapshot",
    "ServerState",
    "TabletState",
    "build_cluster",
    "choose_moves",
    "snapshot_of",
]

log = logging.getLogger("nyala.master")


@dataclasses.dataclass(frozen=True, slots=True)
class ServerState:
    uuid: str
    location: str
    live: bool
    maintenance: bool = False

    @property
    def takes_part(self) -> bool:
        return self.live and not self.maintenance


@dataclasses.dataclass(frozen=True, slots=True)
class TabletState:
    """One running tablet: its committed config (as the catalog holds it) and reported leader."""

    tablet_id: str
    table_id: str
    range_key: bytes
    replication_factor: int
    voters: tuple[str, ...]
    cas_config_index: int
    leader: str = ""
    non_voters: tuple[str, ...] = ()
    #: Members marked ``replace``: a move or a replacement is under way.
    replacing: tuple[str, ...] = ()
    #: A re-replication step is owed, or a move started here has not reached the catalog yet.
    changing: bool = False
    #: The table's (or range's) own placement policy, None when it has none.
    constraint: PlacementConstraint | None = None

    @property
    def members(self) -> tuple[str, ...]:
        return self.voters + self.non_voters


@dataclasses.dataclass(frozen=True, slots=True)
class AutoSnapshot:
    servers: tuple[ServerState, ...]
    tablets: tuple[TabletState, ...]


def snapshot_of(
    view: LeaderView, ts_manager: TSManager, changing: Callable[[str, int], bool] = lambda _t, _i: False
) -> AutoSnapshot:
    """The leader's memory as the planner's input.  ``changing(tablet id, config index)`` adds
    tablets the caller knows to be changing (moves it started)."""
    servers = tuple(
        ServerState(
            d.uuid, d.location or DEFAULT_LOCATION, ts_manager.is_live(d), maintenance=view.in_maintenance(d.uuid)
        )
        for d in ts_manager.all()
    )
    tablets = []
    for tablet in view.catalog.all_tablets():
        table = view.catalog.table(tablet.table_id)
        if not tablet.running or table is None or table.removed:
            continue
        config = tablet.entry.committed_config
        voters = tuple(p.permanent_uuid for p in config.peers if p.member_type == consensus_pb2.VOTER)
        leader, _ = view.replicas.leader(tablet.tablet_id)
        tablets.append(
            TabletState(
                tablet_id=tablet.tablet_id,
                table_id=tablet.table_id,
                range_key=tablet.range_key,
                replication_factor=table.num_replicas,
                voters=voters,
                cas_config_index=config.opid_index,
                leader=leader if leader in voters else "",
                non_voters=tuple(p.permanent_uuid for p in config.peers if p.member_type != consensus_pb2.VOTER),
                replacing=tuple(p.permanent_uuid for p in config.peers if p.attrs.replace),
                changing=tablet.tablet_id in view.repairs or changing(tablet.tablet_id, config.opid_index),
                constraint=None if table.placement.empty else table.placement.for_range(tablet.partition.range),
            )
        )
    return AutoSnapshot(servers, tuple(tablets))


def build_cluster(snapshot: AutoSnapshot) -> tuple[ClusterInfo, frozenset[str]]:
    """The planner's model and the busy tablets (see the module doc); pure."""
    state = {s.uuid: s for s in snapshot.servers}
    taking_part = {s.uuid: s.location for s in snapshot.servers if s.takes_part}
    busy: set[str] = set()
    tablets = []
    for t in snapshot.tablets:
        unsettled = (
            t.changing
            or not t.leader
            or bool(t.non_voters)
            or bool(t.replacing)
            or len(t.voters) != t.replication_factor
            or any(u not in state or not state[u].takes_part for u in t.members)
        )
        if unsettled:
            busy.add(t.tablet_id)
        members = tuple(u for u in t.members if u in taking_part)
        tablets.append(
            TabletInfo(
                t.tablet_id, t.table_id, t.range_key, t.replication_factor, members, t.leader or None, t.constraint
            )
        )
    return ClusterInfo(taking_part, tablets), frozenset(busy)


def choose_moves(
    snapshot: AutoSnapshot, rng: random.Random, options: RebalanceOptions, max_moves_per_server: int
) -> list[Move]:
    """The moves of one round: plan on the snapshot, then select among the settled tablets; pure."""
    cluster, busy = build_cluster(snapshot)
    if not cluster.tservers:
        return []
    plan = plan_moves(cluster, rng, options)
    chosen, _ = select_moves(plan.moves, busy, max_moves_per_server)
    return chosen


class AutoRebalancer:
    """Runs rounds on the ready leader master (started and stopped with its leadership)."""

    def __init__(
        self,
        ts_manager: TSManager,
        tablet_tasks: TabletTasks,
        lease: RebalanceLease,
        *,
        interval_s: float,
        max_moves_per_server: int,
        options: RebalanceOptions,
        settle_s: float,
        rng: random.Random | None = None,
    ) -> None:
        self._ts = ts_manager
        self._tasks = tablet_tasks
        self._lease = lease
        self._interval_s = interval_s
        self._max_moves_per_server = max_moves_per_server
        self._options = options
        #: How long a move sent is assumed to be on its way to the catalog (a report or two).
        self._settle_s = settle_s
        self._rng = rng or random.Random()
        self._task: asyncio.Task[None] | None = None
        #: Tablet id -> (config index the move was sent with, when): busy until the index moves on.
        self._started: dict[str, tuple[int, float]] = {}
        #: Counters, for tests and logs.
        self.rounds = 0
        self.moves_started = 0
        self.skipped_for_lease = 0

    def start(self, view: LeaderView) -> None:
        self.stop()
        self._started.clear()
        self._task = asyncio.get_running_loop().create_task(self._run(view), name="auto-rebalancer")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        task = self._task
        self.stop()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, view: LeaderView) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                self.round(view)
            except Exception:  # a bug in one round must not stop the next
                log.exception("auto rebalancing round failed")

    def round(self, view: LeaderView) -> list[Move]:
        """One round: plan and start moves, unless a CLI rebalance holds a lease."""
        holder = self._lease.holder()
        if holder:
            self.skipped_for_lease += 1
            log.debug("auto rebalancing paused: a rebalance lease is held by %s", holder)
            return []
        self.rounds += 1
        now = time.monotonic()
        self._started = {t: (i, at) for t, (i, at) in self._started.items() if now - at < self._settle_s}
        snapshot = snapshot_of(view, self._ts, self._sent_recently)
        moves = choose_moves(snapshot, self._rng, self._options, self._max_moves_per_server)
        tablets = {t.tablet_id: t for t in snapshot.tablets}
        started = []
        for move in moves:
            tablet = tablets[move.tablet_id]
            if self._tasks.start_move(tablet.tablet_id, tablet.leader, tablet.cas_config_index, move):
                self._started[tablet.tablet_id] = (tablet.cas_config_index, now)
                started.append(move)
        self.moves_started += len(started)
        if started:
            log.info("auto rebalancing: starting %d moves (%s)", len(started), _phases(started))
        return started

    def moves_in_progress(self) -> list[tuple[str, int, float]]:
        """(tablet id, config index the move was sent with, seconds since) of the moves sent
        within the settle time: until the catalog's config moves past that index."""
        now = time.monotonic()
        return [(t, index, now - at) for t, (index, at) in self._started.items() if now - at < self._settle_s]

    def _sent_recently(self, tablet_id: str, config_index: int) -> bool:
        started = self._started.get(tablet_id)
        return started is not None and started[0] == config_index


def _phases(moves: Collection[Move]) -> str:
    counts: dict[str, int] = {}
    for move in moves:
        counts[move.phase] = counts.get(move.phase, 0) + 1
    return ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items()))
