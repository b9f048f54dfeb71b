"""Test kit for the tablet server's integration tests (a helper module, no tests of its own).

Real ``nyala tserver start`` processes on loopback, driven from the test: a stand-in master
(an RpcServer in the test process answering TSHeartbeat and recording every report), direct
CreateTablet calls with a 3-voter config, and plain RPC for writes and scans.  The asyncio
side (stand-in master, messenger) lives on a loop in a background thread so that ordinary
synchronous tests can call into it.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from google.protobuf.message import Message

from nyala.common.hostport import HostPort
from nyala.consensus.core import RaftConfig
from nyala.errors import NotTheLeader, NyalaError, RetriableError
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext, Messenger, RpcMethod, RpcServer
from nyala.rpc.loop import loop_factory
from nyala.schema import ColumnSchema, OpType, Partition, Partitioner, PartitionSchema, Schema, make_row_operations
from nyala.server.fs import ServerStatus
from nyala.services import GET_CONSENSUS_STATE, SCAN, TS_HEARTBEAT, WRITE
from nyala.testing.process import ServerProcess, stop_all
from nyala.testing.wait import wait_for
from nyala.tserver.tablet import config_to_pb

T = TypeVar("T")
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

TSERVER_PORT = 7050
SCHEMA = Schema.of(
    [ColumnSchema.of("id", "int64", nullable=False), ColumnSchema.of("v", "double"), ColumnSchema.of("s", "string")],
    ["id"],
)
WHOLE = PartitionSchema()


class LoopThread:
    """An event loop on a daemon thread; ``run`` executes a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = loop_factory()()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class Heartbeat:
    at: float
    request: mpb.TSHeartbeatRequestPB


@dataclass
class StandInMaster:
    """Answers TSHeartbeat like the leader master: re-registration, full report on first
    contact, and every registered tablet server's address."""

    heartbeats: dict[str, list[Heartbeat]] = field(default_factory=dict)
    registrations: dict[str, common_pb2.ServerRegistrationPB] = field(default_factory=dict)
    latest: dict[tuple[str, str], mpb.ReportedTabletPB] = field(default_factory=dict)
    rpc: RpcServer = field(default_factory=RpcServer)

    def __post_init__(self) -> None:
        self.rpc.add_method(TS_HEARTBEAT, self._heartbeat)

    def _heartbeat(self, request: mpb.TSHeartbeatRequestPB, ctx: CallContext) -> mpb.TSHeartbeatResponsePB:
        uuid = request.instance.permanent_uuid
        response = mpb.TSHeartbeatResponsePB(leader_master=True)
        if uuid not in self.registrations and not request.HasField("registration"):
            response.needs_reregister = True
            return response
        first_contact = uuid not in self.heartbeats
        if request.HasField("registration"):
            self.registrations[uuid] = request.registration
        self.heartbeats.setdefault(uuid, []).append(Heartbeat(time.monotonic(), request))
        for tablet in request.tablet_report.updated_tablets:
            self.latest[(uuid, tablet.tablet_id)] = tablet
        response.needs_full_tablet_report = first_contact
        response.tablet_report_sequence_number = request.tablet_report.sequence_number
        for ts_uuid, registration in self.registrations.items():
            address = registration.rpc_addresses[0]
            response.tserver_addresses.add(permanent_uuid=ts_uuid, rpc_address=address)
        return response


class TabletServers:
    """N tablet server processes on their own 127.a.b.x addresses, stopped by PID at the end."""

    def __init__(self, root: Path, master: HostPort, count: int, flags: Sequence[str] = ()) -> None:
        block = f"127.{random.randint(100, 254)}.{random.randint(0, 254)}"
        self.addresses = [HostPort(f"{block}.{10 + i}", TSERVER_PORT) for i in range(count)]
        self.dirs = [root / f"ts-{i}" for i in range(count)]
        self.processes = [
            ServerProcess(
                f"tserver-{i}",
                [
                    sys.executable, "-m", "nyala", "tserver", "start",
                    "--fs-data-dir", str(self.dirs[i]),
                    "--rpc-bind-address", str(self.addresses[i]),
                    "--master-addresses", str(master),
                    *flags,
                ],
                root / "logs" / f"tserver-{i}.log",
            )
            for i in range(count)
        ]  # fmt: skip
        self.uuids: list[str] = [""] * count

    def start(self, indexes: Sequence[int] | None = None) -> None:
        chosen = range(len(self.processes)) if indexes is None else indexes
        for i in chosen:
            self.processes[i].start()
        for i in chosen:
            self.processes[i].wait_ready(lambda i=i: self._listening(i), timeout_s=60)  # type: ignore[misc]

    def _listening(self, i: int) -> bool:
        status = ServerStatus.read(self.dirs[i])
        if status is None or status.pid != self.processes[i].pid:
            return False
        self.uuids[i] = status.uuid
        return True

    def kill(self, i: int) -> None:
        self.processes[i].kill()

    def stop(self) -> None:
        stop_all(self.processes)

    def index_of(self, uuid: str) -> int:
        return self.uuids.index(uuid)

    def address_of(self, uuid: str) -> HostPort:
        return self.addresses[self.index_of(uuid)]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail(30)}" for p in self.processes)


def create_request(
    dest: str,
    tablet_id: str,
    voters: Sequence[str],
    *,
    schema: Schema = SCHEMA,
    partition_schema: PartitionSchema = WHOLE,
    partition: Partition | None = None,
    peers: dict[str, HostPort] | None = None,
) -> tpb.CreateTabletRequestPB:
    chosen = partition or Partitioner(schema, partition_schema).partitions[0]
    request = tpb.CreateTabletRequestPB(
        dest_uuid=dest,
        table_id="table-" + tablet_id,
        table_name="t_" + tablet_id,
        tablet_id=tablet_id,
        partition=json.dumps(chosen.to_dict()).encode(),
        partition_schema=json.dumps(partition_schema.to_dict()).encode(),
        schema=schema.to_json(),
        schema_version=0,
    )
    request.config.CopyFrom(config_to_pb(RaftConfig.of_voters(voters)))
    for uuid, address in (peers or {}).items():
        request.peer_addresses.add(
            permanent_uuid=uuid, rpc_address=common_pb2.HostPortPB(host=address.host, port=address.port)
        )
    return request


def rows(ids: Sequence[int]) -> list[dict[str, Any]]:
    return [{"id": i, "v": float(i), "s": f"row {i}"} for i in ids]


def insert_ops(ids: Sequence[int], op: OpType = OpType.INSERT, schema: Schema = SCHEMA) -> bytes:
    return make_row_operations(schema, op, rows(ids))


class Driver:
    """Synchronous RPC helpers over the loop thread."""

    def __init__(self, loop: LoopThread, messenger: Messenger, servers: TabletServers) -> None:
        self.loop = loop
        self.messenger = messenger
        self.servers = servers

    def call(
        self,
        address: HostPort,
        method: RpcMethod[Req, Resp],
        request: Req,
        sidecars: Sequence[bytes] = (),
        timeout: float = 10.0,
    ) -> Resp:
        return self.loop.run(self.messenger.call(address, method, request, timeout=timeout, sidecars=sidecars))

    def call_with_sidecars(
        self, address: HostPort, method: RpcMethod[Req, Resp], request: Req, timeout: float = 10.0
    ) -> tuple[Resp, list[memoryview]]:
        return self.loop.run(self.messenger.call_with_sidecars(address, method, request, timeout=timeout))

    def consensus(self, i: int, tablet_id: str) -> cpb.ConsensusStatePB:
        response = self.call(
            self.servers.addresses[i], GET_CONSENSUS_STATE, cpb.GetConsensusStateRequestPB(tablet_ids=[tablet_id])
        )
        return response.tablets[0]

    def leader(self, tablet_id: str, within_s: float = 30.0, alive: Sequence[int] | None = None) -> int:
        """Index of the server whose replica leads ``tablet_id`` and takes writes."""
        indexes = list(alive if alive is not None else range(len(self.servers.processes)))

        def find() -> int | None:
            for i in indexes:
                try:
                    state = self.consensus(i, tablet_id)
                except NyalaError:
                    continue
                if state.role == common_pb2.LEADER and state.commit_index >= state.last_index:
                    return i
            return None

        return wait_for(find, what=f"a leader of {tablet_id}", timeout_s=within_s)

    def write(
        self,
        tablet_id: str,
        ops: bytes,
        schema_version: int = 0,
        within_s: float = 30.0,
        request_id: tpb.RequestIdPB | None = None,
    ) -> tpb.WriteResponsePB:
        """Write through whoever leads, following hints and retrying retriable errors."""
        request = tpb.WriteRequestPB(tablet_id=tablet_id, schema_version=schema_version, request_id=request_id)
        target = [self.leader(tablet_id)]

        def written() -> tpb.WriteResponsePB:
            try:
                return self.call(self.servers.addresses[target[0]], WRITE, request, [ops])
            except NotTheLeader as e:
                target[0] = self.servers.index_of(e.leader_hint) if e.leader_hint else self.leader(tablet_id)
                raise
            except RetriableError:
                target[0] = self.leader(tablet_id)
                raise

        return wait_for(written, what=f"a write to {tablet_id}", timeout_s=within_s, retry_on=(RetriableError,))

    def scan(
        self, i: int, new: tpb.NewScanRequestPB, batch_size_bytes: int = 0
    ) -> tuple[pa.Table, list[tpb.ScanResponsePB]]:
        """Every row of a scan on server ``i``, and the responses it took."""
        response, sidecars = self.call_with_sidecars(
            self.servers.addresses[i],
            SCAN,
            tpb.ScanRequestPB(new_scan_request=new, batch_size_bytes=batch_size_bytes),
        )
        responses = [response]
        tables = [pa.ipc.open_stream(sidecars[0]).read_all()] if response.num_rows else []
        seq = 1
        while response.has_more_results:
            request = tpb.ScanRequestPB(
                scanner_id=response.scanner_id, call_seq_id=seq, batch_size_bytes=batch_size_bytes
            )
            response, sidecars = self.call_with_sidecars(self.servers.addresses[i], SCAN, request)
            responses.append(response)
            if response.num_rows:
                tables.append(pa.ipc.open_stream(sidecars[0]).read_all())
            seq += 1
        table = pa.concat_tables(tables) if tables else pa.table({})
        return table, responses

    def ids(self, i: int, tablet_id: str, **fields: Any) -> list[int]:
        table, _ = self.scan(i, tpb.NewScanRequestPB(tablet_id=tablet_id, order_by_primary_key=True, **fields))
        return table.column("id").to_pylist() if table.num_rows else []


@dataclass
class Cluster:
    """A stand-in master, N tablet servers and a driver, for one test module."""

    loop: LoopThread
    master: StandInMaster
    master_address: HostPort
    servers: TabletServers
    driver: Driver
    messenger: Messenger

    @classmethod
    def start(cls, root: Path, count: int, flags: Sequence[str]) -> Cluster:
        loop = LoopThread()
        master = StandInMaster()
        try:
            address = loop.run(_start_rpc(master.rpc, random_loopback()))
            messenger = loop.run(_make_messenger())
        except BaseException:
            loop.close()
            raise
        servers = TabletServers(root, address, count, flags)
        cluster = cls(loop, master, address, servers, Driver(loop, messenger, servers), messenger)
        try:
            servers.start()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def stop(self) -> None:
        try:
            self.servers.stop()
        finally:
            self.loop.run(self.messenger.close())
            self.loop.run(self.master.rpc.stop())
            self.loop.close()

    def wait_registered(self) -> None:
        """Until every server registered and heard back the full list of addresses."""
        uuids = set(self.servers.uuids)

        def done() -> bool:
            return self.loop.run(_snapshot(lambda: set(self.master.registrations))) >= uuids

        wait_for(done, what="every tablet server to register", timeout_s=30)

    def reports(self, uuid: str) -> list[Heartbeat]:
        return self.loop.run(_snapshot(lambda: list(self.master.heartbeats.get(uuid, []))))

    def latest(self, uuid: str, tablet_id: str) -> mpb.ReportedTabletPB | None:
        return self.loop.run(_snapshot(lambda: self.master.latest.get((uuid, tablet_id))))


def random_loopback() -> str:
    return f"127.{random.randint(100, 254)}.{random.randint(0, 254)}.1:0"


async def _start_rpc(rpc: RpcServer, address: str) -> HostPort:
    return await rpc.start(address)


async def _make_messenger() -> Messenger:
    return Messenger()


async def _snapshot(read: Callable[[], T]) -> T:
    return read()
