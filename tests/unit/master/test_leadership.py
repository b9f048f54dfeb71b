"""Which catalog requests a master serves in each role (a stand-in replica, no I/O)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from nyala.catalog import CatalogState
from nyala.common.hostport import HostPort
from nyala.consensus.core import Role
from nyala.errors import NotTheLeader, ServiceUnavailable
from nyala.master.catalog_manager import CatalogManager
from nyala.master.leader import LeaderView
from nyala.master.peers import MasterPeers
from nyala.placement import PlacementOptions
from nyala.proto import common_pb2

from .helpers import master_options

ME, OTHER = "a" * 32, "b" * 32


class StandInReplica:
    def __init__(self, role: Role, term: int, leader_id: str) -> None:
        self.role, self.term, self.leader_id = role, term, leader_id


def manager(tmp_path: Path, replica: StandInReplica | None) -> CatalogManager:
    peers = MasterPeers(
        ME, HostPort("127.0.0.1", 7051), [HostPort("127.0.0.1", 7051), HostPort("127.0.0.2", 7051)], tmp_path
    )
    peers.by_uuid = {ME: HostPort("127.0.0.1", 7051), OTHER: HostPort("127.0.0.2", 7051)}
    cm = CatalogManager(master_options(tmp_path), peers)
    cm.replica = cast(Any, replica)
    return cm


def test_a_starting_master_is_unavailable(tmp_path: Path) -> None:
    cm = manager(tmp_path, None)
    with pytest.raises(ServiceUnavailable, match="still starting"):
        cm.leader()
    assert cm.role == common_pb2.UNKNOWN_ROLE
    assert not cm.leader_ready


def test_a_follower_names_the_leaders_address_not_its_uuid(tmp_path: Path) -> None:
    cm = manager(tmp_path, StandInReplica(Role.FOLLOWER, 3, OTHER))
    with pytest.raises(NotTheLeader) as caught:
        cm.leader()
    assert caught.value.leader_hint == "127.0.0.2:7051"
    assert cm.role == common_pb2.FOLLOWER
    no_leader = manager(tmp_path, StandInReplica(Role.CANDIDATE, 4, ""))
    with pytest.raises(NotTheLeader, match="no leader is known yet") as caught:
        no_leader.leader()
    assert caught.value.leader_hint == ""


def test_a_new_leader_is_unavailable_until_ready_for_its_own_term(tmp_path: Path) -> None:
    replica = StandInReplica(Role.LEADER, 5, ME)
    cm = manager(tmp_path, replica)
    with pytest.raises(ServiceUnavailable, match="not ready yet"):
        cm.leader()
    view = LeaderView.build(5, CatalogState(), PlacementOptions())
    cm._view, cm._ready_term = view, 5
    assert cm.leader() is view
    assert cm.leader_ready
    replica.term = 6  # re-elected in a later term: ready again only after a new rebuild
    with pytest.raises(ServiceUnavailable, match="not ready yet"):
        cm.leader()
