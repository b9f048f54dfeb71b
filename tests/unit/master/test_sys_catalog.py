"""The sys catalog state machine: entries and the applied index in one durable transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from nyala.catalog import cluster_id_mutation, maintenance_write, table_mutation, unregister_write
from nyala.consensus.core import EntryType, LogEntry
from nyala.errors import Corruption
from nyala.master.sys_catalog import SysCatalogStore
from nyala.proto import master_pb2 as mpb

from .helpers import create_request


def table_entry(name: str) -> mpb.SysTablesEntryPB:
    request = create_request(name)
    return mpb.SysTablesEntryPB(
        name=name,
        schema=request.schema,
        partitioner=request.partitioner,
        num_replicas=3,
        state=mpb.SysTablesEntryPB.RUNNING,
    )


def entry(index: int, *mutations: mpb.CatalogMutationPB) -> LogEntry:
    write = mpb.CatalogWritePB(mutations=list(mutations))
    return LogEntry(1, index, EntryType.WRITE, write.SerializeToString())


def test_writes_survive_reopening_with_their_applied_index(tmp_path: Path) -> None:
    store = SysCatalogStore.open(tmp_path)
    assert store.applied_index() == 0
    assert store.apply([entry(1, table_mutation("a" * 32, table_entry("one")))]) == [None]
    results = store.apply(
        [
            entry(2, table_mutation("b" * 32, table_entry("two")), cluster_id_mutation("c" * 32, 7)),
            entry(3, mpb.CatalogMutationPB(entry_type=mpb.TABLES_ENTRY, entry_id="a" * 32)),  # delete "one"
        ]
    )
    assert results == [None, None]
    assert store.cluster_id == "c" * 32
    store.close()
    again = SysCatalogStore.open(tmp_path)
    try:
        assert again.applied_index() == 3
        assert again.cluster_id == "c" * 32
        state = again.load()
        assert [t.name for t in state.live_tables()] == ["two"]
        assert state.table("a" * 32) is None
    finally:
        again.close()


def test_the_last_mutation_of_a_key_in_one_write_wins(tmp_path: Path) -> None:
    store = SysCatalogStore.open(tmp_path)
    try:
        store.apply(
            [entry(1, table_mutation("a" * 32, table_entry("first")), table_mutation("a" * 32, table_entry("second")))]
        )
        assert [t.name for t in store.load().live_tables()] == ["second"]
    finally:
        store.close()


def test_an_entry_that_is_not_a_catalog_write_fails_loudly_and_applies_nothing(tmp_path: Path) -> None:
    store = SysCatalogStore.open(tmp_path)
    try:
        good = entry(1, table_mutation("a" * 32, table_entry("one")))
        with pytest.raises(Corruption, match="log entry 2 is not a catalog write"):
            store.apply([good, LogEntry(1, 2, EntryType.WRITE, b"\xff\xff\xff\xff")])
        assert store.applied_index() == 0
        assert not store.load().live_tables()
    finally:
        store.close()


def test_applying_an_unregistration_stores_its_state_deletion_and_tells_the_master(tmp_path: Path) -> None:
    store = SysCatalogStore.open(tmp_path)
    told: list[list[str]] = []
    store.on_unregistered = told.append
    try:
        uuid = "5" * 32
        store.apply([LogEntry(1, 1, EntryType.WRITE, maintenance_write(uuid, True, 1).SerializeToString())])
        assert store.load().in_maintenance(uuid)
        assert told == []
        store.apply([LogEntry(1, 2, EntryType.WRITE, unregister_write(uuid).SerializeToString())])
        assert told == [[uuid]]
        assert store.load().tserver_states() == {}
    finally:
        store.close()
