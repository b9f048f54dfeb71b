"""Where a Spark load into Nyala spends its CPU, beside Spark writing the same rows to Parquet.

The same cluster and rows as ``bench/spark_bench.py``'s ingest (1 master, 3 tablet servers,
RF 3, fsync on, production timings; 2M rows of id bigint, ts timestamp, host string, metric
decimal(22,1) from ``spark.range`` in 2 partitions, upserted into a table hash-partitioned on
id into 6 tablets with leaders spread), with every process's CPU read from /proc before and
after each write:

- the JVM (Spark's driver and executor, ``local[2]``),
- the Python workers (PySpark's daemon and the workers it forks: ``writer.py`` and the client),
- each tablet server and the master,

printed as CPU seconds and microseconds of CPU per row, beside the same split for Spark's
Parquet write of the same rows.  Both writes warm up off the clock at full size (the JVM's
C2 compiler is otherwise still at work in the first large write), then run ``--rounds``
times alternated (a fresh table each Nyala round: a second upsert of the same keys would
update, not insert); each figure is the median.

With ``--profile`` the last Nyala round also runs ``py-spy record`` (non-blocking sampling,
no pause of the sampled process) on every tablet server and Python worker, and prints where
their samples fall: by the Nyala package the innermost Nyala frame belongs to (rpc, wal,
consensus, storage, tserver, client, ...) or, below Nyala, pyarrow / DuckDB / protobuf /
asyncio, and the functions with the most samples of their own.  py-spy is a bench extra
(``pip install .[bench]``); sampling costs the sampled processes a little CPU, so the
profiled round is left out of the medians.

With ``--b-tserver-flags FLAGS`` a second cluster's tablet servers get FLAGS and every round
writes into both, alternating which goes first (an A/B of a server setting in one run); with
``--scan`` the Python client then scans each loaded table (rows still in the MemRowSets
included) and its rate is printed.

Usage: ``python bench/spark_ingest_profile.py [--rows 2000000] [--rounds 3] [--profile]
[--b-tserver-flags FLAGS] [--scan]``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import DataFrame, SparkSession

import nyala
from bench._cluster import cluster_options, load_average, median, scratch_dir, spread_leaders
from nyala.client import AsyncClient, Partitioning
from nyala.rpc.loop import run
from nyala.spark import create_table, local_session
from nyala.testing.minicluster import MiniCluster

TICK = os.sysconf("SC_CLK_TCK")


def dataset(spark: SparkSession, rows: int) -> DataFrame:
    """``bench/spark_bench.py``'s rows."""
    return spark.range(0, rows, numPartitions=2).selectExpr(
        "id", "timestamp_seconds(1700000000 + id) AS ts", "format_string('host-%03d', id % 100) AS host",
        "id * 0.5 AS metric",
    )  # fmt: skip


# --- CPU by process, from /proc ----------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pid: int, reaped_children: bool) -> float:
    """User + system CPU of a process; with ``reaped_children`` also its waited-for children's
    (PySpark's daemon forks a worker per task slot and reaps the ones that exit)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each live thread of a process, by thread id."""
    out: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def thread_names(profile: Path) -> dict[int, str]:
    """Thread id -> thread name, from py-spy's ``thread (TID): name`` frames."""
    names: dict[int, str] = {}
    for match in re.finditer(r"thread \((\d+)\): ([^;]+)", profile.read_text()):
        names[int(match.group(1))] = match.group(2)
    return names


def thread_kind(name: str) -> str:
    """A thread's name without the tablet id or pool index it ends with."""
    return re.sub(r"([-_][0-9a-f]{32}|_\d+)$", "", name)


def print_threads(
    title: str, before: dict[int, float], after: dict[int, float], names: dict[int, str], total: float, rows: int
) -> None:
    by_kind: dict[str, float] = {}
    for tid, seconds in after.items():
        kind = thread_kind(names.get(tid, "no Python frames (DuckDB's own threads)"))
        by_kind[kind] = by_kind.get(kind, 0.0) + seconds - before.get(tid, 0.0)
    by_kind["threads that ended meanwhile (MemRowSet flush threads)"] = total - sum(by_kind.values())
    print(f"\n{title}: CPU by thread, {total:.2f} s, {total / rows * 1e6:.2f} us/row")
    for kind, seconds in sorted(by_kind.items(), key=lambda item: -item[1]):
        print(f"    {seconds:6.2f} s  {seconds / rows * 1e6:5.2f} us/row  {kind}")


@dataclass
class Processes:
    """The processes of one run, by role."""

    roles: dict[str, list[int]]

    @classmethod
    def find(cls, cluster: MiniCluster) -> Processes:
        roles: dict[str, list[int]] = {"jvm": [], "python workers": []}
        for pid in _descendants(os.getpid()):
            cmd = _cmdline(pid)
            if cmd.split(" ")[0].endswith("java"):
                roles["jvm"].append(pid)
            elif "pyspark" in cmd:
                roles["python workers"].append(pid)
        for server in cluster.tservers:
            assert server.process.pid is not None
            roles[f"tserver {server.index}"] = [server.process.pid]
        for server in cluster.masters:
            assert server.process.pid is not None
            roles[f"master {server.index}"] = [server.process.pid]
        return cls(roles)

    def sample(self) -> dict[str, float]:
        return {
            role: sum(cpu_seconds(p, reaped_children=role == "python workers") for p in pids)
            for role, pids in self.roles.items()
        }


def measure(processes: Processes, action: Callable[[], object]) -> tuple[float, dict[str, float]]:
    """Wall seconds of ``action`` and the CPU seconds each role spent meanwhile."""
    before = processes.sample()
    start = time.perf_counter()
    action()
    wall = time.perf_counter() - start
    after = processes.sample()
    return wall, {role: after[role] - before.get(role, 0.0) for role in after}


# --- py-spy ------------------------------------------------------------------------------

#: Where a sample is charged: the innermost frame whose file matches, checked in this order.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("nyala/wal/", "wal"),
    ("nyala/storage/", "storage (MemRowSet, DuckDB)"),
    ("nyala/consensus/", "consensus"),
    ("nyala/rpc/", "rpc"),
    ("nyala/tserver/", "tserver"),
    ("nyala/schema/", "schema (rows, keys)"),
    ("nyala/client/", "client"),
    ("nyala/spark/", "spark writer"),
    ("nyala/server/", "server"),
    ("nyala/", "nyala, other"),
    ("pyspark/", "pyspark"),
)


def _category(stack: list[str]) -> str:
    for frame in reversed(stack):
        for pattern, name in CATEGORIES:
            if pattern in frame:
                return name
    leaf = stack[-1] if stack else ""
    for pattern, name in (("pyarrow", "pyarrow"), ("duckdb", "duckdb"), ("protobuf", "protobuf")):
        if pattern in leaf:
            return name
    if any("asyncio" in f or "uvloop" in f or "selectors" in f for f in stack):
        return "event loop"
    return "other"


def _frames(line: str) -> tuple[list[str], int]:
    stack, _, count = line.rpartition(" ")
    return [f for f in stack.split(";") if not f.startswith(("process ", "thread "))], int(count)


def summarise(path: Path, title: str, total_cpu: float, rows: int, top: int = 18) -> None:
    by_category: Counter[str] = Counter()
    by_self: Counter[str] = Counter()
    by_inclusive: Counter[str] = Counter()
    by_thread: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        thread = next((f for f in line.split(";") if f.startswith("thread ")), "thread ?")
        frames, count = _frames(line)
        total += count
        by_thread[thread] += count
        by_category[_category(frames)] += count
        if frames:
            by_self[frames[-1]] += count
        for frame in set(frames):
            by_inclusive[frame] += count
    if not total:
        print(f"\n{title}: no samples")
        return
    us = total_cpu / rows * 1e6

    def share(n: int) -> str:
        return f"{100 * n / total:5.1f} %  {us * n / total:5.2f} us/row"

    print(f"\n{title}: {total} samples, {total_cpu:.2f} s CPU, {us:.2f} us/row")
    print("  by the innermost Nyala layer (or library below it):")
    for name, n in by_category.most_common():
        print(f"    {share(n)}  {name}")
    print("  by thread:")
    for name, n in by_thread.most_common(6):
        print(f"    {share(n)}  {name}")
    print("  functions, own samples:")
    for name, n in by_self.most_common(top):
        print(f"    {share(n)}  {name}")
    print("  functions, inclusive:")
    for name, n in by_inclusive.most_common(top + 12):
        print(f"    {share(n)}  {name}")


class Sampler:
    """``py-spy record`` on a set of processes for the length of one write."""

    def __init__(self, out: Path, rate: int) -> None:
        self.out, self.rate = out, rate
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def start(self, targets: dict[str, int]) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        for name, pid in targets.items():
            path = self.out / f"{name.replace(' ', '-')}.txt"
            argv = [spy, "record", "--nonblocking", "--threads", "-r", str(self.rate), "-f", "raw"]
            argv += ["-o", str(path), "-p", str(pid)]
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs[name] = (proc, path)
        time.sleep(1.0)  # py-spy attaches asynchronously; a fixed grace is enough for a profile

    def stop(self) -> dict[str, Path]:
        for proc, _ in self.procs.values():
            proc.send_signal(signal.SIGINT)
        for proc, _ in self.procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return {name: path for name, (_, path) in self.procs.items() if path.exists()}


# --- the run -----------------------------------------------------------------------------


def create(cluster: MiniCluster, spark: SparkSession, master: str, table: str, buckets: int) -> None:
    schema = dataset(spark, 1).schema
    create_table(
        table, schema, ["id"], Partitioning().add_hash_partitions("id", buckets), master=master, num_replicas=3
    )

    async def spread() -> None:
        async with await AsyncClient.connect(master) as client:
            await spread_leaders(cluster, await client.open_table(table))

    run(spread())


def write_nyala(spark: SparkSession, master: str, table: str, rows: int) -> None:
    writer = dataset(spark, rows).write.format("nyala").option("nyala.master", master).option("nyala.table", table)
    writer.mode("append").save()


def print_split(title: str, rows: int, runs: Iterable[tuple[float, dict[str, float]]]) -> None:
    runs = list(runs)
    walls = [w for w, _ in runs]
    roles = list(runs[0][1])
    print(f"\n{title}: {rows / median(walls) / 1e6:.3f} M rows/s (median of {len(runs)}: "
          f"{', '.join(f'{w:.2f}' for w in walls)} s)")  # fmt: skip
    total = 0.0
    for role in roles:
        seconds = median([cpu[role] for _, cpu in runs])
        total += seconds
        print(f"  {role:16s} {seconds:7.2f} s CPU  {seconds / rows * 1e6:6.2f} us/row")
    print(f"  {'all':16s} {total:7.2f} s CPU  {total / rows * 1e6:6.2f} us/row  "
          f"({total / median(walls):.2f} cores busy)")  # fmt: skip


Runs = list[tuple[float, dict[str, float]]]


def scan_seconds(master: str, table: str, rows: int) -> float:
    """Seconds of the Python client's full scan (rows still in the MemRowSets are read too)."""
    with nyala.connect(master) as client:
        scanner = client.open_table(table).scanner()
        start = time.perf_counter()
        got = scanner.to_arrow().num_rows
        seconds = time.perf_counter() - start
    assert got == rows, f"{table}: scanned {got} rows, wrote {rows}"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--buckets", type=int, default=6)
    parser.add_argument("--profile", action="store_true", help="sample tablet servers and workers with py-spy")
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--scan", action="store_true", help="time a client scan of each table right after its load")
    parser.add_argument(
        "--b-tserver-flags", default=None, metavar="FLAGS",
        help="A/B: also start a second cluster whose tablet servers get these flags (one string, e.g. "
        "'--flush-threshold-rows 100000') and write into both in every round, alternating which goes first",
    )  # fmt: skip
    args = parser.parse_args()
    rows = args.rows
    spark = local_session("nyala-ingest-profile")
    try:
        with contextlib.ExitStack() as stack:
            root = stack.enter_context(scratch_dir("spark-ingest-", keep=args.keep))
            clusters = {"A": stack.enter_context(MiniCluster(root / "nyala-a", cluster_options()))}
            if args.b_tserver_flags is not None:
                options = cluster_options(tserver_flags=tuple(shlex.split(args.b_tserver_flags)))
                clusters["B"] = stack.enter_context(MiniCluster(root / "nyala-b", options))
            for cluster in clusters.values():  # full-size warm-ups, off the clock
                create(cluster, spark, cluster.master_addresses_flag, "warmup", args.buckets)
                write_nyala(spark, cluster.master_addresses_flag, "warmup", rows)
            dataset(spark, rows).write.mode("overwrite").parquet(str(root / "warmup.parquet"))
            nyala_runs: dict[str, Runs] = {name: [] for name in clusters}
            scans: dict[str, list[float]] = {name: [] for name in clusters}
            parquet_runs: Runs = []
            parquet = str(root / "metrics.parquet")
            for i in range(args.rounds):
                order = list(clusters) if i % 2 == 0 else list(reversed(clusters))
                for name in order:
                    cluster, master = clusters[name], clusters[name].master_addresses_flag
                    create(cluster, spark, master, f"metrics{i}", args.buckets)
                    processes = Processes.find(cluster)
                    write = functools.partial(write_nyala, spark, master, f"metrics{i}", rows)
                    nyala_runs[name].append(measure(processes, write))
                    if args.scan:
                        scans[name].append(scan_seconds(master, f"metrics{i}", rows))
                processes = Processes.find(clusters["A"])
                parquet_runs.append(
                    measure(processes, lambda: dataset(spark, rows).write.mode("overwrite").parquet(parquet))
                )
            for name, runs in nyala_runs.items():
                flags = f" (tablet servers with {args.b_tserver_flags})" if name == "B" else ""
                print_split(f"Spark into Nyala {name}{flags} (upsert, RF 3, fsync on)", rows, runs)
            print_split("Spark into local Parquet (snappy), same rounds", rows, parquet_runs)
            for name, seconds in scans.items():
                if seconds:
                    print(f"client scan of {name}'s table after its load: {rows / median(seconds) / 1e6:.2f} M rows/s")
            for name, runs in nyala_runs.items():
                ratio = median([w for w, _ in parquet_runs]) / median([w for w, _ in runs])
                print(f"ingest {name} / Parquet: {ratio:.2f} (target >= 0.6)")
            if args.profile:
                profile(spark, clusters["A"], root, args)
    finally:
        spark.stop()
    print(f"\n{rows:,} rows, {args.buckets} tablets, Spark local[2]; {load_average()}")


def profile(spark: SparkSession, cluster: MiniCluster, root: Path, args: argparse.Namespace) -> None:
    """One more write with py-spy on the tablet servers and Python workers, and CPU by thread."""
    rows, master = args.rows, cluster.master_addresses_flag
    create(cluster, spark, master, "profiled", args.buckets)
    processes = Processes.find(cluster)
    servers = {role: pids[0] for role, pids in processes.roles.items() if role.startswith("tserver")}
    targets = dict(servers)
    for n, pid in enumerate(processes.roles["python workers"]):
        targets[f"python worker {n}"] = pid
    sampler = Sampler(root, args.rate)
    sampler.start(targets)
    threads_before = {role: thread_cpu(pid) for role, pid in servers.items()}
    wall, cpu = measure(processes, lambda: write_nyala(spark, master, "profiled", rows))
    threads_after = {role: thread_cpu(pid) for role, pid in servers.items()}
    profiles = sampler.stop()
    print(f"\nprofiled round (py-spy at {args.rate} Hz, not in the medians): {rows / wall / 1e6:.3f} M rows/s")
    for name, path in profiles.items():
        role_cpu = cpu.get(name, 0.0) if name in servers else cpu["python workers"]
        if name in servers:
            print_threads(name, threads_before[name], threads_after[name], thread_names(path), role_cpu, rows)
        summarise(path, name, role_cpu, rows)


if __name__ == "__main__":
    main()
