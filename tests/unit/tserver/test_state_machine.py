"""The tablet state machine over a real store: runs of writes, schema changes in log order."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from nyala.consensus.core import EntryType, LogEntry
from nyala.errors import AlreadyPresent, InvalidArgument
from nyala.schema import ColumnSchema, OpType, Schema, make_row_operations
from nyala.storage import EntryResult, ScanSpec, TabletStoreManager
from nyala.tserver.envelope import JoinedWrite, RequestId, encode_alter, encode_joined, encode_write
from nyala.tserver.metadata import MetadataFile, TabletMetadata
from nyala.tserver.state_machine import JoinedResult, TabletStateMachine, check_schema_change, split_joined

from .conftest import SCHEMA, metadata


def write(index: int, op: OpType, ids: list[int], schema: Schema = SCHEMA) -> LogEntry:
    rows = [{"id": i, "v": float(i)} for i in ids]
    return LogEntry(1, index, EntryType.WRITE, encode_write(make_row_operations(schema, op, rows)))


def alter(index: int, schema: Schema, version: int) -> LogEntry:
    return LogEntry(1, index, EntryType.WRITE, encode_alter(schema, version))


def entry_results(results: Sequence[EntryResult | JoinedResult]) -> list[EntryResult]:
    """Results of entries that each held one write."""
    assert all(isinstance(r, EntryResult) for r in results)
    return [r for r in results if isinstance(r, EntryResult)]


def make_machine(tmp_path: Path, stores: TabletStoreManager) -> tuple[TabletStateMachine, MetadataFile, list[int]]:
    meta = metadata()
    meta.save(tmp_path)
    file = MetadataFile(tmp_path, meta)
    store = stores.create_tablet(meta.tablet_id, meta.schema)
    changes: list[int] = []
    machine = TabletStateMachine(store, file, lambda: changes.append(file.current.schema_version))
    return machine, file, changes


def test_writes_and_schema_changes_apply_in_log_order(tmp_path: Path, stores: TabletStoreManager) -> None:
    machine, file, changes = make_machine(tmp_path, stores)
    wider = SCHEMA.add_column(ColumnSchema.of("extra", "int32", default=7))
    log = [write(1, OpType.INSERT, [1, 2]), write(2, OpType.INSERT, [2, 3]), alter(3, wider, 1)]
    results = entry_results(machine.apply([*log, write(4, OpType.DELETE, [9])]))
    assert [r.index for r in results] == [1, 2, 3, 4]
    assert [(e.row, type(e.error)) for e in results[1].row_failures] == [(0, AlreadyPresent)]
    assert results[2].error is None
    assert results[2].row_failures == []
    assert [e.row for e in results[3].row_failures] == [0]
    assert machine.applied_index() == 4
    assert (file.current.schema, file.current.schema_version, file.current.pending_alter) == (wider, 1, None)
    assert TabletMetadata.load(tmp_path).schema_version == 1
    assert changes == [1]
    store = stores.open_tablet("tablet-1")
    assert store.scan(ScanSpec(ordered=True)).read_all().column("extra").to_pylist() == [7, 7, 7]


def test_a_write_that_no_longer_fits_the_schema_fails_as_a_whole(tmp_path: Path, stores: TabletStoreManager) -> None:
    machine, _, _ = make_machine(tmp_path, stores)
    narrower = SCHEMA.drop_column("v")
    results = entry_results(machine.apply([alter(1, narrower, 1), write(2, OpType.INSERT, [1])]))
    assert isinstance(results[1].error, InvalidArgument)
    assert "unknown column 'v'" in str(results[1].error)


def test_repeated_and_impossible_schema_changes(tmp_path: Path, stores: TabletStoreManager) -> None:
    machine, file, changes = make_machine(tmp_path, stores)
    renamed = SCHEMA.rename_column("v", "value")
    keyless = Schema.of([ColumnSchema.of("other", "int64", nullable=False)], ["other"])
    results = entry_results(machine.apply([alter(1, renamed, 2), alter(2, SCHEMA, 2), alter(3, keyless, 3)]))
    assert [r.error is None for r in results] == [True, True, False]
    assert "primary key" in str(results[2].error)
    assert (file.current.schema, file.current.schema_version) == (renamed, 2)
    assert changes == [2]


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (SCHEMA.rename_column("id", "key"), "primary key"),
        (Schema.of([*SCHEMA.columns[:1], ColumnSchema("v", SCHEMA.column("s").type, id=1)], ["id"]), "type"),
        (Schema([*SCHEMA.columns, ColumnSchema.of("n", "int32", nullable=False)], 1), "needs a default"),
    ],
)
def test_check_schema_change_refuses_what_the_store_cannot_do(new: Schema, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        check_schema_change(SCHEMA, new)


def test_a_joined_entry_answers_each_write_with_its_own_rows(tmp_path: Path, stores: TabletStoreManager) -> None:
    machine, _, _ = make_machine(tmp_path, stores)
    machine.apply([write(1, OpType.INSERT, [5])])
    rows = [{"id": i, "v": float(i)} for i in (1, 2, 5, 2, 3)]
    rid = RequestId("client", 7, 7)
    writes = (JoinedWrite(2), JoinedWrite(2, rid, (1,)), JoinedWrite(1))
    payload = encode_joined(writes, make_row_operations(SCHEMA, OpType.INSERT, rows))
    [result] = machine.apply([LogEntry(1, 2, EntryType.WRITE, payload)])
    assert isinstance(result, JoinedResult)
    # The writes apply in order: the second write's 2 repeats the first write's.
    errors = [[(e.row, type(e.error)) for e in r.row_failures] for r in result.results]
    assert errors == [[], [(0, AlreadyPresent), (1, AlreadyPresent)], []]
    assert [r.index for r in result.results] == [2, 2, 2]
    answer = machine.tracker.lookup(rid)
    assert answer is not None
    # Row 1 of that write was dropped by the leader, so the store's rows 0 and 1 are its 0 and 2.
    assert [e.row_index for e in answer.per_row_errors] == [0, 1, 2]
    store = stores.open_tablet("tablet-1")
    assert store.scan(ScanSpec(ordered=True)).read_all().column("id").to_pylist() == [1, 2, 3, 5]


def test_split_joined_gives_a_refused_entrys_error_to_every_write() -> None:
    refused = EntryResult(9, error=InvalidArgument("no longer fits"))
    split = split_joined(refused, [JoinedWrite(1), JoinedWrite(4)])
    assert [(r.index, r.error) for r in split.results] == [(9, refused.error), (9, refused.error)]
