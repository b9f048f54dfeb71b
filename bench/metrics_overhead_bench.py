"""What metrics cost: the write and scan benchmarks' workloads with metrics on and off, in pairs.

Each pair starts two clusters one after the other, the same in all but one flag: every server
with metrics (the default) and every server with ``--no-metrics-enabled`` (histograms record
nothing, no event-loop sampler or process collector, nothing exported, an empty
``/metrics``).  The order alternates from pair to pair (on/off, off/on, ...) so that drift
in the machine's load falls on both sides alike.  On each cluster (one master, three tablet
servers, RF 3, fsync on, leaders spread evenly, the servers' default timings), with the
workloads of ``cluster_write_bench.py`` and ``cluster_scan_bench.py``:

1. batched writes: ``--batch-writers`` tasks inserting 1,000-row batches back to back for
   ``--seconds``;
2. single-row writes: ``--writers`` tasks inserting one row per call for ``--seconds``;
3. a full scan of ``--scan-rows`` rows (``id int64, v double``) to Arrow, ``--repeat`` times
   after a warm-up scan (the rows are loaded first, and the servers left to settle).

Per figure it prints the rate and the servers' CPU per row of every run, and the overhead as
1 - (on / off) of the medians over the pairs; CPU per row is the steadier measure on a
shared machine, where rates move with the neighbours' load.  While ``/metrics`` is not
scraped the overhead is counting alone; scrapes come on top, once per scrape interval.

On a two-core machine shared with other work the cluster figures move by 10 to 30 % from run
to run, more than the overhead to be measured.  So the benchmark also times, in this process
and alternating on and off in short slices, exactly the metric updates the servers make for
one operation: for a single-row write, three RPC calls' accounting (the write and the two
followers' UpdateConsensus), three WAL group commits (one a replica), the commit latency
and the rows written (batching shares all but the last among many writes, so this is the
upper bound); for a 1,000-row insert the same with 1,000 rows; for one scan call the RPC
accounting and the rows and bytes scanned.  The difference, on minus off, divided by the
servers' CPU for that operation measured in the cluster runs with metrics off, is the
overhead the counting adds, free of the neighbours' noise.

Usage: ``python bench/metrics_overhead_bench.py [--pairs 3] [--seconds 5] [--writers 64]
[--batch-writers 4] [--buckets 6] [--scan-rows 1000000] [--repeat 3] [--keep]``.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from prometheus_client.registry import CollectorRegistry

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cluster import (
    closed_loop,
    cluster_options,
    connect,
    cpu_of,
    load_average,
    median,
    scratch_dir,
    settle,
    spread_leaders,
)
from bench.cluster_scan_bench import COLUMNS, load
from bench.cluster_scan_bench import SCHEMA as SCAN_SCHEMA
from bench.cluster_write_bench import BATCH_ROWS, KEY_SPACE, PAYLOAD, arrow_batch, checked
from bench.cluster_write_bench import SCHEMA as WRITE_SCHEMA
from nyala.client import Partitioning
from nyala.consensus.runtime.metrics import RaftMetrics
from nyala.metrics import LoopMetrics
from nyala.rpc.loop import run
from nyala.rpc.metrics import RpcMetrics
from nyala.schema.rowops import OpType
from nyala.testing.minicluster import MiniCluster
from nyala.tserver.metrics import TabletServerMetrics
from nyala.tserver.write_metrics import WriteMetrics

OFF = ("--no-metrics-enabled",)
FIGURES = ("batched writes (rows/s)", "single-row writes (rows/s)", "scan (rows/s)")


@dataclass
class Run:
    """One cluster's figures: rate and server CPU microseconds per row, by figure."""

    metrics: bool
    rate: dict[str, float] = field(default_factory=dict)
    cpu_us: dict[str, float] = field(default_factory=dict)


async def measure(cluster: MiniCluster, args: argparse.Namespace, metrics: bool) -> Run:
    result = Run(metrics)
    client = await connect(cluster)
    try:
        pids = [s.process.pid for s in cluster.tservers + cluster.masters if s.process.pid is not None]
        partitioning = Partitioning().add_hash_partitions("id", args.buckets)
        table = await client.create_table("overhead_writes", WRITE_SCHEMA, partitioning, num_replicas=3, wait=True)
        await spread_leaders(cluster, table)

        async def insert_batch(n: int) -> int:
            await checked(table.insert(arrow_batch(2 * KEY_SPACE + n * BATCH_ROWS)))
            return BATCH_ROWS

        async def insert_row(n: int) -> int:
            await checked(table.insert({"id": 3 * KEY_SPACE + n, "payload": PAYLOAD}))
            return 1

        for name, op, workers in ((FIGURES[0], insert_batch, args.batch_writers),
                                  (FIGURES[1], insert_row, args.writers)):  # fmt: skip
            await settle(pids)
            done = await closed_loop(op, workers, args.seconds, pids)
            result.rate[name] = done.rate
            result.cpu_us[name] = done.server_cpu_s / done.units * 1e6

        scanned = await client.create_table("overhead_scan", SCAN_SCHEMA, partitioning, num_replicas=3, wait=True)
        await spread_leaders(cluster, scanned)
        await load(scanned, args.scan_rows, 100_000, pids)
        await settle(pids)
        first = await scanned.to_arrow(COLUMNS)  # warm-up, off the clock
        if first.num_rows != args.scan_rows:
            raise RuntimeError(f"the scan returned {first.num_rows:,} rows, not {args.scan_rows:,}")
        del first
        seconds = []
        server_start = cpu_of(pids)
        for _ in range(args.repeat):
            start = time.perf_counter()
            rows = (await scanned.to_arrow(COLUMNS)).num_rows
            seconds.append(time.perf_counter() - start)
            if rows != args.scan_rows:
                raise RuntimeError(f"the scan returned {rows:,} rows, not {args.scan_rows:,}")
        result.rate[FIGURES[2]] = args.scan_rows / median(seconds)
        result.cpu_us[FIGURES[2]] = (cpu_of(pids) - server_start) / (args.scan_rows * args.repeat) * 1e6
        return result
    finally:
        await client.close()


class Counting:
    """The metric objects of one server, on or off, and the updates one operation makes."""

    def __init__(self, enabled: bool) -> None:
        registry = CollectorRegistry() if enabled else None
        self.rpc = RpcMetrics(registry, enabled)
        self.method = self.rpc.method("nyala.tserver.TabletServerService.Write")
        self.raft = RaftMetrics(registry, enabled)
        self.tally = self.raft.wal.tally()
        self.tserver = TabletServerMetrics(registry, enabled)
        self.writes = WriteMetrics(LoopMetrics(enabled))

    def rpc_call(self) -> None:
        m = self.method
        m.calls.value += 1
        self.rpc.received(200)
        m.queue.observe(0.0001)
        m.latency.observe(0.001)
        self.rpc.sent(100)

    def group_commit(self) -> None:
        tally = self.tally  # what Log._write_group updates
        tally.fsync.observe(0.002)
        tally.appends += 1
        tally.group_size.observe(1)
        tally.written_bytes += 200
        tally.entries += 1

    def write(self, ops: pa.Array) -> None:
        for _ in range(3):
            self.rpc_call()
            self.group_commit()
        self.raft.commit_latency.observe(0.003)
        self.writes.count(ops, (), OpType.INSERT)  # the benchmarks' batches are all inserts
        self.tserver.writes.row_errors.value += 0

    def scan_call(self) -> None:
        self.rpc_call()
        self.tserver.bytes_scanned.value += 4 << 20
        self.tserver.rows_scanned.value += 262_144


def counting_cost_us(slices: int = 40, per_slice: int = 2000) -> dict[str, tuple[float, float]]:
    """(on, off) microseconds of the metric updates of one operation, median of alternating slices."""
    one_row = pa.array([OpType.INSERT], pa.int8())
    thousand = pa.array([OpType.INSERT] * BATCH_ROWS, pa.int8())
    sides = {True: Counting(True), False: Counting(False)}
    cases: dict[str, Callable[[Counting], None]] = {
        FIGURES[0]: lambda c: c.write(thousand),
        FIGURES[1]: lambda c: c.write(one_row),
        FIGURES[2]: lambda c: c.scan_call(),
    }
    out: dict[str, tuple[float, float]] = {}
    for name, case in cases.items():
        samples: dict[bool, list[float]] = {True: [], False: []}
        for i in range(slices):
            for enabled in (True, False) if i % 2 == 0 else (False, True):
                counting = sides[enabled]
                start = time.perf_counter()
                for _ in range(per_slice):
                    case(counting)
                samples[enabled].append((time.perf_counter() - start) / per_slice * 1e6)
        out[name] = (median(samples[True]), median(samples[False]))
    return out


def one_run(root: Path, args: argparse.Namespace, metrics: bool, index: int) -> Run:
    flags = () if metrics else OFF
    options = cluster_options(master_flags=flags, tserver_flags=flags)
    print(f"run {index}: metrics {'on' if metrics else 'off'} ...", flush=True)
    with MiniCluster(root / f"run-{index}-{'on' if metrics else 'off'}", options) as cluster:
        return run(measure(cluster, args, metrics))


def report(runs: list[Run], counting: dict[str, tuple[float, float]], scan_rows_per_call: int) -> None:
    print()
    print(f"load average: {load_average()}")
    header = f"{'figure':<28} {'metrics':<8} {'rate per run':<44} {'server CPU us/row per run':<40}"
    print(header)
    for name in FIGURES:
        for on in (True, False):
            mine = [r for r in runs if r.metrics is on]
            rates = " ".join(f"{r.rate[name]:>10,.0f}" for r in mine)
            cpus = " ".join(f"{r.cpu_us[name]:>8.3f}" for r in mine)
            print(f"{name:<28} {'on' if on else 'off':<8} {rates:<44} {cpus:<40}")
    print()
    print(f"{'figure':<28} {'rate on/off':>12} {'rate overhead':>14} {'CPU/row on/off':>15} {'CPU overhead':>13}")
    for name in FIGURES:
        rate_on = median([r.rate[name] for r in runs if r.metrics])
        rate_off = median([r.rate[name] for r in runs if not r.metrics])
        cpu_on = median([r.cpu_us[name] for r in runs if r.metrics])
        cpu_off = median([r.cpu_us[name] for r in runs if not r.metrics])
        print(f"{name:<28} {rate_on / rate_off:>12.3f} {100 * (1 - rate_on / rate_off):>13.1f}% "
              f"{cpu_on / cpu_off:>15.3f} {100 * (cpu_on / cpu_off - 1):>12.1f}%")  # fmt: skip
    print()
    print("The metric updates of one operation, timed in this process (on, off, and their difference against the")
    print("servers' CPU for the operation with metrics off, median of the cluster runs):")
    print(f"{'figure':<28} {'operation':<22} {'on us':>8} {'off us':>8} {'servers us/op':>14} {'overhead':>9}")
    per_op_rows = {FIGURES[0]: BATCH_ROWS, FIGURES[1]: 1, FIGURES[2]: scan_rows_per_call}
    operations = {FIGURES[0]: "1,000-row insert", FIGURES[1]: "single-row write", FIGURES[2]: "scan call (4 MiB)"}
    for name in FIGURES:
        on_us, off_us = counting[name]
        server_us = median([r.cpu_us[name] for r in runs if not r.metrics]) * per_op_rows[name]
        print(f"{name:<28} {operations[name]:<22} {on_us:>8.2f} {off_us:>8.2f} {server_us:>14.1f} "
              f"{100 * (on_us - off_us) / server_us:>8.2f}%")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs (metrics on and off)")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each write measurement")
    parser.add_argument("--writers", type=int, default=64, help="concurrent single-row writers")
    parser.add_argument("--batch-writers", type=int, default=4, help="concurrent 1,000-row inserts")
    parser.add_argument("--buckets", type=int, default=6, help="hash buckets (tablets) of each table")
    parser.add_argument("--scan-rows", type=int, default=1_000_000, help="rows loaded and scanned")
    parser.add_argument("--repeat", type=int, default=3, help="timed scans per run (the median counts)")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs under .bench-tmp")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    runs: list[Run] = []
    with scratch_dir("metrics-overhead-", args.keep) as root:
        for pair in range(args.pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            for metrics in order:
                runs.append(one_run(root, args, metrics, len(runs)))
    print("timing the metric updates of one operation in this process ...", flush=True)
    counting = counting_cost_us()
    # A scan call carries 4 MiB of Arrow data: 16-byte rows (id int64, v double).
    report(runs, counting, (4 << 20) // 16)


if __name__ == "__main__":
    main()
