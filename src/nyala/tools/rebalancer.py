"""``nyala cluster rebalance``: snapshot, plan, move a few replicas, and again until balanced.

A run is a series of rounds.  Each round

1. takes a **snapshot** (:func:`take_snapshot`): the leader master's tablet servers (location,
   live or dead, maintenance) and, for every selected table, each tablet's committed config
   (voters, non-voters) and leader as the catalog knows them;
2. builds the planner's **model** (:func:`build_model`): which servers take part, which are
   drained, which replicas count (see below); bad input (unknown or dead servers named,
   conflicting flags) is refused here, before anything moves;
3. **plans** with :func:`nyala.placement.plan_moves` (drain, fix the policy, across
   locations, within each location);
4. **selects** the round's moves (:func:`select_moves`): walking the plan in order, the first
   move of each tablet only (a tablet's later moves assume its earlier ones), none of a tablet
   whose config change is already under way or whose move failed earlier in the run, and at
   most ``max_moves_per_server`` moves from each server and as many to each (Kudu counts the
   two directions apart);
5. **carries them out** concurrently, each as a 3-4-3 move the leader master finishes
   (:func:`nyala.tools.replica_ops.start_move`: one BulkChangeConfig marking the source
   ``replace`` and adding the destination as a NON_VOTER with ``promote``), watching the
   committed config until the source has left it.

Then the next round plans again from a fresh snapshot, so moves that failed, tablets that
changed meanwhile and writes that went on are all accounted for.  The run ends when the plan
is empty (balanced), when only moves of tablets whose move failed are left, after
``max_run_time_s``, or when interrupted.  While a run lasts it holds the leader master's
rebalance lease (renewed every few seconds), so the master's own auto rebalancer starts no
moves meanwhile.

Which servers take part: live ones not in maintenance mode and not ignored.  Ignored servers
(``--ignored-tservers``) and servers in maintenance mode are left out with their replicas, as
in Kudu; with ``move_from_ignored`` the ignored servers (which must be live) are drained
instead, and once empty they are left out too.  A dead server that is neither ignored nor in
maintenance stops the run before it starts, as in Kudu: its replicas are the master's to
re-replicate, and balancing around them would be undone.  A server without a location counts
in ``/default``, as in the master's placement.

What "done" means: a move is *done* when the committed config no longer has the source and
has the destination as a voter.  Once its BulkChangeConfig has committed, a move no longer
depends on this tool: the master completes it even if the tool stops.  So an interrupted run
(:class:`Controls`) stops starting moves and waits for those in flight; interrupted again, it
stops watching and reports them as left to the master.  A move that does not finish within
``move_timeout_s`` is undone while its destination is still a NON_VOTER
(:func:`~nyala.tools.replica_ops.cancel_move`), else left to the master.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import os
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from nyala.client.async_client import AsyncClient
from nyala.client.info import TableSummary, TabletServerInfo
from nyala.errors import IllegalState, InvalidArgument, NotFound, NyalaError, TimedOut
from nyala.master.rebalance_lease import CLI_LEASE_S, CLI_RENEW_S
from nyala.placement import ClusterInfo, Move, PlacementConstraint, Plan, RebalanceOptions, TabletInfo, plan_moves
from nyala.placement import select_moves as select_placement_moves
from nyala.tools.ksck import select_tables, table_constraints
from nyala.tools.replica_ops import MoveState, TabletOps, cancel_move, move_state, start_move

__all__ = [
    "DEFAULT_LOCATION",
    "Controls",
    "Model",
    "MoveResult",
    "Outcome",
    "RebalanceSettings",
    "Rebalancer",
    "RunResult",
    "Snapshot",
    "StopReason",
    "TabletView",
    "Tally",
    "build_model",
    "select_moves",
    "take_snapshot",
]

#: Where a tablet server without a location counts (the master's placement does the same).
DEFAULT_LOCATION = "/default"
#: A tablet whose move could not start this many times (its config kept changing) is left alone.
MAX_START_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True, slots=True)
class RebalanceSettings:
    """What the command line asks for (Kudu's flag names, in Python spelling)."""

    tables: tuple[str, ...] | None = None
    ignored_tservers: frozenset[str] = frozenset()
    move_replicas_from_ignored_tservers: bool = False
    enable_range_rebalancing: bool = True
    disable_policy_fixer: bool = False
    disable_cross_location_rebalancing: bool = False
    disable_intra_location_rebalancing: bool = False
    max_moves_per_server: int = 5
    #: 0: no limit.
    max_run_time_s: float = 0.0
    move_timeout_s: float = 600.0
    #: Deadline of each snapshot and of undoing a move.
    timeout_s: float = 30.0
    #: How often a move in flight is looked at.
    poll_s: float = 0.5

    def __post_init__(self) -> None:
        if self.max_moves_per_server < 1:
            raise InvalidArgument(f"--max-moves-per-server must be at least 1, got {self.max_moves_per_server}")
        if self.max_run_time_s < 0:
            raise InvalidArgument(f"--max-run-time-sec must be 0 (no limit) or more, got {self.max_run_time_s:g}")
        if self.move_timeout_s <= 0:
            raise InvalidArgument(f"--move-timeout-sec must be more than 0, got {self.move_timeout_s:g}")
        if self.move_replicas_from_ignored_tservers and not self.ignored_tservers:
            raise InvalidArgument(
                "--move-replicas-from-ignored-tservers needs --ignored-tservers naming the servers to drain"
            )
        if self.tables is not None and (not self.tables or "" in self.tables):
            raise InvalidArgument("--tables needs table names separated by commas")
        if "" in self.ignored_tservers:
            raise InvalidArgument("--ignored-tservers needs tablet server uuids separated by commas")
        if (
            self.disable_policy_fixer
            and self.disable_cross_location_rebalancing
            and self.disable_intra_location_rebalancing
            and not self.move_replicas_from_ignored_tservers
        ):
            raise InvalidArgument(
                "--disable-policy-fixer, --disable-cross-location-rebalancing and "
                "--disable-intra-location-rebalancing together leave nothing to do"
            )

    def planner_options(self) -> RebalanceOptions:
        return RebalanceOptions(
            enable_range_rebalancing=self.enable_range_rebalancing,
            disable_policy_fixer=self.disable_policy_fixer,
            disable_cross_location_rebalancing=self.disable_cross_location_rebalancing,
            disable_intra_location_rebalancing=self.disable_intra_location_rebalancing,
        )


# --- the snapshot -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class TabletView:
    """One tablet as the catalog knows it: its committed config and the leader last reported."""

    tablet_id: str
    table: str
    table_id: str
    range_start: bytes
    replication_factor: int
    voters: tuple[str, ...]
    non_voters: tuple[str, ...] = ()
    leader: str = ""
    #: The table's (or range's) own placement policy, None when it has none.
    constraint: PlacementConstraint | None = None

    @property
    def members(self) -> tuple[str, ...]:
        return self.voters + self.non_voters

    @property
    def settled(self) -> bool:
        """No config change under way: a leader, as many voters as the replication factor and
        no non-voter (one is a move or a re-replication in progress)."""
        return bool(self.leader) and not self.non_voters and len(self.voters) == self.replication_factor


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    tservers: tuple[TabletServerInfo, ...]
    tables: tuple[TableSummary, ...]
    tablets: tuple[TabletView, ...]

    def address_of(self, uuid: str) -> str:
        server = next((s for s in self.tservers if s.uuid == uuid), None)
        return server.rpc_addresses[0] if server is not None and server.rpc_addresses else uuid


async def take_snapshot(client: AsyncClient, tables: Sequence[str] | None, timeout_s: float) -> Snapshot:
    """The leader master's view of the tablet servers and of the tablets of ``tables`` (all when
    None; InvalidArgument naming an unknown one).  A table deleted meanwhile is left out."""
    tservers, summaries = await asyncio.gather(
        client.list_tablet_servers(timeout_s=timeout_s), client.list_table_summaries(timeout_s=timeout_s)
    )
    selected = select_tables(summaries, tables)

    async def tablets_of(summary: TableSummary) -> list[TabletView]:
        try:
            opened, infos = await asyncio.gather(
                client.open_table(summary.name, timeout_s=timeout_s),
                client.table_tablets(summary.name, timeout_s=timeout_s),
            )
        except NotFound:
            return []
        constraints = table_constraints(opened)
        return [
            TabletView(
                tablet_id=t.tablet_id,
                table=summary.name,
                table_id=summary.id,
                range_start=t.range_start,
                replication_factor=summary.num_replicas,
                voters=tuple(r.uuid for r in t.replicas if r.role in ("LEADER", "FOLLOWER")),
                non_voters=tuple(r.uuid for r in t.replicas if r.role not in ("LEADER", "FOLLOWER")),
                leader=next((r.uuid for r in t.replicas if r.role == "LEADER"), ""),
                constraint=constraints.get(t.range_start, constraints.get(None)),
            )
            for t in infos
        ]

    layouts = await asyncio.gather(*(tablets_of(s) for s in selected))
    return Snapshot(tuple(tservers), tuple(selected), tuple(t for layout in layouts for t in layout))


# --- the model ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Model:
    """The planner's input, and why each left-out server is left out (uuid -> reason)."""

    info: ClusterInfo
    left_out: Mapping[str, str]


def build_model(snapshot: Snapshot, settings: RebalanceSettings) -> Model:
    """The servers and replicas the planner works on; bad settings are refused (see the module doc)."""
    registered = {s.uuid: s for s in snapshot.tservers}
    unknown = sorted(settings.ignored_tservers - set(registered))
    if unknown:
        raise InvalidArgument(
            f"--ignored-tservers names tablet servers that are not registered: {unknown} "
            f"(registered: {sorted(registered)})"
        )
    if settings.move_replicas_from_ignored_tservers:
        dead = sorted(u for u in settings.ignored_tservers if not registered[u].live)
        if dead:
            raise IllegalState(
                f"tablet servers {dead} are dead: replicas can only be moved from live servers (the master "
                "re-replicates a dead server's replicas); start them again, or leave out "
                "--move-replicas-from-ignored-tservers"
            )
    held = Counter(u for t in snapshot.tablets for u in t.members)
    left_out: dict[str, str] = {}
    draining: set[str] = set()
    for uuid, server in registered.items():
        if uuid in settings.ignored_tservers:
            if not settings.move_replicas_from_ignored_tservers:
                left_out[uuid] = "ignored"
            elif held[uuid]:
                draining.add(uuid)
            else:
                left_out[uuid] = "drained"
        elif server.maintenance:
            left_out[uuid] = "in maintenance mode"
        elif not server.live:
            left_out[uuid] = "dead"
    dead = sorted(u for u, why in left_out.items() if why == "dead")
    if dead:
        raise IllegalState(
            f"tablet servers {dead} are dead; rebalancing around them would be undone when they come back or "
            "are re-replicated. Start them, put them in maintenance mode, or name them in --ignored-tservers"
        )
    tservers = {u: s.location or DEFAULT_LOCATION for u, s in registered.items() if u not in left_out}
    tablets = [
        TabletInfo(
            t.tablet_id,
            t.table_id,
            t.range_start,
            t.replication_factor,
            tuple(u for u in t.members if u in tservers),
            t.leader or None,
            t.constraint,
        )
        for t in snapshot.tablets
    ]
    return Model(ClusterInfo(tservers, tablets, frozenset(draining)), left_out)


def select_moves(
    moves: Sequence[Move], tablets: Mapping[str, TabletView], max_per_server: int, excluded: set[str]
) -> tuple[list[Move], list[Move]]:
    """The moves of one round, and the moves held back because their tablet is not settled
    (:func:`nyala.placement.select_moves`, with the unsettled tablets busy)."""
    busy = {tablet_id for tablet_id, view in tablets.items() if not view.settled}
    return select_placement_moves(moves, busy, max_per_server, excluded)


# --- carrying moves out ---------------------------------------------------------------------------


class Outcome(enum.Enum):
    DONE = "done"
    FAILED = "failed"
    NOT_STARTED = "not started"
    LEFT_TO_MASTER = "left to the master"


@dataclasses.dataclass(frozen=True, slots=True)
class MoveResult:
    move: Move
    table: str
    outcome: Outcome
    detail: str = ""
    seconds: float = 0.0


class StopReason(enum.Enum):
    BALANCED = "the cluster is balanced: no move is left"
    ONLY_FAILED_LEFT = "the only moves left are of tablets whose move failed"
    BUSY = "the only moves left are of tablets with a config change under way that did not end"
    TIME_LIMIT = "the run time limit was reached"
    INTERRUPTED = "interrupted"


@dataclasses.dataclass(frozen=True, slots=True)
class Tally:
    """Counts for the progress display."""

    rounds: int = 0
    done: int = 0
    in_flight: int = 0
    failed: int = 0
    not_started: int = 0
    left_to_master: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class RunResult:
    reason: StopReason
    results: tuple[MoveResult, ...]
    rounds: int
    #: Moves a fresh plan still has at the end (None when it could not be taken).
    moves_left: int | None
    seconds: float

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome is outcome)


class Controls:
    """Set from another thread (the command's Ctrl-C handler) and read by the run.

    The first :meth:`interrupt` stops new moves from starting; moves in flight go on being
    watched.  The second stops the watching too.
    """

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.abandon = threading.Event()

    def interrupt(self) -> int:
        """Record one interrupt; return how many there have been (1 or 2)."""
        if self.stop.is_set():
            self.abandon.set()
            return 2
        self.stop.set()
        return 1


Listener = Callable[[str, Tally], None]


class Rebalancer:
    """One run of the rebalancer against the cluster ``client`` is connected to.

    ``listener(message, tally)`` hears of every round and every move started and finished.
    :meth:`snapshot` and :meth:`carry_out` are the only places that talk to the cluster.
    """

    def __init__(
        self,
        client: AsyncClient | None,
        settings: RebalanceSettings,
        *,
        controls: Controls | None = None,
        listener: Listener | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.settings = settings
        self.controls = controls or Controls()
        self.listener = listener or (lambda message, tally: None)
        self.rng = rng or random.Random()
        self.clock = clock
        self.tally = Tally()
        self.addresses: dict[str, str] = {}
        self.lease_holder = f"nyala cluster rebalance, pid {os.getpid()} on {socket.gethostname()}"

    # -- talking to the cluster ------------------------------------------------------------

    async def snapshot(self) -> Snapshot:
        assert self.client is not None
        return await take_snapshot(self.client, self.settings.tables, self.settings.timeout_s)

    async def carry_out(self, move: Move) -> tuple[Outcome, str]:
        """Start one move and watch it until done (see the module doc for the outcomes)."""
        assert self.client is not None
        ops = TabletOps(self.client, move.tablet_id, self.settings.move_timeout_s)
        try:
            await start_move(ops, move.from_uuid, move.to_uuid)
        except IllegalState as exc:
            return Outcome.NOT_STARTED, str(exc)
        except NyalaError as exc:
            return Outcome.FAILED, f"{type(exc).__name__}: {exc}"
        last_error: BaseException | None = None
        while not self.controls.abandon.is_set():
            try:
                view = await ops.leader()
            except TimedOut:
                break
            except NyalaError as exc:  # the masters or the replicas are unreachable for a moment
                last_error = exc
            else:
                state = move_state(view.committed, move.from_uuid, move.to_uuid)
                if state is MoveState.DONE:
                    return Outcome.DONE, ""
                if state is MoveState.DESTINATION_LOST:
                    await self._undo(move)
                    return Outcome.FAILED, "the destination left the config before the source (its tablet copy failed?)"
                if state is MoveState.SOURCE_LOST:
                    return Outcome.FAILED, "the source left the config but the destination did not become a voter"
            if ops.remaining() <= 0:
                break
            await asyncio.sleep(min(self.settings.poll_s, ops.remaining()))
        if self.controls.abandon.is_set():
            return Outcome.LEFT_TO_MASTER, "no longer watched (interrupted); the master completes it"
        cause = f" (last error: {last_error})" if last_error else ""
        if await self._undo(move):
            return Outcome.FAILED, f"did not finish within {self.settings.move_timeout_s:g} s and was undone{cause}"
        return (
            Outcome.LEFT_TO_MASTER,
            f"did not finish within {self.settings.move_timeout_s:g} s; past the point of no return, the master "
            f"completes it{cause}",
        )

    async def _undo(self, move: Move) -> bool:
        assert self.client is not None
        try:
            ops = TabletOps(self.client, move.tablet_id, self.settings.timeout_s)
            return await cancel_move(ops, move.from_uuid, move.to_uuid)
        except NyalaError:
            return False

    # -- the run ---------------------------------------------------------------------------

    async def plan(self) -> tuple[Snapshot, Model, Plan]:
        """A fresh snapshot, its model and its plan (``--report-only`` stops here)."""
        snapshot = await self.snapshot()
        self.addresses.update({s.uuid: s.rpc_addresses[0] for s in snapshot.tservers if s.rpc_addresses})
        model = build_model(snapshot, self.settings)
        return snapshot, model, plan_moves(model.info, self.rng, self.settings.planner_options())

    async def run(self) -> RunResult:
        """The rounds, while holding the leader master's rebalance lease (see :meth:`hold_lease`)."""
        await self.renew_lease()  # before the first plan, so the master is out of the way from the start
        lease = asyncio.get_running_loop().create_task(self.hold_lease(), name="rebalance-lease")
        try:
            return await self._rounds()
        finally:
            lease.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lease
            await self.release_lease()

    async def hold_lease(self) -> None:
        """Renew the leader master's rebalance lease until cancelled, so the master's auto
        rebalancer starts no moves while this run plans its own (:mod:`nyala.master.rebalance_lease`;
        a run killed outright stops renewing and the lease lapses within ``CLI_LEASE_S``)."""
        while True:
            await asyncio.sleep(CLI_RENEW_S)
            await self.renew_lease()

    async def renew_lease(self) -> None:
        if self.client is None:
            return
        try:
            await self.client.rebalance_lease(self.lease_holder, CLI_LEASE_S, timeout_s=CLI_RENEW_S)
        except NyalaError as exc:  # the masters are busy or electing: renew at the next turn
            self.listener(f"could not renew the rebalance lease (the master may rebalance too): {exc}", self.tally)

    async def release_lease(self) -> None:
        if self.client is None:
            return
        with contextlib.suppress(NyalaError):  # it lapses on its own anyway
            await self.client.rebalance_lease(self.lease_holder, 0, timeout_s=CLI_RENEW_S)

    async def _rounds(self) -> RunResult:
        started = self.clock()
        results: list[MoveResult] = []
        excluded: set[str] = set()
        attempts: Counter[str] = Counter()
        busy_since: float | None = None
        while True:
            if self.controls.stop.is_set():
                reason = StopReason.INTERRUPTED
                break
            if self.settings.max_run_time_s and self.clock() - started >= self.settings.max_run_time_s:
                reason = StopReason.TIME_LIMIT
                break
            snapshot, _, plan = await self.plan()
            if not plan.moves:
                reason = StopReason.BALANCED
                break
            views = {t.tablet_id: t for t in snapshot.tablets}
            chosen, waiting = select_moves(plan.moves, views, self.settings.max_moves_per_server, excluded)
            if not chosen:
                if not waiting:
                    reason = StopReason.ONLY_FAILED_LEFT
                    break
                # Every move left is of a tablet whose config is changing (a move or a
                # re-replication): wait for the change to end, but not forever.
                busy_since = self.clock() if busy_since is None else busy_since
                if self.clock() - busy_since > self.settings.move_timeout_s:
                    reason = StopReason.BUSY
                    break
                await asyncio.sleep(self.settings.poll_s)
                continue
            busy_since = None
            self._count(rounds=1)
            self.listener(
                f"round {self.tally.rounds}: {len(chosen)} moves of the {len(plan.moves)} planned", self.tally
            )
            tables = {t.tablet_id: t.table for t in snapshot.tablets}
            done = await asyncio.gather(*(self._one(m, tables[m.tablet_id]) for m in chosen))
            for result in done:
                if result.outcome is Outcome.NOT_STARTED:
                    attempts[result.move.tablet_id] += 1
                if result.outcome is Outcome.FAILED or attempts[result.move.tablet_id] >= MAX_START_ATTEMPTS:
                    excluded.add(result.move.tablet_id)
            results.extend(done)
        moves_left: int | None = 0
        if reason is not StopReason.BALANCED:
            moves_left = None
            if not self.controls.abandon.is_set():
                try:
                    moves_left = len((await self.plan())[2].moves)
                except NyalaError:
                    pass
        return RunResult(reason, tuple(results), self.tally.rounds, moves_left, self.clock() - started)

    async def _one(self, move: Move, table: str) -> MoveResult:
        what = self.describe(move, table)
        if self.controls.stop.is_set():
            return MoveResult(move, table, Outcome.NOT_STARTED, "interrupted before it started")
        self._count(in_flight=1)
        self.listener(f"started: {what}", self.tally)
        began = self.clock()
        try:
            outcome, detail = await self.carry_out(move)
        finally:
            self._count(in_flight=-1)
        seconds = self.clock() - began
        field = {
            Outcome.DONE: "done",
            Outcome.FAILED: "failed",
            Outcome.NOT_STARTED: "not_started",
            Outcome.LEFT_TO_MASTER: "left_to_master",
        }[outcome]
        self._count(**{field: 1})
        suffix = f": {detail}" if detail else ""
        self.listener(f"{outcome.value.upper()} in {seconds:.1f} s: {what}{suffix}", self.tally)
        return MoveResult(move, table, outcome, detail, seconds)

    def describe(self, move: Move, table: str) -> str:
        source = self.addresses.get(move.from_uuid, move.from_uuid)
        dest = self.addresses.get(move.to_uuid, move.to_uuid)
        return f"tablet {move.tablet_id} of {table!r} from {source} to {dest} ({move.phase})"

    def _count(self, **changes: int) -> None:
        tally = self.tally
        self.tally = dataclasses.replace(tally, **{k: getattr(tally, k) + v for k, v in changes.items()})
