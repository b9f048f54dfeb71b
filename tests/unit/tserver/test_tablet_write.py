"""The leader's write path with a stand-in Raft replica that applies to a real store."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import cast

import pyarrow as pa
import pytest

from nyala.consensus.core import EntryType, LogEntry, Role
from nyala.consensus.runtime import RaftReplica
from nyala.errors import Aborted, InvalidArgument, NotTheLeader, NyalaError, ServiceUnavailable
from nyala.proto import rpc_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc.loop import run
from nyala.schema import OpType, Partitioner, PartitionSchema, RowOperationOptions, decode_row_operations
from nyala.schema import encode_row_operations as encode
from nyala.schema import make_row_operations as ops
from nyala.storage import EntryResult, ScanSpec, TabletStoreManager
from nyala.testing.wait import wait_for_async
from nyala.tserver.envelope import JoinedPayload, RequestId, WritePayload, decode_payload
from nyala.tserver.metadata import MetadataFile, TabletMetadata
from nyala.tserver.state_machine import JoinedResult, TabletStateMachine
from nyala.tserver.tablet import TabletReplica

from .conftest import SCHEMA, metadata

LIMITS = RowOperationOptions()
MAX_BYTES = 1 << 20


class StandInRaft:
    """Replicates instantly by applying to the state machine; can play follower or fail."""

    def __init__(self, machine: TabletStateMachine) -> None:
        self.machine = machine
        self.role = Role.LEADER
        self.peer_id = "me"
        self.leader_id = "me"
        self.failed: NyalaError | None = None
        self.refuse: NyalaError | None = None
        self.payloads: list[bytes] = []
        self.index = 0
        self.term = 1
        self.read_indexes = 0  # read barriers taken (a new leader's catch-up)
        #: When set, replication waits for it (a write still in flight).
        self.delay: asyncio.Event | None = None

    async def read_index(self) -> int:
        self.read_indexes += 1
        return self.index

    async def wait_applied(self, index: int) -> None:
        assert index <= self.index

    async def replicate(self, payload: bytes) -> EntryResult | JoinedResult:
        if self.refuse is not None:
            raise self.refuse
        # Proposed: the entry is in the log and commits whatever becomes of this caller.
        self.payloads.append(payload)
        return await asyncio.shield(asyncio.ensure_future(self._commit(payload)))

    async def _commit(self, payload: bytes) -> EntryResult | JoinedResult:
        if self.delay is not None:
            await self.delay.wait()
        self.index += 1
        return self.machine.apply([LogEntry(1, self.index, EntryType.WRITE, payload)])[0]


def make_tablet(tmp_path: Path, stores: TabletStoreManager, meta: TabletMetadata) -> tuple[TabletReplica, StandInRaft]:
    meta.save(tmp_path)
    file = MetadataFile(tmp_path, meta)
    store = stores.create_tablet(meta.tablet_id, meta.schema)
    tablet = TabletReplica(tmp_path, file)
    raft = StandInRaft(TabletStateMachine(store, file, lambda: None, tablet.tracker))
    tablet.attach(store, cast(RaftReplica, raft))
    return tablet, raft


@pytest.fixture
def tablet(tmp_path: Path, stores: TabletStoreManager) -> tuple[TabletReplica, StandInRaft]:
    return make_tablet(tmp_path, stores, metadata())


def rows(*ids: int) -> list[dict[str, object]]:
    return [{"id": i, "v": float(i)} for i in ids]


def write(tablet: TabletReplica, data: bytes, version: int = 0) -> tuple[list[tuple[int, int]], int]:
    response = run(tablet.write(memoryview(data), version, LIMITS, MAX_BYTES))
    return [(e.row_index, e.code) for e in response.per_row_errors], response.op_index


def scan_ids(tablet: TabletReplica) -> list[int]:
    assert tablet.store is not None
    ids: list[int] = tablet.store.scan(ScanSpec(ordered=True)).read_all().column("id").to_pylist()
    return ids


def test_row_errors_per_operation_and_ignore_variants(tablet: tuple[TabletReplica, StandInRaft]) -> None:
    t, _ = tablet
    assert write(t, ops(SCHEMA, OpType.INSERT, rows(1, 2, 3))) == ([], 1)
    assert write(t, ops(SCHEMA, OpType.INSERT, rows(3, 4))) == ([(0, rpc_pb2.ALREADY_PRESENT)], 2)
    assert write(t, ops(SCHEMA, OpType.INSERT_IGNORE, rows(4, 5))) == ([], 3)
    assert write(t, ops(SCHEMA, OpType.UPDATE, rows(9, 1))) == ([(0, rpc_pb2.NOT_FOUND)], 4)
    assert write(t, ops(SCHEMA, OpType.DELETE, [{"id": 2}, {"id": 8}])) == ([(1, rpc_pb2.NOT_FOUND)], 5)
    assert write(t, ops(SCHEMA, OpType.UPDATE_IGNORE, rows(9))) == ([], 6)
    assert write(t, ops(SCHEMA, OpType.DELETE_IGNORE, [{"id": 9}])) == ([], 7)
    assert scan_ids(t) == [1, 3, 4, 5]


def test_a_follower_refuses_with_the_leaders_uuid(tablet: tuple[TabletReplica, StandInRaft]) -> None:
    t, raft = tablet
    raft.role, raft.leader_id = Role.FOLLOWER, "the-leader"
    with pytest.raises(NotTheLeader) as caught:
        write(t, ops(SCHEMA, OpType.INSERT, rows(1)))
    assert caught.value.leader_hint == "the-leader"
    assert raft.payloads == []


def test_a_configuring_leader_and_a_lost_entry_are_retriable(tablet: tuple[TabletReplica, StandInRaft]) -> None:
    t, raft = tablet
    raft.refuse = ServiceUnavailable("leader is CONFIGURING")
    with pytest.raises(ServiceUnavailable, match="CONFIGURING"):
        write(t, ops(SCHEMA, OpType.INSERT, rows(1)))
    raft.refuse, raft.leader_id = Aborted("replaced"), "other"
    with pytest.raises(NotTheLeader, match="not applied") as caught:
        write(t, ops(SCHEMA, OpType.INSERT, rows(1)))
    assert caught.value.leader_hint == "other"
    assert scan_ids(t) == []


def garbage_batches() -> list[tuple[bytes, str]]:
    wrong_type = pa.record_batch({"__op": pa.array([1], pa.int8()), "id": pa.array(["x"])})
    null_key = pa.record_batch({"__op": pa.array([1], pa.int8()), "id": pa.array([None], pa.int64())})
    unknown = pa.record_batch({"__op": pa.array([1], pa.int8()), "id": pa.array([1], pa.int64()), "zz": [1]})
    return [
        (b"\x00garbage", "not a valid Arrow IPC stream"),
        (encode(wrong_type), "column 'id' has type string, expected int64"),
        (encode(null_key), "column 'id' is not nullable but has nulls"),
        (encode(unknown), "unknown column 'zz'"),
        (b"x" * (MAX_BYTES + 1), f"exceeds the limit of {MAX_BYTES} bytes"),
    ]


@pytest.mark.parametrize(("data", "message"), garbage_batches())
def test_bad_batches_are_refused_and_change_nothing(
    tablet: tuple[TabletReplica, StandInRaft], data: bytes, message: str
) -> None:
    t, raft = tablet
    with pytest.raises(InvalidArgument, match=message):
        write(t, data)
    assert raft.payloads == []


def test_schema_versions_older_are_refused_newer_are_retried(tablet: tuple[TabletReplica, StandInRaft]) -> None:
    t, raft = tablet
    t.metadata.update(lambda m: replace(m, schema_version=3))
    with pytest.raises(InvalidArgument, match="schema version 2 but tablet tablet-1 is at schema version 3"):
        write(t, ops(SCHEMA, OpType.INSERT, rows(1)), version=2)
    with pytest.raises(ServiceUnavailable, match="only applied schema version 3"):
        write(t, ops(SCHEMA, OpType.INSERT, rows(1)), version=4)
    assert raft.payloads == []


def test_rows_of_other_partitions_get_row_errors_and_the_rest_is_written(
    tmp_path: Path, stores: TabletStoreManager
) -> None:
    ranged = PartitionSchema((), ("id",))
    base = Partitioner(SCHEMA, ranged)
    bounds = base.bounds([10], [20])
    meta = replace(metadata(), partition_schema=ranged, partition=Partitioner(SCHEMA, ranged, [bounds]).partitions[0])
    t, raft = make_tablet(tmp_path, stores, meta)
    assert write(t, ops(SCHEMA, OpType.INSERT, rows(12))) == ([], 1)
    errors, index = write(t, ops(SCHEMA, OpType.INSERT, rows(5, 12, 15, 25)))
    outside = rpc_pb2.INVALID_ARGUMENT
    assert (errors, index) == ([(0, outside), (1, rpc_pb2.ALREADY_PRESENT), (3, outside)], 2)
    replicated = decode_payload(raft.payloads[-1])
    assert isinstance(replicated, WritePayload)
    assert decode_row_operations(replicated.row_operations, SCHEMA).data.column("id").to_pylist() == [12, 15]
    assert scan_ids(t) == [12, 15]
    assert write(t, ops(SCHEMA, OpType.INSERT, rows(1, 30))) == ([(0, outside), (1, outside)], 0)
    assert len(raft.payloads) == 2


def write_together(
    tablet: TabletReplica, *batches: tuple[bytes, RequestId | None], max_bytes: int = MAX_BYTES
) -> list[list[tuple[int, int]]]:
    """Start the writes in one event-loop turn, as the RPC server does for calls read together."""

    async def all_of() -> list[tpb.WriteResponsePB]:
        return await asyncio.gather(
            *(tablet.write(memoryview(data), 0, LIMITS, max_bytes, rid) for data, rid in batches)
        )

    return [[(e.row_index, e.code) for e in r.per_row_errors] for r in run(all_of())]


def test_writes_that_arrive_together_are_joined_and_each_gets_its_answer(
    tablet: tuple[TabletReplica, StandInRaft],
) -> None:
    t, raft = tablet
    rids = [RequestId("client", seq, 1) for seq in (1, 2, 3)]
    rid = rids[1]
    answers = write_together(
        t,
        (ops(SCHEMA, OpType.INSERT, rows(1, 2)), rids[0]),
        (ops(SCHEMA, OpType.INSERT, rows(2, 3)), rid),
        (ops(SCHEMA, OpType.UPSERT, rows(1)), rids[2]),
    )
    assert answers == [[], [(0, rpc_pb2.ALREADY_PRESENT)], []]
    [entry] = [decode_payload(p) for p in raft.payloads]
    assert isinstance(entry, JoinedPayload)
    assert [(w.rows, w.request_id) for w in entry.writes] == [(2, rids[0]), (2, rid), (1, rids[2])]
    # One record batch, not one a write: replicas decode, check and apply each batch on its own.
    assert len(list(pa.ipc.open_stream(pa.py_buffer(entry.row_operations)))) == 1
    assert scan_ids(t) == [1, 2, 3]
    # The tracked write's answer was recorded: a retry is answered, not applied again.
    retried = run(t.write(memoryview(ops(SCHEMA, OpType.INSERT, rows(2, 3))), 0, LIMITS, MAX_BYTES, rid))
    assert [(e.row_index, e.code) for e in retried.per_row_errors] == [(0, rpc_pb2.ALREADY_PRESENT)]
    assert len(raft.payloads) == 1


def test_writes_with_different_columns_or_per_row_columns_are_not_joined(
    tablet: tuple[TabletReplica, StandInRaft],
) -> None:
    t, raft = tablet
    partial = ops(SCHEMA, OpType.UPSERT, [{"id": 7, "v": 7.0}, {"id": 8}])  # rows set different columns
    answers = write_together(
        t,
        (ops(SCHEMA, OpType.INSERT, rows(1)), None),
        (ops(SCHEMA, OpType.INSERT, [{"id": 2}]), None),
        (partial, None),
        (ops(SCHEMA, OpType.INSERT, rows(3)), None),
    )
    assert answers == [[], [], [], []]
    kinds = [decode_payload(p) for p in raft.payloads]
    assert [type(k).__name__ for k in kinds] == ["JoinedPayload", "WritePayload", "WritePayload"]
    first = kinds[0]
    assert isinstance(first, JoinedPayload)
    assert decode_row_operations(first.row_operations, SCHEMA).data.column("id").to_pylist() == [1, 3]
    assert scan_ids(t) == [1, 2, 3, 7, 8]


def test_a_joined_entry_that_fails_fails_every_write_in_it(tablet: tuple[TabletReplica, StandInRaft]) -> None:
    t, raft = tablet
    raft.refuse = ServiceUnavailable("leader is CONFIGURING")

    async def both() -> list[BaseException | tpb.WriteResponsePB]:
        writes = (t.write(memoryview(ops(SCHEMA, OpType.INSERT, rows(i))), 0, LIMITS, MAX_BYTES) for i in (1, 2))
        return await asyncio.gather(*writes, return_exceptions=True)

    outcomes = run(both())
    assert [type(o) for o in outcomes] == [ServiceUnavailable, ServiceUnavailable]
    assert scan_ids(t) == []


def test_joined_entries_stay_within_the_write_size_limit(tablet: tuple[TabletReplica, StandInRaft]) -> None:
    t, raft = tablet
    batches = [ops(SCHEMA, OpType.INSERT, rows(i)) for i in range(5)]
    limit = 2 * (len(batches[0]) + 128)  # room for two writes and their headers
    assert write_together(t, *((b, None) for b in batches), max_bytes=limit) == [[]] * 5
    entries = [decode_payload(p) for p in raft.payloads]
    assert [len(e.writes) if isinstance(e, JoinedPayload) else 1 for e in entries] == [2, 2, 1]
    assert all(len(p) <= limit for p in raft.payloads)
    assert scan_ids(t) == [0, 1, 2, 3, 4]


def test_dropping_rows_of_other_partitions_keeps_which_columns_each_row_sets(
    tmp_path: Path, stores: TabletStoreManager
) -> None:
    ranged = PartitionSchema((), ("id",))
    bounds = Partitioner(SCHEMA, ranged).bounds([10], [20])
    meta = replace(metadata(), partition_schema=ranged, partition=Partitioner(SCHEMA, ranged, [bounds]).partitions[0])
    t, _ = make_tablet(tmp_path, stores, meta)
    assert write(t, ops(SCHEMA, OpType.INSERT, [{"id": 12, "v": 1.0, "s": "a"}])) == ([], 1)
    # Row 0 sets only v, row 1 only s; row 2 is outside the tablet and is dropped.
    partial = [{"id": 12, "v": 2.0}, {"id": 13, "s": "b"}, {"id": 5, "v": 9.0}]
    errors, _ = write(t, ops(SCHEMA, OpType.UPSERT, partial))
    assert errors == [(2, rpc_pb2.INVALID_ARGUMENT)]
    assert t.store is not None
    rows_now = t.store.scan(ScanSpec(ordered=True)).read_all().to_pylist()
    assert rows_now == [{"id": 12, "v": 2.0, "s": "a"}, {"id": 13, "v": None, "s": "b"}]


def test_a_write_cancelled_while_it_waits_for_its_entry_is_not_proposed(
    tablet: tuple[TabletReplica, StandInRaft],
) -> None:
    t, raft = tablet
    raft.delay = asyncio.Event()  # two entries stay in flight, so the next writes wait

    async def scenario() -> list[int]:
        def start(i: int) -> asyncio.Task[tpb.WriteResponsePB]:
            data = memoryview(ops(SCHEMA, OpType.INSERT, rows(i)))
            return asyncio.ensure_future(t.write(data, 0, LIMITS, MAX_BYTES))

        first = start(1)
        await wait_for_async(lambda: len(raft.payloads) == 1, what="one entry in flight")
        second = start(2)
        # Two entries in flight: later writes wait.
        await wait_for_async(lambda: len(raft.payloads) == 2, what="two entries in flight")
        waiting, kept = start(3), start(4)
        assert t._entry_joiner is not None
        entry_joiner = t._entry_joiner
        await wait_for_async(lambda: len(entry_joiner._pending) == 2, what="two writes waiting in the entry joiner")
        waiting.cancel()
        assert raft.delay is not None
        raft.delay.set()
        await asyncio.gather(first, second, kept)
        return scan_ids(t)

    assert run(scenario()) == [1, 2, 4]
    assert len(raft.payloads) == 3


def test_a_leader_catches_up_once_a_term_and_a_follower_is_refused(tablet: tuple[TabletReplica, StandInRaft]) -> None:
    replica, raft = tablet

    async def twice() -> None:
        await replica.caught_up_leader()
        await replica.caught_up_leader()

    run(twice())
    assert raft.read_indexes == 1
    raft.term = 2  # a new term: the leader takes the read barrier again
    run(twice())
    assert raft.read_indexes == 2
    raft.role, raft.leader_id = Role.FOLLOWER, "other"
    with pytest.raises(NotTheLeader) as caught:
        run(replica.caught_up_leader())
    assert caught.value.leader_hint == "other"
