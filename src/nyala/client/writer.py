"""Sending buffered operations: split by tablet, one Write RPC per tablet batch, retries.

Splitting: each buffered batch is mapped row by row to the table's partitions with the
Partitioner (column-wise in Arrow); rows of one partition keep their order, consecutive
pieces that set the same columns are merged, and a piece bigger than the session buffer is
cut so no RPC grows without bound.  Rows no range partition covers are handed back: the
session looks the table up again (another client may have added the range) and reports the
rows still uncovered as NotFound row errors.

Sending one tablet batch: the tablet is looked up by partition key in the meta cache and the
batch goes to its leader as one Write with the row operations in sidecar 0.

- NOT_THE_LEADER with a hint (the leader's uuid) moves the cached leader there; without a
  known hint the replica is skipped and, once every replica was tried, the tablet's locations
  are fetched again.  SERVICE_UNAVAILABLE (a leader still starting its term) waits and retries.
- A network error or a timed-out attempt marks that server as failed for this batch and
  tries the next replica (a follower answers with the new leader's uuid once one is elected).
  Such an attempt may have been applied, so every attempt of a batch carries the same request
  id (client id, sequence number; see :mod:`._requests`): a tablet that applied the batch
  answers the retry with its first answer instead of applying it again (exactly-once, as
  Kudu's RPCs).  The tablets remember answers in memory, so a retry that outlives the restart
  of every replica of its tablet may apply again; row errors of a batch that needed such a
  retry are flagged ``after_ambiguous_retry`` for that reason.
- INVALID_ARGUMENT may mean the tablet's schema is newer: the table is looked up again and, if
  its schema version grew, the batch is re-encoded against the new schema and sent again;
  otherwise every row of the batch gets the error.
- When the deadline passes, every row of the batch gets a TimedOut row error (outcome unknown).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

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
from nyala.schema import Partition, RowFailure, RowOperationOptions
from nyala.services import WRITE, row_failure_from_pb

from ._context import ClientContext
from ._retry import Backoff, Deadline
from .meta_cache import TableInfo, TabletLocation
from .operations import OpBatch, RowError, encode_batch
from .write_batcher import WriteBatcher, WriteOutcome

__all__ = ["TabletWork", "send_tablet_work", "split_by_partition"]

log = logging.getLogger("nyala.client")


@dataclasses.dataclass(slots=True)
class TabletWork:
    """The operations of one flush for one partition, in the order they were applied."""

    partition: Partition
    batches: list[OpBatch]


def split_by_partition(table: TableInfo, batches: Sequence[OpBatch]) -> tuple[list[TabletWork], list[OpBatch]]:
    """Group rows by partition, keeping their order; also return the rows no partition covers."""
    partitions = table.partitioner.partitions
    work: dict[int, TabletWork] = {}
    uncovered: list[OpBatch] = []
    for batch in batches:
        found = _partition_indices(table, batch)
        if len(found) == 1:
            distinct, indices = [int(found[0])], None  # one row (a single-row write): nothing to count
        else:
            # Partition indices are small (-1: none), so counting finds them without a sort.
            distinct = (np.flatnonzero(np.bincount(np.asarray(found) + 1)) - 1).tolist()
            indices = pa.array(found) if len(distinct) > 1 else None
        for index in distinct:
            # A pa.scalar, not an int: pyarrow looks for pandas on every call given a Python scalar.
            piece = batch if indices is None else _take(batch, pc.equal(indices, pa.scalar(index, pa.int64())))
            if index < 0:
                uncovered.append(piece)
                continue
            entry = work.setdefault(index, TabletWork(partitions[index], []))
            entry.batches.append(piece)
    for entry in work.values():
        entry.batches = _merge(entry.batches)
    return list(work.values()), uncovered


# Below this many rows, mapping rows one by one in Python beats Arrow's per-call overhead.
_SMALL_BATCH_ROWS = 32


def _partition_indices(table: TableInfo, batch: OpBatch) -> npt.NDArray[np.int64] | list[int]:
    partitioner = table.partitioner
    if batch.rows is not None and batch.num_rows <= _SMALL_BATCH_ROWS:
        # Dict rows (checked to hold canonical values): no Arrow form needed to map them.
        return [partitioner.index_of(partitioner.partition_key(row)) for row in batch.rows]
    if batch.num_rows > _SMALL_BATCH_ROWS:
        return partitioner.partition_indices(batch.data)
    # Column by column: a table's select().to_pylist() cost more than the partitioning itself.
    keys = {name: batch.data.column(name).to_pylist() for name in partitioner.schema.key_names}
    rows = [{name: values[i] for name, values in keys.items()} for i in range(batch.num_rows)]
    return [partitioner.index_of(partitioner.partition_key(row)) for row in rows]


def _take(batch: OpBatch, mask: pa.Array) -> OpBatch:
    return OpBatch(batch.ops.filter(mask), batch.data.filter(mask))


def _merge(batches: list[OpBatch]) -> list[OpBatch]:
    """Runs of consecutive batches with the same columns, each as one batch."""
    runs: list[list[OpBatch]] = []
    for batch in batches:
        if runs and runs[-1][-1].same_columns(batch):
            runs[-1].append(batch)
        else:
            runs.append([batch])
    return [OpBatch.joined(run) for run in runs]


def _chunks(batch: OpBatch, max_bytes: int) -> list[OpBatch]:
    if batch.nbytes <= max_bytes or batch.num_rows <= 1:
        return [batch]
    rows = max(1, batch.num_rows * max_bytes // batch.nbytes)
    return [
        OpBatch(batch.ops.slice(start, rows), batch.data.slice(start, rows)) for start in range(0, batch.num_rows, rows)
    ]


async def send_tablet_work(
    ctx: ClientContext, table: TableInfo, work: TabletWork, deadline: Deadline
) -> list[RowError]:
    """Write one partition's operations, batch after batch (their order matters).

    Small batches go through the client's write batcher (see :mod:`.write_batcher`), which
    sends those of other callers for the same tablet in the same Write."""
    limit = _limit(ctx)
    if ctx.write_batcher is None:
        ctx.write_batcher = WriteBatcher(lambda t, p, b, d: _write_batch(ctx, t, p, b, d), limit // _BATCHER_FRACTION)
    errors: list[RowError] = []
    for batch in work.batches:
        for chunk in _chunks(batch, limit):
            if chunk.nbytes <= limit // _BATCHER_FRACTION:
                errors += await ctx.write_batcher.write(table, work.partition, chunk, deadline)
            else:
                errors += (await _write_batch(ctx, table, work.partition, chunk, deadline)).row_errors(chunk)
    return errors


# Batches up to this fraction of the Write limit go through the batcher, and its Writes stay
# below it: an estimate from Arrow's buffer sizes, so the encoded stream keeps room for its
# framing.
_BATCHER_FRACTION = 4


def _limit(ctx: ClientContext) -> int:
    return min(ctx.options.write_batch_max_bytes, RowOperationOptions().max_row_operations_bytes)


async def _write_batch(
    ctx: ClientContext, table: TableInfo, partition: Partition, batch: OpBatch, deadline: Deadline
) -> WriteOutcome:
    """One batch to one tablet, halved while its encoding exceeds the Write limit."""
    try:
        payload = encode_batch(table.schema, batch)
    except NyalaError as exc:
        return WriteOutcome.failed(batch.num_rows, exc)
    if batch.num_rows > 1 and len(payload) > _limit(ctx):
        # The estimate was low (Arrow adds framing and padding): halve and try again.
        half = batch.num_rows // 2
        first = await _write_batch(ctx, table, partition, _slice(batch, 0, half), deadline)
        second = await _write_batch(ctx, table, partition, _slice(batch, half, batch.num_rows - half), deadline)
        failures = first.failures + [RowFailure(f.row + half, f.error) for f in second.failures]
        return WriteOutcome(failures, second.tablet_id or first.tablet_id, first.ambiguous or second.ambiguous)
    return await _TabletWrite(ctx, table, partition, batch, deadline).run(payload)


def _slice(batch: OpBatch, start: int, length: int) -> OpBatch:
    return OpBatch(batch.ops.slice(start, length), batch.data.slice(start, length))


class _TabletWrite:
    """One batch to one tablet, with every retry it takes."""

    def __init__(
        self, ctx: ClientContext, table: TableInfo, partition: Partition, batch: OpBatch, deadline: Deadline
    ) -> None:
        self.ctx = ctx
        self.table = table
        self.partition = partition
        self.batch = batch
        self.deadline = deadline
        self.backoff = Backoff(ctx.options, ctx.rng)
        self.failed: set[str] = set()
        self.hints_followed: set[str] = set()
        self.ambiguous = False
        self.tablet_id = ""
        self.reencode = False
        self.seq_no = ctx.requests.new_seq_no()
        self.attempts = 0

    async def run(self, payload: memoryview) -> WriteOutcome:
        try:
            return await self._run(payload)
        finally:
            self.ctx.requests.complete(self.seq_no)

    async def _run(self, payload: memoryview) -> WriteOutcome:
        try:
            while True:
                self.backoff.check(self.deadline)
                tablet = await self._locate()
                if tablet is None:
                    continue
                self.tablet_id = tablet.tablet_id
                response = await self._attempt(tablet, payload)
                if response is not None:
                    return self._outcome(response)
                if self.reencode:
                    payload = encode_batch(self.table.schema, self.batch)
                    self.reencode = False
        except NyalaError as exc:
            ambiguous = self.ambiguous or isinstance(exc, TimedOut | NetworkError)
            return WriteOutcome.failed(self.batch.num_rows, exc, self.tablet_id, ambiguous)

    async def _locate(self) -> TabletLocation | None:
        """The tablet of this batch's partition; None after a wait when it has no location yet."""
        try:
            return await self.ctx.meta.tablet_for_key(self.table, self.partition.partition_key_start, self.deadline)
        except NotFound as exc:
            fresh = await self.ctx.meta.table(self.deadline, table_id=self.table.id, refresh=True)
            if self.partition not in fresh.partitioner.partitions:
                raise NotFound(f"the range partition of these rows was dropped from table {fresh.name!r}") from exc
            # The partition exists but its tablet is not running yet (being created): wait for it.
            await self.backoff.wait(self.deadline, ServiceUnavailable(f"no running tablet yet: {exc}"))
            return None

    async def _attempt(self, tablet: TabletLocation, payload: memoryview) -> tpb.WriteResponsePB | None:
        """One Write; None means try again (after whatever the failure called for)."""
        target = self._pick(tablet)
        if target is None:
            self.failed.clear()
            self.ctx.meta.invalidate_locations(self.table.id)
            await self.backoff.wait(self.deadline)
            return None
        address = self.ctx.server_address(target)
        if address is None:
            self.failed.add(target)
            return None
        self.attempts += 1
        requests = self.ctx.requests
        request = tpb.WriteRequestPB(
            tablet_id=tablet.tablet_id,
            schema_version=self.table.schema_version,
            request_id=tpb.RequestIdPB(
                client_id=requests.client_id,
                seq_no=self.seq_no,
                first_incomplete_seq_no=requests.first_incomplete(),
                attempt_no=self.attempts,
            ),
        )
        timeout = max(1e-3, self.deadline.attempt_timeout(self.ctx.options))
        try:
            response = await self.ctx.messenger.call(address, WRITE, request, timeout=timeout, sidecars=[payload])
        except NyalaError as exc:
            await self._handle(tablet, target, exc)
            return None
        tablet.leader_uuid = target
        self.ctx.note_write(tablet.tablet_id, response.op_index)
        return response

    def _pick(self, tablet: TabletLocation) -> str | None:
        if tablet.leader_uuid and tablet.leader_uuid not in self.failed:
            return tablet.leader_uuid
        return next((u for u in tablet.replica_uuids if u not in self.failed), None)

    async def _handle(self, tablet: TabletLocation, target: str, exc: NyalaError) -> None:
        """Decide what the next attempt does; raise when retrying cannot help."""
        log.debug("write to tablet %s on %s failed: %s", tablet.tablet_id, target, exc)
        if isinstance(exc, NotTheLeader):
            self.failed.add(target)
            hint = exc.leader_hint
            if hint and hint in tablet.replica_uuids:
                tablet.leader_uuid = hint
                self.failed.discard(hint)
                if hint != target and hint not in self.hints_followed:
                    # A replica names the leader: go there at once, as after an election the
                    # pause was most of the time between the new leader and the first write
                    # acknowledged by it.  Once per replica named, so replicas that name each
                    # other (a stale view) still back off.
                    self.hints_followed.add(hint)
                    self.backoff.last_error = exc
                    return
            elif tablet.leader_uuid == target:
                tablet.leader_uuid = ""
            await self.backoff.wait(self.deadline, exc)
        elif isinstance(exc, ServiceUnavailable):
            await self.backoff.wait(self.deadline, exc)
        elif isinstance(exc, NetworkError | TimedOut):
            self.ambiguous = True
            self.failed.add(target)
            if tablet.leader_uuid == target:
                tablet.leader_uuid = ""
            await self.backoff.wait(self.deadline, exc)
        elif isinstance(exc, NotFound | IllegalState):
            # The replica does not host the tablet (moved, deleted, not yet created) or is not running.
            self.failed.add(target)
            self.ctx.meta.invalidate_locations(self.table.id)
            await self.backoff.wait(self.deadline, exc)
        elif isinstance(exc, InvalidArgument):
            await self._maybe_newer_schema(exc)
        else:
            raise exc

    async def _maybe_newer_schema(self, exc: InvalidArgument) -> None:
        fresh = await self.ctx.meta.table(self.deadline, table_id=self.table.id, refresh=True)
        if fresh.schema_version <= self.table.schema_version:
            raise exc
        log.debug("table %s moved to schema version %d; re-encoding", fresh.name, fresh.schema_version)
        self.table = fresh
        self.reencode = True

    def _outcome(self, response: tpb.WriteResponsePB) -> WriteOutcome:
        failures = [row_failure_from_pb(pb) for pb in response.per_row_errors]
        for failure in failures:
            if not 0 <= failure.row < self.batch.num_rows:
                raise InvalidArgument(
                    f"tablet {self.tablet_id} reported an error for row {failure.row} of a batch of "
                    f"{self.batch.num_rows} rows"
                )
        return WriteOutcome(failures, self.tablet_id, self.ambiguous)
