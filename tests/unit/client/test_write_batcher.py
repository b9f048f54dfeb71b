"""The client's write batcher, with a stand-in for the Write that records what it was given."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

import pyarrow as pa
import pytest

from nyala.client._retry import Deadline
from nyala.client.meta_cache import TableInfo
from nyala.client.operations import OpBatch, RowError, encode_batch
from nyala.client.write_batcher import SMALL_WRITE_BYTES, WriteBatcher, WriteOutcome
from nyala.errors import AlreadyPresent, IllegalState, NetworkError, NyalaError
from nyala.rpc.loop import run
from nyala.schema import OpType, Partition, RowFailure
from nyala.testing.wait import wait_for_async

from .helpers import kv_schema


@dataclass(frozen=True)
class StandInTable:
    id: str = "table-1"
    schema_version: int = 0


@dataclass(frozen=True)
class StandInPartition:
    partition_key_start: bytes = b""


TABLE = cast(TableInfo, StandInTable())
P0 = cast(Partition, StandInPartition(b"\x00"))
P1 = cast(Partition, StandInPartition(b"\x01"))


def batch(*ids: int, with_v: bool = True) -> OpBatch:
    columns = {"id": pa.array(ids, pa.int64())}
    if with_v:
        columns["v"] = pa.array([float(i) for i in ids])
    return OpBatch(pa.array([int(OpType.INSERT)] * len(ids), pa.int8()), pa.table(columns))


class Recorder:
    """Answers every Write with AlreadyPresent for the rows whose id is in ``present``."""

    def __init__(self, present: frozenset[int] = frozenset(), error: NyalaError | None = None) -> None:
        self.present = present
        self.error = error
        self.sent: list[tuple[bytes, list[int]]] = []

    async def __call__(self, table: TableInfo, partition: Partition, b: OpBatch, deadline: Deadline) -> WriteOutcome:
        ids = b.data.column("id").to_pylist()
        self.sent.append((partition.partition_key_start, ids))
        if self.error is not None:
            raise self.error
        present = [RowFailure(i, AlreadyPresent("present")) for i, k in enumerate(ids) if k in self.present]
        return WriteOutcome(present, "t1")


def failed_ids(errors: list[RowError]) -> list[int]:
    return [e.row["id"] for e in errors]


def together(batcher: WriteBatcher, *writes: tuple[Partition, OpBatch]) -> list[list[RowError] | BaseException]:
    async def all_of() -> list[list[RowError] | BaseException]:
        deadline = Deadline(10, "test")
        calls = (batcher.write(TABLE, p, b, deadline) for p, b in writes)
        return await asyncio.gather(*calls, return_exceptions=True)

    return run(all_of())


def test_writes_to_one_tablet_started_together_are_one_write_and_each_gets_its_errors() -> None:
    recorder = Recorder(present=frozenset({2, 4}))
    batcher = WriteBatcher(recorder, 1 << 20)
    results = together(batcher, (P0, batch(1, 2)), (P0, batch(3, 4, 5)), (P1, batch(6)))
    assert recorder.sent == [(b"\x00", [1, 2, 3, 4, 5]), (b"\x01", [6])]
    assert [failed_ids(r) for r in results if isinstance(r, list)] == [[2], [4], []]
    assert all(e.tablet_id == "t1" for r in results if isinstance(r, list) for e in r)


def test_batches_with_other_columns_or_over_the_size_limit_go_separately() -> None:
    recorder = Recorder()
    small = batch(1)
    batcher = WriteBatcher(recorder, 2 * small.nbytes)
    together(batcher, (P0, small), (P0, batch(2, with_v=False)), (P0, batch(3)), (P0, batch(4)))
    assert recorder.sent == [(b"\x00", [1, 3]), (b"\x00", [2]), (b"\x00", [4])]


def test_a_failed_write_fails_every_caller_in_it() -> None:
    recorder = Recorder(error=NetworkError("connection reset"))
    batcher = WriteBatcher(recorder, 1 << 20)
    results = together(batcher, (P0, batch(1)), (P0, batch(2)))
    assert [type(r) for r in results] == [NetworkError, NetworkError]


def test_a_caller_cancelled_before_the_write_is_sent_is_left_out() -> None:
    recorder = Recorder()
    batcher = WriteBatcher(recorder, 1 << 20)

    async def scenario() -> list[RowError]:
        deadline = Deadline(10, "test")
        gone = asyncio.ensure_future(batcher.write(TABLE, P0, batch(1), deadline))
        kept = asyncio.ensure_future(batcher.write(TABLE, P0, batch(2), deadline))
        await asyncio.sleep(0)  # both tasks ran up to the batcher; its flush comes next
        assert len(batcher._pending) == 2
        assert not recorder.sent
        gone.cancel()
        return await kept

    assert run(scenario()) == []
    assert recorder.sent == [(b"\x00", [2])]


class Gate(Recorder):
    """A Recorder whose Writes are answered only once the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = asyncio.Event()

    async def __call__(self, table: TableInfo, partition: Partition, b: OpBatch, deadline: Deadline) -> WriteOutcome:
        outcome = await super().__call__(table, partition, b, deadline)
        await self.opened.wait()
        return outcome


def test_small_batches_for_a_tablet_with_a_write_in_flight_wait_for_it_and_go_together() -> None:
    gate = Gate()
    batcher = WriteBatcher(gate, 1 << 20)

    async def scenario() -> list[list[RowError]]:
        deadline = Deadline(10, "test")
        first = asyncio.ensure_future(batcher.write(TABLE, P0, batch(1), deadline))
        await wait_for_async(lambda: len(gate.sent) == 1, what="the first write sent at once")
        later = [asyncio.ensure_future(batcher.write(TABLE, P0, batch(i), deadline)) for i in (2, 3)]
        other = asyncio.ensure_future(batcher.write(TABLE, P1, batch(4), deadline))
        # 4 was sent in the same turn that held 2 and 3.
        await wait_for_async(lambda: len(gate.sent) == 2, what="a second write sent")
        assert gate.sent == [(b"\x00", [1]), (b"\x01", [4])]  # another tablet does not wait
        gate.opened.set()
        return list(await asyncio.gather(first, *later, other))

    assert run(scenario()) == [[], [], [], []]
    assert gate.sent == [(b"\x00", [1]), (b"\x01", [4]), (b"\x00", [2, 3])]


def test_callers_answered_by_a_write_that_write_again_go_with_the_held_batches() -> None:
    # Closed-loop writers (each waits for its row, then writes the next) would otherwise split
    # into two cohorts per tablet that take turns, each with half the rows a Write could carry.
    gate = Gate()
    batcher = WriteBatcher(gate, 1 << 20)

    async def writer(deadline: Deadline) -> list[RowError]:
        errors = await batcher.write(TABLE, P0, batch(1), deadline)
        return errors + await batcher.write(TABLE, P0, batch(5), deadline)

    async def scenario() -> list[list[RowError]]:
        deadline = Deadline(10, "test")
        looping = asyncio.ensure_future(writer(deadline))
        await wait_for_async(lambda: len(gate.sent) == 1, what="the first write sent")
        held = asyncio.ensure_future(batcher.write(TABLE, P0, batch(2), deadline))
        await wait_for_async(lambda: bool(batcher._held), what="a held batch")
        gate.opened.set()
        return list(await asyncio.gather(looping, held))

    assert run(scenario()) == [[], []]
    assert gate.sent == [(b"\x00", [1]), (b"\x00", [2, 5])]


def test_an_answer_in_the_middle_of_a_turn_does_not_split_that_turns_batches() -> None:
    recorder = Recorder()
    batcher = WriteBatcher(recorder, 1 << 20)

    async def scenario() -> list[list[RowError]]:
        deadline = Deadline(10, "test")
        other_key = (TABLE.id, TABLE.schema_version, P1.partition_key_start)
        batcher._in_flight[other_key] = 1  # a Write to another tablet, answered between the two
        first = asyncio.ensure_future(batcher.write(TABLE, P0, batch(1), deadline))
        asyncio.get_running_loop().call_soon(batcher._answered, other_key)
        second = asyncio.ensure_future(batcher.write(TABLE, P0, batch(2), deadline))
        return list(await asyncio.gather(first, second))

    assert run(scenario()) == [[], []]
    assert recorder.sent == [(b"\x00", [1, 2])]


def test_a_large_batch_goes_at_once_beside_a_write_in_flight() -> None:
    gate = Gate()
    batcher = WriteBatcher(gate, 1 << 20)
    large = batch(*range(10, 10 + SMALL_WRITE_BYTES // 8))
    assert large.nbytes >= SMALL_WRITE_BYTES

    async def scenario() -> None:
        deadline = Deadline(10, "test")
        first = asyncio.ensure_future(batcher.write(TABLE, P0, batch(1), deadline))
        await wait_for_async(lambda: len(gate.sent) == 1, what="the first write sent")
        second = asyncio.ensure_future(batcher.write(TABLE, P0, large, deadline))
        await wait_for_async(lambda: len(gate.sent) == 2, what="a second write sent")
        assert [len(ids) for _, ids in gate.sent] == [1, large.num_rows]
        gate.opened.set()
        await asyncio.gather(first, second)

    run(scenario())


def test_a_held_batch_whose_deadline_passes_times_out_unsent_and_does_not_cut_others_short() -> None:
    gate = Gate()
    batcher = WriteBatcher(gate, 1 << 20)

    async def scenario() -> tuple[list[RowError], list[RowError]]:
        first = asyncio.ensure_future(batcher.write(TABLE, P0, batch(1), Deadline(10, "test")))
        await wait_for_async(lambda: len(gate.sent) == 1, what="the first write sent at once")
        hurried = asyncio.ensure_future(batcher.write(TABLE, P0, batch(2), Deadline(0.05, "a short write")))
        patient = asyncio.ensure_future(batcher.write(TABLE, P0, batch(3), Deadline(10, "test")))
        errors = await asyncio.wait_for(hurried, 5)  # answered at its deadline, not when the gate opens
        assert not patient.done()
        gate.opened.set()
        await first
        return errors, await patient

    timed_out, kept = run(scenario())
    assert [(e.row["id"], type(e.error).__name__, e.after_ambiguous_retry) for e in timed_out] == [
        (2, "TimedOut", False)
    ]
    assert kept == []
    assert gate.sent == [(b"\x00", [1]), (b"\x00", [3])]  # row 2 was never sent


def test_a_large_batch_behind_a_small_one_it_cannot_join_is_not_held() -> None:
    gate = Gate()
    batcher = WriteBatcher(gate, 1 << 20)
    large = batch(*range(10, 10 + SMALL_WRITE_BYTES // 8))

    async def scenario() -> None:
        deadline = Deadline(10, "test")
        first = asyncio.ensure_future(batcher.write(TABLE, P0, batch(1), deadline))
        await wait_for_async(lambda: len(gate.sent) == 1, what="the first write sent")
        # Another column set: the small batch and the large one cannot go together.
        small = asyncio.ensure_future(batcher.write(TABLE, P0, batch(2, with_v=False), deadline))
        big = asyncio.ensure_future(batcher.write(TABLE, P0, large, deadline))
        # The large one went in the turn that held the small one.
        await wait_for_async(lambda: len(gate.sent) == 2, what="a second write sent")
        assert [ids[0] for _, ids in gate.sent] == [1, 10]
        gate.opened.set()
        await asyncio.gather(first, small, big)
        assert [ids[0] for _, ids in gate.sent] == [1, 10, 2]

    run(scenario())


def test_closing_fails_the_held_batches_and_refuses_new_ones() -> None:
    gate = Gate()
    batcher = WriteBatcher(gate, 1 << 20)

    async def scenario() -> list[BaseException | list[RowError]]:
        deadline = Deadline(10, "test")
        first = asyncio.ensure_future(batcher.write(TABLE, P0, batch(1), deadline))
        await wait_for_async(lambda: len(gate.sent) == 1, what="the first write sent")
        held = asyncio.ensure_future(batcher.write(TABLE, P0, batch(2), deadline))
        await wait_for_async(lambda: bool(batcher._held), what="a held batch")
        batcher.close(IllegalState("the client is closed"))
        gate.opened.set()
        after = batcher.write(TABLE, P0, batch(3), deadline)
        return list(await asyncio.gather(first, held, after, return_exceptions=True))

    first, held, after = run(scenario())
    assert first == []  # already sent: answered as usual
    assert isinstance(held, IllegalState)
    assert isinstance(after, IllegalState)
    assert gate.sent == [(b"\x00", [1])]


def test_a_joined_batch_is_encoded_as_one_record_batch() -> None:
    parts = [batch(1), batch(2, 3)]
    joined = OpBatch(pa.concat_arrays([b.ops for b in parts]), pa.concat_tables([b.data for b in parts]))
    stream = pa.ipc.open_stream(pa.py_buffer(encode_batch(kv_schema(), joined)))
    # Every replica decodes, checks and applies each record batch of a stream on its own.
    assert [b.num_rows for b in stream] == [3]


@pytest.mark.parametrize("offset", [0, 2])
def test_an_outcome_gives_a_batch_the_errors_of_its_own_rows(offset: int) -> None:
    error = AlreadyPresent("present")
    outcome = WriteOutcome([RowFailure(1, error), RowFailure(3, error)], "t9", ambiguous=True)
    # Rows 1 and 3 of the Write failed: the batch's second row either way, never another.
    errors = outcome.row_errors(batch(10, 11), offset)
    assert [(e.row["id"], e.tablet_id, e.after_ambiguous_retry) for e in errors] == [(11, "t9", True)]
