"""The in-memory catalog: applying writes, tombstones, lookups by name, id and partition key."""

from __future__ import annotations

import pytest

from nyala.catalog import (
    CatalogState,
    cluster_id_mutation,
    copy_tablet_entry,
    delete_table_write,
    state_from_entries,
    tablet_mutation,
)
from nyala.errors import Corruption, NotFound
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb

from .helpers import created, servers

RUNNING = mpb.SysTabletsEntryPB.RUNNING


def test_create_write_makes_a_running_table_with_creating_tablets_in_partition_key_order() -> None:
    state = CatalogState()
    table_id = created(state)
    table = state.find_table(common_pb2.TableIdentifierPB(table_name="t"))
    assert table.table_id == table_id
    assert table.entry.state == mpb.SysTablesEntryPB.RUNNING
    tablets = state.tablets_of(table_id)
    assert len(tablets) == 4  # 2 buckets x 2 ranges
    assert all(t.creating and t.replicas == servers() for t in tablets)
    starts = [t.partition.partition_key_start for t in tablets]
    assert starts == sorted(starts)


def test_find_table_by_id_wins_over_name_and_unknown_names_are_not_found() -> None:
    state = CatalogState()
    table_id = created(state)
    assert state.find_table(common_pb2.TableIdentifierPB(table_id=table_id, table_name="other")).name == "t"
    with pytest.raises(NotFound, match="'nope'"):
        state.find_table(common_pb2.TableIdentifierPB(table_name="nope"))
    with pytest.raises(NotFound, match="id 'x'"):
        state.find_table(common_pb2.TableIdentifierPB(table_id="x"))
    with pytest.raises(NotFound, match="give a table id or a table name"):
        state.find_table(common_pb2.TableIdentifierPB())


def test_deleted_table_keeps_tombstones_and_frees_its_name() -> None:
    state = CatalogState()
    table_id = created(state)
    table = state.table(table_id)
    assert table is not None
    state.apply(delete_table_write(table, state.tablets_of(table_id), "dropped by test"))
    assert state.table_by_name("t") is None
    tombstone = state.table(table_id)
    assert tombstone is not None
    assert tombstone.removed
    assert state.tablets_of(table_id) == []
    dead = state.tablets_of(table_id, include_dead=True)
    assert len(dead) == 4
    assert all(t.dead and t.entry.state_msg == "dropped by test" for t in dead)
    with pytest.raises(NotFound):
        state.find_table(common_pb2.TableIdentifierPB(table_id=table_id))
    # The name is free again: a new table with another id takes it.
    new_id = created(state, table_id="b" * 32)
    assert state.find_table(common_pb2.TableIdentifierPB(table_name="t")).table_id == new_id


def test_tablets_in_range_returns_overlapping_live_tablets_in_order() -> None:
    state = CatalogState()
    table_id = created(state)
    tablets = state.tablets_of(table_id)
    assert state.tablets_in_range(table_id, b"", b"") == tablets
    first = tablets[0].partition
    # A point range inside the first partition returns only it.
    assert state.tablets_in_range(table_id, first.partition_key_start, first.partition_key_start + b"\x00") == [
        tablets[0]
    ]
    # From the second partition's start to the end.
    assert state.tablets_in_range(table_id, tablets[1].partition.partition_key_start, b"") == tablets[1:]
    # End exclusive: ending at the second partition's start returns only the first.
    assert state.tablets_in_range(table_id, b"", tablets[1].partition.partition_key_start) == tablets[:1]


def test_a_tablet_update_replaces_the_entry_and_keeps_the_order() -> None:
    state = CatalogState()
    table_id = created(state)
    before = state.tablets_of(table_id)
    entry = copy_tablet_entry(before[2].entry)
    entry.state = RUNNING
    entry.leader_uuid = servers()[1]
    state.apply(mpb.CatalogWritePB(mutations=[tablet_mutation(before[2].tablet_id, entry)]))
    after = state.tablets_of(table_id)
    assert [t.tablet_id for t in after] == [t.tablet_id for t in before]
    assert after[2].running
    assert after[2].leader_uuid == servers()[1]
    assert before[2].creating  # the old info object was not mutated


def test_a_write_that_does_not_decode_changes_nothing() -> None:
    state = CatalogState()
    table_id = created(state)
    good = copy_tablet_entry(state.tablets_of(table_id)[0].entry)
    good.state = RUNNING
    bad = mpb.CatalogMutationPB(entry_type=mpb.TABLETS_ENTRY, entry_id="x", value=b"\xff\xff\xff")
    with pytest.raises(Corruption, match="tablet x"):
        state.apply(mpb.CatalogWritePB(mutations=[tablet_mutation("y", good), bad]))
    assert state.tablet("y") is None
    unknown = mpb.CatalogMutationPB(entry_type=mpb.UNKNOWN_ENTRY, entry_id="z", value=b"1")
    with pytest.raises(Corruption, match="unknown entry type"):
        state.apply(mpb.CatalogWritePB(mutations=[unknown]))


def test_rebuild_from_entries_equals_the_incremental_state_and_empty_value_deletes() -> None:
    state = CatalogState()
    created(state)
    state.apply(mpb.CatalogWritePB(mutations=[cluster_id_mutation("c" * 32, 5)]))
    entries = [
        *(
            mpb.CatalogMutationPB(entry_type=mpb.TABLES_ENTRY, entry_id=t.table_id, value=t.entry.SerializeToString())
            for t in state.all_tables()
        ),
        *(tablet_mutation(t.tablet_id, t.entry) for t in state.all_tablets()),
        cluster_id_mutation("c" * 32, 5),
    ]
    rebuilt = state_from_entries(entries)
    assert rebuilt.cluster_id == "c" * 32
    assert len(rebuilt) == len(state) == 1 + 4 + 1
    assert [t.tablet_id for t in rebuilt.all_tablets()] == [t.tablet_id for t in state.all_tablets()]
    some = next(rebuilt.all_tablets()).tablet_id
    rebuilt.apply(mpb.CatalogWritePB(mutations=[mpb.CatalogMutationPB(entry_type=mpb.TABLETS_ENTRY, entry_id=some)]))
    assert rebuilt.tablet(some) is None
    assert len(rebuilt) == 5


def test_range_lookups_by_bisection_match_a_full_scan_with_tombstones_about() -> None:
    state = CatalogState()
    table_id = created(state)
    every = state.tablets_of(table_id)
    # Tombstone every other tablet: lookups must skip them, and find the live ones around them.
    for t in every[::2]:
        entry = copy_tablet_entry(t.entry)
        entry.state = mpb.SysTabletsEntryPB.DELETED
        state.apply(mpb.CatalogWritePB(mutations=[tablet_mutation(t.tablet_id, entry)]))
    live = state.tablets_of(table_id)
    assert len(live) == len(every) - len(every[::2])
    bounds = sorted({b"", b"\xff" * 8} | {t.partition.partition_key_start for t in every})
    keys = sorted({*bounds, *(b + b"\x00" for b in bounds)})

    def scan(start: bytes, end: bytes) -> list[str]:
        return [
            t.tablet_id
            for t in live
            if (not end or t.partition.partition_key_start < end)
            and (not t.partition.partition_key_end or t.partition.partition_key_end > start)
        ]

    for start in keys:
        for end in [b"", *keys]:
            if end and end <= start:
                continue
            assert [t.tablet_id for t in state.tablets_in_range(table_id, start, end)] == scan(start, end)
