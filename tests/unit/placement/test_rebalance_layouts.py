"""The move planner on Kudu's rebalancer layouts: constrained locations, illegal pairs, ranges, even RF.

Kudu's location-awareness design uses locations of 100, 2 and 2 servers as its counter-example:
the small locations look far more loaded per server, yet every move out of them would give a
tablet two replicas in one location.  The planner must see that, make no such move, and stop.
"""

from __future__ import annotations

import random
from collections import Counter

from nyala.placement import check_placement
from nyala.placement.rebalance import ClusterInfo, Move, RebalanceOptions, TabletInfo, plan_moves

from .test_rebalance import apply, servers


def location(uuid: str) -> str:
    return "/" + uuid.split("-")[0]


def sizes_of(cluster: ClusterInfo) -> dict[str, int]:
    return dict(Counter(cluster.tservers.values()))


def violations(cluster: ClusterInfo) -> list[str]:
    sizes = sizes_of(cluster)
    return [
        t.tablet_id
        for t in cluster.tablets
        if not check_placement(t.replication_factor, Counter(location(u) for u in t.replicas), sizes).met
    ]


def replay_checking_each_move(cluster: ClusterInfo, moves: list[Move]) -> ClusterInfo:
    """Apply the moves one at a time; none may turn a complying tablet into a violating one."""
    for move in moves:
        before = set(violations(cluster))
        cluster = apply(cluster, [move])
        assert set(violations(cluster)) <= before, move
    return cluster


def skew_within(cluster: ClusterInfo, loc: str, key: tuple[str, bytes] | None = None) -> int:
    counts = Counter({u: 0 for u, where in cluster.tservers.items() if where == loc})
    for t in cluster.tablets:
        if key is None or (t.table_id, t.range_key) == key or (key[1] == b"*" and t.table_id == key[0]):
            counts.update(u for u in t.replicas if cluster.tservers[u] == loc)
    return max(counts.values()) - min(counts.values())


def test_100_2_2_makes_no_move_across_locations_and_balances_inside_them() -> None:
    # 200 tablets of RF 3, one replica per location, piled onto a few servers of each location.
    tserver_map = servers([100, 2, 2])
    rng = random.Random(7)
    tablets = [
        TabletInfo(f"t{k}", f"table{k % 4}", b"", 3, (f"L0-{rng.randrange(5)}", f"L1-{k % 2}", "L2-0"))
        for k in range(200)
    ]
    cluster = ClusterInfo(tserver_map, tablets)
    assert violations(cluster) == []
    plan = plan_moves(cluster, random.Random(1), RebalanceOptions(enable_range_rebalancing=False))
    # Every move between locations would put two replicas of a tablet in one: none is made.
    assert all(location(m.from_uuid) == location(m.to_uuid) for m in plan.moves)
    after = replay_checking_each_move(cluster, plan.moves)
    assert violations(after) == []
    # Inside each location, every table and the location's totals end within a skew of 1.
    for loc in ("/L0", "/L1", "/L2"):
        assert skew_within(after, loc) <= 1
        for table in range(4):
            assert skew_within(after, loc, (f"table{table}", b"*")) <= 1
    # The small locations carry T/2 per server: the water-fill optimum, not an even spread.
    per_server = Counter(u for t in after.tablets for u in t.replicas)
    assert per_server["L1-0"] == per_server["L1-1"] == per_server["L2-0"] == per_server["L2-1"] == 100
    assert plan_moves(after, random.Random(2), RebalanceOptions(enable_range_rebalancing=False)).moves == []


def test_100_2_2_from_a_violating_random_layout_is_fixed_then_never_broken() -> None:
    tserver_map = servers([100, 2, 2])
    names = sorted(tserver_map)
    rng = random.Random(3)
    tablets = [TabletInfo(f"t{k}", f"table{k % 5}", b"", 3, tuple(rng.sample(names, 3))) for k in range(300)]
    cluster = ClusterInfo(tserver_map, tablets)
    assert len(violations(cluster)) > 200  # most tablets land entirely in the big location
    plan = plan_moves(cluster, random.Random(1), RebalanceOptions(enable_range_rebalancing=False))
    after = replay_checking_each_move(cluster, plan.moves)
    assert violations(after) == []
    assert plan.unfixable == []
    assert plan_moves(after, random.Random(2), RebalanceOptions(enable_range_rebalancing=False)).moves == []


def test_when_moves_between_the_most_and_least_loaded_locations_are_illegal_the_next_pair_is_used() -> None:
    # /L0: 1 server, /L1: 2, /L2: 2, /L3: 20.  Twelve tablets sit on L0, L1 and L3, two on L1, L2
    # and L3.  Per-server loads: L0 12, L1 7, L2 1, L3 0.7.  Moving from L0 to L3 (the extreme
    # pair) is illegal for every tablet (each already has its replica in L3), so L0 -> L2 is used.
    tserver_map = servers([1, 2, 2, 20])
    tablets = [TabletInfo(f"a{k}", "table", b"", 3, ("L0-0", f"L1-{k % 2}", f"L3-{k}")) for k in range(12)]
    tablets += [TabletInfo(f"b{k}", "table", b"", 3, (f"L1-{k}", f"L2-{k}", f"L3-{12 + k}")) for k in range(2)]
    cluster = ClusterInfo(tserver_map, tablets)
    plan = plan_moves(cluster, random.Random(1), RebalanceOptions(enable_range_rebalancing=False))
    across = [m for m in plan.moves if m.phase == "cross-location"]
    assert across, plan.moves
    assert all(location(m.to_uuid) != "/L3" for m in across)
    assert any(location(m.from_uuid) == "/L0" and location(m.to_uuid) == "/L2" for m in across)
    after = replay_checking_each_move(cluster, plan.moves)
    assert violations(after) == []
    assert plan_moves(after, random.Random(2), RebalanceOptions(enable_range_rebalancing=False)).moves == []


def test_when_every_pair_is_illegal_nothing_moves_across_locations() -> None:
    # One server per location and RF 3 over three locations: each tablet fills every location.
    tserver_map = servers([1, 1, 1])
    tablets = [TabletInfo(f"t{k}", "table", b"", 3, ("L0-0", "L1-0", "L2-0")) for k in range(10)]
    plan = plan_moves(ClusterInfo(tserver_map, tablets), random.Random(1))
    assert plan.moves == []
    assert plan.unfixable == []


def test_range_rebalancing_balances_each_range_within_each_location() -> None:
    # Three locations of three servers; four ranges of one table, every replica of a range on
    # the same server of each location (a per-range hotspot with an even per-table spread).
    tserver_map = servers([3, 3, 3])
    tablets = [
        TabletInfo(f"r{r}-{b}", "table", bytes([r]), 3, tuple(f"L{loc}-{r % 3}" for loc in range(3)))
        for r in range(4)
        for b in range(6)
    ]
    cluster = ClusterInfo(tserver_map, tablets)
    by_table = plan_moves(cluster, random.Random(1), RebalanceOptions(enable_range_rebalancing=False))
    table_balanced = apply(cluster, by_table.moves)
    worst_range = max(
        skew_within(table_balanced, f"/L{loc}", ("table", bytes([r]))) for loc in range(3) for r in range(4)
    )
    assert worst_range > 1  # balancing tables alone leaves ranges piled up
    by_range = plan_moves(cluster, random.Random(1), RebalanceOptions(enable_range_rebalancing=True))
    assert all(location(m.from_uuid) == location(m.to_uuid) for m in by_range.moves)
    after = replay_checking_each_move(cluster, by_range.moves)
    for loc in range(3):
        for r in range(4):
            assert skew_within(after, f"/L{loc}", ("table", bytes([r]))) <= 1
        assert skew_within(after, f"/L{loc}", ("table", b"*")) <= 1
    assert plan_moves(after, random.Random(2), RebalanceOptions(enable_range_rebalancing=True)).moves == []


def test_an_even_replication_factor_over_two_locations_is_split_evenly() -> None:
    # RF 4 with three replicas in /L0: the fixer moves one to /L1 (2 + 2, durable through the
    # loss of either location).  RF 2 with both in one location: one moves.
    tserver_map = servers([3, 3])
    tablets = [
        TabletInfo("four", "table", b"", 4, ("L0-0", "L0-1", "L0-2", "L1-0"), leader="L0-0"),
        TabletInfo("two", "table", b"", 2, ("L0-0", "L0-1"), leader="L0-0"),
    ]
    cluster = ClusterInfo(tserver_map, tablets)
    assert sorted(violations(cluster)) == ["four", "two"]
    plan = plan_moves(cluster, random.Random(1))
    policy = [m for m in plan.moves if m.phase == "policy"]
    assert sorted(m.tablet_id for m in policy) == ["four", "two"]
    assert all(m.from_uuid != "L0-0" for m in policy)  # the leader stays
    after = replay_checking_each_move(cluster, plan.moves)
    assert violations(after) == []
    shapes = {t.tablet_id: sorted(Counter(location(u) for u in t.replicas).values()) for t in after.tablets}
    assert shapes == {"four": [2, 2], "two": [1, 1]}
    assert plan_moves(after, random.Random(2)).moves == []


def test_an_even_replication_factor_over_three_locations_may_hold_half_in_one() -> None:
    # RF 4 as 2 + 2 + 0 over three locations: no location holds a majority, so it complies.
    tserver_map = servers([2, 2, 2])
    tablets = [TabletInfo("four", "table", b"", 4, ("L0-0", "L0-1", "L1-0", "L1-1"))]
    cluster = ClusterInfo(tserver_map, tablets)
    assert violations(cluster) == []
    assert [m for m in plan_moves(cluster, random.Random(1)).moves if m.phase == "policy"] == []


def test_range_mode_fills_a_new_empty_location_though_no_single_range_exceeds_the_threshold() -> None:
    # Three locations of three servers hold 2 tables x 4 ranges x 3 tablets, one replica per
    # location; a fourth location of three servers is empty.  Each range's load differs by
    # exactly 1.0 (the threshold) between the old locations and the new one, so ranges alone
    # never move; each table as a whole does (3 x 8 = 24 replicas per location, 2 per server).
    tserver_map = servers([3, 3, 3, 3])
    tablets = [
        TabletInfo(f"{t}-{r}-{b}", t, bytes([r]), 3, tuple(f"L{loc}-{b}" for loc in range(3)))
        for t in ("ta", "tb")
        for r in range(4)
        for b in range(3)
    ]
    cluster = ClusterInfo(tserver_map, tablets)
    plan = plan_moves(cluster, random.Random(1), RebalanceOptions(enable_range_rebalancing=True))
    across = [m for m in plan.moves if m.phase == "cross-location"]
    assert across
    assert all(location(m.to_uuid) == "/L3" for m in across)
    after = replay_checking_each_move(cluster, plan.moves)
    for table in ("ta", "tb"):
        # Each table's load per server now differs by at most the threshold between locations.
        loads = Counter(location(u) for t in after.tablets if t.table_id == table for u in t.replicas)
        assert len(loads) == 4
        assert (max(loads.values()) - min(loads.values())) / 3 <= 1.0, loads
    for loc in range(4):
        assert skew_within(after, f"/L{loc}") <= 1
    assert plan_moves(after, random.Random(2), RebalanceOptions(enable_range_rebalancing=True)).moves == []
