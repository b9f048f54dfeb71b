"""One tablet hosted by this server: metadata, store, Raft replica, state; writes and alters.

A :class:`TabletReplica` starts BOOTSTRAPPING (or TOMBSTONED), becomes RUNNING once its store
is open and its Raft replica has replayed the WAL, and FAILED when either cannot work (the
error is kept and reported).  Writes and schema changes go through the leader:

- a write is validated once, on the leader, against the current schema (types, nulls, sizes,
  columns, the client's schema version, the tablet's partition); rows that belong to another
  partition are answered with per-row errors and not written;
- writes that arrive together are joined into one entry (:mod:`nyala.tserver.entry_joiner`);
  a write that goes alone keeps the bytes the client sent;
- the leader waits for the entry to be applied and answers with its row errors and index
  (built in :mod:`nyala.tserver.write_response`);
- a write with a request id is exactly-once: a retry of a write this tablet has applied gets
  the recorded answer (see :mod:`nyala.tserver.result_tracker`).

A checksum (ksck's checksum scan) is taken at a marker the leader replicates
(:meth:`TabletReplica.replicate_checksum_marker`); every replica answers with its checksum
at that marker once it has applied it (:meth:`TabletReplica.checksum_at`, see
:mod:`nyala.tserver.checksum`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow as pa

from nyala.consensus.core import PeerHealth, RaftConfig, Role, encode_config
from nyala.consensus.runtime import ConsensusMetadata, RaftReplica
from nyala.errors import (
    Aborted,
    IllegalState,
    InvalidArgument,
    NotFound,
    NotTheLeader,
    NyalaError,
    ServiceUnavailable,
)
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import (
    OP_COLUMN,
    RowFailure,
    RowOperationOptions,
    Schema,
    decode_row_operations,
    encode_row_operations,
)
from nyala.storage import DuckDBTabletStore, EntryResult, RowsChecksum
from nyala.tserver.checksum import ChecksumTracker
from nyala.tserver.entry_joiner import EntryJoiner, PendingWrite
from nyala.tserver.envelope import RequestId, encode_alter, encode_checksum
from nyala.tserver.metadata import MetadataFile, TabletMetadata
from nyala.tserver.partition_filter import PartitionFilter
from nyala.tserver.result_tracker import ResultTracker
from nyala.tserver.state_machine import JoinedResult, check_schema_change
from nyala.tserver.write_metrics import WriteMetrics
from nyala.tserver.write_response import outside_partition, response_from_result, write_response

__all__ = ["ROLE_TO_PB", "TabletReplica", "config_to_pb"]

ROLE_TO_PB = {
    Role.LEADER: common_pb2.LEADER,
    Role.FOLLOWER: common_pb2.FOLLOWER,
    Role.CANDIDATE: common_pb2.CANDIDATE,
    Role.LEARNER: common_pb2.LEARNER,
    Role.NON_PARTICIPANT: common_pb2.NON_PARTICIPANT,
}

State = tpb.TabletStatePB

# Kudu's health of a member as its leader sees it (the Raft core decides it).
_PEER_HEALTH = {
    PeerHealth.UNKNOWN: cpb.HEALTH_UNKNOWN,
    PeerHealth.HEALTHY: cpb.HEALTHY,
    PeerHealth.FAILED: cpb.FAILED,
    PeerHealth.FAILED_UNRECOVERABLE: cpb.FAILED_UNRECOVERABLE,
}


def config_to_pb(config: RaftConfig) -> consensus_pb2.RaftConfigPB:
    pb = consensus_pb2.RaftConfigPB()
    pb.ParseFromString(encode_config(config))
    return pb


class TabletReplica:
    """A tablet's replica on this server and everything it needs to serve."""

    def __init__(
        self,
        directory: Path,
        metadata: MetadataFile,
        tracker: ResultTracker | None = None,
        write_metrics: WriteMetrics | None = None,
    ) -> None:
        self.directory = directory
        #: Where this replica, as leader, counts the rows of the writes it answers.
        self.write_metrics = write_metrics if write_metrics is not None else WriteMetrics()
        #: Answers of applied writes by request id (exactly-once retries).
        self.tracker = tracker if tracker is not None else ResultTracker()
        #: Checksums of this replica's rows at checksum markers (ksck's checksum scan).
        self.checksums = ChecksumTracker()
        #: The term in which this replica, as leader, has applied every earlier entry.
        self._caught_up_term = -1
        #: Retries answered from the tracker instead of being applied again.
        self.duplicate_writes = 0
        self.metadata = metadata
        self.tablet_id = metadata.current.tablet_id
        self.store: DuckDBTabletStore | None = None
        self.raft: RaftReplica | None = None
        self._state: State = tpb.BOOTSTRAPPING
        self.error = ""
        self._filter: PartitionFilter | None = None
        self._alter_lock = asyncio.Lock()
        self._entry_joiner: EntryJoiner | None = None

    # -- state ----------------------------------------------------------------------------

    @property
    def meta(self) -> TabletMetadata:
        return self.metadata.current

    @property
    def state(self) -> State:
        if self._state == tpb.RUNNING and self.raft is not None and self.raft.failed is not None:
            return tpb.FAILED
        return self._state

    @property
    def state_name(self) -> str:
        return str(tpb.TabletStatePB.Name(self.state))

    @property
    def failure(self) -> str:
        if self.raft is not None and self.raft.failed is not None:
            return str(self.raft.failed)
        return self.error

    def set_state(self, state: State, error: str = "") -> None:
        self._state = state
        self.error = error

    def attach(self, store: DuckDBTabletStore, raft: RaftReplica) -> None:
        """The store is open and the replica has bootstrapped: serve."""
        meta = self.meta
        self._filter = PartitionFilter(meta.schema, meta.partition_schema, meta.partition)
        self.store, self.raft = store, raft
        self.set_state(tpb.RUNNING)

    def require_running(self) -> tuple[DuckDBTabletStore, RaftReplica]:
        state = self.state
        if state == tpb.RUNNING and self.store is not None and self.raft is not None:
            return self.store, self.raft
        if state == tpb.TOMBSTONED:
            raise NotFound(f"tablet {self.tablet_id} was deleted from this server (tombstoned)")
        if state == tpb.FAILED:
            raise IllegalState(f"tablet {self.tablet_id} has FAILED: {self.failure}")
        raise ServiceUnavailable(f"tablet {self.tablet_id} is {self.state_name}, not yet RUNNING")

    async def caught_up_leader(self) -> RaftReplica:
        """This replica's Raft, once, as leader, it has applied every entry earlier leaders committed.

        A new leader learns how far the log is committed only when an entry of its own term
        commits; until then its store can lack rows whose writes were acknowledged (after every
        process restarted, for one: nothing saved the commit index).  Leader reads and the
        answers of retried writes wait for that, once per term.  NotTheLeader when not leading.
        """
        raft = self.require_leader()
        if self._caught_up_term != raft.term:
            term = raft.term
            await raft.wait_applied(await raft.read_index())
            self._caught_up_term = term
        return raft

    def require_leader(self) -> RaftReplica:
        _, raft = self.require_running()
        if raft.role is not Role.LEADER:
            leader = raft.leader_id or "unknown"
            raise NotTheLeader(
                f"tablet {self.tablet_id}: this replica ({raft.peer_id}) is {raft.role.value}; the leader is {leader}",
                leader_hint=raft.leader_id,
            )
        return raft

    # -- writes -----------------------------------------------------------------------------

    async def write(
        self,
        row_operations: memoryview,
        schema_version: int,
        options: RowOperationOptions,
        max_bytes: int,
        request_id: RequestId | None = None,
    ) -> tpb.WriteResponsePB:
        """Validate, replicate and apply one batch of row operations; the leader only."""
        self.require_leader()
        if self._entry_joiner is None:
            self._entry_joiner = EntryJoiner(self._replicate_entry, max_bytes)
        if request_id is None:
            return await self._write(row_operations, schema_version, options, max_bytes, None)
        answer = await self._recorded_answer(request_id)
        if answer is not None:
            self.duplicate_writes += 1
            return answer
        write = self._write(row_operations, schema_version, options, max_bytes, request_id)
        return await asyncio.shield(self.tracker.start(request_id, write))

    async def _recorded_answer(self, request_id: RequestId) -> tpb.WriteResponsePB | None:
        """The answer of an earlier attempt of this write, waiting for one still replicating."""
        await self.caught_up_leader()  # so that earlier leaders' answers are recorded
        answer = self.tracker.lookup(request_id)
        if answer is not None:
            return answer
        original = self.tracker.in_flight(request_id)
        if original is not None:
            return await asyncio.shield(original)
        return None

    async def _write(
        self,
        row_operations: memoryview,
        schema_version: int,
        options: RowOperationOptions,
        max_bytes: int,
        request_id: RequestId | None,
    ) -> tpb.WriteResponsePB:
        meta = self.meta
        self._check_schema_version(schema_version, meta)
        if len(row_operations) > max_bytes:
            raise InvalidArgument(
                f"write of {len(row_operations)} bytes of row operations exceeds the limit of {max_bytes} bytes "
                f"per write; send smaller batches"
            )
        ops = decode_row_operations(row_operations, meta.schema, options)
        if len(ops) == 0:
            return write_response([])
        assert self._filter is not None
        outside = self._filter.rows_outside(ops.data)
        failures = [self._outside_failure(ops.data, row) for row in outside]
        payload: bytes | memoryview = row_operations
        kept_ops, kept_data = ops.ops, ops.data
        if outside:
            if len(outside) == len(ops):
                return write_response(failures)
            kept = _without_rows(row_operations, set(outside))
            kept_ops, kept_data = kept.column(0).combine_chunks(), kept.drop_columns([OP_COLUMN])
            payload = encode_row_operations(kept)
        dropped = tuple(sorted(outside))
        assert self._entry_joiner is not None
        pending = PendingWrite(kept_ops, kept_data, payload, request_id, dropped, joinable=not ops.groups)
        result: EntryResult = await self._entry_joiner.submit(pending)
        if result.error is not None:
            raise result.error
        self.write_metrics.count(kept_ops, [f.row for f in result.row_failures], ops.only_op)
        return response_from_result(self.tablet_id, result, dropped, failures)

    def _check_schema_version(self, version: int, meta: TabletMetadata) -> None:
        if version < meta.schema_version:
            raise InvalidArgument(
                f"write uses schema version {version} but tablet {self.tablet_id} is at schema version "
                f"{meta.schema_version}; refresh the table schema and retry"
            )
        if version > meta.schema_version:
            raise ServiceUnavailable(
                f"write uses schema version {version} but tablet {self.tablet_id} has only applied schema "
                f"version {meta.schema_version} so far; retry"
            )

    def _outside_failure(self, data: pa.Table, row: int) -> RowFailure:
        key = {name: data.column(name)[row].as_py() for name in self.meta.schema.key_names}
        return outside_partition(self.tablet_id, row, key)

    async def _replicate_entry(self, entry: bytes) -> EntryResult | JoinedResult:
        """Replicate an entry of the entry joiner, if this replica still leads."""
        return await self._replicate(self.require_leader(), entry)

    async def _replicate(self, raft: RaftReplica, payload: bytes) -> EntryResult:
        try:
            result: EntryResult = await raft.replicate(payload)
        except Aborted:
            if raft.leader_id and raft.leader_id != raft.peer_id:
                raise NotTheLeader(
                    f"tablet {self.tablet_id}: leadership moved before the operation committed; it was not applied",
                    leader_hint=raft.leader_id,
                ) from None
            raise ServiceUnavailable(
                f"tablet {self.tablet_id}: leadership changed before the operation committed; it was not applied"
            ) from None
        return result

    # -- schema changes -----------------------------------------------------------------------

    async def alter_schema(self, schema: Schema, version: int) -> None:
        """Replicate a schema change (the leader only); repeated or older versions are no-ops."""
        async with self._alter_lock:
            raft = self.require_leader()
            meta = self.meta
            if version < meta.schema_version:
                return
            if version == meta.schema_version:
                if schema != meta.schema:
                    raise InvalidArgument(
                        f"tablet {self.tablet_id} is at schema version {version} with a different schema"
                    )
                return
            check_schema_change(meta.schema, schema)
            result = await self._replicate(raft, encode_alter(schema, version))
            if result.error is not None:
                raise result.error

    # -- checksums -------------------------------------------------------------------------------

    async def replicate_checksum_marker(self) -> int:
        """Replicate a checksum marker (the leader only) and return its index once applied here."""
        result = await self._replicate(self.require_leader(), encode_checksum())
        if result.error is not None:
            raise result.error
        return result.index

    async def checksum_at(self, index: int) -> RowsChecksum:
        """This replica's checksum at the marker ``index``, which it must have applied.

        NotFound when it has none: ``index`` is not a marker's, or this replica applied it
        before it restarted or was filled by a tablet copy (run the checksum again)."""
        _, raft = self.require_running()
        if raft.applied_index < index:
            raise IllegalState(
                f"replica of tablet {self.tablet_id} has applied only index {raft.applied_index}, not {index}"
            )
        future = self.checksums.result(index)
        if future is None:
            raise NotFound(
                f"replica of tablet {self.tablet_id} on {raft.peer_id} has no checksum at index {index}: that "
                f"entry is not a checksum marker, or this replica applied it before it restarted or was copied "
                f"(run the checksum scan again)"
            )
        return await asyncio.wrap_future(future)

    # -- reporting ------------------------------------------------------------------------------

    def consensus_state(self) -> cpb.ConsensusStatePB | None:
        """What the replica believes now; for a tombstone, what its consensus metadata says."""
        raft = self.raft
        if raft is None:
            return self._tombstone_consensus_state()
        pb = cpb.ConsensusStatePB(
            tablet_id=self.tablet_id,
            current_term=raft.term,
            leader_uuid=raft.leader_id,
            role=ROLE_TO_PB[raft.role],
            last_index=raft.last_index,
            last_term=raft.last_term,
            commit_index=raft.commit_index,
            applied_index=raft.applied_index,
        )
        pb.committed_config.CopyFrom(config_to_pb(raft.committed_config))
        if raft.active_config != raft.committed_config:
            pb.pending_config.CopyFrom(config_to_pb(raft.active_config))
        if raft.role is Role.LEADER:
            pb.transfer_target_uuid = raft.transfer_target
            for peer in raft.peer_progress():
                pb.peers.add(
                    permanent_uuid=peer.peer_id,
                    match_index=peer.match,
                    next_index=peer.next,
                    state=peer.state,
                    health=_PEER_HEALTH[peer.health],
                )
        return pb

    def _tombstone_consensus_state(self) -> cpb.ConsensusStatePB | None:
        try:
            cmeta = ConsensusMetadata.load(self.directory)
        except NyalaError:
            return None
        pb = cpb.ConsensusStatePB(
            tablet_id=self.tablet_id, current_term=cmeta.hard_state.term, role=common_pb2.NON_PARTICIPANT
        )
        pb.committed_config.CopyFrom(config_to_pb(cmeta.committed_config))
        return pb

    def signature(self) -> tuple[object, ...]:
        """What a tablet report says about this tablet; a change makes it part of the next report."""
        raft = self.raft
        consensus: tuple[object, ...] = ()
        if raft is not None:
            # A leader's members' health too: the master re-replicates on its change.
            health = tuple((p.peer_id, p.health) for p in raft.peer_progress())
            consensus = (raft.role, raft.leader_id, raft.term, raft.committed_config, raft.active_config, health)
        return (self.state, self.failure, self.meta.schema_version, *consensus)

    def report(self) -> mpb.ReportedTabletPB:
        pb = mpb.ReportedTabletPB(
            tablet_id=self.tablet_id, state=self.state, error=self.failure, schema_version=self.meta.schema_version
        )
        consensus = self.consensus_state()
        if consensus is not None:
            pb.consensus_state.CopyFrom(consensus)
        return pb


def _without_rows(row_operations: memoryview, drop: set[int]) -> pa.Table:
    """The batch as sent (every column, ``__isset`` too), without the dropped rows."""
    table = pa.ipc.open_stream(pa.py_buffer(row_operations)).read_all()
    return table.filter(pa.array([i not in drop for i in range(table.num_rows)]))
