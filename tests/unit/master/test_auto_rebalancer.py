"""The leader master's auto rebalancer: snapshot, busy tablets, move choice and the CLI lease."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from pathlib import Path

import pytest

from nyala.errors import InvalidArgument
from nyala.master.auto_rebalancer import (
    AutoSnapshot,
    ServerState,
    TabletState,
    build_cluster,
    choose_moves,
    snapshot_of,
)
from nyala.master.rebalance_lease import CLI_LEASE_S, MAX_LEASE_S, NEW_LEADER_HOLDER, RebalanceLease
from nyala.placement import PlacementConstraint, RebalanceOptions
from nyala.proto import master_pb2 as mpb
from nyala.services import CREATE_TABLE, REBALANCE_LEASE

from .helpers import cluster, create_request, master_options

pytestmark = pytest.mark.timeout(60)

# Three locations of two servers each: a{1,2} in /a, b{1,2} in /b, c{1,2} in /c.
SERVERS = tuple(ServerState(f"{loc}{i}", f"/{loc}", live=True) for loc in "abc" for i in (1, 2))


def tablet(tablet_id: str, *voters: str, **changes: object) -> TabletState:
    base = TabletState(tablet_id, "t1", tablet_id.encode(), 3, voters, cas_config_index=5, leader=voters[0])
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def snapshot(*tablets: TabletState, servers: tuple[ServerState, ...] = SERVERS) -> AutoSnapshot:
    return AutoSnapshot(servers, tablets)


def moves_of(snap: AutoSnapshot, max_per_server: int = 1) -> list[tuple[str, str, str]]:
    moves = choose_moves(snap, random.Random(3), RebalanceOptions(), max_per_server)
    return [(m.tablet_id, m.from_uuid, m.to_uuid) for m in moves]


# -- the model --------------------------------------------------------------------------------


def test_settled_tablets_are_planned_and_changing_ones_are_busy() -> None:
    snap = snapshot(
        tablet("ok", "a1", "b1", "c1"),
        tablet("no-leader", "a1", "b1", "c1", leader=""),
        tablet("non-voter", "a1", "b1", "c1", non_voters=("c2",)),
        tablet("replacing", "a1", "b1", "c1", replacing=("b1",)),
        tablet("short", "a1", "b1"),
        tablet("repair", "a1", "b1", "c1", changing=True),
    )
    info, busy = build_cluster(snap)
    assert busy == {"no-leader", "non-voter", "replacing", "short", "repair"}
    assert dict(info.tservers) == {s.uuid: s.location for s in SERVERS}
    assert {t.tablet_id: t.replicas for t in info.tablets}["non-voter"] == ("a1", "b1", "c1", "c2")


def test_dead_and_maintenance_servers_take_no_part_and_their_tablets_wait() -> None:
    servers = (
        *SERVERS[:4],
        ServerState("c1", "/c", live=False),
        ServerState("c2", "/c", live=True, maintenance=True),
    )
    snap = snapshot(
        tablet("on-dead", "a1", "b1", "c1"),
        tablet("in-maintenance", "a2", "b2", "c2"),
        tablet("unregistered", "a1", "b2", "zz"),
        servers=servers,
    )
    info, busy = build_cluster(snap)
    assert set(info.tservers) == {"a1", "a2", "b1", "b2"}
    assert busy == {"on-dead", "in-maintenance", "unregistered"}
    # Their replicas elsewhere still count for load; the ones on left-out servers do not.
    assert {t.tablet_id: t.replicas for t in info.tablets}["on-dead"] == ("a1", "b1")


# -- choosing moves ---------------------------------------------------------------------------


def test_policy_violation_is_fixed_into_the_empty_location() -> None:
    # After /c was lost and re-replicated best effort, then came back: two replicas in /a.
    moves = moves_of(snapshot(tablet("t", "a1", "a2", "b1")))
    assert len(moves) == 1
    tablet_id, source, dest = moves[0]
    assert tablet_id == "t"
    assert source in {"a1", "a2"}
    assert dest in {"c1", "c2"}


def test_rounds_respect_max_moves_per_server_and_restore_the_policy() -> None:
    """Round after round (each move applied as the master would finish it), every tablet ends
    with one replica per location, and no round moves more than the limit per server."""
    for limit in (1, 2):
        tablets = {f"t{i}": tablet(f"t{i}", "a1", "a2", "b1") for i in range(4)}
        location = {s.uuid: s.location for s in SERVERS}
        for _ in range(12):
            moves = moves_of(snapshot(*tablets.values()), max_per_server=limit)
            if not moves:
                break
            for end in (1, 2):
                per_server: dict[str, int] = {}
                for move in moves:
                    per_server[move[end]] = per_server.get(move[end], 0) + 1
                assert max(per_server.values()) <= limit
            for tablet_id, source, dest in moves:
                t = tablets[tablet_id]
                voters = tuple(dest if u == source else u for u in t.voters)
                tablets[tablet_id] = dataclasses.replace(t, voters=voters, leader=voters[0])
        assert moves_of(snapshot(*tablets.values()), max_per_server=limit) == []
        for t in tablets.values():
            assert sorted(location[u] for u in t.voters) == ["/a", "/b", "/c"], t


def test_a_balanced_cluster_is_left_alone() -> None:
    assert moves_of(snapshot(tablet("x", "a1", "b1", "c1"), tablet("y", "a2", "b2", "c2"))) == []


def test_a_busy_tablet_is_not_moved_even_when_it_violates_the_policy() -> None:
    assert moves_of(snapshot(tablet("t", "a1", "a2", "b1", changing=True))) == []


def test_replicas_of_a_server_in_maintenance_are_never_moved() -> None:
    servers = (*SERVERS[:1], ServerState("a2", "/a", live=True, maintenance=True), *SERVERS[2:])
    assert moves_of(snapshot(tablet("t", "a1", "a2", "b1"), servers=servers)) == []


def test_no_server_takes_part_means_no_move() -> None:
    dead = tuple(dataclasses.replace(s, live=False) for s in SERVERS)
    assert moves_of(snapshot(tablet("t", "a1", "a2", "b1"), servers=dead)) == []


# -- the lease --------------------------------------------------------------------------------


def test_lease_is_held_until_it_expires_or_is_released() -> None:
    now = [100.0]
    lease = RebalanceLease(clock=lambda: now[0])
    assert lease.holder() == ""
    assert lease.grant("cli 1", 10) == 10
    assert lease.holder() == "cli 1"
    now[0] += 9.9
    assert lease.holder() == "cli 1"
    now[0] += 0.2  # a CLI killed with -9 stops renewing: its lease lapses
    assert lease.holder() == ""
    assert lease.grant("cli 2", 10_000) == MAX_LEASE_S
    assert lease.grant("cli 2", 0) == 0
    assert lease.holder() == ""
    lease.new_leadership()
    assert lease.holder() == NEW_LEADER_HOLDER
    now[0] += CLI_LEASE_S
    assert lease.holder() == ""


@pytest.mark.parametrize(("holder", "duration"), [("", 10.0), ("cli", -1.0)])
def test_bad_lease_requests_are_refused_and_change_nothing(holder: str, duration: float) -> None:
    lease = RebalanceLease(clock=lambda: 0.0)
    with pytest.raises(InvalidArgument):
        lease.grant(holder, duration)
    assert lease.holder() == ""


@pytest.mark.parametrize(
    "overrides",
    [
        {"auto_rebalancing_interval_sec": 0.0},
        {"auto_rebalancing_max_moves_per_server": 0},
        {"auto_rebalancing_load_imbalance_threshold": -1.0},
    ],
)
def test_bad_auto_rebalancing_options_are_refused(tmp_path: Path, overrides: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        master_options(tmp_path, **overrides)


# -- in a master --------------------------------------------------------------------------------


def test_snapshot_of_the_leader_view_and_rounds_paused_by_the_lease(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            response = await c.call(CREATE_TABLE, create_request(buckets=2))
            view = c.master.catalog_manager.leader()
            snap = snapshot_of(view, c.master.ts_manager)
            assert {s.uuid for s in snap.servers} == {t.uuid for t in c.tservers}
            assert all(s.live and not s.maintenance and s.location == "/default" for s in snap.servers)
            assert {t.tablet_id for t in snap.tablets} == {
                t.tablet_id for t in view.catalog.tablets_of(response.table_id)
            }
            for t in snap.tablets:
                assert t.replication_factor == 3
                assert len(t.voters) == 3
                assert t.leader in t.voters
                info = view.catalog.tablet(t.tablet_id)
                assert info is not None
                assert t.cas_config_index == info.entry.committed_config.opid_index
            # One location, three servers, RF 3: nothing to do.
            rebalancer = c.master.auto_rebalancer
            c.master.rebalance_lease.grant(NEW_LEADER_HOLDER, 0)
            assert rebalancer.round(view) == []
            rounds = rebalancer.rounds
            # A CLI's lease pauses the rounds; releasing it resumes them.
            granted = await c.call(REBALANCE_LEASE, mpb.RebalanceLeaseRequestPB(holder="cli", duration_ms=5000))
            assert granted.granted_ms == 5000
            assert granted.auto_rebalancing_enabled
            assert rebalancer.round(view) == []
            assert rebalancer.rounds == rounds
            assert rebalancer.skipped_for_lease >= 1
            await c.call(REBALANCE_LEASE, mpb.RebalanceLeaseRequestPB(holder="cli", duration_ms=0))
            rebalancer.round(view)
            assert rebalancer.rounds == rounds + 1

    asyncio.run(main())


def test_a_pinned_tablet_outside_its_locations_is_brought_back_and_never_moved_out() -> None:
    pinned = PlacementConstraint.of(["/a", "/b"])
    # After its policy changed to /a and /b: the /c replica has to come back inside.
    moves = moves_of(snapshot(tablet("t", "a1", "b1", "c1", constraint=pinned)))
    assert moves == [("t", "c1", moves[0][2])]
    assert moves[0][2] in {"a2", "b2"}
    # A tablet that keeps to its locations is never moved out of them, even into an empty location.
    servers = (*SERVERS, ServerState("d1", "/d", live=True), ServerState("d2", "/d", live=True))
    crowded = [tablet(f"t{i}", "a1", "b1", "a2", constraint=pinned) for i in range(4)]
    for _, _, dest in moves_of(snapshot(*crowded, servers=servers), max_per_server=4):
        assert dest[0] in "ab", dest
