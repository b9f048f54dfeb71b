"""Cluster scan: a full scan of two columns to Arrow through the client, beside DuckDB reading
the same rows from one local file (the limit) in the same run.

The table is ``id int64`` (key) and ``v double``: 16 bytes a row, ``--rows`` rows (10 M by
default), hash-partitioned into ``--buckets`` tablets with leaders spread evenly over three
tablet servers (RF 3, fsync on, the servers' default timings).

1. Load, as fast as the client allows: one AUTO_FLUSH_BACKGROUND session fed Arrow batches of
   ``--chunk-rows`` rows (the session cuts them per tablet into writes of up to 1 MiB and keeps
   several in flight).  The load rate and CPU per row are reported.
2. Nyala: ``table.scanner(["id", "v"]).to_arrow()`` (LEADER_ONLY, READ_LATEST, the client's
   default of four tablets at a time and 4 MiB per scan call), ``--repeat`` times; the rows
   are counted every time.
3. DuckDB: the rows Nyala's warm-up scan returned, written once to one DuckDB file on the same
   filesystem (before Nyala's timed scans, so that neither side holds its warm-up result while
   timed); a fresh connection then runs ``SELECT id, v`` to an Arrow table, ``--repeat``
   times, in this process (DuckDB's default threads: all cores).
4. The floor: the same number of bytes as Nyala's result moved from a sender process over
   loopback TCP in pieces of one scan call's size, over two connections (one per core), and
   kept, with no storage, Arrow or RPC work (:mod:`bench._loopback`).  Any design that serves
   scans from another process pays at least this much CPU.

Before Nyala's scans the benchmark waits until the servers are idle (at most 30 s): the
MemRowSet flushes and checkpoints the load leaves behind would otherwise compete with the
scans for the two cores, and be charged to them.  Each side scans once off the clock to warm
up (DuckDB's buffers, the OS page cache), then takes the median of its repeats.  Target:
Nyala's scan rate >= 0.5 of DuckDB's.

Usage: ``python bench/cluster_scan_bench.py [--rows 10000000] [--repeat 3] [--buckets 6]
[--chunk-rows 100000] [--scan-batch-mib 1] [--scan-parallelism 4] [--keep]``.  The two scan
options override the client's, to see what they change.  Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from bench._cluster import (
    Figure,
    cluster_options,
    cpu_of,
    load_average,
    median,
    print_table,
    scratch_dir,
    settle,
    spread_leaders,
)
from bench._loopback import LoopbackTiming, measure_loopback
from nyala.client import AsyncClient, AsyncTable, ClientOptions, FlushMode, Partitioning, schema
from nyala.rpc.loop import run
from nyala.testing.minicluster import MiniCluster

SCHEMA = schema([("id", "int64"), ("v", "double")], primary_key="id")
COLUMNS = ["id", "v"]


@dataclass
class Timing:
    """Seconds of each repeat, with the CPU of the client and the servers over all repeats."""

    rows: int
    seconds: list[float] = field(default_factory=list)
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    result_bytes: int = 0  # the Arrow size of one scan's result

    @property
    def rate(self) -> float:
        return self.rows / median(self.seconds)

    def cpu_us_per_row(self, cpu_s: float) -> float:
        return cpu_s / (self.rows * len(self.seconds)) * 1e6


@dataclass
class NyalaResult:
    load: Timing
    scan: Timing


def chunk(start: int, stop: int) -> pa.Table:
    ids = pa.array(range(start, stop), pa.int64())
    return pa.table({"id": ids, "v": pc.multiply(ids.cast(pa.float64()), 0.5)})


async def load(table: AsyncTable, rows: int, chunk_rows: int, pids: list[int]) -> Timing:
    timing = Timing(rows)
    session = table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND)
    start, cpu_start, server_start = time.perf_counter(), time.process_time(), cpu_of(pids)
    next_report = start + 10
    for first in range(0, rows, chunk_rows):
        await session.insert(chunk(first, min(rows, first + chunk_rows)))
        if time.perf_counter() > next_report:
            print(f"  {first + chunk_rows:,} rows loaded ...", flush=True)
            next_report += 10
    errors = await session.flush()
    errors += await session.close()
    if errors:
        raise RuntimeError(f"{len(errors)} row errors while loading, e.g. {errors[0]}")
    timing.seconds.append(time.perf_counter() - start)
    timing.client_cpu_s = time.process_time() - cpu_start
    timing.server_cpu_s = cpu_of(pids) - server_start
    return timing


async def scan(table: AsyncTable, rows: int, repeat: int, pids: list[int], reference: Path) -> Timing:
    timing = Timing(rows)
    first = await table.to_arrow(COLUMNS)  # warm-up, off the clock; DuckDB gets these rows
    if first.num_rows != rows:
        raise RuntimeError(f"the scan returned {first.num_rows:,} rows, not {rows:,}")
    write_reference(first, reference)
    timing.result_bytes = first.nbytes
    # Released before the clock starts, as DuckDB's warm-up result is: a result held meanwhile
    # made the first timed scan grow the client's memory by its size (2x slower, measured).
    del first
    cpu_start, server_start = time.process_time(), cpu_of(pids)
    for _ in range(repeat):
        start = time.perf_counter()
        result = await table.to_arrow(COLUMNS)
        timing.seconds.append(time.perf_counter() - start)
        if result.num_rows != rows:
            raise RuntimeError(f"the scan returned {result.num_rows:,} rows, not {rows:,}")
        del result
    timing.client_cpu_s = time.process_time() - cpu_start
    timing.server_cpu_s = cpu_of(pids) - server_start
    return timing


async def measure_nyala(cluster: MiniCluster, args: argparse.Namespace, reference: Path) -> NyalaResult:
    options = ClientOptions()
    if args.scan_batch_mib:
        options = dataclasses.replace(options, scan_batch_size_bytes=int(args.scan_batch_mib * 1024 * 1024))
    if args.scan_parallelism:
        options = dataclasses.replace(options, scan_parallelism=args.scan_parallelism)
    client = await AsyncClient.connect(cluster.master_addresses_flag, timeout_s=60, options=options)
    try:
        partitioning = Partitioning().add_hash_partitions("id", args.buckets)
        table = await client.create_table("scan_bench", SCHEMA, partitioning, num_replicas=3, wait=True)
        await spread_leaders(cluster, table)
        pids = [s.process.pid for s in cluster.tservers + cluster.masters if s.process.pid is not None]
        print(f"Nyala: loading {args.rows:,} rows ...", flush=True)
        loaded = await load(table, args.rows, args.chunk_rows, pids)
        waited = await settle(pids)
        print(f"  (the servers settled in {waited:.1f} s: flushes of the rows just loaded)", flush=True)
        print(f"Nyala: scanning {args.repeat} times ...", flush=True)
        scanned = await scan(table, args.rows, args.repeat, pids, reference)
        return NyalaResult(loaded, scanned)
    finally:
        await client.close()


def write_reference(rows: pa.Table, path: Path) -> None:
    """Write ``rows`` to one DuckDB file, the reference's table ``t``."""
    with duckdb.connect(str(path)) as con:
        con.register("nyala_rows", rows)
        con.execute("CREATE TABLE t AS SELECT id, v FROM nyala_rows")
        con.execute("CHECKPOINT")


def measure_duckdb(path: Path, rows: int, repeat: int) -> Timing:
    """Time full scans of the reference file to Arrow from a fresh connection."""
    timing = Timing(rows)
    with duckdb.connect(str(path)) as con:
        con.sql("SELECT id, v FROM t").to_arrow_table()  # warm-up, off the clock
        cpu_start = time.process_time()
        for _ in range(repeat):
            start = time.perf_counter()
            result = con.sql("SELECT id, v FROM t").to_arrow_table()
            timing.seconds.append(time.perf_counter() - start)
            if result.num_rows != rows:
                raise RuntimeError(f"DuckDB returned {result.num_rows:,} rows, not {rows:,}")
            del result
        timing.client_cpu_s = time.process_time() - cpu_start
    return timing


def batch_bytes(args: argparse.Namespace) -> int:
    return int(args.scan_batch_mib * 1024 * 1024) if args.scan_batch_mib else ClientOptions().scan_batch_size_bytes


def report(nyala: NyalaResult, reference: Timing, floor: LoopbackTiming, args: argparse.Namespace) -> None:
    batch_mib = batch_bytes(args) / 1024 / 1024
    parallelism = args.scan_parallelism or ClientOptions().scan_parallelism
    load_, scan_ = nyala.load, nyala.scan
    moved = Timing(scan_.rows, floor.seconds)
    figures = [
        Figure("full scan of 2 columns to Arrow, M rows/s", scan_.rate / 1e6, reference.rate / 1e6, ">= 0.50", 2),
        Figure("  median seconds per scan", median(scan_.seconds), median(reference.seconds), "", 2),
        Figure("  client CPU per row, ns", scan_.cpu_us_per_row(scan_.client_cpu_s) * 1e3,
               reference.cpu_us_per_row(reference.client_cpu_s) * 1e3, "", 0),
        Figure("  server CPU per row, ns (all Nyala processes)", scan_.cpu_us_per_row(scan_.server_cpu_s) * 1e3),
        Figure("floor: the result's bytes over loopback TCP, M rows/s", moved.rate / 1e6, reference.rate / 1e6,
               "", 2),
        Figure("  receiver CPU per row, ns", moved.cpu_us_per_row(floor.receiver_cpu_s) * 1e3,
               reference.cpu_us_per_row(reference.client_cpu_s) * 1e3, "", 0),
        Figure("  sender CPU per row, ns", moved.cpu_us_per_row(floor.sender_cpu_s) * 1e3),
        Figure("load rate, rows/s (one session, fsync on, RF 3)", load_.rate),
        Figure("  load seconds", load_.seconds[0], digits=1),
        Figure("  client CPU per row, us", load_.cpu_us_per_row(load_.client_cpu_s), digits=1),
        Figure("  server CPU per row, us (all Nyala processes)", load_.cpu_us_per_row(load_.server_cpu_s), digits=1),
    ]  # fmt: skip
    print_table(
        f"Cluster scan: {args.rows:,} rows of (int64, double), {args.buckets} tablets on 3 tablet servers, RF 3; "
        f"median of {args.repeat}; scan calls of {batch_mib:g} MiB, {parallelism} tablets at once; "
        f"{load_average()}",
        "DuckDB, 1 local file",
        figures,
        [
            f"seconds per scan, Nyala: {fmt(scan_.seconds)}; DuckDB: {fmt(reference.seconds)}; "
            f"loopback floor: {fmt(floor.seconds)}",
            f"floor: {scan_.result_bytes / 1e6:,.0f} MB a scan over 2 connections from one sender process",
        ],
    )


def fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows to load and scan")
    parser.add_argument("--repeat", type=int, default=3, help="scans on each side (the median counts)")
    parser.add_argument("--buckets", type=int, default=6, help="hash buckets (tablets) of the table")
    parser.add_argument("--chunk-rows", type=int, default=100_000, help="rows per insert call while loading")
    parser.add_argument("--scan-batch-mib", type=float, help="MiB per scan call (client default: 4)")
    parser.add_argument("--scan-parallelism", type=int, help="tablets read at once (client default: 4)")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs under .bench-tmp")
    args = parser.parse_args()
    with scratch_dir("scan-bench-", args.keep) as root:
        path = root / "reference.duckdb"
        with MiniCluster(root / "nyala", cluster_options()) as cluster:
            nyala = run(measure_nyala(cluster, args, path))
        print("DuckDB: scanning the same rows from one file ...", flush=True)
        reference = measure_duckdb(path, args.rows, args.repeat)
    print("Floor: moving the same bytes over loopback TCP ...", flush=True)
    floor = measure_loopback(nyala.scan.result_bytes, batch_bytes(args), streams=2, repeat=args.repeat)
    report(nyala, reference, floor, args)


if __name__ == "__main__":
    main()
