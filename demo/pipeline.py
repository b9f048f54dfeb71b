"""`make demo`: a data pipeline on Spark over a Nyala cluster that loses a whole location.

1. Start a local cluster: 3 masters and 6 tablet servers in 3 locations (/dc1/rack1 to
   /dc1/rack3, 2 servers each), each its own process on loopback, data under ``--dir``
   (default ./nyala-data/pipeline); and a local[2] SparkSession whose Python workers run
   this interpreter.
2. Create a time-series table from a Spark schema (``nyala.spark.create_table``): key
   (host, metric, ts), hash(host) x range(ts, one range per day), 3 replicas.
3. A PySpark job generates ``--rows`` (5M by default) realistic metric samples -- 48 hosts in
   3 regions, 4 metrics every 10 s with daily cycles, per-host load and noise -- and writes
   them into the table with the ``nyala`` data source (upsert), chunk by chunk.
4. Spark SQL aggregations over a temporary view ``USING nyala``; a selective query shows the
   tablets left after pruning.
5. Kill (SIGKILL) both tablet servers of the location leading the most tablets.
6. The same aggregations again, with fault-tolerant scans: the results must be equal.
7. Healing: the leader master re-replicates every lost replica into the two remaining
   locations (Kudu's 3-4-3: a non-voter is added and copied, promoted, then the dead replica
   evicted).  The demo declares a server failed after ``FAILURE_TIMEOUT_S`` (3 s) of silence,
   not Kudu's 5 minutes, and waits until every tablet has 3 voters again, none on the dead
   servers; it prints how long that took and the bytes copied within and across locations.
8. ``nyala cluster ksck``: every tablet healthy and the dead location reported unreachable.
   Two replicas of a tablet now share a location, but a location with no live tablet server
   does not count for the placement policy (Kudu's rule), so that is no violation yet.
9. The dead location returns: its stale replicas are tombstoned by the master, and ksck now
   flags the tablets crowded into two locations.
10. ``nyala cluster rebalance``: the policy fixer moves one replica of each such tablet back
    (3-4-3 moves) until every tablet has one replica per location again.
11. Stop Spark and the cluster; a summary with rows/s, the healing time and the bytes copied.

Values are multiples of 1/4 so that sums and averages are exact whatever order Spark adds
them in, and the before/after comparison is an honest equality.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table as RichTable

import nyala
from nyala import services
from nyala.client import Client, Partitioning
from nyala.client.info import TabletInfo
from nyala.errors import NyalaError
from nyala.proto import tserver_pb2 as tpb
from nyala.spark import create_table, local_session
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions

console = Console()
LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}
HOSTS = 48
METRICS = ["cpu_pct", "mem_pct", "disk_iops", "net_mbps"]
INTERVAL_S = 10
START = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
CHUNKS = 10
TABLE = "metrics"
#: Seconds of silence after which a tablet leader reports a follower FAILED and the master
#: stops placing replicas on its server: Kudu waits 5 minutes (its defaults), a demo cannot.
FAILURE_TIMEOUT_S = 3
#: How long the demo waits for healing and for tombstones before it reports what is missing.
HEAL_TIMEOUT_S = 120

AGGREGATIONS = {
    "per metric": """
        SELECT metric, count(*) AS samples, avg(value) AS mean, min(value) AS low, max(value) AS high
        FROM m GROUP BY metric ORDER BY metric""",
    "busiest hosts (mean cpu_pct)": """
        SELECT region, host, avg(value) AS mean_cpu, max(value) AS peak_cpu
        FROM m WHERE metric = 'cpu_pct' GROUP BY region, host ORDER BY mean_cpu DESC, host LIMIT 5""",
    "per region and day": """
        SELECT region, to_date(ts) AS day, count(*) AS samples, sum(value) AS total
        FROM m WHERE metric = 'net_mbps' GROUP BY region, to_date(ts) ORDER BY region, day""",
}


def generate(spark: SparkSession, first: int, count: int) -> DataFrame:
    """Samples ``first .. first+count`` of the series: row i is host (i / 4) % 48, metric i % 4."""
    series = HOSTS * len(METRICS)
    start = int(START.timestamp())
    return spark.range(first, first + count, numPartitions=2).selectExpr(
        f"format_string('host-%02d', CAST((id DIV {len(METRICS)}) % {HOSTS} AS INT)) AS host",
        f"element_at(array({', '.join(repr(m) for m in METRICS)}), CAST(id % {len(METRICS)} AS INT) + 1) AS metric",
        f"timestamp_seconds({start} + (id DIV {series}) * {INTERVAL_S}) AS ts",
        f"element_at(array('eu-west', 'us-east', 'ap-south'), CAST((id DIV {len(METRICS)}) % 3 AS INT) + 1) AS region",
        "id",
    ).selectExpr(
        "host", "metric", "ts", "region",
        # A daily cycle, a per-host level and deterministic noise, rounded to quarters; the
        # levels keep the percentages below 100 (at most base x 1.4 x 1.3 + 10).
        "round(4 * ((CASE metric WHEN 'cpu_pct' THEN 35 WHEN 'mem_pct' THEN 45 WHEN 'disk_iops' THEN 400"
        " ELSE 120 END) * (1 + 0.4 * sin(2 * pi() * (unix_seconds(ts) % 86400) / 86400))"
        " * (0.7 + 0.6 * pmod(hash(host), 100) / 100) + pmod(hash(id), 1000) / 100)) / 4 AS value",
    )  # fmt: skip


def days_needed(rows: int) -> int:
    return max(1, math.ceil(rows / (HOSTS * len(METRICS)) * INTERVAL_S / 86_400))


def make_table(spark: SparkSession, master: str, rows: int) -> None:
    partitioning = Partitioning().add_hash_partitions("host", 4).set_range_partition_columns("ts")
    for day in range(days_needed(rows)):
        lower = START + datetime.timedelta(days=day)
        partitioning = partitioning.add_range_partition(lower, lower + datetime.timedelta(days=1))
    schema = generate(spark, 0, 1).schema
    create_table(TABLE, schema, ["host", "metric", "ts"], partitioning, master=master, num_replicas=3)


def write(spark: SparkSession, master: str, rows: int) -> float:
    columns = [TextColumn("[bold]Spark -> Nyala"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"),
               TimeRemainingColumn()]  # fmt: skip
    started = time.perf_counter()
    chunk = max(math.ceil(rows / CHUNKS), 250_000)  # each chunk is a Spark job: not too small
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("write", total=rows)
        for first in range(0, rows, chunk):
            count = min(chunk, rows - first)
            df = generate(spark, first, count)
            df.write.format("nyala").option("nyala.master", master).option("nyala.table", TABLE).mode("append").save()
            progress.update(task, completed=first + count)
    return rows / (time.perf_counter() - started)


def aggregate(spark: SparkSession, master: str) -> tuple[dict[str, list[Row]], float]:
    started = time.perf_counter()
    results = {}
    for name, query in AGGREGATIONS.items():
        create_view(spark, master)  # a fresh view per query: see "Filter pushdown" in docs/spark.md
        results[name] = spark.sql(query).collect()
    return results, time.perf_counter() - started


def create_view(spark: SparkSession, master: str) -> None:
    # Pushdown is opted in: safe here because every query gets a view of its own.
    options = (
        f"`nyala.master` '{master}', `nyala.table` '{TABLE}', `nyala.faultTolerantScan` 'true', `nyala.pushdown` 'true'"
    )
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW m USING nyala OPTIONS ({options})")


def show(results: dict[str, list[Row]], when: str) -> None:
    for name, rows in results.items():
        out = RichTable(title=f"{name} ({when})")
        for column in rows[0].__fields__:
            out.add_column(column, justify="right")
        for row in rows[:8]:
            out.add_row(*(_cell(v) for v in row))
        if len(rows) > 8:
            out.add_row("...", *[""] * (len(rows[0]) - 1))
        console.print(out)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def session() -> SparkSession:
    return local_session("nyala-pipeline-demo", shuffle_partitions=4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="./nyala-data", help="where the demo keeps its data")
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows the Spark job generates")
    args = parser.parse_args()
    root = Path(args.dir) / "pipeline"
    shutil.rmtree(root, ignore_errors=True)
    options = MiniClusterOptions(
        num_masters=3,
        raft_tick_interval_ms=100,
        raft_heartbeat_interval_ms=500,
        heartbeat_interval_ms=1000,
        master_flags=("--tserver-unresponsive-timeout-ms", str(FAILURE_TIMEOUT_S * 1000)),
        tserver_flags=("--follower-unavailable-considered-failed-sec", str(FAILURE_TIMEOUT_S)),
    )
    console.rule("[bold]1. a local cluster (3 masters, 6 tablet servers in 3 locations) and Spark local[2]")
    with MiniCluster(root, options, locations=LOCATIONS) as cluster:
        console.print(f"masters {cluster.master_addresses_flag}")
        for rpc_address, url in cluster.urls().items():
            console.print(f"  web {rpc_address:<18} {url}")
        for location in cluster.locations:
            console.print(
                f"tablet servers in {location}: {', '.join(str(t.address) for t in cluster.tservers_in(location))}"
            )
        spark = session()
        try:
            summary = run_pipeline(cluster, spark, args.rows)
        finally:
            spark.stop()
    console.rule("[bold]11. Spark and the cluster stopped")
    console.print(summary)


def run_pipeline(cluster: MiniCluster, spark: SparkSession, rows: int) -> str:
    master = cluster.master_addresses_flag
    console.rule("[bold]2. a table from a Spark schema: hash(host) x range(ts by day), 3 replicas")
    make_table(spark, master, rows)
    with nyala.connect(master) as client:
        tablets = client.open_table(TABLE).tablets()
    spread = {layout(t) for t in tablets}
    console.print(f"table {TABLE!r}: {len(tablets)} tablets; replicas per location: {', '.join(spread)}")

    console.rule(f"[bold]3. a PySpark job writes {rows:,} generated samples")
    write_rate = write(spark, master, rows)
    console.print(f"wrote {rows:,} rows at {write_rate:,.0f} rows/s (upsert, RF 3, every write fsynced)")

    console.rule("[bold]4. Spark SQL over CREATE TEMPORARY VIEW m USING nyala")
    before, before_s = aggregate(spark, master)
    show(before, "before the failure")
    read_rate = rows * len(AGGREGATIONS) / before_s
    last = days_needed(rows) - 1
    day2, day3 = (START + datetime.timedelta(days=d) for d in (min(1, last), min(1, last) + 1))
    create_view(spark, master)
    selective = spark.sql(
        f"SELECT * FROM m WHERE host = 'host-07' AND ts >= '{day2:%Y-%m-%d}' AND ts < '{day3:%Y-%m-%d}'"
    )
    console.print(
        f"{len(AGGREGATIONS)} aggregations over {rows:,} rows in {before_s:.1f} s ({read_rate:,.0f} rows/s scanned); "
        f"host = 'host-07' on day 2 reads {selective.rdd.getNumPartitions()} of {len(tablets)} tablets "
        f"and finds {selective.count():,} rows"
    )

    console.rule("[bold]5. kill -9 both tablet servers of one location")
    with nyala.connect(master) as client:
        copied_before = copy_counters(client, cluster.tservers)
    victim = kill_busiest_location(cluster, master)
    killed_at = time.perf_counter()
    dead = {s.uuid for s in cluster.tservers_in(victim)}

    console.rule("[bold]6. the same aggregations again")
    after, after_s = aggregate(spark, master)
    show(after, f"after losing {victim}")
    changed = [name for name in AGGREGATIONS if after[name] != before[name]]
    if changed:
        raise SystemExit(f"the aggregations {changed} changed after the failure")
    console.print(f"[bold green]equal results after losing {victim} ({after_s:.1f} s against {before_s:.1f} s)")

    console.rule(f"[bold]7. healing: the master re-replicates the replicas lost with {victim}")
    live = [s for s in cluster.tservers if s.uuid not in dead]
    with nyala.connect(master) as client:
        heal_s, unhealed = wait_healed(client, dead, killed_at)
        tablets = client.open_table(TABLE).tablets()
        within, across, copies = (a - b for a, b in zip(copy_counters(client, live), copied_before, strict=True))
    healed_spread = Counter(layout(t) for t in tablets)
    shapes = ", ".join(f"{shape} ({n} tablets)" for shape, n in sorted(healed_spread.items()))
    if unhealed:
        console.print(
            f"[bold red]{len(unhealed)} of {len(tablets)} tablets still list a dead replica {heal_s:.0f} s after "
            f"the kill:[/] {', '.join(t[:8] for t in sorted(unhealed))}"
        )
    console.print(
        f"[bold green]{len(tablets) - len(unhealed)} of {len(tablets)} tablets have 3 voters again, "
        f"the last {heal_s:.1f} s after the kill[/] "
        f"(failure timeout {FAILURE_TIMEOUT_S} s); {copies} tablet copies: "
        f"{within / 1e6:,.1f} MB within locations, {across / 1e6:,.1f} MB across locations; "
        f"replicas per location now: {shapes}"
    )

    console.rule("[bold]8. nyala cluster ksck")
    health = f"{len(unhealed)} tablets still under-replicated" if unhealed else "the tablets are healthy"
    ksck(master, f"ksck exit status {{}}: {health}; {victim}'s servers are reported unreachable; while "
         f"{victim} has no live server it does not count for the placement policy")  # fmt: skip

    console.rule(f"[bold]9. {victim} returns: its stale replicas are tombstoned")
    returned_at = time.perf_counter()
    for server in cluster.tservers_in(victim):
        cluster.restart(server)
    healed_ids = {t.tablet_id for t in tablets} - unhealed  # a dead replica still a member rejoins instead
    tombstoned = wait_tombstoned(cluster, master, victim, healed_ids)
    console.print(
        f"{victim}'s servers are back; the master tombstoned their {tombstoned} stale replicas "
        f"{time.perf_counter() - returned_at:.1f} s after the restart"
    )
    with nyala.connect(master) as client:
        crowded = sum(layout(t) != "1+1+1" for t in client.open_table(TABLE).tablets())
    console.print(f"{crowded} tablets have two replicas in one location: with {victim} back, each breaks the policy")

    console.rule("[bold]10. nyala cluster rebalance: the policy fixer gives every location its replica back")
    fixed_s, fixed_spread = rebalance(master)
    console.print(
        f"[bold green]after {fixed_s:.1f} s every tablet has one replica per location again[/]"
        if fixed_spread == "1+1+1 everywhere"
        else f"[bold red]after {fixed_s:.1f} s the replicas per location are {fixed_spread}"
    )
    return (
        f"[bold]summary:[/] {rows:,} rows generated by Spark and written at {write_rate:,.0f} rows/s; "
        f"{len(AGGREGATIONS)} Spark SQL aggregations scanned {read_rate:,.0f} rows/s; "
        f"after losing {victim} the same results in {after_s:.1f} s; "
        + (f"{len(unhealed)} tablets NOT healed after {heal_s:.0f} s; " if unhealed else f"healed in {heal_s:.1f} s ")
        + f"({FAILURE_TIMEOUT_S} s of it the failure timeout) by copying {within / 1e6:,.1f} MB within and "
        f"{across / 1e6:,.1f} MB across locations; the policy restored by the rebalancer in {fixed_s:.1f} s"
    )


def rebalance(master: str) -> tuple[float, str]:
    """Run ``nyala cluster rebalance`` (the policy fixer and the balancing phases), print what it
    said, and return its duration and the replicas per location it left."""
    console.print(f"$ nyala cluster rebalance {master}")
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "nyala", "cluster", "rebalance", master],
        capture_output=True, text=True, timeout=HEAL_TIMEOUT_S, env={**os.environ, "COLUMNS": str(console.width)},
    )  # fmt: skip
    took = time.perf_counter() - started
    lines = (result.stdout or result.stderr).strip().splitlines()
    # What it did (one line: rounds, moves done and failed), then the layout it left.
    outcome = [line for line in lines if " rounds in " in line]
    console.print("\n".join([*outcome, *lines[-12:]]), markup=False, highlight=False)
    with nyala.connect(master) as client:
        spread = Counter(layout(t) for t in client.open_table(TABLE).tablets())
    if set(spread) == {"1+1+1"}:
        return took, "1+1+1 everywhere"
    return took, ", ".join(f"{shape} ({n} tablets)" for shape, n in sorted(spread.items()))


def ksck(master: str, note: str) -> None:
    console.print(f"$ nyala cluster ksck {master}")
    result = subprocess.run(
        [sys.executable, "-m", "nyala", "cluster", "ksck", master],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": str(console.width)},
    )  # fmt: skip
    report, _, per_tablet = (result.stdout or result.stderr).partition("\nTablets")
    console.print(report.rstrip(), markup=False, highlight=False)
    # The per-tablet table is long; the problems and warnings (placement-policy violations) after it are not.
    first = re.search(r"^\d+ (?:problems?|warnings?)\b", per_tablet, re.M)
    detail, findings = (per_tablet[: first.start()], per_tablet[first.start() :]) if first else (per_tablet, "")
    if per_tablet:
        console.print(f"(then {detail.count(chr(10))} lines of per-tablet detail: run the command to see them)")
    if findings:
        console.print(findings.strip(), markup=False, highlight=False)
    console.print(f"({note.format(result.returncode)})")


def layout(tablet: TabletInfo) -> str:
    """Replicas per location, e.g. 1+1+1."""
    return "+".join(str(n) for n in sorted(Counter(r.location for r in tablet.replicas).values()))


def copy_counters(client: Client, servers: list[ClusterServer]) -> tuple[int, int, int]:
    """Bytes the tablet servers received by tablet copy, within and across locations, and the
    copies they completed."""
    within = across = completed = 0
    for server in servers:
        request = tpb.GetTabletServerStatusRequestPB()
        status = client.run(client.aio.messenger.call(server.address, services.GET_TABLET_SERVER_STATUS, request))
        within += status.tablet_copy_bytes_within_location
        across += status.tablet_copy_bytes_across_locations
        completed += status.tablet_copies_completed
    return within, across, completed


def wait_healed(client: Client, dead: set[str], killed_at: float) -> tuple[float, set[str]]:
    """Seconds from the kill until every tablet has 3 voters, none on ``dead``, and no other
    member (a non-voter still being copied), as the leader master sees it; at most
    ``HEAL_TIMEOUT_S``, then also the tablets that are not whole yet."""
    unhealed: set[str] = set()
    with Progress(TextColumn("[bold]tablets whole again"), BarColumn(), MofNCompleteColumn(), console=console) as bar:
        task = bar.add_task("heal", total=None)
        while time.perf_counter() - killed_at < HEAL_TIMEOUT_S:
            try:
                tablets = client.open_table(TABLE).tablets()
            except NyalaError:
                tablets = []
            unhealed = {
                t.tablet_id
                for t in tablets
                if len(t.replicas) != 3
                or any(r.role not in ("LEADER", "FOLLOWER") for r in t.replicas)
                or dead & {r.uuid for r in t.replicas}
            }
            bar.update(task, total=len(tablets) or None, completed=len(tablets) - len(unhealed))
            if tablets and not unhealed:
                break
            time.sleep(0.2)
    return time.perf_counter() - killed_at, unhealed


def wait_tombstoned(cluster: MiniCluster, master: str, location: str, tablet_ids: set[str]) -> int:
    """Wait until every replica of ``tablet_ids`` on the servers of ``location`` is a tombstone."""
    deadline = time.perf_counter() + HEAL_TIMEOUT_S
    with nyala.connect(master) as client:
        while time.perf_counter() < deadline:
            states = []
            for server in cluster.tservers_in(location):
                try:
                    call = client.aio.messenger.call(server.address, services.LIST_TABLETS, tpb.ListTabletsRequestPB())
                    listed = client.run(call)
                except NyalaError:
                    states = [tpb.RUNNING]  # not answering yet: look again
                    break
                states += [t.state for t in listed.tablets if t.tablet_id in tablet_ids]
            if all(state == tpb.TOMBSTONED for state in states):
                return len(states)
            time.sleep(0.2)
    console.print(f"[bold red]the stale replicas of {location} were not all tombstoned in {HEAL_TIMEOUT_S} s")
    return sum(state == tpb.TOMBSTONED for state in states)


def kill_busiest_location(cluster: MiniCluster, master: str) -> str:
    with nyala.connect(master) as client:
        leaders = [t.leader.location for t in client.open_table(TABLE).tablets() if t.leader is not None]
    victim = max(cluster.locations, key=leaders.count)
    for server in cluster.tservers_in(victim):
        cluster.kill(server)
    console.print(f"killed both tablet servers of {victim}, which led {leaders.count(victim)} tablets")
    return victim


if __name__ == "__main__":
    main()
