"""Tablet copy: a tablet of ``--size-gb`` GB copied between two tablet servers, beside the same
bytes moved over a loopback socket between two processes, and the write gap the copy causes.

One master and two tablet servers with the servers' default settings (production timings,
4 MiB chunks, 4 fetches in flight, no throttle, fsync on).  One table of one tablet, RF 1,
``id int64`` plus a 1,000-character string of random base64 (about 1 KB a row that DuckDB
cannot compress much), loaded through one AUTO_FLUSH_BACKGROUND session until the tablet's
DuckDB file holds ``--size-gb`` GB.  Then, while one writer upserts 100-row batches into the
same tablet back to back (a closed loop, noting each call's latency):

- a baseline of ``--baseline`` seconds of the writer alone;
- StartTabletCopy to the other tablet server (the source is the tablet's only replica), timed
  from the request until the destination lists the tablet RUNNING with every row: the copy's
  whole cost (session with snapshot and CRCs, transfer, fsync and CRC check of every file,
  install, bootstrap);
- the bytes it moved (the destination's counters) over the same loopback TCP, in 4 MiB
  requests over one connection between two processes (``bench/_loopback.py``): the floor of
  moving them at all;
- the same bytes written to a file on the data directory's disk in 4 MiB writes and synced
  (``fdatasync``): the floor of landing them durably, which a copy must also do.

Figures: copy MB/s and the loopback's, their ratio (target >= 0.5); the transfer alone (from
the destination's log); the write gap: the writer's longest call during the copy beside its
longest before, and the store snapshot's duration (from the source's log: the time the
tablet's writes waited for the flush, checkpoint and local copy under its lock).

Usage: ``python bench/tablet_copy_bench.py [--size-gb 1] [--baseline 5] [--keep]``.  Figures
are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa

from bench._cluster import Figure, cluster_options, connect, load_average, print_table, scratch_dir, settle
from bench._loopback import measure_loopback
from nyala.client import AsyncTable, FlushMode, Partitioning, schema
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.services import GET_CONSENSUS_STATE, GET_TABLET_SERVER_STATUS, LIST_TABLETS, START_TABLET_COPY
from nyala.testing.minicluster import ClusterServer, MiniCluster

SCHEMA = schema([("id", "int64"), ("payload", "string")], primary_key="id")
ROW_CHARS = 1000
BATCH_ROWS = 1000
CHUNK_BYTES = 4 << 20  # the copy's default chunk, for the loopback reference
WRITER_ROWS = 100
WRITER_BASE = 10**12  # the writer's keys, apart from the loaded ones
COPY_TIMEOUT_S = 1800.0


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


@dataclass
class Result:
    rows: int
    raw_bytes: int
    load_s: float
    file_bytes: int
    copy_s: float
    copy_bytes: int
    transfer_s: float | None
    snapshot_s: float | None
    loopback_s: float
    disk_s: float
    before_max_s: float
    before_median_s: float
    during_max_s: float
    during_median_s: float
    writer_calls: int
    writer_errors: list[str]


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
    rows, started, last_report = 0, time.perf_counter(), 0.0
    while True:
        for _ in range(64):  # about 64 MB between two looks at the file
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
    while time.perf_counter() < deadline:
        listed = await messenger.call(dest.address, LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=120)
        tablet = next((t for t in listed.tablets if t.tablet_id == tablet_id), None)
        if tablet is not None and tablet.state == tpb.RUNNING and tablet.num_rows >= rows:
            return time.perf_counter() - started
        if tablet is not None and tablet.state in (tpb.FAILED, tpb.TOMBSTONED):
            raise RuntimeError(f"the copy ended {tpb.TabletStatePB.Name(tablet.state)}: {tablet.error}")
        await asyncio.sleep(0.02)
    raise TimeoutError(f"the copy did not finish in {COPY_TIMEOUT_S} s")


def logged_seconds(server: ClusterServer, pattern: str) -> float | None:
    """The last number of seconds a server's log gives for ``pattern`` (a regex with one group)."""
    found = re.findall(pattern, server.process.log_tail(5000))
    return float(found[-1]) if found else None


async def measure(cluster: MiniCluster, args: argparse.Namespace) -> Result:
    client = await connect(cluster)
    messenger = Messenger()
    writer: Writer | None = None
    try:
        table = await client.create_table("copy_bench", SCHEMA, Partitioning(), num_replicas=1, wait=True)
        tablet = (await table.tablets())[0]
        source = next(s for s in cluster.tservers if s.uuid == tablet.replicas[0].uuid)
        dest = next(s for s in cluster.tservers if s is not source)
        print(f"Loading {args.size_gb:g} GB into tablet {tablet.tablet_id} on {source.process.name} ...", flush=True)
        rows, load_s = await load(table, source, tablet.tablet_id, int(args.size_gb * 1e9))
        pids = [s.process.pid for s in cluster.tservers + cluster.masters if s.process.pid is not None]
        await settle(pids, timeout_s=120)
        file_bytes = store_bytes(source, tablet.tablet_id)
        print(f"Loaded {rows:,} rows in {load_s:.0f} s; the store holds {file_bytes / 1e9:.2f} GB", flush=True)

        writer = Writer(table)
        writer.stopping = args.no_writer
        writing = asyncio.ensure_future(writer.run())
        await asyncio.sleep(args.baseline)
        before_end = time.perf_counter()
        print(f"Copying to {dest.process.name} while one writer upserts {WRITER_ROWS}-row batches ...", flush=True)
        copy_start = time.perf_counter()
        copy_s = await copy(messenger, source, dest, tablet.tablet_id, rows)
        copy_end = time.perf_counter()
        await asyncio.sleep(1.0)
        writer.stopping = True
        await writing
        status = await messenger.call(dest.address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
        copy_bytes = status.tablet_copy_bytes_within_location + status.tablet_copy_bytes_across_locations
        print(f"Floor: {copy_bytes / 1e9:.2f} GB over loopback TCP between two processes ...", flush=True)
        loopback = measure_loopback(copy_bytes, CHUNK_BYTES, streams=1, repeat=1)
        print("Floor: the same bytes written to the data directory's disk and synced ...", flush=True)
        disk_s = measure_disk(cluster.root / "disk-floor.bin", copy_bytes)
        first = writer.calls[0][0] if writer.calls else before_end
        return Result(
            rows=rows,
            raw_bytes=rows * (ROW_CHARS + 8),
            load_s=load_s,
            file_bytes=file_bytes,
            copy_s=copy_s,
            copy_bytes=copy_bytes,
            transfer_s=logged_seconds(
                dest, r"tablet copy of \S+: fetched \d+ bytes in \d+ files from \S+ in ([\d.]+) s"
            ),
            snapshot_s=logged_seconds(source, r"local copy under the tablet's lock\) took ([\d.]+) s"),
            loopback_s=loopback.seconds[0],
            disk_s=disk_s,
            before_max_s=writer.longest_within(first, copy_start),
            before_median_s=writer.median(first, before_end),
            during_max_s=writer.longest(copy_start, copy_end),
            during_median_s=writer.median(copy_start, copy_end),
            writer_calls=len(writer.calls),
            writer_errors=writer.errors,
        )
    finally:
        if writer is not None:
            writer.stopping = True
        await messenger.close()
        await client.close()


def measure_disk(path: Path, total: int) -> float:
    """Seconds to write ``total`` bytes to a new file in 4 MiB writes and fdatasync it."""
    chunk = os.urandom(CHUNK_BYTES)
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        left = total
        while left > 0:
            left -= os.write(fd, chunk[: min(left, CHUNK_BYTES)])
        os.fdatasync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    path.unlink()
    return elapsed


def report(r: Result, args: argparse.Namespace) -> None:
    mb = 1e6
    copy_rate = r.copy_bytes / r.copy_s / mb
    loop_rate = r.copy_bytes / r.loopback_s / mb
    transfer = r.copy_bytes / r.transfer_s / mb if r.transfer_s else None
    figures = [
        Figure("tablet copy, request to RUNNING, MB/s", copy_rate, loop_rate, ">= 0.50", 0),
        Figure("  seconds", r.copy_s, r.loopback_s, "", 2),
        Figure("  the transfer alone (fetch, write, fsync, CRC check), MB/s", transfer, loop_rate, "", 0),
        Figure("  floor: the same bytes written to disk and synced, MB/s", r.copy_bytes / r.disk_s / mb,
               loop_rate, "", 0),
        Figure("write gap: the writer's longest call during the copy, ms", r.during_max_s * 1e3,
               r.before_max_s * 1e3, "", 0),
        Figure("  the writer's median call during the copy, ms", r.during_median_s * 1e3,
               r.before_median_s * 1e3, "", 1),
        Figure("  the store snapshot (writes wait for it), ms", r.snapshot_s * 1e3 if r.snapshot_s else None,
               digits=0),
        Figure("load rate, MB/s of rows (one session, fsync on, RF 1)", r.raw_bytes / r.load_s / mb, digits=0),
    ]  # fmt: skip
    print_table(
        f"Tablet copy: {r.rows:,} rows ({r.raw_bytes / 1e9:.2f} GB of rows, {r.file_bytes / 1e9:.2f} GB DuckDB file, "
        f"{r.copy_bytes / 1e9:.2f} GB copied with the WAL) between two tablet servers; {load_average()}",
        "loopback / before",
        figures,
        [
            "reference column: the same bytes over loopback TCP (1 connection, 4 MiB requests) for the rates; "
            "the writer's calls before the copy for the write gap",
            f"copy / disk floor: {r.disk_s / r.copy_s:.2f} (request to RUNNING), "
            + (f"{r.disk_s / r.transfer_s:.2f} (the transfer alone)" if r.transfer_s else "transfer not logged"),
            f"writer: {r.writer_calls:,} calls of {WRITER_ROWS} rows, {len(r.writer_errors)} failed"
            + (f" (e.g. {r.writer_errors[0]})" if r.writer_errors else ""),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=1.0, help="GB of DuckDB file to copy")
    parser.add_argument("--baseline", type=float, default=5.0, help="seconds of the writer alone before the copy")
    parser.add_argument("--no-writer", action="store_true", help="copy with no concurrent writer")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs under .bench-tmp")
    args = parser.parse_args()
    with scratch_dir("copy-bench-", args.keep) as root:
        with MiniCluster(root / "nyala", cluster_options(num_tservers=2)) as cluster:
            result = run(measure(cluster, args))
        report(result, args)


if __name__ == "__main__":
    main()
