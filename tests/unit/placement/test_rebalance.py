"""The move planner: placement.md's rebalancer scenarios, invariants and idempotence."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nyala.errors import InvalidArgument
from nyala.placement import check_placement
from nyala.placement.rebalance import ClusterInfo, Move, RebalanceOptions, TabletInfo, plan_moves


def servers(sizes: list[int]) -> dict[str, str]:
    return {f"L{i}-{j}": f"/L{i}" for i, n in enumerate(sizes) for j in range(n)}


def apply(cluster: ClusterInfo, moves: list[Move]) -> ClusterInfo:
    members = {t.tablet_id: list(t.replicas) for t in cluster.tablets}
    for move in moves:
        replicas = members[move.tablet_id]
        assert move.from_uuid in replicas
        assert move.to_uuid not in replicas
        replicas[replicas.index(move.from_uuid)] = move.to_uuid
    tablets = [
        TabletInfo(t.tablet_id, t.table_id, t.range_key, t.replication_factor, tuple(members[t.tablet_id]), t.leader)
        for t in cluster.tablets
    ]
    live = {u: loc for u, loc in cluster.tservers.items() if u not in cluster.draining}
    return ClusterInfo(live, tablets)


def per_server(cluster: ClusterInfo, table: str | None = None) -> Counter[str]:
    counts: Counter[str] = Counter(dict.fromkeys(cluster.tservers, 0))
    for tablet in cluster.tablets:
        if table is None or tablet.table_id == table:
            counts.update(tablet.replicas)
    return counts


def skew(counts: Counter[str]) -> int:
    return max(counts.values()) - min(counts.values())


def test_r1_many_moves_reach_the_lower_bound() -> None:
    # Kudu's rebalance_algo-test ManyMoves: one table on three servers {100, 400, 100}: 200 moves.
    layout = ["L0-0"] * 100 + ["L0-1"] * 400 + ["L0-2"] * 100
    tablets = [TabletInfo(f"t{i}", "table", b"", 1, (u,)) for i, u in enumerate(layout)]
    cluster = ClusterInfo(servers([3]), tablets)
    plan = plan_moves(cluster, random.Random(1))
    assert len(plan.moves) == 200
    after = apply(cluster, plan.moves)
    assert set(per_server(after).values()) == {200}
    assert plan_moves(after, random.Random(1)).moves == []


def test_r2_ranges_packed_on_one_server_spread_to_zero_skew() -> None:
    # Kudu commit 01ca8c3f2: 4 servers, 4 ranges x 8 replicas each on a single server: 24 moves.
    tablets = [TabletInfo(f"r{r}-{i}", "table", bytes([r]), 1, (f"L0-{r}",)) for r in range(4) for i in range(8)]
    cluster = ClusterInfo(servers([4]), tablets)
    plan = plan_moves(cluster, random.Random(1))
    assert len(plan.moves) == 24
    after = apply(cluster, plan.moves)
    for r in range(4):
        assert Counter(u for t in after.tablets if t.range_key == bytes([r]) for u in t.replicas) == dict.fromkeys(
            servers([4]), 2
        )


def test_r3_policy_fixer_spreads_tablets_packed_into_one_location() -> None:
    # Tablets X, Y, Z each with all three replicas in one location: 2 moves each, 6 in all.
    sizes = [3, 3, 3]
    tablets = [
        TabletInfo(name, "table", b"", 3, tuple(f"L{i}-{j}" for j in range(3)), leader=f"L{i}-0")
        for i, name in enumerate("XYZ")
    ]
    cluster = ClusterInfo(servers(sizes), tablets)
    plan = plan_moves(cluster, random.Random(1))
    policy_moves = [m for m in plan.moves if m.phase == "policy"]
    assert len(policy_moves) == 6
    assert len(plan.moves) == 6  # the lower bound: no move inside a location is needed after
    assert all(m.from_uuid != f"L{'XYZ'.index(m.tablet_id)}-0" for m in policy_moves)  # leaders stay
    after = apply(cluster, plan.moves)
    counts = {loc: 3 for loc in ("/L0", "/L1", "/L2")}
    for tablet in after.tablets:
        assert check_placement(3, Counter(u.split("-")[0].replace("L", "/L") for u in tablet.replicas), counts).met
    assert plan.unfixable == []


def test_unfixable_violations_are_reported_and_not_chased() -> None:
    # RF 1 over three locations: the single replica is always a majority.
    cluster = ClusterInfo(servers([1, 1, 1]), [TabletInfo("t", "table", b"", 1, ("L0-0",))])
    plan = plan_moves(cluster, random.Random(1))
    assert plan.unfixable == ["t"]
    assert [m for m in plan.moves if m.phase == "policy"] == []


def test_r6_drain_moves_every_replica_of_the_server_and_keeps_the_policy() -> None:
    rng = random.Random(3)
    sizes = [3, 3, 3]
    tablets = []
    for i in range(60):
        tablets.append(
            TabletInfo(f"t{i}", f"table{i % 3}", b"", 3, tuple(f"L{loc}-{rng.randrange(3)}" for loc in range(3)))
        )
    cluster = ClusterInfo(servers(sizes), tablets, draining=frozenset({"L1-0"}))
    on_drained = sum(1 for t in tablets if "L1-0" in t.replicas)
    plan = plan_moves(cluster, random.Random(1))
    drain_moves = [m for m in plan.moves if m.phase == "drain"]
    assert len(drain_moves) == on_drained
    after = apply(cluster, plan.moves)
    assert all("L1-0" not in t.replicas for t in after.tablets)
    assert all(len({u.split("-")[0] for u in t.replicas}) == 3 for t in after.tablets)


def test_cross_location_balancing_moves_load_to_the_empty_location() -> None:
    # Three locations used, a fourth added empty: cross-location moves, then within-location ones.
    rng = random.Random(5)
    tablets = [
        TabletInfo(f"t{i}", "table", b"", 3, tuple(f"L{loc}-{rng.randrange(4)}" for loc in range(3)))
        for i in range(120)
    ]
    cluster = ClusterInfo(servers([4, 4, 4, 4]), tablets)
    plan = plan_moves(cluster, random.Random(1), RebalanceOptions(enable_range_rebalancing=False))
    assert any(m.phase == "cross-location" for m in plan.moves)
    after = apply(cluster, plan.moves)
    loads: Counter[str] = Counter()
    for tablet in after.tablets:
        loads.update(u.split("-")[0] for u in tablet.replicas)
    assert max(loads.values()) / 4 - min(loads.values()) / 4 <= 1.0
    assert skew(per_server(after)) <= 2
    assert plan_moves(after, random.Random(2)).moves == []


def test_max_moves_stops_early() -> None:
    layout = ["L0-1"] * 50
    tablets = [TabletInfo(f"t{i}", "table", b"", 1, (u,)) for i, u in enumerate(layout)]
    plan = plan_moves(ClusterInfo(servers([2]), tablets), random.Random(1), RebalanceOptions(max_moves=7))
    assert len(plan.moves) == 7


def test_bad_snapshots_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="unknown tablet servers"):
        plan_moves(ClusterInfo(servers([2]), [TabletInfo("t", "x", b"", 1, ("nope",))]), random.Random(1))
    with pytest.raises(InvalidArgument, match="lists a tablet server twice"):
        plan_moves(ClusterInfo(servers([2]), [TabletInfo("t", "x", b"", 2, ("L0-0", "L0-0"))]), random.Random(1))
    tablet = TabletInfo("t", "x", b"", 1, ("L0-0",))
    with pytest.raises(InvalidArgument, match="listed twice"):
        plan_moves(ClusterInfo(servers([2]), [tablet, tablet]), random.Random(1))
    with pytest.raises(InvalidArgument, match="draining unknown"):
        plan_moves(ClusterInfo(servers([2]), [], draining=frozenset({"zz"})), random.Random(1))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    tablets=st.integers(0, 60),
    rf=st.integers(1, 5),
    seed=st.integers(0, 1000),
    by_range=st.booleans(),
)
def test_random_layouts_never_get_worse_and_replanning_is_idle(sizes, tablets, rf, seed, by_range) -> None:
    rng = random.Random(seed)
    uuids = sorted(servers(sizes))
    rf = min(rf, len(uuids))
    layout = [
        TabletInfo(f"t{i}", f"table{i % 3}", bytes([i % 2]), rf, tuple(rng.sample(uuids, rf)), leader=None)
        for i in range(tablets)
    ]
    cluster = ClusterInfo(servers(sizes), layout)
    options = RebalanceOptions(enable_range_rebalancing=by_range)
    plan = plan_moves(cluster, random.Random(seed), options)  # move() asserts no move breaks the policy
    after = apply(cluster, plan.moves)
    location_servers = Counter(servers(sizes).values())
    for before_tablet, after_tablet in zip(cluster.tablets, after.tablets, strict=True):
        before_check = check_placement(
            rf, Counter(u.split("-")[0].replace("L", "/L") for u in before_tablet.replicas), location_servers
        )
        after_check = check_placement(
            rf, Counter(u.split("-")[0].replace("L", "/L") for u in after_tablet.replicas), location_servers
        )
        assert after_check.met or not before_check.met
        if before_tablet.tablet_id not in plan.unfixable:
            assert after_check.met, (before_tablet, after_tablet, plan)
    assert plan_moves(after, random.Random(seed + 1), options).moves == []


def test_each_phase_can_be_turned_off() -> None:
    # X packed into /L0 (a violation), /L3 empty (cross-location work), table b all on the first
    # server of /L0, /L1 and /L2 (intra-location work).
    tablets = [TabletInfo("X", "a", b"", 3, ("L0-0", "L0-1", "L0-2"), leader="L0-0")]
    tablets += [TabletInfo(f"b{i}", "b", b"", 3, ("L0-0", "L1-0", "L2-0")) for i in range(6)]
    cluster = ClusterInfo(servers([3, 3, 3, 3]), tablets)
    phases = {m.phase for m in plan_moves(cluster, random.Random(1)).moves}
    assert {"policy", "cross-location", "key"} <= phases
    no_fixer = plan_moves(cluster, random.Random(1), RebalanceOptions(disable_policy_fixer=True))
    assert "policy" not in {m.phase for m in no_fixer.moves}
    assert no_fixer.unfixable == []
    no_cross = plan_moves(cluster, random.Random(1), RebalanceOptions(disable_cross_location_rebalancing=True))
    assert "cross-location" not in {m.phase for m in no_cross.moves}
    no_intra = plan_moves(cluster, random.Random(1), RebalanceOptions(disable_intra_location_rebalancing=True))
    assert {m.phase for m in no_intra.moves} <= {"policy", "cross-location"}
    nothing = RebalanceOptions(
        disable_policy_fixer=True, disable_cross_location_rebalancing=True, disable_intra_location_rebalancing=True
    )
    assert plan_moves(cluster, random.Random(1), nothing).moves == []
    # Draining is asked for by naming servers, so it runs whatever phases are off.
    drained = ClusterInfo(cluster.tservers, tablets, draining=frozenset({"L1-0"}))
    assert {m.phase for m in plan_moves(drained, random.Random(1), nothing).moves} == {"drain"}


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    tablets=st.integers(0, 40),
    rf=st.integers(1, 3),
    seed=st.integers(0, 1000),
    off=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    drain=st.booleans(),
)
def test_replanning_the_planned_layout_is_idle_whatever_the_options(sizes, tablets, rf, seed, off, drain) -> None:
    rng = random.Random(seed)
    uuids = sorted(servers(sizes))
    rf = min(rf, len(uuids))
    layout = [TabletInfo(f"t{i}", f"table{i % 2}", b"", rf, tuple(rng.sample(uuids, rf))) for i in range(tablets)]
    draining = frozenset({uuids[0]}) if drain and len(uuids) > rf else frozenset()
    cluster = ClusterInfo(servers(sizes), layout, draining=draining)
    options = RebalanceOptions(
        disable_policy_fixer=off[0],
        disable_cross_location_rebalancing=off[1],
        disable_intra_location_rebalancing=off[2],
    )
    plan = plan_moves(cluster, random.Random(seed), options)
    after = apply(cluster, plan.moves)
    assert plan_moves(after, random.Random(seed + 1), options).moves == []
