"""Exactly-once writes: the tracker's memory, the tracked envelope and the leader's answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nyala.consensus.core import EntryType, LogEntry
from nyala.errors import Aborted, Corruption, InvalidArgument, ServiceUnavailable
from nyala.proto import rpc_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc.loop import run
from nyala.schema import OpType
from nyala.schema import make_row_operations as ops
from nyala.storage import TabletStoreManager
from nyala.tserver.envelope import RequestId, WritePayload, decode_payload, encode_tracked_write
from nyala.tserver.result_tracker import ResultTracker, request_id_from_pb
from nyala.tserver.write_response import client_row

from .conftest import SCHEMA, metadata
from .test_tablet_write import LIMITS, MAX_BYTES, make_tablet, rows, scan_ids


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def answer(op_index: int) -> tpb.WriteResponsePB:
    return tpb.WriteResponsePB(op_index=op_index)


def test_tracked_payload_round_trips_request_id_and_dropped_rows() -> None:
    rid = RequestId("client-é", 12, 10)
    payload = encode_tracked_write(rid, (1, 4), memoryview(b"arrow bytes"))
    assert payload[0] == 3
    assert decode_payload(payload) == WritePayload(b"arrow bytes", rid, (1, 4))
    with pytest.raises(Corruption, match="unreadable write header"):
        decode_payload(payload[:9])


def test_client_row_skips_the_dropped_positions() -> None:
    dropped = (0, 2, 3)  # the batch kept rows 1, 4, 5, ...
    assert [client_row(r, dropped) for r in range(3)] == [1, 4, 5]
    assert [client_row(r, ()) for r in range(3)] == [0, 1, 2]


def test_answers_are_kept_until_the_client_moves_past_them() -> None:
    tracker = ResultTracker()
    tracker.record(RequestId("c", 1, 1), answer(10))
    tracker.record(RequestId("c", 2, 1), answer(11))
    assert tracker.lookup(RequestId("c", 1, 1)) == answer(10)
    assert tracker.lookup(RequestId("other", 1, 1)) is None
    assert tracker.lookup(RequestId("c", 3, 1)) is None
    # The first answer stays the answer when a duplicate reaches the log.
    tracker.record(RequestId("c", 2, 1), answer(99))
    assert tracker.lookup(RequestId("c", 2, 1)) == answer(11)
    tracker.record(RequestId("c", 3, 2), answer(12))
    assert len(tracker) == 2
    with pytest.raises(Aborted, match="no longer kept"):
        tracker.lookup(RequestId("c", 1, 1))


def test_old_answers_and_idle_clients_expire() -> None:
    clock = Clock()
    tracker = ResultTracker(responses_ttl_s=60, clients_ttl_s=300, clock=clock)
    tracker.record(RequestId("idle", 1, 1), answer(1))
    tracker.record(RequestId("busy", 1, 1), answer(2))
    clock.now += 100
    tracker.record(RequestId("busy", 2, 1), answer(3))  # sweeps: answers older than 60 s go
    assert tracker.lookup(RequestId("busy", 1, 1)) is None
    assert tracker.lookup(RequestId("busy", 2, 1)) == answer(3)
    clock.now += 250
    tracker.record(RequestId("busy", 3, 1), answer(4))
    assert tracker.lookup(RequestId("busy", 2, 1)) is None
    assert len(tracker) == 1
    assert tracker.clients() == ["busy"]  # "idle" was unheard of for 350 s


@pytest.mark.parametrize(
    ("pb", "message"),
    [
        (tpb.RequestIdPB(seq_no=1), "client_id must be 1 to 64 bytes"),
        (tpb.RequestIdPB(client_id="c", seq_no=-4), "seq_no must be at least 1"),
        (tpb.RequestIdPB(client_id="c", seq_no=1, first_incomplete_seq_no=-1), "first_incomplete_seq_no"),
    ],
)
def test_request_ids_from_the_wire_are_validated(pb: tpb.RequestIdPB, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        request_id_from_pb(pb)


def test_a_retry_is_answered_not_applied_and_followers_record_answers(
    tmp_path: Path, stores: TabletStoreManager
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    tablet, raft = make_tablet(tmp_path / "a", stores, metadata("tablet-a"))
    rid = RequestId("client", 1, 1)
    batch = ops(SCHEMA, OpType.INSERT, rows(1, 2))

    def tracked_write() -> tpb.WriteResponsePB:
        return run(tablet.write(memoryview(batch), 0, LIMITS, MAX_BYTES, rid))

    first = tracked_write()
    assert (list(first.per_row_errors), first.op_index) == ([], 1)
    assert tracked_write() == first
    assert (len(raft.payloads), tablet.duplicate_writes) == (1, 1)
    # Another replica applying the same entry (as a follower) records the same answer.
    follower, _ = make_tablet(tmp_path / "b", stores, metadata("tablet-b"))
    machine = raft.machine.__class__(follower.store, follower.metadata, lambda: None, follower.tracker)  # type: ignore[arg-type]
    machine.apply([LogEntry(1, 1, EntryType.WRITE, raft.payloads[0])])
    assert follower.tracker.lookup(rid) == first
    assert scan_ids(tablet) == scan_ids(follower) == [1, 2]


def test_a_retry_during_replication_waits_for_the_original(tmp_path: Path, stores: TabletStoreManager) -> None:
    tablet, raft = make_tablet(tmp_path, stores, metadata())
    raft.delay = asyncio.Event()
    rid = RequestId("client", 1, 1)
    batch = memoryview(ops(SCHEMA, OpType.INSERT, rows(5)))

    async def both() -> tuple[tpb.WriteResponsePB, tpb.WriteResponsePB]:
        original = asyncio.ensure_future(tablet.write(batch, 0, LIMITS, MAX_BYTES, rid))
        await asyncio.sleep(0)
        retry = asyncio.ensure_future(tablet.write(batch, 0, LIMITS, MAX_BYTES, rid))
        await asyncio.sleep(0)
        assert raft.delay is not None
        raft.delay.set()
        return await original, await retry

    first, second = run(both())
    assert first == second
    assert [e.code for e in first.per_row_errors] == []
    assert len(raft.payloads) == 1


def test_a_refused_tracked_write_is_not_remembered(tmp_path: Path, stores: TabletStoreManager) -> None:
    tablet, raft = make_tablet(tmp_path, stores, metadata())
    rid = RequestId("client", 1, 1)
    batch = memoryview(ops(SCHEMA, OpType.INSERT, rows(1)))
    raft.refuse = ServiceUnavailable("leader is CONFIGURING")
    with pytest.raises(ServiceUnavailable):
        run(tablet.write(batch, 0, LIMITS, MAX_BYTES, rid))
    raft.refuse = None
    again = run(tablet.write(batch, 0, LIMITS, MAX_BYTES, rid))
    assert [e.code for e in again.per_row_errors] == []
    dup = run(tablet.write(memoryview(ops(SCHEMA, OpType.INSERT, rows(1))), 0, LIMITS, MAX_BYTES, RequestId("c", 9, 9)))
    assert [e.code for e in dup.per_row_errors] == [rpc_pb2.ALREADY_PRESENT]


def test_a_retry_after_the_first_handler_was_cancelled_is_not_proposed_again(
    tmp_path: Path, stores: TabletStoreManager
) -> None:
    # The RPC server cancels a handler at its deadline; the entry it proposed may still
    # commit, so the retry must wait for that replication instead of proposing the write again.
    tablet, raft = make_tablet(tmp_path, stores, metadata())
    raft.delay = asyncio.Event()
    rid = RequestId("client", 1, 1)
    batch = memoryview(ops(SCHEMA, OpType.INSERT, rows(7)))

    async def cancel_then_retry() -> tpb.WriteResponsePB:
        first = asyncio.ensure_future(tablet.write(batch, 0, LIMITS, MAX_BYTES, rid))
        await asyncio.sleep(0)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        retry = asyncio.ensure_future(tablet.write(batch, 0, LIMITS, MAX_BYTES, rid))
        await asyncio.sleep(0)
        assert raft.delay is not None
        raft.delay.set()
        return await retry

    answer = run(cancel_then_retry())
    assert [e.code for e in answer.per_row_errors] == []
    assert len(raft.payloads) == 1
    assert scan_ids(tablet) == [7]
