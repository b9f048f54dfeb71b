"""Reading one tablet: the Scan RPC stream, replica choice, and resuming after failures.

The first call opens a scanner on a replica chosen by the scan's replica selection (see
:mod:`.replicas`) with the projection, predicates, key bounds and limit; each later call
continues it by scanner id with ``call_seq_id`` one higher, and every answer carries up to
``batch_size_bytes`` of rows as one Arrow IPC stream in sidecar 0.

When opening fails (the server is down, does not host the tablet, or is not running it), the
next replica in order is tried; once all failed, the tablet's locations are fetched again
and the attempts start over after a backoff, until the deadline.

When a continuation fails (network error, timed-out attempt, expired scanner):

- an ORDERED scan (Kudu's fault-tolerant scan) opens a new scanner on the next replica that
  starts just after the last primary key it returned, with the limit reduced by the rows
  already read, so no row is returned twice or skipped; under READ_LATEST the new replica
  may have applied more or fewer writes than the old one;
- an unordered scan that has returned no rows yet starts over on the next replica;
- otherwise the scan raises, since an unordered scan cannot resume without repeating rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence

import pyarrow as pa

from nyala.errors import (
    IllegalState,
    InvalidArgument,
    NetworkError,
    NotFound,
    NotTheLeader,
    NyalaError,
    ServiceUnavailable,
    TimedOut,
)
from nyala.proto import tserver_pb2 as tpb
from nyala.services import SCAN

from ._context import ClientContext
from ._retry import Backoff, Deadline
from .meta_cache import TableInfo, TabletLocation
from .replicas import ReadMode, ReplicaSelection, order_replicas
from .scan_spec import ScanSpec

__all__ = ["TabletScan"]

log = logging.getLogger("nyala.client")

_REPLICA_FAILURES = (NetworkError, TimedOut, NotFound, IllegalState, ServiceUnavailable, NotTheLeader)


class TabletScan:
    """A stream of Arrow tables from one tablet."""

    def __init__(
        self,
        ctx: ClientContext,
        table: TableInfo,
        tablet: TabletLocation,
        spec: ScanSpec,
        *,
        count_only: bool = False,
        min_applied_index: int = 0,
    ) -> None:
        self.ctx = ctx
        self.table = table
        self.tablet = tablet
        self.spec = spec
        self.count_only = count_only
        self.min_applied_index = max(min_applied_index, ctx.op_indices.get(tablet.tablet_id, 0))
        self.scanner_id = b""
        self.server = ""
        self.call_seq_id = 0
        self.last_key = b""
        self.rows = 0
        self.done = spec.limit == 0
        self.failed: set[str] = set()

    @property
    def remaining_limit(self) -> int | None:
        return None if self.spec.limit is None else max(0, self.spec.limit - self.rows)

    async def next(self) -> tuple[pa.Table | None, int]:
        """The next batch of rows and its row count; (None, 0) when the tablet is exhausted."""
        if self.done:
            return None, 0
        deadline = Deadline(self.spec.timeout_s, f"scan of tablet {self.tablet.tablet_id} of {self.table.name!r}")
        backoff = Backoff(self.ctx.options, self.ctx.rng)
        while True:
            backoff.check(deadline)
            opening = not self.scanner_id
            try:
                if opening:
                    response, sidecars = await self._open(deadline, backoff)
                else:
                    response, sidecars = await self._continue(deadline)
            except NyalaError as exc:
                await self._recover(exc, opening, deadline, backoff)
                continue
            return self._consume(response, sidecars)

    async def _open(self, deadline: Deadline, backoff: Backoff) -> tuple[tpb.ScanResponsePB, list[memoryview]]:
        server = await self._choose_replica(deadline, backoff)
        address = self.ctx.server_address(server)
        if address is None:
            raise NotFound(f"tablet server {server} has no known address")
        lower, upper = self.spec.encoded_bounds(self.table.schema)
        new_scan = tpb.NewScanRequestPB(
            tablet_id=self.tablet.tablet_id,
            projected_columns=self._projection(),
            predicates=self.spec.predicates_json(self.table.schema),
            lower_bound_primary_key=lower,
            exclusive_upper_bound_primary_key=upper,
            limit=self.remaining_limit or 0,
            read_mode=self.spec.read_mode.name,
            min_applied_index=self.min_applied_index if self.spec.read_mode is ReadMode.READ_YOUR_WRITES else 0,
            order_by_primary_key=self.spec.ordered,
            last_primary_key=self.last_key if self.spec.ordered else b"",
            schema_version=self.table.schema_version,
            leader_only=self.spec.replica_selection is ReplicaSelection.LEADER_ONLY,
        )
        request = tpb.ScanRequestPB(
            new_scan_request=new_scan, call_seq_id=0, batch_size_bytes=self.spec.batch_size_bytes
        )
        self.server = server
        self.call_seq_id = 0
        timeout = max(1e-3, deadline.attempt_timeout(self.ctx.options))
        return await self.ctx.messenger.call_with_sidecars(address, SCAN, request, timeout=timeout)

    def _projection(self) -> list[str]:
        if self.count_only:
            return [self.table.schema.key_names[0]]  # the narrowest request that still counts rows
        return list(self.spec.projection) if self.spec.projection is not None else []

    async def _continue(self, deadline: Deadline) -> tuple[tpb.ScanResponsePB, list[memoryview]]:
        address = self.ctx.server_address(self.server)
        if address is None:
            raise NotFound(f"tablet server {self.server} has no known address")
        request = tpb.ScanRequestPB(
            scanner_id=self.scanner_id, call_seq_id=self.call_seq_id, batch_size_bytes=self.spec.batch_size_bytes
        )
        timeout = max(1e-3, deadline.attempt_timeout(self.ctx.options))
        return await self.ctx.messenger.call_with_sidecars(address, SCAN, request, timeout=timeout)

    async def _choose_replica(self, deadline: Deadline, backoff: Backoff) -> str:
        while True:
            order = order_replicas(
                self.tablet,
                self.ctx.meta.servers,
                self.spec.replica_selection,
                local_hosts=self.ctx.local_hosts,
                client_location=self.ctx.masters.client_location,
                salt=self.ctx.salt,
            )
            candidates = [u for u in order if u not in self.failed]
            if candidates:
                return candidates[0]
            # Every replica failed (or no leader is known): ask the master again, then retry.
            self.failed.clear()
            await backoff.wait(deadline)
            await self._refresh_tablet(deadline)

    async def _refresh_tablet(self, deadline: Deadline) -> None:
        locations = await self.ctx.meta.locations(self.table, deadline, refresh=True)
        fresh = locations.by_id(self.tablet.tablet_id)
        if fresh is None:
            raise NotFound(f"tablet {self.tablet.tablet_id} of table {self.table.name!r} no longer exists")
        self.tablet = fresh

    async def _recover(self, exc: NyalaError, opening: bool, deadline: Deadline, backoff: Backoff) -> None:
        """Prepare the next attempt after ``exc``, or raise it when the scan cannot go on."""
        log.debug("scan of tablet %s on %s failed: %s", self.tablet.tablet_id, self.server, exc)
        if isinstance(exc, InvalidArgument) and opening:
            fresh = await self.ctx.meta.table(deadline, table_id=self.table.id, refresh=True)
            if fresh.schema_version <= self.table.schema_version:
                raise exc
            self.table = fresh
            return
        if not isinstance(exc, _REPLICA_FAILURES) and not (isinstance(exc, InvalidArgument) and self.spec.ordered):
            raise exc
        resumable = self.rows == 0 or (self.spec.ordered and bool(self.last_key))
        if not resumable:
            raise type(exc)(
                f"scan of tablet {self.tablet.tablet_id} failed after {self.rows} rows and cannot resume "
                f"(only ordered scans resume on another replica): {exc}"
            ) from exc
        if self.server:
            self.failed.add(self.server)
        self.scanner_id = b""
        hint = exc.leader_hint if isinstance(exc, NotTheLeader) else None
        if hint and hint not in self.failed and hint in self.tablet.replica_uuids:
            # A replica naming the leader is followed at once, as writes do; one already tried
            # falls through to the pause, so replicas naming each other cannot make it spin.
            self.tablet = dataclasses.replace(self.tablet, leader_uuid=hint)
            return
        await backoff.wait(deadline, exc)

    def _consume(self, response: tpb.ScanResponsePB, sidecars: Sequence[memoryview]) -> tuple[pa.Table | None, int]:
        self.call_seq_id += 1
        self.scanner_id = response.scanner_id
        if response.last_primary_key:
            self.last_key = response.last_primary_key
        self.rows += response.num_rows
        if not response.has_more_results or not response.scanner_id:
            self.done, self.scanner_id = True, b""
        elif self.spec.limit is not None and self.rows >= self.spec.limit:
            self.done = True
            self.close_soon()
        if self.count_only or response.num_rows == 0 or not sidecars:
            return None, response.num_rows
        return pa.ipc.open_stream(pa.py_buffer(sidecars[0])).read_all(), response.num_rows

    def close_soon(self) -> None:
        """Release the server's scanner without waiting (best effort; the TTL reaps it otherwise)."""
        if not self.scanner_id:
            return
        address = self.ctx.server_address(self.server)
        scanner_id, self.scanner_id = self.scanner_id, b""
        if address is None:
            return
        request = tpb.ScanRequestPB(scanner_id=scanner_id, call_seq_id=self.call_seq_id, close_scanner=True)
        task = asyncio.get_running_loop().create_task(
            self.ctx.messenger.call(address, SCAN, request, timeout=self.ctx.options.rpc_attempt_timeout_ms / 1000)
        )
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
