"""ClusterState: the master's incremental feed of servers and replicas."""

from __future__ import annotations

import random

import pytest

from nyala.errors import InvalidArgument, NotFound
from nyala.placement import ClusterState, TServerInfo, place_new_tablet

from .helpers import assert_consistent, cluster


def test_register_reregister_and_liveness() -> None:
    state = ClusterState(random.Random(0))
    state.register_tserver("a", "/dc1/r1")
    state.register_tserver("b", "/dc1/r2", live=False)
    assert state.servers_per_location() == {"/dc1/r1": 1, "/dc1/r2": 1}
    assert state.servers_per_location(live_only=True) == {"/dc1/r1": 1, "/dc1/r2": 0}
    state.register_tserver("b", "/dc1/r2")  # re-registration brings it back
    assert state.tserver("b") == TServerInfo("b", "/dc1/r2", True, 0, 0.0)
    assert_consistent(state)


def test_reregistering_under_a_new_location_carries_the_counts() -> None:
    state = cluster([2, 1])
    state.add_replica("t", b"k", "L0-0")
    place_new_tablet(state, "t", b"k", 1, now_s=0.0)
    before = {info.uuid: (info.reported_replicas, info.pending_replicas) for info in state.tservers()}
    state.register_tserver("L0-0", "/L1")
    assert state.tserver("L0-0").location == "/L1"
    assert {info.uuid: (info.reported_replicas, info.pending_replicas) for info in state.tservers()} == before
    assert state.replica_counts("L0-0", "t", b"k")[0] >= 1
    assert state.servers_per_location() == {"/L0": 1, "/L1": 2}
    assert_consistent(state)
    state.register_tserver("L0-1", "/L2")  # the last server of /L0 leaves: the location goes
    assert "/L0" not in state.servers_per_location()
    assert_consistent(state)


def test_add_and_remove_replicas() -> None:
    state = cluster([2])
    state.add_replica("t", b"a", "L0-0")
    state.add_replica("t", b"b", "L0-0")
    assert state.replica_counts("L0-0", "t", b"a") == (1.0, 2.0, 2.0)
    state.remove_replica("t", b"a", "L0-0")
    assert state.replica_counts("L0-0", "t", b"a") == (0.0, 1.0, 1.0)
    with pytest.raises(NotFound, match="has no replica of table 't' range b'a'"):
        state.remove_replica("t", b"a", "L0-0")
    with pytest.raises(NotFound, match="unknown tablet server"):
        state.add_replica("t", b"a", "zz")
    with pytest.raises(InvalidArgument, match="range start key must be bytes"):
        state.add_replica("t", "a", "L0-0")  # type: ignore[arg-type]
    assert_consistent(state)


def test_pending_only_replica_cannot_be_removed_as_reported() -> None:
    state = cluster([1])
    place_new_tablet(state, "t", b"", 1, now_s=0.0)
    with pytest.raises(NotFound):
        state.remove_replica("t", b"", "L0-0")


def test_remove_table_drops_its_reported_replicas() -> None:
    state = cluster([2])
    for _ in range(3):
        state.add_replica("gone", b"", "L0-0")
    state.add_replica("kept", b"", "L0-0")
    state.remove_table("gone")
    assert state.tserver("L0-0").reported_replicas == 1
    assert state.replica_counts("L0-0", "gone", b"") == (0.0, 0.0, 1.0)
    assert_consistent(state)


def test_dead_servers_keep_their_counts_but_receive_nothing() -> None:
    state = cluster([3])
    state.add_replica("t", b"", "L0-0")
    state.set_tserver_live("L0-0", False)
    assert state.locations["/L0"].reported == 0
    for _ in range(10):
        assert "L0-0" not in place_new_tablet(state, "t", b"", 2, now_s=0.0).tserver_uuids
    state.set_tserver_live("L0-0", True)
    assert state.tserver("L0-0").reported_replicas == 1
    assert_consistent(state)


def test_remove_tserver_frees_its_slot() -> None:
    state = cluster([2, 1])
    state.add_replica("t", b"", "L1-0")
    state.remove_tserver("L1-0")
    assert state.servers_per_location() == {"/L0": 2}
    with pytest.raises(NotFound):
        state.tserver("L1-0")
    state.register_tserver("new", "/L2")
    assert state.tserver("new").reported_replicas == 0
    assert_consistent(state)


@pytest.mark.parametrize("bad", ["", None, 5])
def test_bad_uuids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="uuid must be a non-empty string"):
        ClusterState(random.Random(0)).register_tserver(bad, "/a")  # type: ignore[arg-type]


def test_bad_location_is_refused_and_nothing_registered() -> None:
    state = ClusterState(random.Random(0))
    with pytest.raises(InvalidArgument, match="must begin with '/'"):
        state.register_tserver("a", "rack1")
    assert state.tservers() == []
