"""An in-process master with fake tablet servers, for the master's own tests."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import Message

from nyala.consensus.core import RaftOptions
from nyala.master import Master, MasterOptions
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger, RpcMethod
from nyala.schema import ColumnSchema, HashDimension, Partitioner, PartitionSchema, Schema
from nyala.server import ServerOptions
from nyala.testing.wait import wait_for_async

from .fake_tserver import FakeTabletServer

ResponseT = TypeVar("ResponseT", bound=Message)

TICK_MS = 20
FAST_RAFT = RaftOptions(raft_tick_interval_ms=TICK_MS, raft_heartbeat_interval_ms=100)


def master_options(data_dir: Path, **overrides: Any) -> MasterOptions:
    options = MasterOptions(
        server=ServerOptions(fs_data_dir=str(data_dir), rpc_bind_address="127.0.0.1:0", raft=FAST_RAFT),
        heartbeat_interval_ms=100,
        tserver_unresponsive_timeout_ms=60_000,
        tserver_warm_up_ms=1,  # tests wait for registrations themselves
    )
    return dataclasses.replace(options, **overrides)


@dataclasses.dataclass
class Cluster:
    """One in-process master and its fake tablet servers."""

    master: Master
    tservers: list[FakeTabletServer]
    messenger: Messenger

    @property
    def address(self) -> str:
        return str(self.master.address)

    async def call(self, method: RpcMethod[Any, ResponseT], request: Message, timeout: float = 10.0) -> ResponseT:
        return await self.messenger.call(self.address, method, request, timeout=timeout)

    async def add_tserver(self) -> FakeTabletServer:
        ts = FakeTabletServer([self.address], heartbeat_interval_s=0.1)
        await ts.start()
        self.tservers.append(ts)
        return ts

    def registered(self, n: int) -> bool:
        return sum(1 for d in self.master.ts_manager.all() if self.master.ts_manager.is_live(d)) >= n


@contextlib.asynccontextmanager
async def cluster(data_dir: Path, num_tservers: int = 3, **overrides: Any) -> AsyncIterator[Cluster]:
    """A ready leader master with ``num_tservers`` registered fake tablet servers."""
    master = Master(master_options(data_dir, **overrides))
    await master.start()
    c = Cluster(master, [], Messenger())
    try:
        await wait_for_async(lambda: master.catalog_manager.leader_ready, what="leader readiness")
        # A new leader writes its own address book entry in the background after it is ready;
        # tests that compare the catalog's applied index before and after a call need it done.
        await wait_for_async(
            lambda: master.uuid in master.catalog_manager.leader().catalog.masters, what="the address book entry"
        )
        for _ in range(num_tservers):
            await c.add_tserver()
        await wait_for_async(lambda: c.registered(num_tservers), what="tablet server registration")
        yield c
    finally:
        for ts in c.tservers:
            await ts.stop()
        await c.messenger.close()
        await master.stop()


def table_schema() -> Schema:
    return Schema.of(
        [
            ColumnSchema.of("id", "int64", nullable=False),
            ColumnSchema.of("ts", "int32", nullable=False),
            ColumnSchema.of("v", "string"),
        ],
        ["id", "ts"],
    )


def create_request(
    name: str = "t",
    *,
    buckets: int = 2,
    ranges: tuple[tuple[int, int], ...] = ((0, 100),),
    rf: int = 3,
    wait: bool = True,
) -> mpb.CreateTableRequestPB:
    s = table_schema()
    ps = PartitionSchema((HashDimension(("id",), buckets),), ("ts",))
    bare = Partitioner(s, ps, [])
    p = Partitioner(s, ps, [bare.bounds([lo], [hi]) for lo, hi in ranges])
    return mpb.CreateTableRequestPB(name=name, schema=s.to_json(), partitioner=p.to_json(), num_replicas=rf, wait=wait)


def range_step(kind: str, lo: int, hi: int) -> mpb.AlterTableStepPB:
    step = mpb.AlterTableStepPB()
    getattr(step, kind).CopyFrom(
        mpb.AlterTableStepPB.RangePartition(
            lower_bound=json.dumps([lo]).encode(), upper_bound=json.dumps([hi]).encode()
        )
    )
    return step
