"""`make demo`: a Nyala cluster on this machine, end to end.

1. Start a local cluster: 3 masters and 6 tablet servers in 3 locations (/dc1/rack1 to
   /dc1/rack3, 2 servers each), each its own process on loopback, data under ``--dir``
   (default ./nyala-data/demo).  Placement puts one replica of every tablet in each location.
2. Create a table of time-series metrics, hash partitioned by host and range partitioned by
   day, replicated 3 ways.
3. Load 1M rows through the Python client (a background-flushing session), with a progress bar.
4. Scan them back to Arrow and aggregate per host.
5. Kill every tablet server of one location with SIGKILL (a whole rack lost): reads and
   writes go on, no acknowledged row is lost.
6. Stop the cluster and summarise.

The Spark issue turns this into the pipeline demo.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table as RichTable

import nyala
from nyala.client import FlushMode, Partitioning, schema
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions

console = Console()
HOSTS = [f"host-{i:02d}" for i in range(24)]
METRICS = ["cpu", "mem", "disk", "net"]
START = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
DAYS = 3
BATCH = 10_000
LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}


def metrics_batch(first: int, n: int) -> pa.Table:
    """Rows ``first .. first+n`` of a deterministic time series: every host reports every metric each second."""
    i = pa.array(range(first, first + n), pa.int64())
    per_second = len(HOSTS) * len(METRICS)
    seconds = pc.divide(i, per_second)
    host = pc.take(pa.array(HOSTS), pc.divide(pc.remainder(i, per_second), len(METRICS)))
    metric = pc.take(pa.array(METRICS), pc.remainder(i, len(METRICS)))
    ts = pc.cast(pc.add(pc.multiply(seconds, 1_000_000), int(START.timestamp() * 1_000_000)), pa.timestamp("us", "UTC"))
    # A value that depends on the row alone, so aggregations are the same in every run.
    value = pc.divide(pc.cast(pc.remainder(pc.multiply(i, 7919), 10_000), pa.float64()), 100.0)
    return pa.table({"host": host, "metric": metric, "ts": ts, "value": value})


def rows_in_every_tablet() -> pa.Table:
    """Rows for every day, host and metric at half-second offsets: they touch every tablet and no
    loaded row (loaded rows fall on whole seconds)."""
    rows = [
        {"host": h, "metric": m, "ts": START + datetime.timedelta(days=d, seconds=s + 0.5), "value": 1.0}
        for d in range(DAYS) for h in HOSTS for m in METRICS for s in range(3)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows)


def create_table(client: nyala.client.Client) -> nyala.client.Table:
    metrics = schema(
        [("host", "string"), ("metric", "string"), ("ts", "timestamp"), ("value", "double")],
        primary_key=["host", "metric", "ts"],
    )
    partitioning = Partitioning().add_hash_partitions("host", 3).set_range_partition_columns("ts")
    for day in range(DAYS):
        lower = START + datetime.timedelta(days=day)
        partitioning = partitioning.add_range_partition(lower, lower + datetime.timedelta(days=1))
    return client.create_table("metrics", metrics, partitioning, num_replicas=3)


def load(table: nyala.client.Table, rows: int) -> float:
    started = time.perf_counter()
    columns = [
        TextColumn("[bold]loading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=console) as progress, table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND) as session:
        task = progress.add_task("load", total=rows)
        for first in range(0, rows, BATCH):
            session.insert(metrics_batch(first, min(BATCH, rows - first)))
            progress.update(task, completed=first + BATCH)
        errors = session.flush()
        progress.update(task, completed=rows)
    if errors:
        raise SystemExit(f"{len(errors)} rows failed, first: {errors[0].error}")
    return rows / (time.perf_counter() - started)


def aggregate(table: nyala.client.Table) -> tuple[pa.Table, float]:
    started = time.perf_counter()
    data = table.scanner(["host", "value"]).to_arrow()
    elapsed = time.perf_counter() - started
    per_host = data.group_by("host").aggregate([("value", "count"), ("value", "mean"), ("value", "max")])
    return per_host.sort_by("host"), data.num_rows / elapsed


def show(per_host: pa.Table, title: str) -> None:
    out = RichTable(title=title)
    for name in ("host", "rows", "mean", "max"):
        out.add_column(name, justify="right")
    for row in per_host.slice(0, 6).to_pylist():
        out.add_row(row["host"], f"{row['value_count']:,}", f"{row['value_mean']:.3f}", f"{row['value_max']:.2f}")
    out.add_row("...", f"({per_host.num_rows} hosts)", "", "")
    console.print(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="./nyala-data", help="where the demo keeps its data")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows to load")
    args = parser.parse_args()
    root = Path(args.dir) / "demo"
    shutil.rmtree(root, ignore_errors=True)
    options = MiniClusterOptions(
        num_masters=3,
        raft_tick_interval_ms=100,
        raft_heartbeat_interval_ms=500,
        heartbeat_interval_ms=1000,
    )
    console.rule("[bold]1. a local cluster: 3 masters, 6 tablet servers in 3 locations")
    with MiniCluster(root, options, locations=LOCATIONS) as cluster:
        console.print(f"masters {cluster.master_addresses_flag}")
        for location in cluster.locations:
            servers = ", ".join(str(t.address) for t in cluster.tservers_in(location))
            console.print(f"tablet servers in {location}: {servers}")
        with nyala.connect(cluster.master_addresses_flag) as client:
            run_demo(cluster, client, args.rows)
    console.rule("[bold]6. cluster stopped")


def run_demo(cluster: MiniCluster, client: nyala.client.Client, rows: int) -> None:
    console.rule("[bold]2. a table: hash(host) x range(ts by day), 3 replicas")
    table = create_table(client)
    spread = {
        "+".join(str(n) for n in sorted(Counter(r.location for r in t.replicas).values())) for t in table.tablets()
    }
    console.print(
        f"table 'metrics': {len(table.tablets())} tablets, 3 replicas each; replicas per location: {', '.join(spread)}"
    )

    console.rule(f"[bold]3. load {rows:,} rows")
    load_rate = load(table, rows)
    console.print(f"loaded {rows:,} rows at {load_rate:,.0f} rows/s (RF 3, every write fsynced)")

    console.rule("[bold]4. scan and aggregate")
    before, scan_rate = aggregate(table)
    show(before, "per host, before the failure")
    console.print(f"scanned {rows:,} rows at {scan_rate:,.0f} rows/s")

    console.rule("[bold]5. kill -9 every tablet server of one location")
    leaders = [t.leader.location for t in table.tablets() if t.leader is not None]
    victim = max(cluster.locations, key=leaders.count)
    for server in cluster.tservers_in(victim):
        cluster.kill(server)
    led = leaders.count(victim)
    console.print(f"killed both tablet servers of {victim}, which led {led} tablets; they elect new leaders")
    started = time.perf_counter()
    extra = rows_in_every_tablet()
    errors = table.insert(extra)
    took = time.perf_counter() - started
    console.print(
        f"wrote {extra.num_rows} rows into every tablet {took:.2f} s after the kill, {len(errors)} row errors"
    )
    after, _ = aggregate(table)
    total = sum(after.column("value_count").to_pylist())
    console.print(f"rows readable after the kill: {total:,} (expected {rows + extra.num_rows:,})")
    show(after, "per host, after the failure")
    if errors or total != rows + extra.num_rows:
        raise SystemExit("reads or writes did not go on after losing a location")
    console.print(f"[bold green]no acknowledged row lost; load {load_rate:,.0f} rows/s, scan {scan_rate:,.0f} rows/s")


if __name__ == "__main__":
    main()
