"""A fake tablet server for master tests: answers the admin RPCs and heartbeats like a real one.

It keeps tablets as plain records, answers CreateTablet / DeleteTablet / AlterSchema (recording
every call), and runs one heartbeat loop per master the way the contract describes: the
registration on first contact and when asked, a full tablet report on first contact and when
asked, incremental reports (tablets changed since) otherwise.  Every tablet claims the first
replica of its config as leader, in term 1, so the master sees a leader at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid as uuid_module
from collections.abc import Sequence

from nyala.errors import InvalidArgument, NyalaError, ServiceUnavailable
from nyala.proto import common_pb2, consensus_pb2, consensus_rpc_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext, Messenger, RpcServer
from nyala.services import ALTER_SCHEMA, CREATE_TABLET, DELETE_TABLET, TS_HEARTBEAT


@dataclasses.dataclass
class FakeTablet:
    tablet_id: str
    table_id: str
    config: consensus_pb2.RaftConfigPB
    schema_version: int
    state: tpb.TabletStatePB = tpb.RUNNING


class FakeTabletServer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``heartbeating`` pauses the heartbeats."""

    def __init__(self, masters: Sequence[str], *, host: str = "127.0.0.1", heartbeat_interval_s: float = 0.1) -> None:
        self.uuid = uuid_module.uuid4().hex
        self.masters = list(masters)
        self.host = host
        self.heartbeat_interval_s = heartbeat_interval_s
        self.instance_seqno = time.time_ns() // 1000
        self.tablets: dict[str, FakeTablet] = {}
        self.calls: list[tuple[str, object]] = []
        self.heartbeating = True
        self.ignore_deletes = False  # answer DeleteTablet but keep the tablet (a lost delete)
        self.ignore_alters = False  # answer AlterSchema but keep the old schema (a lost alter)
        self.fail_creates = False
        self.full_reports_sent = 0
        self.leader_master: str | None = None
        self._dirty: dict[str, set[str]] = {m: set() for m in self.masters}
        self._needs_registration = dict.fromkeys(self.masters, True)
        self._needs_full = dict.fromkeys(self.masters, True)
        self._seq = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.rpc = RpcServer()
        self.rpc.add_method(CREATE_TABLET, self._create)
        self.rpc.add_method(DELETE_TABLET, self._delete)
        self.rpc.add_method(ALTER_SCHEMA, self._alter)
        self.messenger = Messenger()
        self.address = ""

    async def start(self) -> None:
        bound = await self.rpc.start(f"{self.host}:0")
        self.address = str(bound)
        self._tasks = [asyncio.get_running_loop().create_task(self._heartbeat_loop(m)) for m in self.masters]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.rpc.stop()
        await self.messenger.close()

    def restart(self) -> None:
        """Act as a restarted process: a new instance that must register and report in full."""
        self.instance_seqno += 1
        for m in self.masters:
            self._needs_registration[m] = True
            self._needs_full[m] = True

    def calls_of(self, method: str) -> list[object]:
        return [r for name, r in self.calls if name == method]

    # -- admin RPCs ---------------------------------------------------------------------

    def _create(self, request: tpb.CreateTabletRequestPB, ctx: CallContext) -> tpb.CreateTabletResponsePB:
        self.calls.append(("create", request))
        if request.dest_uuid != self.uuid:
            raise InvalidArgument(f"CreateTablet for {request.dest_uuid} reached {self.uuid}")
        if self.fail_creates:
            raise ServiceUnavailable("fake tablet server refuses creations")
        if request.tablet_id not in self.tablets:
            self.tablets[request.tablet_id] = FakeTablet(
                request.tablet_id, request.table_id, request.config, request.schema_version
            )
            self._mark(request.tablet_id)
        return tpb.CreateTabletResponsePB()

    def _delete(self, request: tpb.DeleteTabletRequestPB, ctx: CallContext) -> tpb.DeleteTabletResponsePB:
        self.calls.append(("delete", request))
        tablet = self.tablets.get(request.tablet_id)
        if tablet is not None and not self.ignore_deletes and tablet.state != tpb.TOMBSTONED:
            tablet.state = tpb.TOMBSTONED
            self._mark(request.tablet_id)
        return tpb.DeleteTabletResponsePB()

    def _alter(self, request: tpb.AlterSchemaRequestPB, ctx: CallContext) -> tpb.AlterSchemaResponsePB:
        self.calls.append(("alter", request))
        if self.ignore_alters:
            return tpb.AlterSchemaResponsePB()
        tablet = self.tablets[request.tablet_id]
        tablet.schema_version = max(tablet.schema_version, request.schema_version)
        self._mark(request.tablet_id)
        return tpb.AlterSchemaResponsePB()

    def _mark(self, tablet_id: str) -> None:
        for dirty in self._dirty.values():
            dirty.add(tablet_id)

    # -- heartbeats -----------------------------------------------------------------------

    def _reported(self, tablet: FakeTablet) -> mpb.ReportedTabletPB:
        leader = tablet.config.peers[0].permanent_uuid
        role = common_pb2.LEADER if leader == self.uuid else common_pb2.FOLLOWER
        return mpb.ReportedTabletPB(
            tablet_id=tablet.tablet_id,
            state=tablet.state,
            schema_version=tablet.schema_version,
            consensus_state=consensus_rpc_pb2.ConsensusStatePB(
                tablet_id=tablet.tablet_id,
                current_term=1,
                leader_uuid=leader if tablet.state == tpb.RUNNING else "",
                role=role if tablet.state == tpb.RUNNING else common_pb2.NON_PARTICIPANT,
                committed_config=tablet.config,
            ),
        )

    def _request(self, master: str) -> tuple[mpb.TSHeartbeatRequestPB, set[str]]:
        host, _, port = self.address.rpartition(":")
        request = mpb.TSHeartbeatRequestPB(
            instance=common_pb2.NodeInstancePB(permanent_uuid=self.uuid, instance_seqno=self.instance_seqno),
            num_live_tablets=sum(t.state == tpb.RUNNING for t in self.tablets.values()),
        )
        if self._needs_registration[master]:
            request.registration.rpc_addresses.add(host=host, port=int(port))
        self._seq += 1
        full = self._needs_full[master]
        sent = set(self.tablets) if full else set(self._dirty[master])
        request.tablet_report.is_incremental = not full
        request.tablet_report.sequence_number = self._seq
        request.tablet_report.updated_tablets.extend(self._reported(self.tablets[t]) for t in sorted(sent))
        return request, sent

    async def _heartbeat_loop(self, master: str) -> None:
        while True:
            if self.heartbeating:
                await self._heartbeat(master)
            await asyncio.sleep(self.heartbeat_interval_s)

    async def _heartbeat(self, master: str) -> None:
        request, sent = self._request(master)
        try:
            response = await self.messenger.call(master, TS_HEARTBEAT, request, timeout=2.0)
        except NyalaError:
            return
        if not request.tablet_report.is_incremental:
            self.full_reports_sent += 1
        # A master that just became our leader needs everything, unless this report was everything.
        self._needs_full[master] = response.needs_full_tablet_report or (
            response.leader_master and self.leader_master != master and request.tablet_report.is_incremental
        )
        self._needs_registration[master] = response.needs_reregister
        if response.leader_master:
            self.leader_master = master
        if not response.needs_reregister:
            self._dirty[master] -= sent
