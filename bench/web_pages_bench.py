"""Web page render time for a catalog of 10,000 tablets, beside the same pages for 10 tablets.

Builds a leader master's in-memory state (catalog, replica reports, tablet-server registry)
with ``--tablets`` tablets of RF 3 over ``--tservers`` servers in three locations, in this
process, and times each master page (handler plus HTML, and the JSON form) the way the web
server calls them, ``--repeat`` times (the median counts).  The reference is the same pages
for 10 tablets, measured in the same run: a page that pages its rows and summarises the
rest costs about the same for both, a page that walks every tablet grows with them.  The
``/metrics`` collectors of the master (tablets by health) are timed the same way.  On the
tablet server's side, a server hosting as many replicas: its ``/tablets`` page (a summary by
state and role over all, one page of rows) and its ``/metrics`` (gauges summed over every
replica), and apart the sum of bytes on disk that a worker thread refreshes at every
maintenance pass (two ``stat`` calls a replica, of a real file).

Usage: ``python bench/web_pages_bench.py [--tablets 10000] [--tservers 30] [--repeat 5]``.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from bench._cluster import median
from nyala.catalog import CatalogOptions, CatalogState, NewTablet, create_table_write, validate_create_table
from nyala.consensus.core import Role
from nyala.master.leader import LeaderView
from nyala.master.metrics import MasterMetrics
from nyala.master.replicas import ReplicaReport
from nyala.master.ts_manager import TSManager
from nyala.master.web import MasterPages
from nyala.placement import PlacementOptions
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import ColumnSchema, HashDimension, Partitioner, PartitionSchema, Schema
from nyala.tserver.metrics import TabletServerMetrics
from nyala.tserver.web import TabletServerPages
from nyala.web import PageRequest
from nyala.web.query import Query
from nyala.web.render import render_html, render_json
from nyala.web.view import Page

TABLETS_PER_TABLE = 1000
LOCATIONS = ("/dc1/rack1", "/dc1/rack2", "/dc1/rack3")


class Leader:
    """What the pages ask of the catalog manager: the leader's view."""

    def __init__(self, view: LeaderView) -> None:
        self.view = view

    def leader(self) -> LeaderView:
        return self.view


def build(num_tablets: int, num_tservers: int) -> tuple[LeaderView, TSManager]:
    schema = Schema.of([ColumnSchema.of("id", "int64", nullable=False), ColumnSchema.of("v", "string")], ["id"])
    servers = [f"{i:032x}" for i in range(1, num_tservers + 1)]
    ts = TSManager(unresponsive_timeout_ms=3_600_000)
    for i, uuid in enumerate(servers):
        heartbeat = mpb.TSHeartbeatRequestPB(instance=common_pb2.NodeInstancePB(permanent_uuid=uuid, instance_seqno=1))
        heartbeat.registration.rpc_addresses.add(host=f"127.0.1.{i % 250}", port=7050)
        ts.heartbeat(heartbeat, LOCATIONS[i % len(LOCATIONS)])
    state = CatalogState()
    options = CatalogOptions(max_create_tablets_per_ts=10**6)
    made = 0
    table_index = 0
    while made < num_tablets:
        count = min(TABLETS_PER_TABLE, num_tablets - made)
        partitioner = Partitioner(schema, PartitionSchema((HashDimension(("id",), count),), ()), [])
        request = mpb.CreateTableRequestPB(name=f"table{table_index:03d}", schema=schema.to_json(),
                                           partitioner=partitioner.to_json(), num_replicas=3)  # fmt: skip
        new = validate_create_table(request, num_tservers, options)
        table_id = f"{table_index:032x}"
        tablets = [
            NewTablet(
                f"{table_index:08x}{i:024x}", p, tuple(servers[(made + i + k * 7) % num_tservers] for k in range(3))
            )
            for i, p in enumerate(new.partitioner.partitions)
        ]
        state.apply(create_table_write(table_id, new, tablets, now_us=1))
        made += count
        table_index += 1
    view = LeaderView.build(1, state, PlacementOptions())
    for tablet in list(state.all_tablets()):
        leader = tablet.replicas[0]
        for uuid in tablet.replicas:
            role = common_pb2.LEADER if uuid == leader else common_pb2.FOLLOWER
            view.record_report(uuid, tablet, ReplicaReport(tpb.RUNNING, role, 1, leader, 0))
    return view, ts


def page_timer(path: str, handler: Callable[[PageRequest], Page], params: dict[str, str]) -> Callable[[], int]:
    def render() -> int:
        page = handler(PageRequest(Query([], {"format", "offset", "limit"}), params))
        html = render_html(page, server_title="Nyala master", nav=[], path=path, query=[])
        return len(html) + len(render_json(page))

    return render


def timings(num_tablets: int, num_tservers: int, repeat: int) -> dict[str, float]:
    view, ts = build(num_tablets, num_tservers)
    pages = MasterPages("m" * 32, Leader(view), ts, None, None, lambda: None)  # type: ignore[arg-type]
    first_table = view.catalog.live_tables()[0].table_id
    cases: dict[str, Callable[[], int]] = {
        "/tables": page_timer("/tables", pages.tables, {}),
        "/tables/{id}": page_timer("/tables/x", pages.table, {"table_id": first_table}),
        "/tservers": page_timer("/tservers", pages.tservers, {}),
        "/locations": page_timer("/locations", pages.locations, {}),
        "/tasks": page_timer("/tasks", pages.replica_work, {}),
    }
    registry = CollectorRegistry()
    metrics = MasterMetrics(registry)
    metrics.watch(view=lambda: view, ts_manager=ts, tasks_sent=dict, tasks_in_flight=list, rebalance=lambda: (0, 0))
    cases["/metrics (master)"] = lambda: len(generate_latest(registry))
    out: dict[str, float] = {}

    async def measure() -> None:  # /tasks reads the running loop's clock
        for name, case in cases.items():
            case()  # warm-up
            seconds = []
            for _ in range(repeat):
                start = time.perf_counter()
                case()
                seconds.append(time.perf_counter() - start)
            out[name] = median(seconds)

    asyncio.run(measure())
    return out


class FakeStore:
    """What the tablet server's pages and gauges read of a store; sizes ``stat`` a real file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def file_size_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, self.path))

    def memrowset_rows(self) -> int:
        return 100

    def memrowset_bytes(self) -> int:
        return 10_000


def fake_replica(i: int, path: str) -> SimpleNamespace:
    raft = SimpleNamespace(role=Role.LEADER if i % 3 == 0 else Role.FOLLOWER, term=2, leader_id=f"{i % 30:032x}",
                           last_index=100, commit_index=100, applied_index=100,
                           wal=SimpleNamespace(segment_count=2))  # fmt: skip
    return SimpleNamespace(tablet_id=f"{i:032x}", state=tpb.RUNNING, state_name="RUNNING", raft=raft,
                           store=FakeStore(path), meta=SimpleNamespace(table_name=f"table{i // 1000:03d}"))  # fmt: skip


def tserver_timings(num_tablets: int, repeat: int, path: str) -> dict[str, float]:
    replicas = [fake_replica(i, path) for i in range(num_tablets)]
    manager = SimpleNamespace(tablets=lambda: replicas)
    pages = TabletServerPages(manager, None, None, None, None, lambda: "")  # type: ignore[arg-type]
    registry = CollectorRegistry()
    metrics = TabletServerMetrics(registry)
    metrics.watch(tablets=lambda: replicas, flushes=lambda: 0, scanners_open=lambda: 0,  # type: ignore[arg-type,return-value]
                  scanners_expired=lambda: 0, copy_counters=lambda: None, copy_source=lambda: None,
                  copies_in_progress=lambda: 0)  # fmt: skip
    cases: dict[str, Callable[[], int]] = {
        "tserver /tablets": page_timer("/tablets", pages.tablet_list, {}),
        "tserver /metrics": lambda: len(generate_latest(registry)),
        # Off the event loop: the maintenance pass's worker thread.
        "tserver disk bytes": lambda: asyncio.run(metrics.refresh_disk_bytes()) or 0,
    }
    out: dict[str, float] = {}
    for name, case in cases.items():
        case()
        seconds = []
        for _ in range(repeat):
            start = time.perf_counter()
            case()
            seconds.append(time.perf_counter() - start)
        out[name] = median(seconds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tablets", type=int, default=10_000, help="tablets in the catalog")
    parser.add_argument("--tservers", type=int, default=30, help="tablet servers (three locations)")
    parser.add_argument("--repeat", type=int, default=5, help="renders per page (the median counts)")
    args = parser.parse_args()
    if args.tablets < 10 or args.tservers < 3:
        parser.error("--tablets must be at least 10 and --tservers at least 3")
    print(f"building a catalog of {args.tablets:,} tablets and of 10 tablets ...", flush=True)
    big = timings(args.tablets, args.tservers, args.repeat)
    small = timings(10, args.tservers, args.repeat)
    with tempfile.NamedTemporaryFile() as file:
        file.write(b"x" * 4096)
        file.flush()
        big.update(tserver_timings(args.tablets, args.repeat, file.name))
        small.update(tserver_timings(10, args.repeat, file.name))
    print(f"{'page':<20} {f'{args.tablets:,} tablets (ms)':>20} {'10 tablets (ms)':>16} {'ratio':>8}")
    for name in big:
        print(f"{name:<20} {big[name] * 1e3:>20.1f} {small[name] * 1e3:>16.1f} {big[name] / small[name]:>8.1f}")


if __name__ == "__main__":
    main()
