"""The rebalancer's orchestration against an in-memory cluster: model, selection, rounds,
failures, interrupts and the distribution report (no servers, no sockets)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from nyala.client.info import TableSummary, TabletServerInfo
from nyala.errors import IllegalState, InvalidArgument
from nyala.placement import Move, PlacementConstraint, plan_moves
from nyala.tools.rebalance_report import distribution_report
from nyala.tools.rebalancer import (
    Controls,
    Outcome,
    Rebalancer,
    RebalanceSettings,
    Snapshot,
    StopReason,
    TabletView,
    build_model,
    select_moves,
)

pytestmark = pytest.mark.timeout(60)


def tserver(uuid: str, location: str, *, live: bool = True, maintenance: bool = False) -> TabletServerInfo:
    return TabletServerInfo(uuid, (f"{uuid}.host:7050",), location, live, 0, 0, maintenance=maintenance)


class FakeCluster:
    """Tablet servers and tablets whose moves apply at once (or fail, for chosen tablets)."""

    def __init__(self, sizes: dict[str, int], extra: dict[str, str] | None = None) -> None:
        self.servers = {f"{loc[1:]}-{i}": loc for loc, n in sizes.items() for i in range(n)}
        self.servers.update(extra or {})
        self.dead: set[str] = set()
        self.maintenance: set[str] = set()
        self.tablets: dict[str, TabletView] = {}
        self.fail: set[str] = set()
        self.busy: set[str] = set()
        self.started: list[Move] = []
        self.from_server: Counter[str] = Counter()
        self.to_server: Counter[str] = Counter()
        self.most_at_once = 0

    def add(self, tablet_id: str, table: str, replicas: tuple[str, ...]) -> None:
        self.tablets[tablet_id] = TabletView(
            tablet_id, table, f"id-{table}", b"", len(replicas), replicas, (), replicas[0]
        )

    def snapshot(self) -> Snapshot:
        tservers = tuple(
            tserver(u, loc, live=u not in self.dead, maintenance=u in self.maintenance)
            for u, loc in sorted(self.servers.items())
        )
        tables = sorted({t.table for t in self.tablets.values()})
        summaries = tuple(TableSummary(f"id-{t}", t, 0, 3) for t in tables)
        views = tuple(
            TabletView(t.tablet_id, t.table, t.table_id, b"", t.replication_factor, t.voters, ("x",), t.leader)
            if t.tablet_id in self.busy
            else t
            for t in self.tablets.values()
        )
        return Snapshot(tservers, summaries, views)

    def per_server(self) -> Counter[str]:
        counts: Counter[str] = Counter(dict.fromkeys(self.servers, 0))
        for t in self.tablets.values():
            counts.update(t.voters)
        return counts


class FakeRebalancer(Rebalancer):
    def __init__(self, cluster: FakeCluster, settings: RebalanceSettings, controls: Controls | None = None) -> None:
        super().__init__(None, settings, controls=controls, rng=random.Random(7), listener=self.hear)
        self.cluster = cluster
        self.heard: list[str] = []
        self.on_start: list[Move] = []

    def hear(self, message: str, tally: object) -> None:
        self.heard.append(message)

    async def snapshot(self) -> Snapshot:
        return self.cluster.snapshot()

    async def carry_out(self, move: Move) -> tuple[Outcome, str]:
        cluster = self.cluster
        cluster.started.append(move)
        cluster.from_server[move.from_uuid] += 1
        cluster.to_server[move.to_uuid] += 1
        at_once = max(cluster.from_server[move.from_uuid], cluster.to_server[move.to_uuid])
        cluster.most_at_once = max(cluster.most_at_once, at_once)
        try:
            await asyncio.sleep(0)  # let the round start its other moves: they overlap, as real ones do
            if move.tablet_id in cluster.fail:
                return Outcome.FAILED, "the destination could not copy the tablet"
            t = cluster.tablets[move.tablet_id]
            voters = tuple(move.to_uuid if u == move.from_uuid else u for u in t.voters)
            cluster.tablets[move.tablet_id] = TabletView(
                t.tablet_id, t.table, t.table_id, b"", t.replication_factor, voters, (), voters[0]
            )
            return Outcome.DONE, ""
        finally:
            cluster.from_server[move.from_uuid] -= 1
            cluster.to_server[move.to_uuid] -= 1


def loaded(sizes: dict[str, int], new: dict[str, int] | None = None, tablets: int = 12) -> FakeCluster:
    """Every tablet on the first server of each location in ``sizes``; ``new`` locations empty."""
    cluster = FakeCluster({**sizes, **(new or {})})
    first = [f"{loc[1:]}-0" for loc in sizes]
    for i in range(tablets):
        cluster.add(f"t{i:02d}", "a" if i % 2 else "b", tuple(first))
    return cluster


def within_skew(cluster: FakeCluster, table: str) -> int:
    worst = 0
    for location in set(cluster.servers.values()):
        uuids = [u for u, loc in cluster.servers.items() if loc == location]
        counts = Counter(u for t in cluster.tablets.values() if t.table == table for u in t.voters)
        worst = max(worst, max(counts[u] for u in uuids) - min(counts[u] for u in uuids))
    return worst


def test_a_run_balances_the_cluster_round_by_round_within_the_per_server_limit() -> None:
    cluster = loaded({"/r1": 3, "/r2": 3, "/r3": 3}, {"/r4": 3})
    rebalancer = FakeRebalancer(cluster, RebalanceSettings(max_moves_per_server=2))
    result = asyncio.run(rebalancer.run())
    assert result.reason is StopReason.BALANCED
    assert result.moves_left == 0
    assert result.count(Outcome.DONE) == len(result.results) > 0
    assert result.rounds > 1
    for table in ("a", "b"):
        assert within_skew(cluster, table) <= 1
    # Each round: at most 2 moves from one server and 2 to one server, one per tablet.
    assert cluster.most_at_once == 2
    assert any("round 1:" in m for m in rebalancer.heard)
    assert any(m.startswith("DONE") for m in rebalancer.heard)
    # Planning again on the result: nothing to do.
    model = build_model(cluster.snapshot(), RebalanceSettings())
    assert plan_moves(model.info, random.Random(1)).moves == []


def test_select_moves_takes_the_first_move_of_each_tablet_within_the_limits() -> None:
    views = {t: TabletView(t, "x", "id-x", b"", 1, ("a",), (), "a") for t in ("t1", "t2", "t3", "t4", "t5")} | {
        "busy": TabletView("busy", "x", "id-x", b"", 1, ("a",), ("b",), "a")
    }
    moves = [
        Move("t1", "a", "b", "key"),
        Move("t1", "b", "c", "key"),  # assumes the first: never in the same round
        Move("busy", "a", "c", "key"),
        Move("t2", "a", "c", "key"),
        Move("t3", "a", "d", "key"),  # a is the source of 2 already
        Move("t4", "e", "b", "key"),
        Move("t5", "e", "b", "key"),  # b is the destination of 2 already
        Move("failed", "e", "f", "key"),
    ]
    views["failed"] = views["t1"]
    chosen, waiting = select_moves(moves, views, 2, {"failed"})
    assert chosen == [moves[0], moves[3], moves[5]]
    assert waiting == [moves[2]]


def test_a_failed_move_is_reported_and_the_run_goes_on_without_its_tablet() -> None:
    cluster = loaded({"/r1": 2, "/r2": 2, "/r3": 2}, tablets=8)
    cluster.fail = {"t03"}
    rebalancer = FakeRebalancer(cluster, RebalanceSettings())
    result = asyncio.run(rebalancer.run())
    failed = [r for r in result.results if r.outcome is Outcome.FAILED]
    assert [r.move.tablet_id for r in failed] == ["t03"]
    assert result.count(Outcome.DONE) > 0
    assert all(r.move.tablet_id != "t03" for r in result.results if r is not failed[0])
    assert result.reason in (StopReason.ONLY_FAILED_LEFT, StopReason.BALANCED)
    assert any(m.startswith("FAILED") and "t03" in m for m in rebalancer.heard)


def test_an_interrupt_lets_the_moves_in_flight_finish_and_starts_no_more() -> None:
    cluster = loaded({"/r1": 3, "/r2": 3, "/r3": 3}, {"/r4": 3})
    controls = Controls()
    rebalancer = FakeRebalancer(cluster, RebalanceSettings(max_moves_per_server=1), controls)
    original = rebalancer.carry_out

    async def interrupted(move: Move) -> tuple[Outcome, str]:
        controls.interrupt()  # Ctrl-C while the first round's moves are in flight
        return await original(move)

    rebalancer.carry_out = interrupted  # type: ignore[method-assign]
    result = asyncio.run(rebalancer.run())
    assert result.reason is StopReason.INTERRUPTED
    assert result.rounds == 1
    started = [r for r in result.results if r.outcome is Outcome.DONE]
    assert started
    assert len(started) == len(cluster.started)
    assert result.moves_left is not None
    assert result.moves_left > 0


def test_tablets_with_a_change_under_way_are_waited_for_then_given_up_on() -> None:
    cluster = loaded({"/r1": 2}, tablets=4)
    cluster.servers["r1-1"] = "/r1"
    cluster.busy = {"t00", "t01", "t02", "t03"}
    result = asyncio.run(FakeRebalancer(cluster, RebalanceSettings(move_timeout_s=0.05, poll_s=0.01)).run())
    assert result.reason is StopReason.BUSY
    assert result.results == ()


def test_the_model_leaves_out_ignored_and_maintenance_servers_and_drains_on_request() -> None:
    cluster = loaded({"/r1": 2, "/r2": 2, "/r3": 2}, tablets=4)
    cluster.servers["bare"] = ""
    cluster.maintenance = {"r2-1"}
    snapshot = cluster.snapshot()
    model = build_model(snapshot, RebalanceSettings(ignored_tservers=frozenset({"r1-0"})))
    assert model.left_out == {"r1-0": "ignored", "r2-1": "in maintenance mode"}
    assert model.info.tservers["bare"] == "/default"
    assert all("r1-0" not in t.replicas for t in model.info.tablets)
    draining = build_model(
        snapshot,
        RebalanceSettings(ignored_tservers=frozenset({"r1-0", "r1-1"}), move_replicas_from_ignored_tservers=True),
    )
    assert draining.info.draining == {"r1-0"}  # r1-1 holds nothing: drained already
    assert draining.left_out["r1-1"] == "drained"


def test_bad_settings_are_refused_before_anything_moves() -> None:
    cluster = loaded({"/r1": 2, "/r2": 2, "/r3": 2}, tablets=4)
    snapshot = cluster.snapshot()
    with pytest.raises(InvalidArgument, match=r"not registered: \['nope'\]"):
        build_model(snapshot, RebalanceSettings(ignored_tservers=frozenset({"nope"})))
    cluster.dead = {"r2-1"}
    with pytest.raises(IllegalState, match=r"tablet servers \['r2-1'\] are dead"):
        build_model(cluster.snapshot(), RebalanceSettings())
    assert build_model(cluster.snapshot(), RebalanceSettings(ignored_tservers=frozenset({"r2-1"}))).left_out
    with pytest.raises(IllegalState, match="replicas can only be moved from live servers"):
        build_model(
            cluster.snapshot(),
            RebalanceSettings(ignored_tservers=frozenset({"r2-1"}), move_replicas_from_ignored_tservers=True),
        )
    with pytest.raises(InvalidArgument, match="needs --ignored-tservers"):
        RebalanceSettings(move_replicas_from_ignored_tservers=True)
    with pytest.raises(InvalidArgument, match="leave nothing to do"):
        RebalanceSettings(
            disable_policy_fixer=True,
            disable_cross_location_rebalancing=True,
            disable_intra_location_rebalancing=True,
        )
    with pytest.raises(InvalidArgument, match="at least 1"):
        RebalanceSettings(max_moves_per_server=0)
    with pytest.raises(InvalidArgument, match="--max-run-time-sec"):
        RebalanceSettings(max_run_time_s=-1)
    with pytest.raises(InvalidArgument, match="--tables needs"):
        RebalanceSettings(tables=("a", ""))


def test_the_report_shows_skew_per_table_location_and_server_and_the_plan() -> None:
    cluster = loaded({"/r1": 2, "/r2": 2, "/r3": 2}, {"/r4": 2}, tablets=4)
    snapshot = cluster.snapshot()
    model = build_model(snapshot, RebalanceSettings())
    plan = plan_moves(model.info, random.Random(1))
    report = distribution_report(snapshot, model, plan, details=True)
    locations = {row["location"]: row for row in report["locations"]}
    assert locations["/r1"] == {"location": "/r1", "tservers": 2, "replicas": 4, "load": 2.0, "skew": 4}
    assert locations["/r4"]["replicas"] == 0
    tables = {row["table"]: row for row in report["tables"]}
    assert tables["a"]["location_skew"] == 1.0  # 2 replicas / 2 servers vs none
    assert tables["a"]["server_skew"] == 2
    assert tables["a"]["violations"] == 0
    assert len(report["moves"]) == len(plan.moves) > 0
    assert {m["phase"] for m in report["moves"]} <= {"cross-location", "key", "total"}
    assert report["moves"][0]["from"].endswith(":7050")
    per_server = [r for r in report["replicas_per_server"] if r["table"] == "a" and r["location"] == "/r1"]
    assert sorted(r["replicas"] for r in per_server) == [0, 2]
    assert report["violations"] == []


class LeaseRecorder:
    """Stands in for the client: records the duration of every rebalance lease call."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def rebalance_lease(self, holder: str, duration_s: float, *, timeout_s: float | None = None) -> bool:
        assert holder
        self.calls.append(duration_s)
        return True


def test_a_run_holds_the_masters_rebalance_lease_from_before_its_first_plan_until_it_ends() -> None:
    cluster = loaded({"/r1": 2, "/r2": 2, "/r3": 2}, tablets=8)
    rebalancer = FakeRebalancer(cluster, RebalanceSettings())
    recorder = LeaseRecorder()
    rebalancer.client = recorder  # type: ignore[assignment]
    planned_with: list[list[float]] = []
    snapshot = rebalancer.snapshot

    async def snapshot_noting_the_lease() -> Snapshot:
        planned_with.append(list(recorder.calls))
        return await snapshot()

    rebalancer.snapshot = snapshot_noting_the_lease  # type: ignore[method-assign]
    result = asyncio.run(rebalancer.run())
    assert result.reason is StopReason.BALANCED
    assert planned_with
    assert planned_with[0]
    assert planned_with[0][0] > 0  # taken before the first plan
    assert recorder.calls[-1] == 0  # released at the end


def test_the_report_judges_a_pinned_tablet_by_its_own_policy() -> None:
    where = {"e1": "/eu/r1", "e2": "/eu/r2", "e3": "/eu/r3", "u1": "/us"}
    tservers = tuple(TabletServerInfo(u, (f"{u}:7050",), loc, True, 10, 1) for u, loc in where.items())
    eu = PlacementConstraint.of(["/eu"])
    tablets = (
        TabletView("in", "p", "p-id", b"", 3, ("e1", "e2", "e3"), leader="e1", constraint=eu),
        TabletView("out", "p", "p-id", b"", 3, ("e1", "e2", "u1"), leader="e1", constraint=eu),
    )
    snapshot = Snapshot(tservers, (TableSummary("p-id", "p", 2, 3),), tablets)
    model = build_model(snapshot, RebalanceSettings())
    plan = plan_moves(model.info, random.Random(1))
    assert [(m.tablet_id, m.from_uuid, m.to_uuid, m.phase) for m in plan.moves] == [("out", "u1", "e3", "policy")]
    report = distribution_report(snapshot, model, plan, details=True)
    assert report["tables"][0]["violations"] == 1
    (violation,) = report["violations"]
    assert violation["tablet"] == "out"
    assert violation["outside_its_locations"] == ["/us"]
    assert violation["fixable"] is True
