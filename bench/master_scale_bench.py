"""How far one leader master scales: 1,000 tablet servers, 100,000 tablets, and location lookups.

A real :class:`nyala.master.Master` (its sys catalog, Raft replica, catalog manager, heartbeat
handler and RPC handlers) runs in this process, driven through its in-process service: the
benchmark calls the same handlers the RPC server would, with each request and response
encoded and decoded as protobuf as on the wire (the RPC framing itself is measured by
``rpc_bench.py``).  Phases:

1. **Load.** 100 tables x 1,000 tablets (10 hash buckets x 100 ranges), RF 3, replicas spread
   over 1,000 tablet servers in 10 locations (each tablet in three locations, 300 replicas a
   server), written to the sys catalog as one catalog write per table with every tablet
   RUNNING and its leader set, as after a settled CreateTable.
2. **Registration.** Every server registers and sends its full tablet report (300 replicas).
3. **Heartbeats.** Every server heartbeats once a second (paced), each with an incremental
   report of ``--dirty`` tablets (re-reported, unchanged), for ``--seconds``: CPU per
   heartbeat, the share of one core the 1,000 servers take, and heartbeats/s one core allows.
4. **Lookups on the leader.** ``GetTableLocations`` of a random table from a random tablet,
   ``--locations`` tablets per answer (Kudu's client asks for 10), interleaved with the
   heartbeats: the handler's latency (p50, p75, p99, p99.99) and CPU per lookup.
5. **Follower reads.** The same lookups answered the way a follower master answers them (its
   applied catalog, loaded from the same sys catalog, behind the staleness check), and the
   follower's own heartbeat cost (registration and liveness only).  Lookups/s with 3 masters
   is the capacity of one core per master: the leader's core minus its heartbeats, plus two
   followers' cores minus theirs, over each one's CPU per lookup; against the leader alone.

References printed beside the figures: Kudu's published GetTableLocations latency (p75 91 us,
p99.99 3.2 ms, from a production cluster in the Kudu paper, on its hardware), and, measured in
this run, the bare protobuf cost of building, encoding and decoding a locations answer of the
same size (what this machine's speed is).

Usage: ``python bench/master_scale_bench.py [--servers 1000] [--tablets 100000] [--locations-per-lookup 10]
[--dirty 1] [--seconds 5] [--dir .bench-tmp]``.  Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid as uuid_module
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from nyala.catalog import NewTable, NewTablet, create_table_write
from nyala.consensus.core import RaftOptions
from nyala.errors import NotTheLeader
from nyala.master import Master, MasterOptions
from nyala.master.catalog_manager import CatalogManager
from nyala.master.follower_reads import FollowerCatalog
from nyala.master.heartbeats import HeartbeatHandler
from nyala.master.locations import table_locations
from nyala.master.service import MasterService
from nyala.master.tablet_tasks import TabletTasks
from nyala.master.ts_manager import TSManager
from nyala.proto import common_pb2, consensus_pb2, consensus_rpc_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext
from nyala.schema import ColumnSchema, HashDimension, Partitioner, PartitionSchema, Schema
from nyala.server import ServerOptions
from nyala.testing.wait import wait_for_async

#: Kudu's published GetTableLocations latency (the Kudu paper, a production cluster).
KUDU_P75_US = 91.0
KUDU_P9999_US = 3200.0
LOCATIONS = 10
BUCKETS = 10
LEADER, FOLLOWER = "leader", "follower"


@dataclasses.dataclass
class SimServer:
    """One simulated tablet server: what it registers with and which replicas it reports."""

    uuid: str
    host: str
    location: str
    tablets: list[mpb.ReportedTabletPB] = dataclasses.field(default_factory=list)
    seqno: int = 0
    #: Per master (the leader, the follower): the address-book version last received.
    addresses_version: dict[str, int] = dataclasses.field(default_factory=dict)

    def request(self, master: str, *, register: bool, full: bool, dirty: Sequence[mpb.ReportedTabletPB] = ()) -> bytes:
        self.seqno += 1
        request = mpb.TSHeartbeatRequestPB(
            instance=common_pb2.NodeInstancePB(permanent_uuid=self.uuid, instance_seqno=1),
            num_live_tablets=len(self.tablets),
            tserver_addresses_version=self.addresses_version.get(master, 0),
        )
        if register:
            request.registration.rpc_addresses.add(host=self.host, port=7050)
        request.tablet_report.is_incremental = not full
        request.tablet_report.sequence_number = self.seqno
        request.tablet_report.updated_tablets.extend(self.tablets if full else dirty)
        return request.SerializeToString()


class FixedLocations:
    """Stands in for the location mapping command: the benchmark knows every host's location."""

    def __init__(self, by_host: dict[str, str]) -> None:
        self.by_host = by_host

    async def location_of_tserver(self, host: str) -> str:
        return self.by_host[host]

    async def location_of_client(self, host: str) -> str:
        return ""


class FollowerStandIn:
    """What a follower master's heartbeat handler sees of its catalog manager: not the leader."""

    leader_ready = False

    def leader(self) -> Any:
        raise NotTheLeader("this master is not the leader", "")


def schema() -> Schema:
    return Schema.of(
        [
            ColumnSchema.of("id", "int64", nullable=False),
            ColumnSchema.of("ts", "int32", nullable=False),
            ColumnSchema.of("v", "string"),
        ],
        ["id", "ts"],
    )


def context(method: str) -> CallContext:
    return CallContext(method=method, peer="127.0.0.1:1", deadline=None, request_sidecars=[])


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load_catalog(
    master: Master, servers: list[SimServer], tables: int, ranges: int, rng: random.Random
) -> list[tuple[str, list[bytes]]]:
    """Write the tables to the sys catalog; returns (table id, tablet start keys) per table."""
    cm = master.catalog_manager
    by_location: dict[str, list[SimServer]] = {}
    for s in servers:
        by_location.setdefault(s.location, []).append(s)
    locations = sorted(by_location)
    cursor = dict.fromkeys(locations, 0)
    bare = Partitioner(schema(), PartitionSchema((HashDimension(("id",), BUCKETS),), ("ts",)), [])
    partitioner = Partitioner(bare.schema, bare.partition_schema, [bare.bounds([r], [r + 1]) for r in range(ranges)])
    partitions = partitioner.partitions
    out = []
    by_uuid = {s.uuid: s for s in servers}
    for t in range(tables):
        table_id = uuid_module.uuid4().hex
        placed = []
        for k, partition in enumerate(partitions):
            first = (t * len(partitions) + k) % len(locations)
            replicas = []
            for j in range(3):  # three locations per tablet, round robin inside each
                location = locations[(first + j) % len(locations)]
                members = by_location[location]
                replicas.append(members[cursor[location] % len(members)].uuid)
                cursor[location] += 1
            placed.append(NewTablet(uuid_module.uuid4().hex, partition, tuple(replicas)))
        write = create_table_write(table_id, NewTable(f"table{t}", schema(), partitioner, 3), placed, 0)
        for m in write.mutations:
            if m.entry_type != mpb.TABLETS_ENTRY:
                continue
            entry = mpb.SysTabletsEntryPB()
            entry.ParseFromString(m.value)
            entry.state = mpb.SysTabletsEntryPB.RUNNING
            entry.leader_uuid = entry.committed_config.peers[0].permanent_uuid
            entry.reported_term = 1
            m.value = entry.SerializeToString(deterministic=True)
            for peer in entry.committed_config.peers:
                uuid = peer.permanent_uuid
                by_uuid[uuid].tablets.append(reported(m.entry_id, uuid, entry))

        async def replicate(write: mpb.CatalogWritePB = write) -> None:
            await cm.replicate(cm.leader(), write)

        await cm.exclusive(replicate)
        out.append((table_id, [p.partition_key_start for p in partitions]))
    return out


def reported(tablet_id: str, uuid: str, entry: mpb.SysTabletsEntryPB) -> mpb.ReportedTabletPB:
    leader = entry.leader_uuid
    config = consensus_pb2.RaftConfigPB()
    config.CopyFrom(entry.committed_config)
    return mpb.ReportedTabletPB(
        tablet_id=tablet_id,
        state=tpb.RUNNING,
        schema_version=0,
        consensus_state=consensus_rpc_pb2.ConsensusStatePB(
            tablet_id=tablet_id,
            current_term=1,
            leader_uuid=leader,
            role=common_pb2.LEADER if uuid == leader else common_pb2.FOLLOWER,
            committed_config=config,
        ),
    )


async def heartbeat(handler: HeartbeatHandler, server: SimServer, master: str, payload: bytes) -> float:
    """One heartbeat as the RPC server would run it; returns the CPU seconds it took."""
    start = time.thread_time()
    request = mpb.TSHeartbeatRequestPB()
    request.ParseFromString(payload)
    response = await handler.handle(request, context("TSHeartbeat"))
    wire = response.SerializeToString()
    cpu = time.thread_time() - start
    # The tablet server's side, not counted: it keeps the address book's version.
    answer = mpb.TSHeartbeatResponsePB.FromString(wire)
    if answer.tserver_addresses:
        server.addresses_version[master] = answer.tserver_addresses_version
    return cpu


async def heartbeat_phase(
    handler: HeartbeatHandler, servers: list[SimServer], seconds: float, dirty: int, rng: random.Random
) -> list[float]:
    """Every server heartbeats once a second for ``seconds``; the CPU of each heartbeat."""
    loop = asyncio.get_running_loop()
    cpu = []
    start = loop.time()
    for second in range(int(seconds)):
        payloads = [s.request(LEADER, register=False, full=False, dirty=rng.sample(s.tablets, dirty)) for s in servers]
        for server, payload in zip(servers, payloads, strict=True):
            cpu.append(await heartbeat(handler, server, LEADER, payload))
        # Paced: the next round starts on the next second (a real cluster's heartbeat interval).
        await asyncio.sleep(max(0.0, start + second + 1 - loop.time()))
    return cpu


def lookup_request(tables: list[tuple[str, list[bytes]]], per_lookup: int, rng: random.Random) -> bytes:
    table_id, starts = rng.choice(tables)
    return mpb.GetTableLocationsRequestPB(
        table=common_pb2.TableIdentifierPB(table_id=table_id),
        partition_key_start=rng.choice(starts),
        max_returned_locations=per_lookup,
        max_staleness_ms=5000,
    ).SerializeToString()


def timed_lookup(serve: Any, payload: bytes) -> tuple[float, float]:
    """One lookup as the RPC server would run it: (latency, CPU) in seconds."""
    start, cpu = time.perf_counter(), time.thread_time()
    request = mpb.GetTableLocationsRequestPB()
    request.ParseFromString(payload)
    serve(request).SerializeToString()
    return time.perf_counter() - start, time.thread_time() - cpu


async def lookup_phase(serve: Any, payloads: list[bytes]) -> tuple[list[float], list[float]]:
    latencies, cpu = [], []
    for k, payload in enumerate(payloads):
        latency, used = timed_lookup(serve, payload)
        latencies.append(latency)
        cpu.append(used)
        if k % 16 == 15:
            await asyncio.sleep(0)  # let heartbeats and Raft ticks interleave, as on a busy master
    return latencies, cpu


def protobuf_reference(sample: mpb.GetTableLocationsResponsePB, n: int) -> float:
    """Seconds to build, encode and decode a locations answer like ``sample``: the machine's speed."""
    start = time.perf_counter()
    for _ in range(n):
        out = mpb.GetTableLocationsResponsePB(ttl_millis=sample.ttl_millis)
        for loc in sample.tablet_locations:
            new = out.tablet_locations.add(tablet_id=loc.tablet_id, partition=loc.partition)
            for r in loc.replicas:
                new.replicas.add(ts_info_idx=r.ts_info_idx, role=r.role)
        for ts in sample.ts_infos:
            out.ts_infos.add(permanent_uuid=ts.permanent_uuid, rpc_addresses=ts.rpc_addresses, location=ts.location)
        mpb.GetTableLocationsResponsePB().ParseFromString(out.SerializeToString())
    return (time.perf_counter() - start) / n


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us"


async def run(args: argparse.Namespace, root: Path) -> None:
    rng = random.Random(7)
    n = args.servers
    servers = [
        SimServer(uuid_module.uuid4().hex, f"127.{1 + i // 250}.{i % 250}.1", f"/L{i % LOCATIONS}") for i in range(n)
    ]
    options = MasterOptions(
        server=ServerOptions(
            fs_data_dir=str(root / "master"),
            rpc_bind_address="127.0.0.1:0",
            raft=RaftOptions(raft_tick_interval_ms=100, raft_heartbeat_interval_ms=500),
        ),
        heartbeat_interval_ms=1000,
        tserver_unresponsive_timeout_ms=60_000,
        auto_rebalancing_enabled=False,
    )
    master = Master(options)
    locations = FixedLocations({s.host: s.location for s in servers})
    master.heartbeats._locations = cast(Any, locations)  # the benchmark maps hosts itself
    await master.start()
    try:
        await wait_for_async(lambda: master.catalog_manager.leader_ready, what="leadership", timeout_s=60)
        tables = args.tablets // (BUCKETS * 100) or 1
        load_start = time.perf_counter()
        catalog = await load_catalog(master, servers, tables, 100 if args.tablets >= 1000 else 1, rng)
        load_s = time.perf_counter() - load_start
        view = master.catalog_manager.leader()
        num_tablets = sum(1 for _ in view.catalog.all_tablets())
        print(f"catalog: {tables} tables, {num_tablets:,} tablets, RF 3, written in {load_s:.1f} s")

        handler = master.heartbeats
        reg_start = time.perf_counter()
        reg_cpu = 0.0
        for s in servers:
            reg_cpu += await heartbeat(handler, s, LEADER, s.request(LEADER, register=True, full=True))
        print(
            f"registration + full reports of {n:,} servers ({sum(len(s.tablets) for s in servers):,} replicas): "
            f"{time.perf_counter() - reg_start:.1f} s wall, {reg_cpu:.1f} s CPU, {us(reg_cpu / n)} a server"
        )
        # A follower's registry: the same servers register with it too (they heartbeat to all masters).
        follower_ts = TSManager(options.tserver_unresponsive_timeout_ms)
        follower_tasks = TabletTasks(
            cast(CatalogManager, FollowerStandIn()), follower_ts, master.messenger, interval_s=1.0, rpc_timeout_s=1.0
        )
        follower_hb = HeartbeatHandler(
            master.instance, follower_ts, cast(CatalogManager, FollowerStandIn()), follower_tasks, cast(Any, locations)
        )
        for s in servers:
            await heartbeat(follower_hb, s, FOLLOWER, s.request(FOLLOWER, register=True, full=True))

        # -- heartbeats --------------------------------------------------------------------
        load_before = os.getloadavg()[0]
        wall_start = time.perf_counter()
        hb_cpu = await heartbeat_phase(handler, servers, args.seconds, args.dirty, rng)
        wall = time.perf_counter() - wall_start
        leader_share = sum(hb_cpu) / wall
        per_hb = statistics.mean(hb_cpu)
        for s in servers:  # the second heartbeat: the follower's address book has everyone now
            await heartbeat(follower_hb, s, FOLLOWER, s.request(FOLLOWER, register=False, full=False))
        f_cpu = [
            await heartbeat(follower_hb, s, FOLLOWER, s.request(FOLLOWER, register=False, full=False)) for s in servers
        ]
        follower_per_hb = statistics.mean(f_cpu)
        follower_share = follower_per_hb * n  # n heartbeats a second
        print()
        print(f"heartbeats ({n:,} servers, 1 a second each, {args.dirty} tablet(s) in each incremental report, "
              f"{args.seconds:.0f} s; load average {load_before:.1f}):")  # fmt: skip
        print(f"  leader:   {us(per_hb)} CPU a heartbeat (p99 {us(percentile(hb_cpu, 0.99))}), "
              f"{leader_share:.2f} of a core for {n:,} servers (target < 0.5), "
              f"{1 / per_hb:,.0f} heartbeats/s on one core")  # fmt: skip
        print(f"  follower: {us(follower_per_hb)} CPU a heartbeat (liveness only), {follower_share:.2f} of a core")

        # -- lookups -------------------------------------------------------------------------
        service = MasterService(master)
        payloads = [lookup_request(catalog, args.locations_per_lookup, rng) for _ in range(args.lookups)]

        def leader_serve(request: mpb.GetTableLocationsRequestPB) -> mpb.GetTableLocationsResponsePB:
            return service.get_table_locations(request, context("GetTableLocations"))

        follower = FollowerCatalog()
        store = master.catalog_manager.store
        assert store is not None
        follower.open(await asyncio.to_thread(store.load))
        follower.attach(lambda: 1 << 60)  # as a follower that applied everything the leader committed

        def follower_serve(request: mpb.GetTableLocationsRequestPB) -> mpb.GetTableLocationsResponsePB:
            follower.heard_from_leader(1)  # a leader heartbeat every call: always within the bound
            return table_locations(
                follower.view(request.max_staleness_ms, ""), follower_ts, request, options.table_locations_ttl_ms
            )

        # Warm up both, then measure, with the heartbeats going on meanwhile.
        await lookup_phase(leader_serve, payloads[:1000])
        await lookup_phase(follower_serve, payloads[:1000])
        hb_task = asyncio.get_running_loop().create_task(heartbeat_phase(handler, servers, 1e9, args.dirty, rng))
        try:
            leader_lat, leader_cpu = await lookup_phase(leader_serve, payloads)
            follower_lat, follower_cpu = await lookup_phase(follower_serve, payloads)
        finally:
            hb_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await hb_task
        sample = leader_serve(mpb.GetTableLocationsRequestPB.FromString(payloads[0]))
        reference = protobuf_reference(sample, 2000)
        print()
        print(f"GetTableLocations, {args.locations_per_lookup} tablets an answer ({len(sample.ts_infos)} servers), "
              f"{len(payloads):,} lookups, heartbeats going on; load average {os.getloadavg()[0]:.1f}:")  # fmt: skip
        for name, lat, cpu in (("leader", leader_lat, leader_cpu), ("follower", follower_lat, follower_cpu)):
            print(f"  {name:<9} p50 {us(percentile(lat, 0.5))}, p75 {us(percentile(lat, 0.75))}, "
                  f"p99 {us(percentile(lat, 0.99))}, p99.99 {us(percentile(lat, 0.9999))}; "
                  f"{us(statistics.mean(cpu))} CPU a lookup, "
                  f"{1 / statistics.mean(cpu):,.0f} lookups/s on one core")  # fmt: skip
        print(f"  Kudu      p75 {KUDU_P75_US:.0f} us, p99.99 {KUDU_P9999_US / 1000:.1f} ms (published, its hardware)")
        print(f"  reference: protobuf alone (build, encode, decode the same answer): {us(reference)}")
        leader_capacity = (1 - leader_share) / statistics.mean(leader_cpu)
        follower_capacity = (1 - follower_share) / statistics.mean(follower_cpu)
        three = leader_capacity + 2 * follower_capacity
        print()
        print("lookups/s, one core per master, less each master's heartbeat share:")
        print(f"  leader alone:                 {leader_capacity:,.0f}")
        print(f"  leader + 2 followers (reads): {three:,.0f}  = {three / leader_capacity:.2f}x (target >= 2x)")
    finally:
        await master.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--tablets", type=int, default=100_000, help="a multiple of 1,000")
    parser.add_argument("--locations-per-lookup", type=int, default=10)
    parser.add_argument("--dirty", type=int, default=1, help="tablets in each incremental report")
    parser.add_argument("--seconds", type=float, default=5.0, help="of paced heartbeats")
    parser.add_argument("--lookups", type=int, default=20_000)
    parser.add_argument("--dir", default=".bench-tmp")
    args = parser.parse_args(argv)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="master-scale-", dir=args.dir))
    try:
        asyncio.run(run(args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
