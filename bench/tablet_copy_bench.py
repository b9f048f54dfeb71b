"""Tablet copy: a tablet of ``--size-gb`` GB copied between two tablet servers, beside the same
bytes moved over a loopback socket between two processes and written durably to the disk,
with a timeline of the copy's steps; then the write gap of moving a leader's replica.

**The copy.** One master and two tablet servers with the servers' default settings
(production timings, 4 MiB chunks, 4 fetches in flight, no throttle, fsync on).  One table of
one tablet, RF 1, ``id int64`` plus a 1,000-character string of random base64 (about 1 KB a
row that DuckDB cannot compress much), loaded through one AUTO_FLUSH_BACKGROUND session until
the tablet's DuckDB file holds ``--size-gb`` GB.  Then, while one writer upserts 100-row
batches into the same tablet back to back (a closed loop, noting each call's latency):

- a baseline of ``--baseline`` seconds of the writer alone;
- ``--copies`` times: StartTabletCopy to the other tablet server (the source is the tablet's
  only replica), timed from the request until the destination lists the tablet RUNNING with
  every row: the copy's whole cost (session with snapshot and CRCs, transfer, fsync and CRC
  check of every file, install, bootstrap).  Between two copies the destination's replica is
  tombstoned, so each copy starts from nothing;
- the bytes a copy moved (the destination's counters) over the same loopback TCP, in 4 MiB
  requests over one connection between two processes (``bench/_loopback.py``): the floor of
  moving them at all, the project's reference;
- the same bytes written to a file on the data directory's disk in 4 MiB writes and synced,
  two ways (each twice, the faster kept): an ``fdatasync`` every 64 MiB on a second thread
  behind the writes (as the destination syncs its download) and one at the end, the floor of
  landing them durably that a copy must also pay; and one ``fdatasync`` at the end only (the
  floor of earlier runs, which measured the kernel's one-shot writeback more than the disk).

Figures: copy MB/s against both floors (target: at least 0.5 of loopback); the transfer
alone; the timeline of each step (from both servers' logs: the source's steps of
BeginTabletCopySession nest inside the destination's "begin"); the CPU each process used;
the write gap: the writer's longest call during the copy beside its longest before, and how
long the source held the tablet's lock for its snapshot (writes wait for it).

**The move** (skipped with ``--no-move``).  One master and three tablet servers, one table of
one tablet, RF 3, loaded to ``--move-size-gb`` GB the same way.  ``--writers`` tasks each
upsert one row per call, back to back (the writers of ``failover_bench.py``), and note when
each call is acknowledged.  First ``--step-downs`` graceful leader step-downs (as in
``step_down_bench.py``, which measures more of them beside abrupt ones), then a fourth tablet
server starts and the leader's replica is moved to it with the 3-4-3 move of
``nyala.tools.replica_ops.move_replica`` (what ``nyala tablet move-replica`` runs): the
destination joins as a NON_VOTER, is copied from the leader, catches up and is promoted, the
leader steps down gracefully and its replica is removed.  The write gap is the longest time
between two consecutive acknowledged writes during the whole move, beside the step-downs'.

Usage: ``python bench/tablet_copy_bench.py [--size-gb 1] [--copies 1] [--baseline 5]
[--no-writer] [--move-size-gb 0.25] [--writers 4] [--step-downs 5] [--no-copy] [--no-move]
[--reuse DIR] [--tserver-flags FLAGS] [--keep]``.  Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa

from bench._cluster import (
    Figure,
    cluster_options,
    connect,
    cpu_of,
    load_average,
    median,
    print_table,
    scratch_dir,
    settle,
)
from bench._loopback import measure_loopback
from bench.failover_bench import Writers, wait_caught_up
from bench.step_down_bench import step_down, wait_acks
from nyala.client import AsyncTable, FlushMode, Partitioning, schema
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.services import (
    DELETE_TABLET,
    GET_CONSENSUS_STATE,
    GET_TABLET_SERVER_STATUS,
    LIST_TABLETS,
    START_TABLET_COPY,
)
from nyala.testing.minicluster import ClusterServer, MiniCluster
from nyala.tools.replica_ops import TabletOps, move_replica

SCHEMA = schema([("id", "int64"), ("payload", "string")], primary_key="id")
ROW_CHARS = 1000
BATCH_ROWS = 1000
CHUNK_BYTES = 4 << 20  # the copy's default chunk, for the loopback reference
WRITER_ROWS = 100
WRITER_BASE = 10**12  # the writers' keys, apart from the loaded ones
COPY_TIMEOUT_S = 1800.0
MOVE_TIMEOUT_S = 1800.0
STEP_DOWN_SPACING = 200  # acknowledged writes before each step-down, as in step_down_bench.py
MB = 1e6
SYNC_EVERY = 64 << 20  # the destination's background fdatasync interval (tablet_copy_client.py)
# The source's log line of each session: how long its store snapshot held the tablet's lock
# (the first wording is that of the code before the files were pinned, kept for comparisons).
LOCK_HELD = r"(?:local copy under the tablet's lock\) took|the store snapshot held the tablet's lock) ([\d.]+) s"


@dataclass
class Writer:
    """Upserts small batches back to back and notes (start, latency) of every call."""

    table: AsyncTable
    calls: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopping: bool = False

    async def run(self) -> None:
        n = 0
        payload = "w" * 100
        while not self.stopping:
            ids = pa.array(range(WRITER_BASE + n * WRITER_ROWS, WRITER_BASE + (n + 1) * WRITER_ROWS), pa.int64())
            batch = pa.table({"id": ids, "payload": pa.repeat(payload, WRITER_ROWS)})
            started = time.perf_counter()
            try:
                row_errors = await self.table.upsert(batch)
            except Exception as e:  # noted: a failed write is a gap too
                self.errors.append(f"{type(e).__name__}: {e}")
                continue
            if row_errors:
                self.errors.append(str(row_errors[0]))
            self.calls.append((started, time.perf_counter() - started))
            n += 1

    def longest(self, start: float, end: float) -> float:
        """The longest call that was running at some point in [start, end]."""
        return max((lat for t, lat in self.calls if t <= end and t + lat >= start), default=float("nan"))

    def longest_within(self, start: float, end: float) -> float:
        """The longest call that started and ended in [start, end]."""
        return max((lat for t, lat in self.calls if t >= start and t + lat <= end), default=float("nan"))

    def median(self, start: float, end: float) -> float:
        values = sorted(lat for t, lat in self.calls if start <= t <= end)
        return values[len(values) // 2] if values else float("nan")


class RandomText:
    """Distinct 1,000-character strings of random base64, cut from one large random buffer."""

    def __init__(self, megabytes: int = 64) -> None:
        self._data = np.frombuffer(base64.b64encode(os.urandom(megabytes * 3 << 18)), dtype=np.uint8)
        self._shift = 0

    def batch(self, rows: int) -> pa.Array:
        span = rows * ROW_CHARS
        if self._shift + span > len(self._data):
            self._shift = (self._shift % 997) + 1  # start over, off by a little: no string repeats
        values = pa.py_buffer(self._data[self._shift : self._shift + span].tobytes())
        self._shift += span
        offsets = pa.py_buffer(np.arange(0, span + 1, ROW_CHARS, dtype=np.int32).tobytes())
        return pa.StringArray.from_buffers(rows, offsets, values)


def store_bytes(server: ClusterServer, tablet_id: str) -> int:
    stores = server.data_dir / "stores"
    return sum(p.stat().st_size for p in stores.glob(f"{tablet_id}.duckdb*") if p.is_file())


async def load(table: AsyncTable, source: ClusterServer, tablet_id: str, target_bytes: int) -> tuple[int, float]:
    """Insert rows until the tablet's DuckDB files hold ``target_bytes``; returns rows and seconds."""
    text = RandomText()
    session = table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND)
    rows, started, last_report = 0, time.perf_counter(), time.perf_counter()
    while True:
        for _ in range(16):  # about 16 MB between two looks at the file
            ids = pa.array(range(rows, rows + BATCH_ROWS), pa.int64())
            await session.insert(pa.table({"id": ids, "payload": text.batch(BATCH_ROWS)}))
            rows += BATCH_ROWS
        if errors := await session.flush():
            raise RuntimeError(f"{len(errors)} row errors while loading, e.g. {errors[0]}")
        on_disk = store_bytes(source, tablet_id)
        if time.perf_counter() - last_report > 10:
            last_report = time.perf_counter()
            print(f"  {rows:,} rows, {on_disk / 1e9:.2f} GB on disk so far", flush=True)
        # The MemRowSet holds up to 32 MiB that are not in the file yet: count them as written.
        if on_disk + (32 << 20) >= target_bytes:
            break
    if errors := await session.close():
        raise RuntimeError(f"{len(errors)} row errors while loading, e.g. {errors[0]}")
    return rows, time.perf_counter() - started


# --- the servers' logs ----------------------------------------------------------------------

# Each copy logs its steps as "name 1.234 s, name 0.5 s, ..." (tserver/manager.py,
# tserver/tablet_copy_source.py); one dict per copy, in log order.
_STEP = re.compile(r"\s*([^,]+?) ([\d.]+) s(?:,|$)")


def logged_steps(server: ClusterServer, prefix: str, end: str = "\n") -> list[dict[str, float]]:
    """Every list of steps a server's log gives after ``prefix`` (up to ``end``)."""
    found = re.findall(re.escape(prefix) + "([^" + re.escape(end) + "\n]*)", server.process.log_tail(20000))
    return [{name: float(s) for name, s in _STEP.findall(text)} for text in found]


def logged_seconds(server: ClusterServer, pattern: str) -> list[float]:
    """Every number of seconds a server's log gives for ``pattern`` (a regex with one group)."""
    return [float(s) for s in re.findall(pattern, server.process.log_tail(20000))]


# --- the copy -----------------------------------------------------------------------------


@dataclass
class CopyRun:
    """One copy of the tablet, with what both servers logged about it."""

    seconds: float
    nbytes: int
    during_max_s: float
    during_median_s: float
    cpu_s: dict[str, float]
    source_steps: dict[str, float] = field(default_factory=dict)
    dest_steps: dict[str, float] = field(default_factory=dict)
    verify_steps: dict[str, float] = field(default_factory=dict)
    transfer_s: float | None = None
    fetch_s: float | None = None
    lock_s: float | None = None


@dataclass
class CopyResult:
    rows: int
    raw_bytes: int
    load_s: float
    file_bytes: int
    runs: list[CopyRun]
    loopback_s: float
    disk_s: float
    synced_behind_s: float
    before_max_s: float
    before_median_s: float
    writer_calls: int
    writer_errors: list[str]


async def copy(messenger: Messenger, source: ClusterServer, dest: ClusterServer, tablet_id: str, rows: int) -> float:
    """StartTabletCopy, then wait until the destination lists the tablet RUNNING with ``rows``."""
    state = await messenger.call(
        source.address, GET_CONSENSUS_STATE, cpb.GetConsensusStateRequestPB(tablet_ids=[tablet_id])
    )
    request = tcpb.StartTabletCopyRequestPB(
        dest_uuid=dest.uuid,
        tablet_id=tablet_id,
        copy_peer_uuid=source.uuid,
        copy_peer_addr=common_pb2.HostPortPB(host=source.address.host, port=source.address.port),
        caller_uuid=source.uuid,
        caller_term=state.tablets[0].current_term,
    )
    started = time.perf_counter()
    await messenger.call(dest.address, START_TABLET_COPY, request, timeout=30)
    deadline = started + COPY_TIMEOUT_S
    began = False  # a tombstone left by an earlier copy shows until this one begins
    while time.perf_counter() < deadline:
        listed = await messenger.call(dest.address, LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=120)
        tablet = next((t for t in listed.tablets if t.tablet_id == tablet_id), None)
        if tablet is not None and tablet.state == tpb.RUNNING and tablet.num_rows >= rows:
            return time.perf_counter() - started
        began = began or (tablet is not None and tablet.state != tpb.TOMBSTONED)
        if tablet is not None and (tablet.state == tpb.FAILED or (began and tablet.state == tpb.TOMBSTONED)):
            raise RuntimeError(f"the copy ended {tpb.TabletStatePB.Name(tablet.state)}: {tablet.error}")
        await asyncio.sleep(0.02)
    raise TimeoutError(f"the copy did not finish in {COPY_TIMEOUT_S} s")


async def tombstone(messenger: Messenger, server: ClusterServer, tablet_id: str) -> None:
    """Tombstone the copied replica, so that the next copy starts from nothing."""
    request = tpb.DeleteTabletRequestPB(dest_uuid=server.uuid, tablet_id=tablet_id, reason="bench", tombstone=True)
    await messenger.call(server.address, DELETE_TABLET, request, timeout=120)


async def copied_bytes(messenger: Messenger, dest: ClusterServer) -> int:
    status = await messenger.call(dest.address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
    return int(status.tablet_copy_bytes_within_location + status.tablet_copy_bytes_across_locations)


async def load_copy_table(cluster: MiniCluster, args: argparse.Namespace) -> dict[str, float]:
    """Create and load the copied table; what was loaded (rows, seconds)."""
    client = await connect(cluster)
    try:
        table = await client.create_table("copy_bench", SCHEMA, Partitioning(), num_replicas=1, wait=True)
        tablet = (await table.tablets())[0]
        source = next(s for s in cluster.tservers if s.uuid == tablet.replicas[0].uuid)
        print(f"Loading {args.size_gb:g} GB into tablet {tablet.tablet_id} on {source.process.name} ...", flush=True)
        rows, load_s = await load(table, source, tablet.tablet_id, int(args.size_gb * 1e9))
        pids = [s.process.pid for s in cluster.tservers + cluster.masters if s.process.pid is not None]
        await settle(pids, timeout_s=120)
        return {"rows": rows, "load_s": load_s}
    finally:
        await client.close()


def reused_cluster(cache: Path, root: Path, args: argparse.Namespace) -> tuple[MiniCluster, dict[str, float]]:
    """A cluster started from a copy of the loaded cluster in ``cache`` (loaded and stopped first
    when ``cache`` holds none), and what was loaded.

    For comparing two versions of the code with the same tablet without loading it each time.
    A stopped tablet server flushes its MemRowSets, so the copied tablet starts with none.
    """
    info = cache / "loaded.json"
    if not info.exists():
        shutil.rmtree(cache, ignore_errors=True)
        with MiniCluster(cache, cluster_options(num_tservers=2)) as cluster:
            loaded = run(load_copy_table(cluster, args))
        info.write_text(json.dumps(loaded))
    shutil.copytree(cache, root, symlinks=True)
    os.sync()  # the copy's own writeback must not land in the measured copy
    described = json.loads((root / "cluster.json").read_text())
    described["options"]["tserver_flags"] = shlex.split(args.tserver_flags)
    (root / "cluster.json").write_text(json.dumps(described))
    cluster = MiniCluster.load(root)
    for server in [*cluster.masters, *cluster.tservers]:
        (server.data_dir / "server.json").unlink(missing_ok=True)
    return cluster, json.loads(info.read_text())


async def measure_copy(cluster: MiniCluster, args: argparse.Namespace, loaded: dict[str, float]) -> CopyResult:
    client = await connect(cluster)
    messenger = Messenger()
    writer: Writer | None = None
    try:
        table = await client.open_table("copy_bench")
        tablet = (await table.tablets())[0]
        source = next(s for s in cluster.tservers if s.uuid == tablet.replicas[0].uuid)
        dest = next(s for s in cluster.tservers if s is not source)
        rows, load_s = int(loaded["rows"]), loaded["load_s"]
        file_bytes = store_bytes(source, tablet.tablet_id)
        print(f"Loaded {rows:,} rows in {load_s:.0f} s; the store holds {file_bytes / 1e9:.2f} GB", flush=True)

        writer = Writer(table)
        writer.stopping = args.no_writer
        writing = asyncio.ensure_future(writer.run())
        await asyncio.sleep(args.baseline)
        before_end = time.perf_counter()
        runs: list[CopyRun] = []
        for i in range(args.copies):
            if i:
                await tombstone(messenger, dest, tablet.tablet_id)
                await asyncio.sleep(2.0)  # the writer alone again for a moment
            print(
                f"Copy {i + 1} of {args.copies} to {dest.process.name} while one writer upserts "
                f"{WRITER_ROWS}-row batches ...",
                flush=True,
            )
            bytes_before = await copied_bytes(messenger, dest)
            cpu_before = {"source": cpu_of([source.process.pid or 0]), "destination": cpu_of([dest.process.pid or 0])}
            bench_before = time.process_time()
            copy_start = time.perf_counter()
            copy_s = await copy(messenger, source, dest, tablet.tablet_id, rows)
            copy_end = time.perf_counter()
            cpu = {
                "source": cpu_of([source.process.pid or 0]) - cpu_before["source"],
                "destination": cpu_of([dest.process.pid or 0]) - cpu_before["destination"],
                "benchmark (the writer)": time.process_time() - bench_before,
            }
            runs.append(
                CopyRun(
                    copy_s,
                    await copied_bytes(messenger, dest) - bytes_before,
                    writer.longest(copy_start, copy_end),
                    writer.median(copy_start, copy_end),
                    cpu,
                )
            )
            print(f"  {copy_s:.2f} s", flush=True)
        await asyncio.sleep(1.0)
        writer.stopping = True
        await writing
        attach_logs(runs, source, dest)
        copy_bytes = runs[0].nbytes
        print(f"Floor: {copy_bytes / 1e9:.2f} GB over loopback TCP between two processes ...", flush=True)
        loopback = measure_loopback(copy_bytes, CHUNK_BYTES, streams=1, repeat=1)
        print("Floor: the same bytes written to the data directory's disk and synced ...", flush=True)
        # Twice each, alternated: the first write of a process is the slowest.
        disk_s, synced_behind_s = [], []
        for _ in range(2):
            disk_s.append(measure_disk(cluster.root / "disk-floor.bin", copy_bytes))
            synced_behind_s.append(measure_disk(cluster.root / "disk-floor.bin", copy_bytes, SYNC_EVERY))
        first = writer.calls[0][0] if writer.calls else before_end
        return CopyResult(
            rows=rows,
            raw_bytes=rows * (ROW_CHARS + 8),
            load_s=load_s,
            file_bytes=file_bytes,
            runs=runs,
            loopback_s=loopback.seconds[0],
            disk_s=min(disk_s),
            synced_behind_s=min(synced_behind_s),
            before_max_s=writer.longest_within(first, before_end),
            before_median_s=writer.median(first, before_end),
            writer_calls=len(writer.calls),
            writer_errors=writer.errors,
        )
    finally:
        if writer is not None:
            writer.stopping = True
        await messenger.close()
        await client.close()


def attach_logs(runs: list[CopyRun], source: ClusterServer, dest: ClusterServer) -> None:
    """Give each copy the steps both servers logged for it (the logs list them in order)."""
    source_steps = logged_steps(source, "begin phases: ")
    dest_steps = logged_steps(dest, ": phases: ")
    verify_steps = logged_steps(dest, "to sync and check: ", ")")
    fetch = logged_seconds(dest, r"in \d+ files from \S+ in [\d.]+ s \(([\d.]+) s to fetch and write")
    transfer = logged_seconds(dest, r"tablet copy of \S+: fetched \d+ bytes in \d+ files from \S+ in ([\d.]+) s")
    lock = logged_seconds(source, LOCK_HELD)
    for i, one in enumerate(runs):
        one.source_steps = source_steps[i] if i < len(source_steps) else {}
        one.dest_steps = dest_steps[i] if i < len(dest_steps) else {}
        one.verify_steps = verify_steps[i] if i < len(verify_steps) else {}
        one.fetch_s = fetch[i] if i < len(fetch) else None
        one.transfer_s = transfer[i] if i < len(transfer) else None
        one.lock_s = lock[i] if i < len(lock) else None


def measure_disk(path: Path, total: int, sync_every: int = 0) -> float:
    """Seconds to write ``total`` bytes to a new file in 4 MiB writes and fdatasync it; with
    ``sync_every``, an fdatasync of the file also starts on a second thread every so many
    bytes (one at a time), as the copy's destination does, so that the disk writes while the
    page cache fills."""
    chunk = os.urandom(CHUNK_BYTES)
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    syncing: threading.Thread | None = None
    try:
        left, unsynced = total, 0
        while left > 0:
            written = os.write(fd, chunk[: min(left, CHUNK_BYTES)])
            left, unsynced = left - written, unsynced + written
            if sync_every and unsynced >= sync_every and (syncing is None or not syncing.is_alive()):
                unsynced, syncing = 0, threading.Thread(target=os.fdatasync, args=(fd,))
                syncing.start()
        if syncing is not None:
            syncing.join()
        os.fdatasync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    path.unlink()
    return elapsed


def _mid(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def report_copy(r: CopyResult) -> None:
    runs = r.runs
    nbytes = runs[0].nbytes
    copy_s = statistics.median(one.seconds for one in runs)
    transfer_s = _mid([one.transfer_s for one in runs])
    lock_s = _mid([one.lock_s for one in runs])
    copy_rate = nbytes / copy_s / MB
    transfer = nbytes / transfer_s / MB if transfer_s else None
    loop_rate = nbytes / r.loopback_s / MB
    disk_rate = nbytes / r.synced_behind_s / MB
    once_rate = nbytes / r.disk_s / MB
    each = f"median of {len(runs)}" if len(runs) > 1 else "one copy"
    figures = [
        Figure(f"tablet copy, request to RUNNING, MB/s ({each})", copy_rate, loop_rate, ">= 0.50", 0),
        Figure("  seconds", copy_s, r.loopback_s, "", 2),
        Figure("  the transfer alone (fetch, write, fsync, CRC check), MB/s", transfer, loop_rate, "", 0),
        Figure("  floor: the same bytes to disk, synced every 64 MiB behind, MB/s", disk_rate, loop_rate, "", 0),
        Figure("  the same bytes written to disk, then synced once, MB/s", once_rate, loop_rate, "", 0),
    ]
    print_table(
        f"Tablet copy: {r.rows:,} rows ({r.raw_bytes / 1e9:.2f} GB of rows, {r.file_bytes / 1e9:.2f} GB DuckDB file, "
        f"{nbytes / 1e9:.2f} GB copied with the WAL) between two tablet servers; {load_average()}",
        "loopback TCP",
        figures,
        ["reference: the same bytes over loopback TCP between two processes (1 connection, 4 MiB requests)"]
        + (
            [f"each copy: {', '.join(f'{one.seconds:.2f} s ({nbytes / one.seconds / MB:.0f} MB/s)' for one in runs)}"]
            if len(runs) > 1
            else []
        ),
    )
    print_table(
        "The same copy against the physical bound: the same bytes written to a file on the data directory's disk "
        "in 4 MiB writes, an fdatasync every 64 MiB on a second thread and one at the end (the better of two)",
        "disk",
        [
            Figure("tablet copy, request to RUNNING, MB/s", copy_rate, disk_rate, "", 0),
            Figure("  the transfer alone (fetch, write, fsync, CRC check), MB/s", transfer, disk_rate, "", 0),
        ],
    )
    print_table(
        "Write gap of the copy (one writer upserting 100-row batches into the copied tablet)",
        "before",
        [
            Figure(
                "the writer's longest call during the copy, ms",
                statistics.median(one.during_max_s for one in runs) * 1e3,
                r.before_max_s * 1e3,
                "",
                0,
            ),
            Figure(
                "the writer's median call during the copy, ms",
                statistics.median(one.during_median_s for one in runs) * 1e3,
                r.before_median_s * 1e3,
                "",
                1,
            ),
            Figure("the source's snapshot under the tablet's lock (writes wait), ms", lock_s and lock_s * 1e3),
            Figure("load rate, MB/s of rows (one session, fsync on, RF 1)", r.raw_bytes / r.load_s / MB),
        ],
        [
            "reference column: the writer's calls in the baseline before the first copy",
            f"writer: {r.writer_calls:,} calls of {WRITER_ROWS} rows, {len(r.writer_errors)} failed"
            + (f" (e.g. {r.writer_errors[0]})" if r.writer_errors else ""),
        ],
    )
    for i, one in enumerate(runs):
        print_timeline(f"copy {i + 1} of {len(runs)}" if len(runs) > 1 else "the copy", one)


def print_timeline(title: str, timed: CopyRun) -> None:
    """The copy's steps in order, seconds from the destination's start (source steps nested)."""
    print(f"\nTimeline of {title}: seconds from the destination taking StartTabletCopy; the source's steps")
    print("are inside 'begin', the download's sync and check steps inside 'download'")
    rows: list[tuple[str, str, str, str]] = [("step", "at", "took", "")]
    at = 0.0
    for name, seconds in timed.dest_steps.items():
        extra = ""
        if name == "download" and timed.fetch_s:
            extra = f"{timed.nbytes / timed.fetch_s / MB:,.0f} MB/s fetch and write ({timed.fetch_s:.3f} s)"
        rows.append((name, f"{at:.3f}", f"{seconds:.3f}", extra))
        nested = {"begin": timed.source_steps, "download": timed.verify_steps}.get(name, {})
        for sub, sub_s in nested.items():
            rows.append((f"  {'source: ' if name == 'begin' else ''}{sub}", "", f"{sub_s:.3f}", ""))
        at += seconds
    rows.append(("RUNNING seen by the benchmark (20 ms polls)", f"{timed.seconds:.3f}", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print(f"  {row[0].ljust(widths[0])}  {row[1].rjust(widths[1])}  {row[2].rjust(widths[2])}  {row[3]}".rstrip())
    cpu = ", ".join(f"{who} {s:.2f} s ({s / timed.seconds:.2f} cores)" for who, s in timed.cpu_s.items())
    print(f"  CPU during the copy: {cpu}; 2 cores in all")


# --- the move -------------------------------------------------------------------------------


@dataclass
class MoveResult:
    rows: int
    file_bytes: int
    writers: int
    move_s: float
    gap_s: float
    gap_at_s: float
    steps: list[tuple[float, str]]
    step_down_gaps: list[float]
    copy_steps: dict[str, float]
    copy_lock_s: float | None
    acks: int
    errors: list[str]


def longest_gap_at(acks: list[float], start: float, end: float) -> tuple[float, float]:
    """The longest interval between consecutive acknowledgements overlapping [start, end], and
    when it began (seconds after ``start``)."""
    times = sorted(t for t in acks if t >= start - 60)
    gaps = [(b - a, a - start) for a, b in itertools.pairwise(times) if b >= start and a <= end]
    return max(gaps, default=(float("nan"), float("nan")))


async def measure_move(cluster: MiniCluster, args: argparse.Namespace) -> MoveResult:
    client = await connect(cluster)
    messenger = Messenger()
    writers: Writers | None = None
    try:
        table = await client.create_table("move_bench", SCHEMA, Partitioning(), num_replicas=3, wait=True)
        tablet_id = (await table.tablets())[0].tablet_id
        leader, _term = await wait_caught_up(cluster, messenger, tablet_id)
        print(f"Loading {args.move_size_gb:g} GB into tablet {tablet_id} (RF 3) ...", flush=True)
        rows, _load_s = await load(table, leader, tablet_id, int(args.move_size_gb * 1e9))
        pids = [s.process.pid for s in cluster.tservers + cluster.masters if s.process.pid is not None]
        await settle(pids, timeout_s=120)
        file_bytes = store_bytes(leader, tablet_id)
        writers = Writers(table, args.writers, first_id=WRITER_BASE)
        gaps: list[float] = []
        for i in range(args.step_downs):
            result = await step_down(cluster, messenger, writers, tablet_id, "graceful", STEP_DOWN_SPACING)
            print(f"  graceful step-down {i + 1}: gap {result.gap_s:.3f} s", flush=True)
            gaps.append(result.gap_s)
        leader, _term = await wait_caught_up(cluster, messenger, tablet_id)
        print("Starting a fresh tablet server ...", flush=True)
        fresh = await asyncio.to_thread(cluster.add_tserver)
        await wait_acks(writers, STEP_DOWN_SPACING)
        ops = TabletOps(client, tablet_id, MOVE_TIMEOUT_S)
        leader_view = await ops.leader()
        print(
            f"Moving the leader's replica ({leader_view.server_uuid[:8]}) to {fresh.process.name} "
            f"({fresh.uuid[:8]}) under {args.writers} writers ...",
            flush=True,
        )
        steps: list[tuple[float, str]] = []
        start = time.perf_counter()

        def note(message: str) -> None:
            steps.append((time.perf_counter() - start, message.split(": ", 1)[-1]))

        await move_replica(ops, leader_view.server_uuid, fresh.uuid, note, lambda _done, _total: None)
        end = time.perf_counter()
        if not await writers.wait_for_ack_after(end, 60):
            raise TimeoutError(f"no write was acknowledged after the move: {writers.errors[-3:]}")
        gap_s, gap_at = longest_gap_at(writers.acks, start, end)
        source = next(s for s in cluster.tservers if s.uuid == leader_view.server_uuid)
        copy_steps = logged_steps(fresh, ": phases: ")
        locks = logged_seconds(source, LOCK_HELD)
        return MoveResult(
            rows=rows,
            file_bytes=file_bytes,
            writers=args.writers,
            move_s=end - start,
            gap_s=gap_s,
            gap_at_s=gap_at,
            steps=steps,
            step_down_gaps=gaps,
            copy_steps=copy_steps[-1] if copy_steps else {},
            copy_lock_s=locks[-1] if locks else None,
            acks=len(writers.acks),
            errors=writers.errors,
        )
    finally:
        if writers is not None:
            await writers.stop()
        await messenger.close()
        await client.close()


def report_move(r: MoveResult) -> None:
    gaps = r.step_down_gaps
    print_table(
        f"Move of the leader's replica (3-4-3, nyala.tools.replica_ops.move_replica) under {r.writers} single-row "
        f"writers; a tablet of {r.rows:,} rows ({r.file_bytes / 1e9:.2f} GB DuckDB file), RF 3; {load_average()}",
        f"step-down (median of {len(gaps)})",
        [
            Figure(
                "write gap: longest time with no acknowledged write during the move, s",
                r.gap_s,
                median(gaps) if gaps else None,
                "",
                3,
            ),
            Figure("  the move, request to the source removed, s", r.move_s, digits=2),
            Figure("  the copy source's snapshot under the tablet's lock, s", r.copy_lock_s, digits=3),
        ],
        [
            "reference column: graceful leader step-downs of the same tablet under the same writers, this run "
            f"({', '.join(f'{g:.3f}' for g in gaps)} s; bench/step_down_bench.py measures more beside abrupt ones)",
            f"the longest gap began {r.gap_at_s:.2f} s into the move",
            f"writers: {r.acks:,} acknowledged writes, {len(r.errors)} failed"
            + (f" (e.g. {r.errors[-1]})" if r.errors else ""),
            "the move's steps, seconds from its start: " + "; ".join(f"{at:.2f} {what}" for at, what in r.steps),
            "the copy's steps on the new server: "
            + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in r.copy_steps.items()),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=1.0, help="GB of DuckDB file to copy")
    parser.add_argument("--copies", type=int, default=1, help="copies of the tablet, one after the other")
    parser.add_argument("--baseline", type=float, default=5.0, help="seconds of the writer alone before the copy")
    parser.add_argument("--no-writer", action="store_true", help="copy with no concurrent writer")
    parser.add_argument("--move-size-gb", type=float, default=0.25, help="GB of DuckDB file in the moved tablet")
    parser.add_argument("--writers", type=int, default=4, help="single-row writers during the move")
    parser.add_argument("--step-downs", type=int, default=5, help="graceful step-downs before the move")
    parser.add_argument("--no-copy", action="store_true", help="skip the copy between two servers")
    parser.add_argument("--no-move", action="store_true", help="skip the move of a leader's replica")
    parser.add_argument(
        "--reuse",
        type=Path,
        help="start the copy's cluster from a copy of the loaded cluster kept in this directory (loaded there "
        "first when it holds none): to compare two versions of the code on the same tablet",
    )
    parser.add_argument(
        "--tserver-flags",
        default="",
        help="extra flags of every tablet server, e.g. '--tablet-copy-transfer-chunk-size-bytes 8388608'",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data and logs under .bench-tmp")
    args = parser.parse_args()
    copied: CopyResult | None = None
    moved: MoveResult | None = None
    flags = tuple(shlex.split(args.tserver_flags))
    with scratch_dir("copy-bench-", args.keep) as root:
        if args.reuse:
            cluster, loaded = reused_cluster(args.reuse.resolve(), root / "copy", args)
            with cluster:
                copied = run(measure_copy(cluster, args, loaded))
        elif not args.no_copy:
            with MiniCluster(root / "copy", cluster_options(num_tservers=2, tserver_flags=flags)) as cluster:
                copied = run(measure_copy(cluster, args, run(load_copy_table(cluster, args))))
        if not args.no_move:
            with MiniCluster(root / "move", cluster_options(num_tservers=3, tserver_flags=flags)) as cluster:
                moved = run(measure_move(cluster, args))
    if copied is not None:
        report_copy(copied)
    if moved is not None:
        report_move(moved)


if __name__ == "__main__":
    main()
