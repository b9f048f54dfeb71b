"""Follower reads (KUDU-500): the staleness proof, and the refusals naming the leader."""

from __future__ import annotations

import pytest

from nyala.catalog import CatalogState, TabletInfo, tablet_mutation
from nyala.errors import NotTheLeader, ServiceUnavailable
from nyala.master.follower_reads import FollowerCatalog, FollowerView, Freshness
from nyala.master.heartbeats import tablet_update
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb

from .test_reports import A, B, creating_tablet, reported


def test_fresh_only_once_the_leaders_commit_index_is_applied() -> None:
    f = Freshness()
    assert f.staleness_s(10.0) is None  # nothing heard yet: no proof at all
    f.heard_from_leader(1.0, leader_commit=5)
    assert f.staleness_s(1.5) is None  # heard, but 5 is not applied here yet
    f.applied(4)
    assert f.staleness_s(1.5) is None
    f.applied(5)
    assert f.staleness_s(1.5) == pytest.approx(0.5)  # as new as the leader was at 1.0
    f.heard_from_leader(2.0, leader_commit=5)  # nothing new committed: fresh at once
    assert f.staleness_s(2.25) == pytest.approx(0.25)


def test_a_lagging_apply_proves_the_latest_point_it_covers() -> None:
    f = Freshness()
    f.applied(10)
    f.heard_from_leader(1.0, leader_commit=12)
    f.heard_from_leader(2.0, leader_commit=15)
    f.heard_from_leader(3.0, leader_commit=20)
    f.applied(16)  # covers the points of 1.0 and 2.0, not 3.0
    assert f.fresh_at == 2.0
    assert f.staleness_s(4.0) == pytest.approx(2.0)
    f.applied(20)
    assert f.fresh_at == 3.0


def test_a_point_asking_no_more_replaces_older_ones_and_the_queue_is_bounded() -> None:
    f = Freshness(max_points=3)
    f.heard_from_leader(1.0, leader_commit=7)
    f.heard_from_leader(2.0, leader_commit=7)  # same commit, later: the earlier one is useless
    f.applied(7)
    assert f.fresh_at == 2.0
    for k in range(10):
        f.heard_from_leader(3.0 + k, leader_commit=100 + k)
    f.applied(200)
    assert f.fresh_at == 12.0  # the oldest points were dropped, the newest kept


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_follower_serves_within_the_bound_and_refuses_beyond_it_naming_the_leader() -> None:
    clock = Clock()
    follower = FollowerCatalog(clock)
    with pytest.raises(ServiceUnavailable, match="still starting"):
        follower.view(1000, "127.0.0.2:7051")
    applied = [0]
    follower.open(CatalogState())
    follower.attach(lambda: applied[0])
    with pytest.raises(NotTheLeader, match="cannot prove how fresh") as caught:
        follower.view(1000, "127.0.0.2:7051")
    assert caught.value.leader_hint == "127.0.0.2:7051"
    follower.heard_from_leader(3)
    applied[0] = 3
    assert follower.view(1000, "127.0.0.2:7051").catalog is follower.catalog
    clock.now += 0.4
    assert follower.staleness_ms() == pytest.approx(400)
    follower.view(500, "")
    with pytest.raises(NotTheLeader, match=r"may be 400 ms old, more than the 300 ms.*no leader is known"):
        follower.view(300, "")


def test_a_follower_names_the_leader_the_catalog_holds() -> None:
    tablet = creating_tablet()
    running = tablet_update(tablet, A, reported(tablet, A, common_pb2.LEADER))
    assert running is not None
    info = TabletInfo.of(tablet.tablet_id, running)
    # A new leader's report is persisted, so a follower's locations name it from the catalog.
    newer = tablet_update(info, B, reported(info, B, common_pb2.LEADER, term=2))
    assert newer is not None
    assert newer.leader_uuid == B
    assert newer.reported_term == 2
    follower = FollowerCatalog(Clock())
    follower.open(CatalogState())
    follower.writes_applied([mpb.CatalogWritePB(mutations=[tablet_mutation(tablet.tablet_id, newer)])])
    assert follower.catalog is not None
    applied = follower.catalog.tablet(tablet.tablet_id)
    assert applied is not None
    assert FollowerView(follower.catalog).leader_of(applied) == B
    # An old leader reporting late (a lower term) changes nothing.
    moved = TabletInfo.of(tablet.tablet_id, newer)
    assert tablet_update(moved, A, reported(moved, A, common_pb2.LEADER, term=1)) is None
