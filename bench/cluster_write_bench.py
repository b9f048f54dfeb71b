"""Cluster writes: Nyala (3 tablet servers, RF 3, fsync on) beside etcd 3.4 (3 members) in the same run.

The table is ``id int64`` (key) plus a 92-byte string: 100-byte rows, hash-partitioned into
``--buckets`` tablets whose leaders are spread evenly over the three tablet servers.  The
cluster runs the servers' default timings (100 ms Raft tick, 500 ms Raft heartbeat).  One
process drives all the load through the async client (one event loop, as cheap a client as
Nyala has), so client and servers share the machine's cores the way etcd and its client do.

Nyala, each for ``--seconds`` after a 1 s warm-up:

1. batched, session: one AUTO_FLUSH_BACKGROUND session fed 1,000-row Arrow batches back to
   back; the clock stops when the final flush has returned.  The session coalesces batches per
   tablet into writes of up to 1 MiB and keeps several in flight.  Its per-batch latency is
   not observable through the API, so only rows/s is given.
2. batched, concurrent inserts: ``--batch-writers`` tasks each calling ``table.insert`` with
   a 1,000-row Arrow batch, back to back; rows/s and latency of each call.
3. single-row, twice: ``--writers`` (64) tasks each inserting one row per call and waiting
   for it, first into the same ``--buckets`` tablets, then into a second table of one tablet
   (no partitioning): one Raft group of three replicas, as etcd is.  How many callers can
   share a ``Write`` (one Raft entry) depends on how many tablets the writers spread over, and
   a ``Write`` costs far more than a row (docs/benchmarks.md), so the two differ by about 5x.

Before figures 2 and 3 the benchmark waits until the servers are idle (at most 30 s): the
MemRowSet flushes and checkpoints that the previous figure's rows cause would otherwise be
charged to the next figure.

etcd 3.4 (Debian ``etcd-server``, installed by this script with apt-get when ``etcd`` is not
on PATH; default timings; data under .bench-tmp): ``--writers`` clients, each with its own
keep-alive HTTP/1.1 connection to the leader's grpc-gateway, putting 8-byte keys with
92-byte values back to back (the same 100 bytes per write).  CPU per operation is given for
the client (this process) and the servers (all their processes together), and so are the
instructions per operation, counted by ``perf stat`` when it is installed: on a shared
machine they move far less with its speed than the rates and CPU seconds do.

Targets: batched >= 200,000 rows/s; single-row writes/s >= 2x etcd's puts/s (the target
column marks the one-tablet figure, like for like with etcd's one Raft group; the spread
figure is printed beside it with its own ratio).

Usage: ``python bench/cluster_write_bench.py [--seconds 10] [--writers 64] [--buckets 6]
[--batch-writers 4] [--no-etcd] [--keep]``.  Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa

from bench._cluster import (
    Figure,
    LoadResult,
    closed_loop,
    cluster_options,
    connect,
    cpu_of,
    load_average,
    print_table,
    scratch_dir,
    settle,
    spread_leaders,
)
from bench._etcd import EtcdCluster, GatewayClient, ensure_etcd, etcd_version
from nyala.client import AsyncTable, FlushMode, Partitioning, RowError, schema
from nyala.rpc.loop import run
from nyala.testing.minicluster import MiniCluster

PAYLOAD = "x" * 92  # with the 8-byte key: 100 bytes per row
SCHEMA = schema([("id", "int64"), ("payload", "string")], primary_key="id")
BATCH_ROWS = 1_000
KEY_SPACE = 10**12  # each phase writes its own range of keys


@dataclass
class NyalaResults:
    session: LoadResult
    concurrent: LoadResult
    single: LoadResult  # into the --buckets tablets
    single_one_tablet: LoadResult
    leaders: dict[str, int]


def arrow_batch(start: int, rows: int = BATCH_ROWS) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + rows), pa.int64()), "payload": pa.repeat(PAYLOAD, rows)})


async def session_load(table: AsyncTable, seconds: float, base: int, pids: list[int]) -> LoadResult:
    """One AUTO_FLUSH_BACKGROUND session fed 1,000-row batches for ``seconds`` (after a warm-up)."""
    session = table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND)
    n = 0

    async def feed(until: float) -> None:
        nonlocal n
        while time.perf_counter() < until:
            await session.insert(arrow_batch(base + n * BATCH_ROWS))
            n += 1

    await feed(time.perf_counter() + 1.0)
    if errors := await session.flush():
        raise RuntimeError(f"{len(errors)} row errors in the warm-up, e.g. {errors[0]}")
    first = n
    start, cpu_start, server_start = time.perf_counter(), time.process_time(), cpu_of(pids)
    await feed(start + seconds)
    errors = await session.flush()
    elapsed = time.perf_counter() - start
    result = LoadResult((n - first), (n - first) * BATCH_ROWS, elapsed, [], time.process_time() - cpu_start,
                        cpu_of(pids) - server_start)  # fmt: skip
    errors += await session.close()
    if errors:
        raise RuntimeError(f"{len(errors)} row errors, e.g. {errors[0]}")
    return result


async def measure_nyala(cluster: MiniCluster, args: argparse.Namespace) -> NyalaResults:
    client = await connect(cluster)
    try:
        partitioning = Partitioning().add_hash_partitions("id", args.buckets)
        table = await client.create_table("write_bench", SCHEMA, partitioning, num_replicas=3, wait=True)
        leaders = await spread_leaders(cluster, table)
        pids = [s.process.pid for s in cluster.tservers + cluster.masters if s.process.pid is not None]

        async def insert_batch(n: int) -> int:
            await checked(table.insert(arrow_batch(2 * KEY_SPACE + n * BATCH_ROWS)))
            return BATCH_ROWS

        async def insert_row(n: int) -> int:
            await checked(table.insert({"id": 3 * KEY_SPACE + n, "payload": PAYLOAD}))
            return 1

        print("Nyala: batched writes through an AUTO_FLUSH_BACKGROUND session ...", flush=True)
        session = await session_load(table, args.seconds, KEY_SPACE, pids)
        await settled(pids)
        print(f"Nyala: batched writes, {args.batch_writers} concurrent 1,000-row inserts ...", flush=True)
        concurrent = await closed_loop(insert_batch, args.batch_writers, args.seconds, pids)
        await settled(pids)
        print(f"Nyala: single-row writes from {args.writers} writers, {args.buckets} tablets ...", flush=True)
        single = await closed_loop(insert_row, args.writers, args.seconds, pids, count_instructions=True)
        await settled(pids)
        one_tablet = await client.create_table("write_bench_one", SCHEMA, Partitioning(), num_replicas=3, wait=True)

        async def insert_row_one_tablet(n: int) -> int:
            await checked(one_tablet.insert({"id": n, "payload": PAYLOAD}))
            return 1

        print(f"Nyala: single-row writes from {args.writers} writers, one tablet ...", flush=True)
        single_one = await closed_loop(insert_row_one_tablet, args.writers, args.seconds, pids, count_instructions=True)
        return NyalaResults(session, concurrent, single, single_one, leaders)
    finally:
        await client.close()


async def settled(pids: list[int]) -> None:
    waited = await settle(pids)
    print(f"  (the servers settled in {waited:.1f} s: flushes of the rows just written)", flush=True)


async def checked(write: Awaitable[list[RowError]]) -> None:
    errors = await write
    if errors:
        raise RuntimeError(f"{len(errors)} row errors, e.g. {errors[0]}")


async def measure_etcd(cluster: EtcdCluster, writers: int, seconds: float) -> LoadResult:
    leader = cluster.leader()
    idle = [GatewayClient(leader.host) for _ in range(writers)]
    connections = list(idle)
    value = PAYLOAD.encode()

    async def put(n: int) -> int:
        connection = idle.pop()  # each worker holds one connection for the duration of a put
        try:
            await connection.put(b"%08d" % (n % 10**8), value)
        finally:
            idle.append(connection)
        return 1

    try:
        return await closed_loop(put, writers, seconds, cluster.pids, count_instructions=True)
    finally:
        for connection in connections:
            await connection.close()


def report(nyala: NyalaResults, etcd: LoadResult | None, etcd_name: str, args: argparse.Namespace) -> None:
    s, c = nyala.session, nyala.concurrent
    best = max(s.rate, c.rate)
    figures = [
        Figure("batched rows/s, the better of the two ways below", best, None, ">= 200,000"),
        Figure("  session (AUTO_FLUSH_BACKGROUND) fed 1,000-row batches, rows/s", s.rate),
        Figure("    client CPU per row, us", s.client_cpu_us, digits=1),
        Figure("    server CPU per row, us (all Nyala processes)", s.server_cpu_us, digits=1),
        Figure(f"  {args.batch_writers} writers, each inserting 1,000 rows per call, rows/s", c.rate),
        Figure("    p50 latency of a call, ms", c.percentile_ms(0.5), digits=1),
        Figure("    p99 latency of a call, ms", c.percentile_ms(0.99), digits=1),
        Figure("    client CPU per row, us", c.client_cpu_us, digits=1),
        Figure("    server CPU per row, us (all Nyala processes)", c.server_cpu_us, digits=1),
        *single_row_figures(
            f"single-row writes/s, {args.writers} writers, one tablet (etcd: puts/s)",
            nyala.single_one_tablet,
            etcd,
            ">= 2.00 (ratio)",
        ),
        *single_row_figures(
            f"single-row writes/s, {args.writers} writers, {args.buckets} tablets (etcd: puts/s)", nyala.single, etcd
        ),
    ]
    leaders = ", ".join(f"{a}: {n}" for a, n in nyala.leaders.items())
    print_table(
        f"Cluster writes: 3 tablet servers, RF 3, fsync on, {args.buckets} tablets (and one); 100-byte rows; "
        f"{args.seconds:.0f} s per figure; {load_average()}",
        etcd_name,
        figures,
        [
            f"tablet leaders per server, {args.buckets}-tablet table: {leaders}",
            "context (published, not this run): Kudu's C++ client, AUTO_FLUSH_BACKGROUND, 1 thread, one machine: "
            "about 355,000 rows/s (gerrit 4308, 2016)",
        ],
    )


def single_row_figures(title: str, one: LoadResult, etcd: LoadResult | None, target: str = "") -> list[Figure]:
    return [
        Figure(title, one.rate, etcd.rate if etcd else None, target),
        Figure("  p50 latency, ms", one.percentile_ms(0.5), etcd.percentile_ms(0.5) if etcd else None, digits=1),
        Figure("  p99 latency, ms", one.percentile_ms(0.99), etcd.percentile_ms(0.99) if etcd else None, digits=1),
        Figure("  client CPU per write, us", one.client_cpu_us, etcd.client_cpu_us if etcd else None),
        Figure(
            "  server CPU per write, us (all server processes)", one.server_cpu_us, etcd.server_cpu_us if etcd else None
        ),
        Figure(
            "  client instructions per write, thousands (perf stat)",
            one.client_kilo_instructions,
            etcd.client_kilo_instructions if etcd else None,
        ),
        Figure(
            "  server instructions per write, thousands (perf stat)",
            one.server_kilo_instructions,
            etcd.server_kilo_instructions if etcd else None,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each measurement")
    parser.add_argument("--writers", type=int, default=64, help="concurrent single-row writers (and etcd clients)")
    parser.add_argument("--batch-writers", type=int, default=4, help="concurrent 1,000-row inserts")
    parser.add_argument("--buckets", type=int, default=6, help="hash buckets (tablets) of the table")
    parser.add_argument("--no-etcd", action="store_true", help="skip the etcd reference")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs under .bench-tmp")
    args = parser.parse_args()
    binary = None if args.no_etcd else ensure_etcd()
    with scratch_dir("write-bench-", args.keep) as root:
        with MiniCluster(root / "nyala", cluster_options()) as cluster:
            nyala = run(measure_nyala(cluster, args))
        etcd = None
        etcd_name = "etcd"
        if binary is not None:
            etcd_name = f"{etcd_version(binary)} (3 members)"
            print(f"{etcd_name}: puts from {args.writers} clients ...", flush=True)
            with EtcdCluster(root / "etcd", binary) as etcd_cluster:
                etcd = run(measure_etcd(etcd_cluster, args.writers, args.seconds))
    report(nyala, etcd, etcd_name, args)


if __name__ == "__main__":
    main()
