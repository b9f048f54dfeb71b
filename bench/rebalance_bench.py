"""The rebalancer: planned moves against the lower bound (pure), and a real cluster balancing under load.

**Pure** (``nyala.placement.plan_moves``, seed 1, no processes): the layouts of
``../shared/reference/placement.md`` (R1-R7, built by ``bench/placement_bench.py``) and two more:
R8, Kudu's (100,2,2) counter-example with every tablet already one per location but piled onto
a few servers of each location (every move between locations is illegal, so the optimum is the
balance inside each location), and R9, a balanced P1 cluster (3 locations x 10 servers) that
gets a fourth, empty location (its bound: the replicas above each location's even share, which
the 1.0 threshold lets the planner stop just short of).  For each: the moves planned, by phase, beside the lower bound
(placement.md section 5; printed where it is known exactly, with the ratio and the 1.05 target),
the skews left (server, table and range skew within each location, worst location; optimal is
at most 1), the location skew beside the water-filling optimum where it applies, the policy
violations before and after, the moves that made a tablet's layout violate the policy when
replayed one by one (must be 0), the moves a second planning on the result finds (must be 0),
and the planning time.

Lower bounds: one move changes one replica by one server, so within one location the moves are
at least ``max(LB(totals), sum over keys of LB(key))`` with ``LB(c) = sum max(0, c_i - t_i)``
against the nearest balanced vector ``t``; a drain needs one move per replica on the drained
servers; a policy repair one per replica above the limit.

**Real** (``--real``; a MiniCluster of real processes with the servers' default timings): three
locations of two tablet servers, one table of ``--tablets`` tablets (RF 3) loaded with
``--rows`` rows; a writer inserts ``--batch``-row batches back to back.  After a baseline of
``--seconds``, three empty tablet servers join in a fourth location and ``nyala cluster
rebalance`` runs (in this process, as the CLI does) until balanced.  Printed: the time to
balance, the moves and moves per minute, and the writer's rows/s during the rebalance beside
its rows/s before it (the reference), plus a check that every acknowledged row is there.

Usage: ``python bench/rebalance_bench.py [--quick] [--real] [--tablets 24] [--rows 100000] [--seconds 10]
[--batch 200] [--json out.json]``.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cluster import PRODUCTION_TIMINGS, load_average, scratch_dir
from bench.placement_bench import rebalance_scenarios, run, scenarios, uuid, water_fill_skew
from nyala.placement import ClusterInfo, Move, RebalanceOptions, TabletInfo, check_placement, plan_moves

TARGET_RATIO = 1.05

# ----------------------------------------------------------------------------- pure


def lb_one(counts: Sequence[int]) -> int:
    """Moves needed to bring one dimension to max - min <= 1 (half the L1 distance)."""
    total, n = sum(counts), len(counts)
    q, r = divmod(total, n)
    targets = [q + 1] * r + [q] * (n - r)
    return sum(max(0, c - t) for c, t in zip(sorted(counts, reverse=True), targets, strict=True))


def lb_within(cluster: ClusterInfo, by_range: bool) -> int:
    """The two-dimensional bound, per location, when no replica needs to change location."""
    total = 0
    servers_of: dict[str, list[str]] = defaultdict(list)
    for server, loc in sorted(cluster.tservers.items()):
        servers_of[loc].append(server)
    for members in servers_of.values():
        totals: Counter[str] = Counter()
        per_key: dict[tuple[str, bytes], Counter[str]] = defaultdict(Counter)
        for tablet in cluster.tablets:
            here = [u for u in tablet.replicas if u in members]
            totals.update(here)
            per_key[(tablet.table_id, tablet.range_key if by_range else b"")].update(here)
        keys = sum(lb_one([c[u] for u in members]) for c in per_key.values())
        total += max(lb_one([totals[u] for u in members]), keys)
    return total


def lb_across_equal(cluster: ClusterInfo) -> int:
    """Moves between locations of equal size: every replica above a location's even share."""
    per_location = Counter(cluster.tservers[u] for t in cluster.tablets for u in t.replicas)
    locations = set(cluster.tservers.values())
    share = sum(per_location.values()) / len(locations)
    return round(sum(max(0.0, per_location[loc] - share) for loc in locations))


@dataclasses.dataclass
class Layout:
    name: str
    cluster: ClusterInfo
    options: RebalanceOptions
    lower_bound: int | None
    optimum: float | None = None  # location skew at the water-filling optimum


def optimum_of(cluster: ClusterInfo) -> float | None:
    """The water-filling optimum of the location skew (placement.md section 5), one RF only."""
    factors = {t.replication_factor for t in cluster.tablets}
    if len(factors) != 1:
        return None
    sizes = Counter(loc for u, loc in cluster.tservers.items() if u not in cluster.draining)
    return water_fill_skew(tuple(sizes.values()), factors.pop(), len(cluster.tablets))


def layouts(quick: bool) -> list[Layout]:
    out = []
    for name, cluster, options, bound in rebalance_scenarios(quick):
        if name.startswith("R5") and quick:
            continue
        if bound is None and name.startswith("R6"):
            bound = sum(1 for t in cluster.tablets for u in t.replicas if u in cluster.draining)
        out.append(Layout(name, cluster, options, bound, optimum_of(cluster)))
    # R8: (100,2,2), one replica per location, piled onto five servers of the big location.
    rng = random.Random(8)
    sizes = (100, 2, 2)
    servers = {uuid(loc, i): f"/dc/loc{loc}" for loc, n in enumerate(sizes) for i in range(n)}
    tablets = [
        TabletInfo(f"t{k}", f"table{k % 4}", b"", 3, (uuid(0, rng.randrange(5)), uuid(1, k % 2), uuid(2, 0)))
        for k in range(400)
    ]
    table_mode = RebalanceOptions(enable_range_rebalancing=False)
    r8 = ClusterInfo(servers, tablets)
    out.append(
        Layout("R8 (100,2,2) piled, compliant", r8, table_mode, lb_within(r8, False), water_fill_skew(sizes, 3, 400))
    )
    # R9: a balanced P1 cluster (3 x 10) and a fourth location of 10 empty servers.
    p1 = run(scenarios(quick)[0], "nyala", 1).layout
    r9_tablets = [TabletInfo(f"t{i}", t, r, rf, s, s[0]) for i, (t, r, rf, s) in enumerate(p1)]
    r9_servers = {uuid(loc, i): f"/dc/loc{loc}" for loc in range(4) for i in range(10)}
    r9 = ClusterInfo(r9_servers, r9_tablets)
    out.append(Layout("R9 P1 + an empty 4th location", r9, RebalanceOptions(), lb_across_equal(r9), 0.0))
    return out


def apply(cluster: ClusterInfo, moves: Sequence[Move]) -> ClusterInfo:
    members = {t.tablet_id: list(t.replicas) for t in cluster.tablets}
    for move in moves:
        replicas = members[move.tablet_id]
        replicas[replicas.index(move.from_uuid)] = move.to_uuid
    tablets = [dataclasses.replace(t, replicas=tuple(members[t.tablet_id])) for t in cluster.tablets]
    return ClusterInfo({u: loc for u, loc in cluster.tservers.items() if u not in cluster.draining}, tablets)


def violating(cluster: ClusterInfo) -> set[str]:
    sizes = Counter(cluster.tservers[u] for u in cluster.tservers if u not in cluster.draining)
    out = set()
    for tablet in cluster.tablets:
        counts = Counter(cluster.tservers[u] for u in tablet.replicas if u not in cluster.draining)
        if not check_placement(tablet.replication_factor, counts, sizes).met:
            out.add(tablet.tablet_id)
    return out


def policy_breaking_moves(cluster: ClusterInfo, moves: Sequence[Move]) -> int:
    """Replay the moves one by one: how many turned a tablet that complied into one that does not."""
    members = {t.tablet_id: list(t.replicas) for t in cluster.tablets}
    rf = {t.tablet_id: t.replication_factor for t in cluster.tablets}
    staying = [u for u in cluster.tservers if u not in cluster.draining]
    sizes = Counter(cluster.tservers[u] for u in staying)

    def met(tablet_id: str) -> bool:
        counts = Counter(cluster.tservers[u] for u in members[tablet_id] if u not in cluster.draining)
        return check_placement(rf[tablet_id], counts, sizes).met

    broken = 0
    for move in moves:
        before = met(move.tablet_id)
        replicas = members[move.tablet_id]
        replicas[replicas.index(move.from_uuid)] = move.to_uuid
        broken += before and not met(move.tablet_id)
    return broken


def skews(cluster: ClusterInfo) -> dict[str, float]:
    servers_of: dict[str, list[str]] = defaultdict(list)
    for server, loc in cluster.tservers.items():
        servers_of[loc].append(server)
    totals: Counter[str] = Counter()
    per_table: dict[str, Counter[str]] = defaultdict(Counter)
    per_range: dict[tuple[str, bytes], Counter[str]] = defaultdict(Counter)
    for tablet in cluster.tablets:
        totals.update(tablet.replicas)
        per_table[tablet.table_id].update(tablet.replicas)
        per_range[(tablet.table_id, tablet.range_key)].update(tablet.replicas)

    def worst(counters: Sequence[Counter[str]]) -> int:
        return max(max(c[u] for u in m) - min(c[u] for u in m) for c in counters for m in servers_of.values())

    loads = [sum(totals[u] for u in m) / len(m) for m in servers_of.values()]
    return {
        "server": worst([totals]),
        "table": worst(list(per_table.values())),
        "range": worst(list(per_range.values())),
        "location": max(loads) - min(loads),
    }


def pure(quick: bool) -> list[dict[str, object]]:
    header = (
        f"{'layout':<32} {'moves':>6} {'LB':>5} {'ratio':>6} {'<=1.05':>6}  {'by phase':<44} "
        f"{'server':>6} {'table':>5} {'range':>5} {'loc skew':>8} {'optimum':>7} {'viol':>9} "
        f"{'bad moves':>9} {'again':>5} {'plan s':>6}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for layout in layouts(quick):
        before = violating(layout.cluster)
        started = time.process_time()
        plan = plan_moves(layout.cluster, random.Random(1), layout.options)
        seconds = time.process_time() - started
        after_cluster = apply(layout.cluster, plan.moves)
        after = skews(after_cluster)
        again = len(plan_moves(after_cluster, random.Random(2), layout.options).moves)
        bad = policy_breaking_moves(layout.cluster, plan.moves)
        ratio = len(plan.moves) / layout.lower_bound if layout.lower_bound else None
        phases = ", ".join(f"{p} {n}" for p, n in Counter(m.phase for m in plan.moves).items())
        optimum = "" if layout.optimum is None else f"{layout.optimum:.2f}"
        bound = "-" if layout.lower_bound is None else str(layout.lower_bound)
        print(
            f"{layout.name:<32} {len(plan.moves):>6} {bound:>5} "
            f"{f'{ratio:.3f}' if ratio is not None else '-':>6} "
            f"{('yes' if ratio <= TARGET_RATIO else 'NO') if ratio is not None else '-':>6}  {phases:<44} "
            f"{after['server']:>6.0f} {after['table']:>5.0f} {after['range']:>5.0f} {after['location']:>8.2f} "
            f"{optimum:>7} {len(before):>4}>{len(violating(after_cluster)):<4} {bad:>9} {again:>5} {seconds:>6.2f}"
        )
        rows.append(
            {
                "layout": layout.name,
                "moves": len(plan.moves),
                "lower_bound": layout.lower_bound,
                "skews_after": after,
                "policy_breaking_moves": bad,
                "replanned_moves": again,
                "plan_s": seconds,
            }
        )
    return rows


# ----------------------------------------------------------------------------- real


class Writer(threading.Thread):
    """Inserts ``batch``-row batches back to back and records when each was acknowledged."""

    def __init__(self, masters: str, table: str, batch: int, first_id: int) -> None:
        super().__init__(daemon=True)
        self.masters, self.table, self.batch, self.next_id = masters, table, batch, first_id
        self.acked: list[tuple[float, int]] = []  # (monotonic time, rows) per acknowledged batch
        self.acked_ids: list[range] = []
        self.failed_rows = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        import nyala

        with nyala.connect(self.masters, timeout_s=60) as client:
            table = client.open_table(self.table)
            while not self.stop_event.is_set():
                ids = range(self.next_id, self.next_id + self.batch)
                self.next_id += self.batch
                try:
                    errors = table.insert([{"id": i, "v": "x" * 92} for i in ids])
                except Exception:  # a write that fails is not acknowledged; count it and go on
                    self.failed_rows += self.batch
                    continue
                self.failed_rows += len(errors)
                if not errors:
                    self.acked.append((time.monotonic(), self.batch))
                    self.acked_ids.append(ids)

    def rate(self, start: float, end: float) -> float:
        rows = sum(n for t, n in self.acked if start <= t < end)
        return rows / (end - start) if end > start else 0.0


def real(tablets: int, rows: int, seconds: float, batch: int) -> dict[str, object]:
    from click.testing import CliRunner

    import nyala
    from nyala.client import Partitioning, schema
    from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
    from nyala.testing.wait import wait_for
    from nyala.tools.cli import main

    options = MiniClusterOptions(num_masters=1, **PRODUCTION_TIMINGS)  # type: ignore[arg-type]
    table_schema = schema([("id", "int64"), ("v", "string")], primary_key="id")
    print(f"\nreal cluster: 3 locations x 2 tablet servers, RF 3, {tablets} tablets, {rows:,} rows")
    with (
        scratch_dir("rebalance-") as root,
        MiniCluster(root, options, locations={"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}) as cluster,
        nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client,
    ):
        wait_for(
            lambda: sum(s.live for s in client.list_tablet_servers()) == 6,
            what="six live tablet servers",
            timeout_s=120,
        )
        client.create_table("bench", table_schema, Partitioning().add_hash_partitions("id", tablets), num_replicas=3)
        table = client.open_table("bench")
        for start in range(0, rows, 5_000):
            assert table.insert([{"id": i, "v": "x" * 92} for i in range(start, min(rows, start + 5_000))]) == []
        writer = Writer(cluster.master_addresses_flag, "bench", batch, rows)
        writer.start()
        time.sleep(1.0)  # warm-up of the writer: the baseline window starts after it
        base_start = time.monotonic()
        time.sleep(seconds)  # a fixed measuring window, not a wait for a condition
        base_end = time.monotonic()
        cluster.add_location("/dc1/rack4", 3)
        wait_for(
            lambda: sum(s.live for s in client.list_tablet_servers()) == 9,
            what="nine live tablet servers",
            timeout_s=120,
        )
        started = time.monotonic()
        result = CliRunner().invoke(main, ["cluster", "rebalance", cluster.master_addresses_flag, "--format", "json"])
        ended = time.monotonic()
        writer.stop_event.set()
        writer.join(timeout=120)
        if result.exit_code != 0:
            print(result.output)
            raise SystemExit(f"the rebalance failed with exit code {result.exit_code}")
        out = json.loads(result.stdout)
        moves = out["result"]["done"]
        found = set(client.open_table("bench").to_arrow().column("id").to_pylist())
        acked = {i for ids in writer.acked_ids for i in ids}
        lost = len(acked - found)
    elapsed = ended - started
    before, during = writer.rate(base_start, base_end), writer.rate(started, ended)
    figures = {
        "seconds_to_balance": elapsed,
        "moves": moves,
        "failed_moves": out["result"]["failed"],
        "reason": out["result"]["reason"],
        "moves_per_minute": moves / elapsed * 60 if elapsed else 0.0,
        "rows_per_s_before": before,
        "rows_per_s_during": during,
        "acknowledged_rows_lost": lost,
        "rows_failed": writer.failed_rows,
    }
    print(f"  time to balance after adding 3 empty servers: {elapsed:.1f} s ({out['result']['reason']})")
    print(f"  moves: {moves} done, {out['result']['failed']} failed; {figures['moves_per_minute']:.1f} moves/minute")
    print(
        f"  writes ({batch}-row batches): {during:,.0f} rows/s during the rebalance against {before:,.0f} rows/s "
        f"before it (reference), ratio {during / before if before else float('nan'):.2f}"
    )
    print(f"  acknowledged rows lost: {lost}; rows not acknowledged (errors, retried by nobody): {writer.failed_rows}")
    print(f"  {load_average()}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller layouts, no R5")
    parser.add_argument("--real", action="store_true", help="also run the real-process part")
    parser.add_argument("--tablets", type=int, default=24)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args()
    document: dict[str, object] = {"pure": pure(args.quick)}
    if args.real:
        document["real"] = real(args.tablets, args.rows, args.seconds, args.batch)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(document, out, indent=1, default=str)


if __name__ == "__main__":
    main()
