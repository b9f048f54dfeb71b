"""Per-table placement constraints: validation, placement, replacement and the move planner."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from nyala.errors import InvalidArgument, ServiceUnavailable
from nyala.placement import (
    ClusterState,
    PlacementConstraint,
    check_constraint,
    place_new_tablet,
    place_replacement,
)
from nyala.placement.rebalance import ClusterInfo, Move, TabletInfo, plan_moves

EU = PlacementConstraint.of(["/eu"])


def topology() -> dict[str, str]:
    """Three racks of three servers in /eu, two locations of three in /us."""
    servers = {}
    for rack in ("r1", "r2", "r3"):
        for i in range(3):
            servers[f"eu-{rack}-{i}"] = f"/eu/{rack}"
    for zone in ("east", "west"):
        for i in range(3):
            servers[f"us-{zone}-{i}"] = f"/us/{zone}"
    return servers


def state_of(servers: dict[str, str], seed: int = 1) -> ClusterState:
    state = ClusterState(random.Random(seed))
    for uuid, location in servers.items():
        state.register_tserver(uuid, location)
    return state


# ----------------------------------------------------------------------------- the value


def test_constraint_validates_its_locations() -> None:
    with pytest.raises(InvalidArgument, match="must begin with '/'"):
        PlacementConstraint.of(["eu"])
    with pytest.raises(InvalidArgument, match="empty component"):
        PlacementConstraint.of(["/eu//r1"])
    with pytest.raises(InvalidArgument, match="twice"):
        PlacementConstraint.of(["/eu", "/eu"])
    with pytest.raises(InvalidArgument, match="inside /eu"):
        PlacementConstraint.of(["/eu", "/eu/r1"])
    with pytest.raises(InvalidArgument, match="outside the table's locations"):
        PlacementConstraint.of(["/eu"], leader_location="/us/east")
    with pytest.raises(InvalidArgument, match="not one string"):
        PlacementConstraint.of("/eu")


def test_groups_are_one_level_below_the_subtree() -> None:
    assert EU.allows("/eu")
    assert EU.allows("/eu/r1/row2")
    assert not EU.allows("/eu2")
    assert not EU.allows("/us/east")
    assert EU.group_of("/eu/r1/row2") == "/eu/r1"
    assert EU.group_of("/eu") == "/eu"
    assert EU.group_of("/eu2/r1") is None
    assert PlacementConstraint().group_of("/us/east") == "/us/east"


def test_check_constraint_names_each_problem() -> None:
    servers = Counter(topology().values())
    constraint = PlacementConstraint.of(["/eu"], leader_location="/eu/r1")
    good = check_constraint(constraint, 3, ["/eu/r1", "/eu/r2", "/eu/r3"], servers, "/eu/r1")
    assert good.met
    assert good.satisfiable
    outside = check_constraint(constraint, 3, ["/eu/r1", "/eu/r2", "/us/east"], servers, "/eu/r1")
    assert not outside.met
    assert outside.outside == ("/us/east",)
    crowded = check_constraint(constraint, 3, ["/eu/r1", "/eu/r1", "/eu/r3"], servers, "/eu/r1")
    assert not crowded.met
    assert crowded.policy.offending_locations == ("/eu/r1",)
    misled = check_constraint(constraint, 3, ["/eu/r1", "/eu/r2", "/eu/r3"], servers, "/eu/r2")
    assert not misled.met
    assert misled.leader_misplaced
    assert "leader outside /eu/r1" in misled.explain(constraint)
    nowhere = check_constraint(PlacementConstraint.of(["/asia"]), 3, [], servers)
    assert not nowhere.satisfiable
    assert "cannot be met" in nowhere.explain(PlacementConstraint.of(["/asia"]))


# ----------------------------------------------------------------------------- placement


def test_new_tablets_stay_in_the_subtree_with_no_rack_majority() -> None:
    servers = topology()
    state = state_of(servers)
    for i in range(60):
        placed = place_new_tablet(state, "t", f"r{i % 4}".encode(), 3, now_s=0.0, constraint=EU)
        locations = [servers[u] for u in placed.tserver_uuids]
        assert all(loc.startswith("/eu/") for loc in locations), locations
        assert sorted(locations) == ["/eu/r1", "/eu/r2", "/eu/r3"], locations
        assert placed.policy_met
    # The load inside the subtree stays even: 60 tablets x 3 replicas over 9 servers.
    loads = [state.tserver(u).pending_replicas for u in servers if u.startswith("eu")]
    assert max(loads) - min(loads) <= 1.0
    assert all(state.tserver(u).pending_replicas == 0 for u in servers if u.startswith("us"))


def test_two_groups_allow_two_and_one() -> None:
    servers = {"a1": "/eu/a", "a2": "/eu/a", "b1": "/eu/b", "b2": "/eu/b", "u1": "/us", "u2": "/us", "u3": "/us"}
    state = state_of(servers)
    for i in range(20):
        placed = place_new_tablet(state, "t", b"", 3, now_s=0.0, constraint=EU)
        counts = Counter(servers[u] for u in placed.tserver_uuids)
        assert set(counts) == {"/eu/a", "/eu/b"}, (i, counts)
        assert max(counts.values()) == 2, (i, counts)
        assert placed.policy_met


def test_too_few_servers_in_the_subtree_fails_and_places_nothing_outside() -> None:
    servers = {"e1": "/eu/a", "e2": "/eu/b", "u1": "/us", "u2": "/us", "u3": "/us"}
    state = state_of(servers)
    with pytest.raises(ServiceUnavailable, match=r"cannot be met: 2 live tablet server\(s\) in /eu"):
        place_new_tablet(state, "t", b"", 3, now_s=0.0, constraint=EU)
    with pytest.raises(ServiceUnavailable, match="cannot be met: 0 live"):
        place_new_tablet(state, "t", b"", 1, now_s=0.0, constraint=PlacementConstraint.of(["/asia"]))
    assert all(state.tserver(u).pending_replicas == 0 for u in servers)


def test_replacement_stays_inside_even_when_only_outside_has_room() -> None:
    servers = {"e1": "/eu/a", "e2": "/eu/b", "e3": "/eu/c", "u1": "/us", "u2": "/us"}
    state = state_of(servers)
    state.set_tserver_live("e3", False)
    with pytest.raises(ServiceUnavailable, match="no replica is placed outside /eu"):
        place_replacement(state, "t", b"", 3, ["e1", "e2", "e3"], now_s=0.0, leaving=["e3"], constraint=EU)
    state.register_tserver("e4", "/eu/c")
    placed = place_replacement(state, "t", b"", 3, ["e1", "e2", "e3"], now_s=0.0, leaving=["e3"], constraint=EU)
    assert placed.tserver_uuids == ("e4",)
    assert placed.policy_met


def test_replacement_prefers_the_missing_group() -> None:
    servers = topology()
    state = state_of(servers)
    for seed in range(20):
        state = state_of(servers, seed)
        placed = place_replacement(
            state, "t", b"", 3, ["eu-r1-0", "eu-r2-0", "eu-r3-0"], now_s=0.0, leaving=["eu-r3-0"], constraint=EU
        )
        assert servers[placed.tserver_uuids[0]] == "/eu/r3"


def test_leader_location_gets_a_replica() -> None:
    servers = topology()
    constraint = PlacementConstraint.of([], leader_location="/us/west")
    state = state_of(servers)
    for _ in range(30):
        placed = place_new_tablet(state, "t", b"", 3, now_s=0.0, constraint=constraint)
        locations = Counter(servers[u] for u in placed.tserver_uuids)
        assert locations["/us/west"] >= 1
        assert max(locations.values()) == 1  # the cluster-wide policy (5 locations) still holds


def test_unconstrained_placement_is_unchanged_by_an_empty_constraint() -> None:
    servers = topology()
    first, second = state_of(servers, 7), state_of(servers, 7)
    for i in range(30):
        a = place_new_tablet(first, "t", bytes([i]), 3, now_s=0.0)
        b = place_new_tablet(second, "t", bytes([i]), 3, now_s=0.0, constraint=PlacementConstraint())
        assert a.tserver_uuids == b.tserver_uuids


# ----------------------------------------------------------------------------- the planner


def apply(cluster: ClusterInfo, moves: list[Move]) -> ClusterInfo:
    members = {t.tablet_id: list(t.replicas) for t in cluster.tablets}
    for move in moves:
        replicas = members[move.tablet_id]
        assert move.from_uuid in replicas
        assert move.to_uuid not in replicas
        replicas[replicas.index(move.from_uuid)] = move.to_uuid
    tablets = [dataclasses.replace(t, replicas=tuple(members[t.tablet_id])) for t in cluster.tablets]
    live = {u: loc for u, loc in cluster.tservers.items() if u not in cluster.draining}
    return ClusterInfo(live, tablets)


def pinned_cluster(servers: dict[str, str], count: int = 12) -> ClusterInfo:
    """A pinned table piled onto three /eu servers, and a free table on /us."""
    tablets = [
        TabletInfo(f"eu{i}", "pinned", b"", 3, ("eu-r1-0", "eu-r2-0", "eu-r3-0"), "eu-r1-0", EU) for i in range(count)
    ]
    tablets += [TabletInfo(f"us{i}", "free", b"", 3, ("us-east-0", "us-west-0", "eu-r1-1")) for i in range(count)]
    return ClusterInfo(servers, tablets)


def check_pinned(cluster: ClusterInfo) -> None:
    for tablet in cluster.tablets:
        if tablet.constraint is None:
            continue
        locations = [cluster.tservers[u] for u in tablet.replicas]
        check = check_constraint(tablet.constraint, 3, locations, Counter(cluster.tservers.values()))
        assert check.met, (tablet.tablet_id, check.explain(tablet.constraint))


def test_plan_moves_balances_a_pinned_table_inside_its_subtree() -> None:
    servers = topology()
    cluster = pinned_cluster(servers)
    plan = plan_moves(cluster, random.Random(3))
    assert plan.moves
    pinned = {t.tablet_id for t in cluster.tablets if t.constraint is not None}
    for move in plan.moves:
        if move.tablet_id in pinned:
            assert servers[move.to_uuid].startswith("/eu/"), move
    after = apply(cluster, plan.moves)
    check_pinned(after)
    per_server = Counter(u for t in after.tablets if t.table_id == "pinned" for u in t.replicas)
    eu = [per_server.get(u, 0) for u in servers if u.startswith("eu")]
    assert max(eu) - min(eu) <= 1
    assert plan_moves(after, random.Random(4)).moves == []


def test_policy_fixer_brings_replicas_back_inside() -> None:
    servers = topology()
    tablets = [TabletInfo("x", "pinned", b"", 3, ("eu-r1-0", "eu-r2-0", "us-east-0"), "eu-r1-0", EU)]
    tablets.append(TabletInfo("y", "pinned", b"", 3, ("eu-r1-1", "eu-r1-2", "eu-r2-1"), "eu-r2-1", EU))
    cluster = ClusterInfo(servers, tablets)
    plan = plan_moves(cluster, random.Random(1))
    policy_moves = [m for m in plan.moves if m.phase == "policy"]
    assert {(m.tablet_id, m.from_uuid) for m in policy_moves} >= {("x", "us-east-0")}
    assert any(m.tablet_id == "y" and servers[m.from_uuid] == "/eu/r1" for m in policy_moves)
    after = apply(cluster, plan.moves)
    check_pinned(after)
    assert plan.unfixable == []
    assert plan_moves(after, random.Random(2)).moves == []


def test_policy_fixer_reports_a_constraint_it_cannot_meet_and_moves_nothing_outside() -> None:
    servers = {"e1": "/eu/a", "e2": "/eu/b", "u1": "/us", "u2": "/us", "u3": "/us"}
    tablets = [TabletInfo("x", "pinned", b"", 3, ("e1", "e2", "u1"), "e1", EU)]
    plan = plan_moves(ClusterInfo(servers, tablets), random.Random(1))
    assert plan.unfixable == ["x"]
    assert all(servers[m.to_uuid].startswith("/eu") for m in plan.moves if m.tablet_id == "x")


def test_draining_moves_pinned_replicas_inside() -> None:
    servers = topology()
    tablets = [TabletInfo(f"t{i}", "pinned", b"", 3, ("eu-r1-0", "eu-r2-0", "eu-r3-0"), None, EU) for i in range(4)]
    cluster = ClusterInfo(servers, tablets, draining=frozenset({"eu-r1-0"}))
    plan = plan_moves(cluster, random.Random(5))
    drains = [m for m in plan.moves if m.phase == "drain"]
    assert len(drains) == 4
    assert all(servers[m.to_uuid] == "/eu/r1" for m in drains)
    after = apply(cluster, plan.moves)
    check_pinned(after)
    assert plan_moves(after, random.Random(6)).moves == []


def test_balancing_keeps_a_replica_in_the_leader_location() -> None:
    servers = {"a1": "/z/a", "a2": "/z/a", "b1": "/z/b", "b2": "/z/b", "c1": "/z/c", "c2": "/z/c"}
    servers.update({f"d{i}": "/z/d" for i in range(6)})
    constraint = PlacementConstraint.of(["/z"], leader_location="/z/a")
    tablets = [TabletInfo(f"t{i}", "t", b"", 3, ("a1", "b1", "c1"), "a1", constraint) for i in range(12)]
    cluster = ClusterInfo(servers, tablets)
    plan = plan_moves(cluster, random.Random(2))
    assert plan.moves
    after = apply(cluster, plan.moves)
    for tablet in after.tablets:
        assert any(servers[u] == "/z/a" for u in tablet.replicas), tablet
    assert plan_moves(after, random.Random(3)).moves == []


def test_the_fixer_gives_a_tablet_a_replica_in_its_leader_location() -> None:
    servers = {"a1": "/z/a", "a2": "/z/a", "b1": "/z/b", "c1": "/z/c", "d1": "/z/d"}
    constraint = PlacementConstraint.of(["/z"], leader_location="/z/a")
    tablets = [TabletInfo("t", "t", b"", 3, ("b1", "c1", "d1"), "b1", constraint)]
    cluster = ClusterInfo(servers, tablets)
    plan = plan_moves(cluster, random.Random(1))
    assert len(plan.moves) == 1
    (move,) = plan.moves
    assert move.phase == "policy"
    assert servers[move.to_uuid] == "/z/a"
    assert move.from_uuid != "b1"  # a follower moves, not the leader
    assert plan_moves(apply(cluster, plan.moves), random.Random(2)).moves == []
