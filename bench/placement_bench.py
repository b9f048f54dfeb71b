"""Replica placement quality and speed: random, power of two choices, Kudu's range-aware scan, Nyala.

The scenarios P1-P7 are defined below (:func:`scenarios`, :func:`edge_cases`); each runs
over seeds 1..5 (``--seeds``) with everything derived from the seed, so a run is reproducible.
Time is a logical clock: the master creates 1,000 tablets per second, and every second a
heartbeat reports the replicas placed at least a second before (they stay pending too, and
decay, as in Kudu).  The "batch" variant of P1 creates one table per instant with no
heartbeat at all, so only pending replicas tell the placements apart.

Strategies, all driving the same ``ClusterState``:

- ``random``: the replication factor's worth of distinct live servers, uniformly, ignoring locations;
- ``p2c``: Kudu's location choice, then the power of two choices on total load (Kudu before 1.17);
- ``kudu-range``: Kudu's location choice (reported replicas only), then a full scan of the
  location for the lowest (range, table, total) load (Kudu 1.17+);
- ``nyala``: Nyala's location choice (pending replicas count too) and indexed ranking.

P4 also places one table of 33k tablets over 40 ranges on 10 x 100 servers (a large
CreateTable), whose speed is printed once more against the 100,000 placements/s target.

Quality, per scenario, median over seeds (worst in brackets): per-server skew (max - min of
replicas per server inside a location, worst location), per-table and per-range skew (same,
per table / per (table, range), worst), range hotspot (most replicas of one range on one server,
divided by the best possible ceil(replicas in the location / servers)), policy violations
(Nyala's rule; Kudu's stricter even-RF rule in brackets), and location skew (max - min of
replicas per server across locations) beside the water-filling optimum.  Speed is placements/s
of CPU time, best of 3 runs; the reference line is a bare power-of-two-choices loop in the
same process, which measures the machine.

The rebalancer section plans moves for layouts R1-R7 (:func:`rebalance_scenarios`) and prints
the moves (by phase) beside the lower bound where one is known, the policy violations before
and after, the skews left, the rounds needed at 5 and 1 concurrent moves per server, and the
planning time.

Usage: ``python bench/placement_bench.py [--seeds 5] [--quick] [--json out.json]``.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Sequence

from nyala.placement import ClusterState, check_placement
from nyala.placement.placer import NYALA, Strategy, place_new_tablet, place_replacement
from nyala.placement.policy import location_limit
from nyala.placement.rebalance import ClusterInfo, Move, RebalanceOptions, TabletInfo, plan_moves
from nyala.placement.reference import KUDU

TABLETS_PER_SECOND = 1000
ONE_TABLE = "P4 10x100, 1 table x 40 ranges"
TARGET_PLACEMENTS_PER_S = 100_000
HEARTBEAT_S = 1.0

# ----------------------------------------------------------------------------- topology


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    sizes: tuple[int, ...]  # servers per location
    tablets: Callable[[], Iterator[tuple[str, bytes, int]]]  # (table, range start key, RF)
    batch: bool = False  # one table per instant, no heartbeats
    preload: tuple[tuple[int, str, bytes, int], ...] = ()  # (server index, table, range, replicas)
    speed: bool = False  # also measure placements/s
    seeds: int | None = None  # override the number of seeds


def grid(tables: int, ranges: int, buckets: int, rf: int, limit: int | None = None):
    def tablets() -> Iterator[tuple[str, bytes, int]]:
        n = 0
        for t in range(tables):
            for r in range(ranges):
                for _ in range(buckets):
                    if limit is not None and n >= limit:
                        return
                    n += 1
                    yield f"table{t}", r.to_bytes(2, "big"), rf

    return tablets


def uuid(location: int, index: int) -> str:
    return f"ts-{location}-{index}"


def build(sizes: Sequence[int], seed: int) -> ClusterState:
    state = ClusterState(random.Random(seed))
    for location, size in enumerate(sizes):
        for index in range(size):
            state.register_tserver(uuid(location, index), f"/dc/loc{location}")
    return state


# ----------------------------------------------------------------------------- strategies


_LIVE: dict[int, tuple[object, int, list[int]]] = {}  # id(location or state) -> (it, generation, live sids)


def _live_sids(state: ClusterState, key: object, sids: Callable[[], list[int]]) -> list[int]:
    cached = _LIVE.get(id(key))
    if cached is None or cached[0] is not key or cached[1] != state.gen:
        cached = _LIVE[id(key)] = (key, state.gen, sids())
    return cached[2]


def p2c_choose(state, loc, tctx, rctx, excluded):
    """Kudu's PickBetterTabletServer: two random eligible servers, the lower total load wins."""
    live = _live_sids(state, loc, lambda: sorted(loc.live_sids))
    if len(live) - sum(1 for sid in excluded if sid in loc.live_sids) < 2:
        eligible = [sid for sid in live if sid not in excluded]
        return eligible[0] if eligible else None
    rng = state.rng
    while True:  # rejection sampling: excluded servers are at most RF - 1 of them
        a, b = live[rng.randrange(len(live))], live[rng.randrange(len(live))]
        if a != b and a not in excluded and b not in excluded:
            break
    weight = state.clock.weight
    load_a = state.servers[a].reported * weight + state.servers[a].pending
    load_b = state.servers[b].reported * weight + state.servers[b].pending
    if load_a == load_b:
        return a if rng.random() < 0.5 else b
    return a if load_a < load_b else b


P2C = Strategy("p2c", p2c_choose, location_load_counts_pending=False)


def place_random(state: ClusterState, table: str, range_key: bytes, rf: int, now_s: float) -> tuple[str, ...]:
    """Distinct live servers uniformly at random, ignoring locations (recorded as pending all the same)."""
    state.advance_clock(now_s)
    live = _live_sids(state, state, lambda: [s.sid for s in state.servers if s is not None and s.live])
    chosen = [state.servers[sid] for sid in state.rng.sample(live, rf)]
    for server in chosen:
        assert server is not None
        loc = state.locations[server.location]
        state.record_pending(loc, *state.contexts(loc, table, range_key), server)
    return tuple(server.uuid for server in chosen if server is not None)


STRATEGIES: dict[str, Strategy | None] = {"random": None, "p2c": P2C, "kudu-range": KUDU, "nyala": NYALA}


# ----------------------------------------------------------------------------- running


@dataclasses.dataclass
class Run:
    layout: list[tuple[str, bytes, int, tuple[str, ...]]]  # (table, range, RF, servers)
    cpu_s: float
    state: ClusterState


def timer_overhead_s(samples: int = 20_000) -> float:
    """What one empty ``process_time`` bracket measures: ~2.8 us on this VM, about a tenth of
    one tablet's placement, so :func:`run` subtracts it from every timed placement."""
    started = time.process_time()
    for _ in range(samples):
        time.process_time()
    return (time.process_time() - started) / samples


TIMER_OVERHEAD_S = timer_overhead_s()


def run(scenario: Scenario, strategy_name: str, seed: int) -> Run:
    state = build(scenario.sizes, seed)
    for server_index, table, range_key, count in scenario.preload:
        target = [s for s in state.servers if s is not None][server_index]
        for _ in range(count):
            state.add_replica(table, range_key, target.uuid)
    strategy = STRATEGIES[strategy_name]
    layout: list[tuple[str, bytes, int, tuple[str, ...]]] = []
    unreported: deque[tuple[float, str, bytes, tuple[str, ...]]] = deque()
    next_heartbeat = HEARTBEAT_S
    now = 0.0
    previous_table = None
    cpu = 0.0
    for table, range_key, rf in scenario.tablets():
        if scenario.batch:
            if previous_table is not None and table != previous_table:
                now += 1.0
            previous_table = table
        else:
            now += 1.0 / TABLETS_PER_SECOND
            while now >= next_heartbeat:
                while unreported and unreported[0][0] <= next_heartbeat - HEARTBEAT_S:
                    _, t, r, servers = unreported.popleft()
                    for server in servers:
                        state.add_replica(t, r, server)
                next_heartbeat += HEARTBEAT_S
        started = time.process_time()
        if strategy is None:
            servers = place_random(state, table, range_key, rf, now)
        else:
            servers = place_new_tablet(state, table, range_key, rf, now_s=now, strategy=strategy).tserver_uuids
        cpu += max(0.0, time.process_time() - started - TIMER_OVERHEAD_S)
        layout.append((table, range_key, rf, servers))
        unreported.append((now, table, range_key, servers))
    return Run(layout, cpu, state)


# ----------------------------------------------------------------------------- metrics


def location_of(name: str) -> int:
    return int(name.split("-")[1])


def metrics(scenario: Scenario, result: Run) -> dict[str, float]:
    sizes = scenario.sizes
    per_server: Counter[str] = Counter()
    per_table: dict[str, Counter[str]] = defaultdict(Counter)
    per_range: dict[tuple[str, bytes], Counter[str]] = defaultdict(Counter)
    all_servers = [uuid(loc, i) for loc, size in enumerate(sizes) for i in range(size)]
    for server_index, table, range_key, count in scenario.preload:
        per_server[all_servers[server_index]] += count
        per_table[table][all_servers[server_index]] += count
        per_range[(table, range_key)][all_servers[server_index]] += count
    violations = kudu_violations = 0
    servers_per_location = {f"/dc/loc{loc}": size for loc, size in enumerate(sizes)}
    for table, range_key, rf, servers in result.layout:
        per_server.update(servers)
        per_table[table].update(servers)
        per_range[(table, range_key)].update(servers)
        counts = Counter(f"/dc/loc{location_of(s)}" for s in servers)
        if not check_placement(rf, counts, servers_per_location).met:
            violations += 1
        if kudu_rule_violated(rf, max(counts.values()), len(sizes)):
            kudu_violations += 1
    by_location = [[s for s in all_servers if location_of(s) == loc] for loc in range(len(sizes))]
    placed_tables = {table for table, *_ in result.layout}  # preloaded tables that got nothing do not count
    placed_ranges = {(table, range_key) for table, range_key, *_ in result.layout}
    hotspot = 0.0
    for key in placed_ranges:
        counts = per_range[key]
        for members in by_location:
            in_location = sum(counts[s] for s in members)
            if in_location:
                best = math.ceil(in_location / len(members))
                hotspot = max(hotspot, max(counts[s] for s in members) / best)
    loads = [sum(per_server[s] for s in members) / len(members) for members in by_location]
    return {
        "server_skew": max(_skew(per_server, members) for members in by_location),
        "table_skew": max(_skew(per_table[t], m) for t in placed_tables for m in by_location),
        "range_skew": max(_skew(per_range[r], m) for r in placed_ranges for m in by_location),
        "hotspot": hotspot,
        "violations": violations,
        "kudu_violations": kudu_violations,
        "location_skew": max(loads) - min(loads),
        "placements_per_s": sum(len(servers) for *_, servers in result.layout) / max(result.cpu_s, 1e-9),
    }


def _skew(counts: Counter[str], members: list[str]) -> int:
    values = [counts[s] for s in members]
    return max(values) - min(values)


def kudu_rule_violated(rf: int, most: int, locations: int) -> bool:
    """Kudu's rebalancer rule: even RF, r/2 in one location; odd RF > 1, a majority (3+ locations)."""
    if locations <= 1 or rf <= 1:
        return False
    return most >= rf // 2 if rf % 2 == 0 else most >= rf // 2 + 1


def water_fill_skew(sizes: Sequence[int], rf: int, tablets: int) -> float:
    """The smallest achievable location skew when every tablet meets the policy (docs/placement.md)."""
    cap = [min(size, location_limit(rf, len(sizes))) for size in sizes]
    if sum(cap) < rf:
        return float("nan")
    low, high = 0.0, float(rf * tablets)
    for _ in range(200):  # bisect lambda: sum_L min(lambda * s_L, m_L * T) = r * T
        mid = (low + high) / 2
        if sum(min(mid * s, m * tablets) for s, m in zip(sizes, cap, strict=True)) >= rf * tablets:
            high = mid
        else:
            low = mid
    loads = [min(high * s, m * tablets) / s for s, m in zip(sizes, cap, strict=True)]
    return max(loads) - min(loads)


# ----------------------------------------------------------------------------- scenarios


def scenarios(quick: bool) -> list[Scenario]:
    p4 = 3_334 if quick else 33_334
    return [
        Scenario("P1 3x10, 20 tables x 10 ranges x 10", (10, 10, 10), grid(20, 10, 10, 3)),
        Scenario("P1 batch (no heartbeat)", (10, 10, 10), grid(20, 10, 10, 3), batch=True),
        Scenario("P2 (100,2,2) RF3", (100, 2, 2), grid(10, 10, 10, 3)),
        Scenario("P3 (100,10,2,2,2) RF3", (100, 10, 2, 2, 2), grid(10, 10, 10, 3)),
        Scenario("P3 (100,10,2,2,2) RF5", (100, 10, 2, 2, 2), grid(10, 10, 10, 5)),
        Scenario("P4 1x1000, 33k tablets", (1000,), grid(100, 10, 34, 3, limit=p4), speed=True, seeds=3),
        Scenario("P4 10x100, 33k tablets", (100,) * 10, grid(100, 10, 34, 3, limit=p4), speed=True, seeds=3),
        # One table of many tablets over 40 ranges: what a large CreateTable asks for.
        Scenario(ONE_TABLE, (100,) * 10, grid(1, 40, 834, 3, limit=p4), speed=True, seeds=3),
        Scenario(
            "P5 (0,0,500,500) RF3",
            (4,),
            grid(1, 1, 1000, 3),
            preload=((2, "t2", (0).to_bytes(2, "big"), 500), (3, "table0", (0).to_bytes(2, "big"), 500)),
        ),
        Scenario("P5 (0,500) RF1", (2,), grid(1, 1, 1000, 1), preload=((1, "other", b"", 500),)),
        Scenario("P6 5 servers, spread", (5,), spread_replicas),
    ]


def spread_replicas() -> Iterator[tuple[str, bytes, int]]:
    """Kudu's create-table-itest TestSpreadReplicas: 4 tables x 4 ranges, 10 buckets for table 1, else 5."""
    for table in range(1, 5):
        for r in range(4):
            for _ in range(10 if table == 1 else 5):
                yield f"table{table}", r.to_bytes(2, "big"), 3


def edge_cases(seed: int) -> list[tuple[str, str]]:
    """P7: odd topologies, and re-replication around a dead server; nothing may raise."""
    rows = []
    cases = [
        ("2 locations RF3", (3, 3), 3),
        ("2 locations RF4", (3, 3), 4),
        ("2 locations RF5", (3, 3), 5),
        ("3 locations RF4", (3, 3, 3), 4),
        ("3 locations RF2", (3, 3, 3), 2),
        ("(5,1,1) RF5: small locations", (5, 1, 1), 5),
        ("1 location RF3", (4,), 3),
    ]
    for name, sizes, rf in cases:
        state = build(sizes, seed)
        verdicts: Counter[str] = Counter()
        shapes: Counter[str] = Counter()
        for k in range(200):
            result = place_new_tablet(state, "t", (k % 10).to_bytes(2, "big"), rf, now_s=k / 1000)
            verdicts[result.policy.verdict.value] += 1
            shape = sorted(Counter(location_of(s) for s in result.tserver_uuids).values(), reverse=True)
            shapes["+".join(map(str, shape))] += 1
        rows.append((name, f"{dict(verdicts)}; layouts {dict(shapes)}"))
    state = build((2, 2, 2), seed)
    members = place_new_tablet(state, "t", b"", 3, now_s=0.0).tserver_uuids
    state.set_tserver_live(members[0], False)
    result = place_replacement(state, "t", b"", 3, members, now_s=1.0)
    rows.append(
        (
            "re-replication, 1 member dead",
            f"{members} -> {result.tserver_uuids}: {result.policy.verdict.value}, "
            f"same location as the dead one: {location_of(result.tserver_uuids[0]) == location_of(members[0])}",
        )
    )
    return rows


# ----------------------------------------------------------------------------- rebalancer


def _tablets_from(layout: list[tuple[str, bytes, int, tuple[str, ...]]]) -> list[TabletInfo]:
    return [TabletInfo(f"t{i}", t, r, rf, servers, servers[0]) for i, (t, r, rf, servers) in enumerate(layout)]


def rebalance_scenarios(quick: bool) -> list[tuple[str, ClusterInfo, RebalanceOptions, int | None]]:
    """(name, snapshot, options, lower bound on moves where one is known)."""
    rng = random.Random(1)
    one = {uuid(0, i): "/dc/loc0" for i in range(4)}
    r1 = [TabletInfo(f"t{i}", "table", b"", 1, (uuid(0, s),)) for i, s in enumerate([0] * 100 + [1] * 400 + [2] * 100)]
    r2 = [TabletInfo(f"r{r}-{i}", "table", bytes([r]), 1, (uuid(0, r),)) for r in range(4) for i in range(8)]
    three = {uuid(loc, i): f"/dc/loc{loc}" for loc in range(3) for i in range(3)}
    r3 = [
        TabletInfo(n, "table", b"", 3, tuple(uuid(loc, i) for i in range(3)), uuid(loc, 0))
        for loc, n in enumerate("XYZ")
    ]
    # R4: a balanced P1 cluster, then ten empty servers join location 0.
    p1 = scenarios(quick)[0]
    r4_servers = {uuid(loc, i): f"/dc/loc{loc}" for loc in range(3) for i in range(10 if loc else 20)}
    r4 = _tablets_from(run(p1, "nyala", 1).layout)
    # R5: 1,000 servers in 10 locations, 100k replicas placed uniformly at random.
    count = 3_334 if quick else 33_334
    r5_servers = {uuid(loc, i): f"/dc/loc{loc}" for loc in range(10) for i in range(100)}
    names = sorted(r5_servers)
    r5 = [TabletInfo(f"t{k}", f"table{k % 100}", bytes([k % 10]), 3, tuple(rng.sample(names, 3))) for k in range(count)]
    # R6: drain one server of a P1 cluster.  R7: (100,2,2) from a random, policy-violating layout.
    r6_servers = {uuid(loc, i): f"/dc/loc{loc}" for loc in range(3) for i in range(10)}
    r7_servers = {uuid(loc, i): f"/dc/loc{loc}" for loc, n in enumerate((100, 2, 2)) for i in range(n)}
    names7 = sorted(r7_servers)
    r7 = [TabletInfo(f"t{k}", f"table{k % 10}", b"", 3, tuple(rng.sample(names7, 3))) for k in range(1000)]
    table_mode = RebalanceOptions(enable_range_rebalancing=False)
    return [
        ("R1 {100,400,100}", ClusterInfo({u: loc for u, loc in one.items() if u != uuid(0, 3)}, r1), table_mode, 200),
        ("R2 4 ranges packed", ClusterInfo(one, r2), RebalanceOptions(), 24),
        ("R3 X/Y/Z one location each", ClusterInfo(three, r3), table_mode, 6),
        ("R4 P1 + 10 empty servers", ClusterInfo(r4_servers, r4), RebalanceOptions(), 1000),
        ("R5 1000 servers, random", ClusterInfo(r5_servers, r5), table_mode, None),
        ("R6 drain one server", ClusterInfo(r6_servers, r4, draining=frozenset({uuid(1, 0)})), table_mode, None),
        ("R7 (100,2,2) random", ClusterInfo(r7_servers, r7), table_mode, None),
    ]


def rounds(moves: list[Move], per_server: int) -> int:
    """Rounds needed if each round moves at most ``per_server`` replicas into or out of a server."""
    busy: dict[tuple[int, str], int] = defaultdict(int)
    after: dict[str, int] = {}
    last = 0
    for move in moves:
        r = after.get(move.tablet_id, 0)
        while busy[(r, move.from_uuid)] >= per_server or busy[(r, move.to_uuid)] >= per_server:
            r += 1
        busy[(r, move.from_uuid)] += 1
        busy[(r, move.to_uuid)] += 1
        after[move.tablet_id] = r + 1
        last = max(last, r + 1)
    return last


def layout_figures(cluster: ClusterInfo, moves: list[Move]) -> dict[str, float]:
    members = {t.tablet_id: list(t.replicas) for t in cluster.tablets}
    for move in moves:
        replicas = members[move.tablet_id]
        replicas[replicas.index(move.from_uuid)] = move.to_uuid
    live = [u for u in cluster.tservers if u not in cluster.draining]
    locations = sorted({cluster.tservers[u] for u in live})
    total: Counter[str] = Counter(dict.fromkeys(live, 0))
    per_key: dict[str, Counter[str]] = defaultdict(Counter)
    violations = 0
    servers = Counter(cluster.tservers[u] for u in live)
    for tablet in cluster.tablets:
        replicas = members[tablet.tablet_id]
        total.update(replicas)
        per_key[tablet.table_id + tablet.range_key.hex()].update(replicas)
        counts = Counter(cluster.tservers[u] for u in replicas)
        violations += not check_placement(tablet.replication_factor, counts, servers).met
    by_loc = [[u for u in live if cluster.tservers[u] == loc] for loc in locations]
    loads = [sum(total[u] for u in members_) / len(members_) for members_ in by_loc]
    return {
        "server_skew": max(_skew(total, m) for m in by_loc),
        "key_skew": max((_skew(c, m) for c in per_key.values() for m in by_loc), default=0),
        "location_skew": max(loads) - min(loads),
        "violations": violations,
    }


def rebalancer_report(quick: bool) -> list[dict[str, object]]:
    print(
        f"\n{'rebalancer scenario':<28} {'moves':>7} {'LB':>5} {'by phase':<48} {'viol before>after':>18} "
        f"{'server':>6} {'key':>4} {'loc skew':>8} {'rounds 5/1':>11} {'plan s':>7}"
    )
    rows = []
    for name, cluster, options, bound in rebalance_scenarios(quick):
        before = layout_figures(cluster, [])
        started = time.process_time()
        plan = plan_moves(cluster, random.Random(1), options)
        seconds = time.process_time() - started
        after = layout_figures(cluster, plan.moves)
        phases = ", ".join(f"{p} {n}" for p, n in Counter(m.phase for m in plan.moves).items())
        again = plan_moves(_replanned(cluster, plan.moves), random.Random(2), options).moves
        print(
            f"{name:<28} {len(plan.moves):>7} {bound if bound is not None else '':>5} {phases:<48} "
            f"{before['violations']:>8.0f} > {after['violations']:<7.0f} {after['server_skew']:>6.0f} "
            f"{after['key_skew']:>4.0f} {after['location_skew']:>8.2f} "
            f"{rounds(plan.moves, 5):>5}/{rounds(plan.moves, 1):<5} {seconds:>7.2f}"
            + ("" if not again else f"  (re-planning found {len(again)} more!)")
        )
        rows.append(
            {"scenario": name, "moves": len(plan.moves), "lower_bound": bound, "after": after, "seconds": seconds}
        )
    return rows


def _replanned(cluster: ClusterInfo, moves: list[Move]) -> ClusterInfo:
    members = {t.tablet_id: list(t.replicas) for t in cluster.tablets}
    for move in moves:
        replicas = members[move.tablet_id]
        replicas[replicas.index(move.from_uuid)] = move.to_uuid
    tablets = [dataclasses.replace(t, replicas=tuple(members[t.tablet_id])) for t in cluster.tablets]
    return ClusterInfo({u: loc for u, loc in cluster.tservers.items() if u not in cluster.draining}, tablets)


# ----------------------------------------------------------------------------- report


def bare_p2c_rate(seconds: float = 0.5) -> float:
    """Placements/s of the simplest possible P2C loop over 1,000 servers: the machine's speed."""
    rng = random.Random(1)
    loads = [0] * 1000
    count = 0
    started = time.process_time()
    while time.process_time() - started < seconds:
        for _ in range(10_000):
            a, b = rng.randrange(1000), rng.randrange(1000)
            if loads[b] < loads[a]:
                a = b
            loads[a] += 1
        count += 10_000
    return count / (time.process_time() - started)


def summarize(values: list[float], integer: bool = True) -> str:
    median = statistics.median(values)
    worst = max(values)
    digits = 0 if integer else 2
    if median == worst:
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} [{worst:.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a tenth of the P4 tablets")
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args()
    reference = bare_p2c_rate()
    print(f"reference: bare power-of-two-choices loop, 1,000 servers: {reference:,.0f} placements/s (CPU)")
    header = (
        f"{'scenario':<36} {'strategy':<10} {'server':>8} {'table':>8} {'range':>8} {'hotspot':>11} "
        f"{'violations':>12} {'loc skew':>13} {'optimum':>8} {'placements/s':>13}"
    )
    print(header)
    print("-" * len(header))
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    parity: list[str] = []
    for scenario in scenarios(args.quick):
        rf = next(scenario.tablets())[2]
        tablets = sum(1 for _ in scenario.tablets())
        optimum = water_fill_skew(scenario.sizes, rf, tablets) if not scenario.preload else float("nan")
        for name in STRATEGIES:
            seeds = range(1, 1 + (scenario.seeds or args.seeds))
            if name == "kudu-range" and scenario.speed:
                seeds = range(1, 2)  # a full scan of 1,000 servers per replica: one seed is slow enough
            figures: dict[str, list[float]] = defaultdict(list)
            for seed in seeds:
                for key, value in metrics(scenario, run(scenario, name, seed)).items():
                    figures[key].append(value)
            if scenario.speed and name != "kudu-range":
                figures["placements_per_s"] = [max(figures["placements_per_s"])]
            results.setdefault(scenario.name, {})[name] = dict(figures)
            if scenario.name.startswith(("P5", "P6")):
                placed = Counter(s for *_, servers in run(scenario, name, 1).layout for s in servers)
                parity.append(f"  {scenario.name:<28} {name:<10} new replicas per server: {sorted(placed.values())}")
            speed = f"{max(figures['placements_per_s']):,.0f}" if scenario.speed else ""
            violations = f"{summarize(figures['violations'])} ({summarize(figures['kudu_violations'])})"
            print(
                f"{scenario.name:<36} {name:<10} {summarize(figures['server_skew']):>8} "
                f"{summarize(figures['table_skew']):>8} {summarize(figures['range_skew']):>8} "
                f"{summarize(figures['hotspot'], integer=False):>11} {violations:>12} "
                f"{summarize(figures['location_skew'], integer=False):>13} "
                f"{'' if math.isnan(optimum) else f'{optimum:.2f}':>8} {speed:>13}"
            )
    one_table = max(results[ONE_TABLE]["nyala"]["placements_per_s"])
    print(
        f"\n{ONE_TABLE}, nyala: {one_table:,.0f} placements/s against the target of "
        f"{TARGET_PLACEMENTS_PER_S:,}/s ({'met' if one_table >= TARGET_PLACEMENTS_PER_S else 'missed'}); "
        f"reference loop {reference:,.0f}/s, ratio {one_table / reference:.3f}"
    )
    print("\nKudu parity (seed 1); Kudu's tests: P5 (0,0,500,500) range-aware 871-881 x3 and 368-378 (ideal 875/375),")
    print("P2C 1000/1000/500/500; P5 (0,500) range-aware 500/500, P2C 750/250; P6 exactly 60 per server")
    print("\n".join(parity))
    print("\nP7 edge cases (nyala, seed 1): verdicts of 200 placements and the replica layouts per location")
    for name, text in edge_cases(1):
        print(f"  {name:<32} {text}")
    rebalancing = rebalancer_report(args.quick)
    if args.json:
        with open(args.json, "w") as out:
            document = {"reference_placements_per_s": reference, "results": results, "rebalancer": rebalancing}
            json.dump(document, out, indent=1, default=str)


if __name__ == "__main__":
    main()
