"""Recovery: a tablet server lost for good under writes, and the master re-replicating its
replicas (Kudu's 3-4-3), beside a raw copy of the lost bytes over loopback TCP.

One master and six tablet servers in three locations (``/dc1/rack1`` to ``/dc1/rack3``, two
servers each) with the servers' default timings, except the failure timeout: tablet servers
report a follower silent for ``--failure-timeout-s`` (5) seconds as FAILED
(``--follower-unavailable-considered-failed-sec``) and the master stops placing replicas on a
server silent as long (``--tserver-unresponsive-timeout-ms``).  One table, ``id int64`` plus
1,000 characters of random base64 a row, hash-partitioned into ``--tablets`` (6) tablets, RF 3
(one replica per location), loaded through one AUTO_FLUSH_BACKGROUND session until a replica of
each tablet together holds ``--size-gb`` GB of DuckDB files (so the cluster holds three times
that).  Tablet leaders are spread, one per server.

``--writers`` (4) tasks each upsert one row per call, back to back (the writers of
``failover_bench.py``), noting each acknowledgement.  After ``--before`` (10) seconds of writes
the benchmark SIGKILLs one tablet server for good and polls the leader master every 100 ms
until every tablet is fully replicated again: three voters, none on the dead server, no
non-voter left.  Writes go on for ``--after`` (10) seconds more.  Figures:

- **healing**: from the kill until the last tablet is whole again; and each tablet's;
- **bytes copied** within and across locations: the tablet copy counters of every live tablet
  server (GetTabletServerStatus), summed, as they grew from the kill to the end;
- **write availability**: the longest time without an acknowledged write during healing, and
  writes acknowledged per second before, during and after;
- **reference**: the lost bytes (the dead server's replicas' DuckDB files) moved over loopback
  TCP between two processes in 4 MiB requests (``bench/_loopback.py``), after the healing.

Target: healing within the failure timeout plus three times the raw loopback copy of the lost
bytes.  A timeline from the logs says where the time went: the master's "re-replication:
added/removed" lines and each destination's tablet copy lines.

Usage: ``python bench/recovery_bench.py [--size-gb 1] [--tablets 6] [--writers 4]
[--failure-timeout-s 5] [--before 10] [--after 10] [--heal-timeout 600] [--keep]``.  A
tablet not whole ``--heal-timeout`` seconds after the kill is printed with its members as the
master lists them.  Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa

from bench._cluster import (
    Figure,
    cluster_options,
    connect,
    load_average,
    print_table,
    scratch_dir,
    settle,
    tablet_leaders,
)
from bench._loopback import measure_loopback
from bench.failover_bench import Writers
from bench.tablet_copy_bench import BATCH_ROWS, CHUNK_BYTES, ROW_CHARS, RandomText
from nyala.client import AsyncClient, AsyncTable, FlushMode, Partitioning, schema
from nyala.errors import NyalaError
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.services import GET_TABLET_SERVER_STATUS, LEADER_STEP_DOWN
from nyala.testing.minicluster import ClusterServer, MiniCluster

SCHEMA = schema([("id", "int64"), ("payload", "string")], primary_key="id")
TABLE = "recovery_bench"
LOCATIONS = {"/dc1/rack1": 2, "/dc1/rack2": 2, "/dc1/rack3": 2}
REPLICAS = 3
WRITER_BASE = 10**12  # the writers' keys, apart from the loaded ones
MEMROWSET_BYTES = 32 << 20  # what a tablet may hold in memory, not in its DuckDB file yet
POLL_S = 0.1
MB = 1e6
VOTERS = ("LEADER", "FOLLOWER")


# --- loading --------------------------------------------------------------------------------


def store_bytes(server: ClusterServer, tablet_ids: set[str] | None = None) -> int:
    """The DuckDB files of a server's replicas (of ``tablet_ids`` when given)."""
    total = 0
    for path in (server.data_dir / "stores").glob("*.duckdb*"):
        if path.is_file() and (tablet_ids is None or path.name.split(".", 1)[0] in tablet_ids):
            total += path.stat().st_size
    return total


def wal_bytes(server: ClusterServer, tablet_ids: set[str]) -> int:
    """The files of a server's replicas outside their stores: WAL segments and metadata."""
    total = 0
    for tablet_id in tablet_ids:
        directory = server.data_dir / "tablets" / tablet_id
        total += sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return total


async def load(cluster: MiniCluster, table: AsyncTable, tablets: int, target_bytes: int) -> tuple[int, float]:
    """Insert 1 KB rows until one replica of each tablet together holds ``target_bytes`` of
    DuckDB files (the MemRowSets' half-full average counted); returns rows and seconds."""
    text = RandomText()
    session = table.new_session(FlushMode.AUTO_FLUSH_BACKGROUND)
    rows, started, last_report = 0, time.perf_counter(), time.perf_counter()
    while True:
        for _ in range(16):  # about 16 MB of rows between two looks at the files
            ids = pa.array(range(rows, rows + BATCH_ROWS), pa.int64())
            await session.insert(pa.table({"id": ids, "payload": text.batch(BATCH_ROWS)}))
            rows += BATCH_ROWS
        if errors := await session.flush():
            raise RuntimeError(f"{len(errors)} row errors while loading, e.g. {errors[0]}")
        on_disk = sum(store_bytes(s) for s in cluster.tservers) / REPLICAS
        if time.perf_counter() - last_report > 10:
            last_report = time.perf_counter()
            print(f"  {rows:,} rows, {on_disk / 1e9:.2f} GB a replica set on disk so far", flush=True)
        if on_disk + tablets * MEMROWSET_BYTES / 2 >= target_bytes:
            break
    if errors := await session.close():
        raise RuntimeError(f"{len(errors)} row errors while loading, e.g. {errors[0]}")
    return rows, time.perf_counter() - started


async def lead_evenly(cluster: MiniCluster, table: AsyncTable, messenger: Messenger, timeout_s: float = 60.0) -> None:
    """Move tablet leaders so that every server leads its share: each tablet, in partition
    order, is led by the replica whose server leads the fewest so far.  (``spread_leaders`` of
    ``bench/_cluster.py`` assumes every server holds every tablet, which RF 3 on six does not.)"""
    led: dict[str, int] = {s.uuid: 0 for s in cluster.tservers}
    wanted: dict[str, str] = {}
    for tablet in await table.tablets():
        uuid = min((r.uuid for r in tablet.replicas), key=lambda u: (led[u], u))
        led[uuid] += 1
        wanted[tablet.tablet_id] = uuid
    address_of = {s.uuid: s.address for s in cluster.tservers}
    deadline = time.monotonic() + timeout_s
    while True:
        leaders = await tablet_leaders(cluster, messenger)
        wrong = [t for t, uuid in wanted.items() if leaders.get(t) != uuid]
        if not wrong:
            return
        if time.monotonic() > deadline:
            print(f"warning: {len(wrong)} of {len(wanted)} tablet leaders could not be moved in {timeout_s} s")
            return
        for tablet_id in wrong:
            current = leaders.get(tablet_id)
            if current is None:
                continue  # an election is under way; look again
            request = cpb.LeaderStepDownRequestPB(tablet_id=tablet_id, new_leader_uuid=wanted[tablet_id])
            try:
                await messenger.call(address_of[current], LEADER_STEP_DOWN, request)
            except NyalaError:
                pass  # asked again on the next round
        await asyncio.sleep(0.5)


# --- healing --------------------------------------------------------------------------------


def whole(tablet_replicas: list[tuple[str, str]], dead: str) -> bool:
    """Three voters, none on ``dead``, and no other member (a non-voter still being added)."""
    roles = [role for _uuid, role in tablet_replicas]
    return (
        len(tablet_replicas) == REPLICAS
        and all(role in VOTERS for role in roles)
        and dead not in {uuid for uuid, _ in tablet_replicas}
    )


async def wait_healed(
    table: AsyncTable, dead: str, killed_at: float, timeout_s: float
) -> tuple[dict[str, float], dict[str, str]]:
    """Poll the master until every tablet is whole, or ``timeout_s`` after the kill: each whole
    tablet's seconds from the kill, and the members of the others as the master lists them."""
    healed: dict[str, float] = {}
    broken: dict[str, str] = {}
    deadline = killed_at + timeout_s
    while time.perf_counter() < deadline:
        try:
            tablets = await table.tablets()
        except NyalaError:
            await asyncio.sleep(POLL_S)
            continue
        now = time.perf_counter() - killed_at
        broken = {}
        for tablet in tablets:
            members = [(r.uuid, r.role) for r in tablet.replicas]
            if whole(members, dead):
                healed.setdefault(tablet.tablet_id, now)
            else:
                healed.pop(tablet.tablet_id, None)  # not whole after all (a later step began)
                broken[tablet.tablet_id] = ", ".join(f"{uuid[:8]} {role}" for uuid, role in members)
        if not broken:
            break
        await asyncio.sleep(POLL_S)
    return healed, broken


async def copy_counters(messenger: Messenger, servers: list[ClusterServer]) -> tuple[int, int]:
    """Tablet copy bytes within and across locations, summed over ``servers``."""
    within = across = 0
    for server in servers:
        status = await messenger.call(server.address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
        within += status.tablet_copy_bytes_within_location
        across += status.tablet_copy_bytes_across_locations
    return within, across


# --- the logs -------------------------------------------------------------------------------

_STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ [\w.]+: "
# What the timeline shows: the master's decisions and each destination's copy.
_MASTER_LINES = re.compile(_STAMP + r"(re-replication: .*|asked the leader .*|tombstoned the replica .*)$", re.M)
_COPY_LINES = re.compile(
    _STAMP + r"(tablet copy of \S+ from \S+ \(.*\) started.*|tablet copy of \S+: (?:fetched|phases).*"
    r"|tablet copy of \S+ from \S+ failed.*)$",
    re.M,
)


def logged_at(stamp: str) -> float:
    """A log line's time (the servers log local time to the millisecond) as a Unix time."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def timeline(cluster: MiniCluster, killed_wall: float, names: dict[str, str]) -> list[tuple[float, str, str]]:
    """(seconds from the kill, server, what) of every re-replication and copy step logged."""
    events: list[tuple[float, str, str]] = []
    sources = [(cluster.masters[0], _MASTER_LINES)] + [(s, _COPY_LINES) for s in cluster.tservers]
    for server, pattern in sources:
        try:
            text = server.process.log_path.read_text(errors="replace")
        except FileNotFoundError:
            continue
        for stamp, what in pattern.findall(text):
            at = logged_at(stamp) - killed_wall
            if at >= -1.0:
                events.append((at, server.process.name, shorten(what, names)))
    return sorted(events)


def shorten(text: str, names: dict[str, str]) -> str:
    """Server uuids as process names, tablet ids cut to 8 characters, long tails cut."""
    for uuid, name in names.items():
        text = text.replace(uuid, name)
    text = re.sub(r"\b([0-9a-f]{8})[0-9a-f]{24}\b", r"\1", text)
    return text if len(text) <= 150 else text[:147] + "..."


# --- the run --------------------------------------------------------------------------------


@dataclass
class Result:
    rows: int
    load_s: float
    table_bytes: int  # one replica of each tablet: DuckDB files
    tablets: int
    victim: str
    victim_location: str
    victim_replicas: int
    victim_leads: int
    lost_bytes: int  # the victim's replicas' DuckDB files
    lost_wal_bytes: int  # and their WAL segments and metadata
    failure_timeout_s: float
    heal_timeout_s: float
    heal_s: float | None  # None: not whole within --heal-timeout
    tablet_heal_s: dict[str, float]
    unhealed: dict[str, str]  # tablet id -> its members as the master lists them
    copied_within: int
    copied_across: int
    loopback_s: float
    gap_s: float
    gap_at_s: float
    rate_before: float
    rate_during: float
    rate_after: float
    acks: int
    errors: list[str]
    writers: int
    events: list[tuple[float, str, str]] = field(default_factory=list)


def rate(acks: list[float], start: float, end: float) -> float:
    return sum(1 for t in acks if start <= t < end) / (end - start) if end > start else float("nan")


def longest_gap(acks: list[float], start: float, end: float) -> tuple[float, float]:
    """The longest interval between consecutive acknowledgements overlapping [start, end], and
    when it began (seconds after ``start``)."""
    times = sorted(acks)
    gaps = [(b - a, a - start) for a, b in itertools.pairwise(times) if b >= start and a <= end]
    return max(gaps, default=(float("nan"), float("nan")))


async def measure(cluster: MiniCluster, args: argparse.Namespace) -> Result:
    client: AsyncClient = await connect(cluster)
    messenger = Messenger()
    writers: Writers | None = None
    try:
        # Every tablet server registered first, or placement leaves the late ones out.
        deadline = time.monotonic() + 60
        while sum(s.live for s in await client.list_tablet_servers()) < len(cluster.tservers):
            if time.monotonic() > deadline:
                raise TimeoutError("the tablet servers did not all register in 60 s")
            await asyncio.sleep(0.2)
        partitioning = Partitioning().add_hash_partitions("id", args.tablets)
        table = await client.create_table(TABLE, SCHEMA, partitioning, num_replicas=REPLICAS, wait=True)
        print(f"Loading {args.size_gb:g} GB into {args.tablets} tablets (RF {REPLICAS}) ...", flush=True)
        rows, load_s = await load(cluster, table, args.tablets, int(args.size_gb * 1e9))
        pids = [s.process.pid for s in cluster.tservers + cluster.masters if s.process.pid is not None]
        print(f"Loaded {rows:,} rows in {load_s:.0f} s; waiting for the servers to go idle ...", flush=True)
        await settle(pids, timeout_s=300)
        await lead_evenly(cluster, table, messenger)

        tablets = await table.tablets()
        victim = cluster.tservers[0]
        hosted = {t.tablet_id for t in tablets if victim.uuid in {r.uuid for r in t.replicas}}
        leads = sum(1 for t in tablets if t.leader is not None and t.leader.uuid == victim.uuid)
        table_bytes = sum(store_bytes(s) for s in cluster.tservers) // REPLICAS
        survivors = [s for s in cluster.tservers if s is not victim]
        names = {s.uuid: s.process.name for s in cluster.tservers}
        within_before, across_before = await copy_counters(messenger, survivors)

        writers = Writers(table, args.writers, first_id=WRITER_BASE)
        print(f"{args.writers} writers for {args.before:g} s, then kill -9 {victim.process.name} ...", flush=True)
        await asyncio.sleep(args.before)
        lost_bytes, lost_wal = store_bytes(victim, hosted), wal_bytes(victim, hosted)
        killed_wall, killed_at = time.time(), time.perf_counter()
        cluster.kill(victim)
        print(
            f"Killed {victim.process.name} ({victim.location}: {len(hosted)} replicas, {leads} leaders, "
            f"{lost_bytes / 1e9:.2f} GB of DuckDB files); waiting for every tablet to be whole again ...",
            flush=True,
        )
        tablet_heal_s, unhealed = await wait_healed(table, victim.uuid, killed_at, args.heal_timeout)
        heal_s = None if unhealed else max(tablet_heal_s.values())
        healed_at = time.perf_counter() if heal_s is None else killed_at + heal_s
        if heal_s is None:
            print(f"  {len(unhealed)} tablets not whole {args.heal_timeout:g} s after the kill", flush=True)
        else:
            print(f"  healed in {heal_s:.2f} s; writes go on for {args.after:g} s more ...", flush=True)
        await asyncio.sleep(args.after)
        ended_at = time.perf_counter()
        await writers.stop()
        within_after, across_after = await copy_counters(messenger, survivors)
        acks = writers.acks
        gap_s, gap_at = longest_gap(acks, killed_at, healed_at)
        events = timeline(cluster, killed_wall, names)
        print(f"Reference: {lost_bytes / 1e9:.2f} GB over loopback TCP between two processes ...", flush=True)
        loopback = measure_loopback(max(lost_bytes, CHUNK_BYTES), CHUNK_BYTES, streams=1, repeat=1)
        return Result(
            rows=rows,
            load_s=load_s,
            table_bytes=table_bytes,
            tablets=len(tablets),
            victim=victim.process.name,
            victim_location=victim.location,
            victim_replicas=len(hosted),
            victim_leads=leads,
            lost_bytes=lost_bytes,
            lost_wal_bytes=lost_wal,
            failure_timeout_s=args.failure_timeout_s,
            heal_timeout_s=args.heal_timeout,
            heal_s=heal_s,
            tablet_heal_s=tablet_heal_s,
            unhealed=unhealed,
            copied_within=within_after - within_before,
            copied_across=across_after - across_before,
            loopback_s=loopback.seconds[0],
            gap_s=gap_s,
            gap_at_s=gap_at,
            rate_before=rate(acks, killed_at - args.before + 1.0, killed_at),  # the first second warms up
            rate_during=rate(acks, killed_at, healed_at),
            rate_after=rate(acks, healed_at, ended_at),
            acks=len(acks),
            errors=writers.errors,
            writers=args.writers,
            events=events,
        )
    finally:
        if writers is not None:
            await writers.stop()
        await messenger.close()
        await client.close()


def report(r: Result) -> None:
    bound = r.failure_timeout_s + 3 * r.loopback_s
    met = "yes" if r.heal_s is not None and r.heal_s <= bound else "no"
    copied = r.copied_within + r.copied_across
    after_timeout = None if r.heal_s is None else r.heal_s - r.failure_timeout_s
    print_table(
        f"Recovery: {r.victim} ({r.victim_location}) killed for good under {r.writers} single-row writers; "
        f"{r.tablets} tablets of {r.rows:,} rows, {r.table_bytes / 1e9:.2f} GB a replica set "
        f"({r.table_bytes * REPLICAS / 1e9:.2f} GB in all), RF 3, 3 locations x 2 tablet servers; {load_average()}",
        "loopback TCP",
        [
            Figure(
                "healing: kill to every tablet whole again, s",
                r.heal_s,
                bound,
                f"<= {r.failure_timeout_s:g} s + 3x loopback: {met}",
                2,
            ),
            Figure("  of which after the failure timeout, s", after_timeout, r.loopback_s, "", 2),
            Figure("  lost bytes: the dead server's replicas' DuckDB files, MB", r.lost_bytes / MB, digits=0),
            Figure("  bytes copied, all, MB", copied / MB, r.lost_bytes / MB, "", 0),
            Figure("    within locations, MB", r.copied_within / MB, digits=0),
            Figure("    across locations, MB", r.copied_across / MB, digits=0),
            Figure(
                "  lost bytes / time after the failure timeout, MB/s",
                r.lost_bytes / after_timeout / MB if after_timeout and after_timeout > 0 else None,
                r.lost_bytes / r.loopback_s / MB,
                "",
                0,
            ),
        ],
        [
            f"reference column: the lost bytes over loopback TCP between two processes "
            f"(1 connection, 4 MiB requests) took {r.loopback_s:.3f} s; the healing row's reference is the "
            f"target, {r.failure_timeout_s:g} s + 3 x {r.loopback_s:.3f} s",
            f"the dead server held {r.victim_replicas} replicas and led {r.victim_leads} tablets; its replicas also "
            f"had {r.lost_wal_bytes / MB:,.0f} MB of WAL segments and metadata",
            "each tablet whole again after (s): " + ", ".join(f"{s:.2f}" for s in sorted(r.tablet_heal_s.values())),
            *(f"NOT whole after {r.heal_timeout_s:g} s: tablet {t[:8]}: {m}" for t, m in r.unhealed.items()),
        ],
    )
    print_table(
        "Write availability during healing",
        "before the kill",
        [
            Figure("longest time without an acknowledged write during healing, s", r.gap_s, digits=3),
            Figure("writes acknowledged per second during healing", r.rate_during, r.rate_before, "", 0),
            Figure("writes acknowledged per second after healing", r.rate_after, r.rate_before, "", 0),
        ],
        [
            f"the longest gap began {r.gap_at_s:.2f} s after the kill",
            f"writers: {r.acks:,} acknowledged writes, {len(r.errors)} failed"
            + (f" (e.g. {r.errors[-1]})" if r.errors else ""),
            f"load: {r.rows:,} rows in {r.load_s:.0f} s ({r.rows * (ROW_CHARS + 8) / r.load_s / MB:.1f} MB/s of rows)",
        ],
    )
    print("\nTimeline, seconds from the kill (the master's re-replication steps, each destination's tablet copies):")
    for at, server, what in r.events:
        print(f"  {at:7.2f}  {server:<9}  {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=1.0, help="GB of DuckDB files in one replica of each tablet")
    parser.add_argument("--tablets", type=int, default=6, help="hash partitions of the table")
    parser.add_argument("--writers", type=int, default=4, help="single-row writers")
    parser.add_argument("--failure-timeout-s", type=float, default=5.0, help="follower and tablet server timeout")
    parser.add_argument("--before", type=float, default=10.0, help="seconds of writes before the kill")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of writes after healing")
    parser.add_argument("--heal-timeout", type=float, default=600.0, help="stop waiting for healing after so many s")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs under .bench-tmp")
    args = parser.parse_args()
    timeout = args.failure_timeout_s
    options = cluster_options(
        master_flags=("--tserver-unresponsive-timeout-ms", str(round(timeout * 1000))),
        tserver_flags=("--follower-unavailable-considered-failed-sec", f"{timeout:g}"),
    )
    with scratch_dir("recovery-bench-", args.keep) as root, MiniCluster(root, options, locations=LOCATIONS) as cluster:
        result = run(measure(cluster, args))
    report(result)


if __name__ == "__main__":
    main()
