"""TabletServerService: Write, Scan, Checksum, ListTablets and GetStatus.

Writes go to the tablet's leader (:meth:`TabletReplica.write`).  Scans are served by any
RUNNING replica from its own applied state: READ_LATEST reads what is applied now;
READ_YOUR_WRITES first waits, within the call's deadline, until the replica has applied
``min_applied_index`` (a write's ``op_index``).  A LEADER_ONLY scan (``leader_only``) is
refused with NOT_THE_LEADER by any other replica, and a new leader first applies everything
committed before its term (:meth:`TabletReplica.caught_up_leader`): after a restart of every
process, the leader's store lacks the rows only its WAL holds until then.  Reading from the
store blocks, so it never runs on the event loop: opening a scan runs in a worker thread
(it may wait for the tablet's lock), and a call's batches are read on the server's scan
pool, as many threads as its storage threads, so that scans use the server's share of the
cores and no more.

Checksum (Kudu's, for ksck's checksum scan) with no ``marker_index``: the leader replicates a
checksum marker and answers with its own checksum at it and the marker's index; with one, any
replica waits (within the call's deadline, at most :data:`CHECKSUM_WAIT_S` without one) until
it has applied the marker and answers with its checksum there (see :mod:`.checksum`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TypeVar

from nyala.errors import InvalidArgument, NyalaError, ServiceUnavailable, TimedOut
from nyala.proto import common_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext, RpcServer
from nyala.services import CHECKSUM, GET_TABLET_SERVER_STATUS, LIST_TABLETS, SCAN, WRITE
from nyala.storage import ScanSpec
from nyala.tserver.manager import TabletManager
from nyala.tserver.metrics import TabletServerMetrics
from nyala.tserver.options import TabletServerOptions
from nyala.tserver.result_tracker import request_id_from_pb
from nyala.tserver.scan_spec import plan_scan
from nyala.tserver.scanners import ScannerRegistry, ScanSession
from nyala.tserver.tablet import TabletReplica

T = TypeVar("T")

__all__ = ["CHECKSUM_WAIT_S", "Counters", "TabletService"]

#: How long a Checksum without a deadline waits for its replica to apply the marker and checksum.
CHECKSUM_WAIT_S = 60.0


@dataclass
class Counters:
    """What GetStatus reports; tests use scans_served to see which replica served a scan."""

    scans_served: int = 0
    writes_served: int = 0


class TabletService:
    """The client-facing calls of a tablet server."""

    def __init__(
        self,
        tablets: TabletManager,
        scanners: ScannerRegistry,
        scan_pool: Executor,
        options: TabletServerOptions,
        status: Callable[[], tuple[common_pb2.NodeInstancePB, common_pb2.ServerRegistrationPB]],
        more_status: Callable[[tpb.GetTabletServerStatusResponsePB], None] = lambda _response: None,
    ) -> None:
        self._tablets = tablets
        self._scanners = scanners
        self._scan_pool = scan_pool
        self._options = options
        self._status = status
        self._more_status = more_status
        self.counters = Counters()
        #: Rows written and scanned (the server's metrics; nothing exported by default).
        self.metrics = TabletServerMetrics()

    def register(self, rpc: RpcServer) -> None:
        rpc.add_method(WRITE, self.write)
        rpc.add_method(SCAN, self.scan)
        rpc.add_method(CHECKSUM, self.checksum)
        rpc.add_method(LIST_TABLETS, self.list_tablets)
        rpc.add_method(GET_TABLET_SERVER_STATUS, self.get_status)

    # -- Write ------------------------------------------------------------------------------

    async def write(self, request: tpb.WriteRequestPB, ctx: CallContext) -> tpb.WriteResponsePB:
        tablet = self._tablets.get(request.tablet_id)
        if len(ctx.request_sidecars) != 1:
            raise InvalidArgument(
                f"a Write carries its row operations in exactly one sidecar, got {len(ctx.request_sidecars)}"
            )
        request_id = request_id_from_pb(request.request_id) if request.HasField("request_id") else None
        response = await tablet.write(
            ctx.request_sidecars[0],
            request.schema_version,
            self._options.row_operations,
            self._options.max_write_bytes,
            request_id,
        )
        self.counters.writes_served += 1
        self.metrics.writes.row_errors.value += len(response.per_row_errors)
        return response

    # -- Scan ---------------------------------------------------------------------------------

    async def scan(self, request: tpb.ScanRequestPB, ctx: CallContext) -> tpb.ScanResponsePB:
        if request.HasField("new_scan_request"):
            if request.scanner_id:
                raise InvalidArgument("a scan call carries new_scan_request or scanner_id, not both")
            if request.call_seq_id != 0:
                raise InvalidArgument(f"the first call of a scan has call_seq_id 0, got {request.call_seq_id}")
            session = await self._open(request.new_scan_request, ctx)
        elif request.scanner_id:
            if request.close_scanner:
                self._scanners.close(request.scanner_id)
                self.counters.scans_served += 1
                return tpb.ScanResponsePB()
            session = self._scanners.continue_scan(request.scanner_id, request.call_seq_id)
        else:
            raise InvalidArgument("a scan call needs new_scan_request (to open) or scanner_id (to continue)")
        if request.close_scanner:
            self._scanners.close(session.scanner_id)
            self.counters.scans_served += 1
            return tpb.ScanResponsePB()
        response = await self._next_batch(session, request.batch_size_bytes, ctx)
        self.counters.scans_served += 1
        return response

    async def _open(self, new: tpb.NewScanRequestPB, ctx: CallContext) -> ScanSession:
        tablet = self._tablets.get(new.tablet_id)
        store, raft = tablet.require_running()
        if new.leader_only:
            await self._within_call(
                tablet.caught_up_leader(), ctx, lambda: f"leader of tablet {tablet.tablet_id} to catch up"
            )
        meta = tablet.meta
        if new.schema_version > meta.schema_version:
            raise ServiceUnavailable(
                f"scan uses schema version {new.schema_version} but this replica of tablet {tablet.tablet_id} "
                f"has applied only version {meta.schema_version}; retry or use another replica"
            )
        planned = plan_scan(new, meta.schema)
        if new.read_mode == tpb.READ_YOUR_WRITES and new.min_applied_index > raft.applied_index:
            await self._wait_applied(tablet, new.min_applied_index, ctx)
        scanner = await asyncio.to_thread(store.scan, planned.spec)
        key_schema = meta.schema if planned.ordered else None
        return self._scanners.register(tablet.tablet_id, scanner, planned.output_columns, key_schema)

    async def _wait_applied(self, tablet: TabletReplica, index: int, ctx: CallContext) -> None:
        _, raft = tablet.require_running()

        def what() -> str:
            return f"replica of tablet {tablet.tablet_id} to apply index {index} (it has applied {raft.applied_index})"

        await self._within_call(raft.wait_applied(index), ctx, what)

    @staticmethod
    async def _within_call(
        wait: Awaitable[T], ctx: CallContext, what: Callable[[], str], default_s: float | None = None
    ) -> T:
        """Await ``wait`` within the call's deadline (with a margin to answer), or ``default_s``
        without one; TimedOut after."""
        remaining = ctx.remaining()
        try:
            return await asyncio.wait_for(wait, default_s if remaining is None else remaining * 0.95)
        except TimeoutError:
            raise TimedOut(f"the call waited for the {what()} until its deadline") from None

    async def _next_batch(self, session: ScanSession, batch_size_bytes: int, ctx: CallContext) -> tpb.ScanResponsePB:
        budget = min(batch_size_bytes or self._options.scanner_default_batch_size_bytes,
                     self._options.scanner_max_batch_size_bytes)  # fmt: skip
        try:
            chunk = await asyncio.get_running_loop().run_in_executor(self._scan_pool, session.next_chunk, budget)
        except NyalaError:
            self._scanners.close(session.scanner_id)
            raise
        if not chunk.has_more:
            self._scanners.close(session.scanner_id)
        if chunk.ipc_stream is not None:
            ctx.add_sidecar(chunk.ipc_stream)
            self.metrics.bytes_scanned.value += chunk.ipc_stream.size
        self.metrics.rows_scanned.value += chunk.num_rows
        return tpb.ScanResponsePB(
            scanner_id=session.scanner_id if chunk.has_more else b"",
            has_more_results=chunk.has_more,
            num_rows=chunk.num_rows,
            last_primary_key=chunk.last_primary_key,
        )

    # -- Checksum ---------------------------------------------------------------------------------

    async def checksum(self, request: tpb.ChecksumRequestPB, ctx: CallContext) -> tpb.ChecksumResponsePB:
        if not request.tablet_id:
            raise InvalidArgument("a Checksum names the tablet to checksum (tablet_id)")
        if request.marker_index < 0:
            raise InvalidArgument(
                f"a Checksum's marker_index is 0 (to start one) or a marker's index, got {request.marker_index}"
            )
        tablet = self._tablets.get(request.tablet_id)
        _, raft = tablet.require_running()
        index = request.marker_index
        if index == 0:
            index = await self._within_call(
                tablet.replicate_checksum_marker(), ctx, lambda: f"checksum marker of tablet {tablet.tablet_id}",
                CHECKSUM_WAIT_S,
            )  # fmt: skip
        else:

            def applied() -> str:
                return f"replica of tablet {tablet.tablet_id} to apply index {index} (applied: {raft.applied_index})"

            await self._within_call(raft.wait_applied(index), ctx, applied, CHECKSUM_WAIT_S)
        rows = await self._within_call(
            tablet.checksum_at(index), ctx, lambda: f"checksum of tablet {tablet.tablet_id} at index {index}",
            CHECKSUM_WAIT_S,
        )  # fmt: skip
        return tpb.ChecksumResponsePB(checksum=rows.checksum, rows_checksummed=rows.num_rows, marker_index=index)

    # -- ListTablets and GetStatus ----------------------------------------------------------------

    async def list_tablets(self, request: tpb.ListTabletsRequestPB, ctx: CallContext) -> tpb.ListTabletsResponsePB:
        response = tpb.ListTabletsResponsePB()
        for tablet in sorted(self._tablets.tablets(), key=lambda t: t.tablet_id):
            meta = tablet.meta
            status = response.tablets.add(
                tablet_id=tablet.tablet_id,
                table_id=meta.table_id,
                table_name=meta.table_name,
                state=tablet.state,
                error=tablet.failure,
            )
            if tablet.state == tpb.RUNNING and tablet.store is not None and tablet.raft is not None:
                status.applied_index = tablet.raft.applied_index
                status.num_rows = await asyncio.to_thread(_count_rows, tablet)
            if request.need_metadata:
                status.partition = json.dumps(meta.partition.to_dict(), sort_keys=True).encode()
                status.partition_schema = json.dumps(meta.partition_schema.to_dict(), sort_keys=True).encode()
                status.schema = meta.schema.to_json()
                status.schema_version = meta.schema_version
                consensus = tablet.consensus_state()
                if consensus is not None:
                    status.committed_config.CopyFrom(consensus.committed_config)
        return response

    def get_status(
        self, request: tpb.GetTabletServerStatusRequestPB, ctx: CallContext
    ) -> tpb.GetTabletServerStatusResponsePB:
        instance, registration = self._status()
        response = tpb.GetTabletServerStatusResponsePB(
            instance=instance,
            registration=registration,
            scans_served=self.counters.scans_served,
            writes_served=self.counters.writes_served,
        )
        self._more_status(response)  # the tablet copy counters
        return response


def _count_rows(tablet: TabletReplica) -> int:
    store = tablet.store
    if store is None:
        return 0
    with store.scan(ScanSpec(projection=tablet.meta.schema.key_names[:1])) as scanner:
        return int(scanner.read_all().num_rows)
