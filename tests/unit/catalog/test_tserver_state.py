"""Tablet-server state entries in the catalog: maintenance mode, unregistration, replica counts."""

from __future__ import annotations

import pytest

from nyala.catalog import (
    CatalogState,
    check_tserver_uuid,
    delete_table_write,
    maintenance_write,
    state_from_entries,
    tserver_state_mutation,
    unregister_write,
)
from nyala.errors import Corruption, InvalidArgument
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb

from .helpers import created, servers

pytestmark = pytest.mark.timeout(10)

TS = "5" * 32


def test_entering_and_exiting_maintenance_adds_and_removes_the_state_entry() -> None:
    state = CatalogState()
    assert not state.in_maintenance(TS)
    assert state.tserver_state(TS) == mpb.NONE
    state.apply(maintenance_write(TS, True, 123))
    assert state.in_maintenance(TS)
    assert state.tserver_states()[TS] == mpb.SysTServerStateEntryPB(state=mpb.MAINTENANCE_MODE, timestamp_us=123)
    assert len(state) == 1
    exit_write = maintenance_write(TS, False, 456)
    assert [m.value for m in exit_write.mutations] == [b""]  # exiting deletes the entry, as in Kudu
    state.apply(exit_write)
    assert not state.in_maintenance(TS)
    assert state.tserver_states() == {}


def test_state_entries_survive_a_rebuild_from_stored_entries() -> None:
    state = state_from_entries(maintenance_write(TS, True, 1).mutations)
    assert state.in_maintenance(TS)
    # An entry stored with state NONE counts as no entry.
    none = tserver_state_mutation(TS, mpb.SysTServerStateEntryPB(state=mpb.NONE))
    assert not state_from_entries([none]).in_maintenance(TS)


def test_unregister_write_deletes_the_state_entry_and_names_the_server() -> None:
    state = CatalogState()
    state.apply(maintenance_write(TS, True, 1))
    write = unregister_write(TS)
    assert list(write.unregistered_tservers) == [TS]
    state.apply(write)
    assert not state.in_maintenance(TS)
    assert len(state) == 0


def test_a_state_entry_that_does_not_parse_is_corruption_and_changes_nothing() -> None:
    state = CatalogState()
    bad = mpb.CatalogMutationPB(entry_type=mpb.TSERVER_STATE, entry_id=TS, value=b"\xff\xff")
    with pytest.raises(Corruption, match=f"tablet server {TS}"):
        state.apply(mpb.CatalogWritePB(mutations=[*maintenance_write("6" * 32, True, 1).mutations, bad]))
    assert state.tserver_states() == {}


def test_replica_counts_come_from_committed_configs_of_live_tablets() -> None:
    state = CatalogState()
    table_id = created(state)  # 4 tablets, each on servers() 1, 2 and 3
    one, two, three = servers()
    assert state.replica_counts() == {one: 4, two: 4, three: 4}
    assert len(state.tablets_on(one)) == 4
    assert state.tablets_on(TS) == []
    assert state.names_tserver(one)
    assert not state.names_tserver(TS)
    table = state.find_table(common_pb2.TableIdentifierPB(table_id=table_id))
    state.apply(delete_table_write(table, state.tablets_of(table_id), "gone"))
    # Deleted tablets hold no replicas any more, but their configs still name the servers.
    assert state.replica_counts() == {}
    assert state.tablets_on(one) == []
    assert state.names_tserver(one)
    state.apply(maintenance_write(TS, True, 1))
    assert state.names_tserver(TS)


@pytest.mark.parametrize(
    ("uuid", "message"),
    [
        ("", "no tablet server uuid given"),
        ("abc", "'abc' is not 32 lowercase hex digits"),
        ("A" * 32, "is not 32 lowercase hex digits"),
        ("g" * 32, "is not 32 lowercase hex digits"),
        ("a" * 33, "is not 32 lowercase hex digits"),
        ("x" * 500, r"'x{80}\.\.\.' is not"),
    ],
)
def test_bad_tserver_uuids_are_refused_with_the_reason(uuid: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        check_tserver_uuid(uuid)


def test_a_good_uuid_passes() -> None:
    check_tserver_uuid("0123456789abcdef" * 2)
