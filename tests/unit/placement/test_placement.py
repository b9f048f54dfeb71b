"""Placement: the policy whenever it can be met, best effort when not, and clear errors."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nyala.errors import AlreadyPresent, InvalidArgument, NotFound, ServiceUnavailable
from nyala.placement import (
    ClusterState,
    Verdict,
    check_placement,
    location_limit,
    place_new_tablet,
    place_replacement,
    policy_locations,
    policy_satisfiable,
)

from .helpers import cluster, location_of, per_location


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    rf=st.integers(1, 7),
    seed=st.integers(0, 1000),
    dead_fraction=st.sampled_from([0.0, 0.0, 0.3]),
)
def test_policy_is_met_whenever_the_live_servers_allow_it(sizes, rf, seed, dead_fraction) -> None:
    rng = random.Random(seed)
    names = [f"L{i}-{j}" for i, n in enumerate(sizes) for j in range(n)]
    dead = [u for u in names if rng.random() < dead_fraction]
    state = cluster(sizes, seed, dead)
    # The policy counts only locations with a live server (nyala.placement.policy_locations).
    live = policy_locations((f"/L{i}", f"L{i}-{j}" not in dead) for i, n in enumerate(sizes) for j in range(n))
    if sum(live.values()) < rf:
        with pytest.raises(ServiceUnavailable, match="not enough live tablet servers"):
            place_new_tablet(state, "t", b"", rf, now_s=0.0)
        return
    for k in range(12):
        result = place_new_tablet(state, f"t{k % 3}", bytes([k % 2]), rf, now_s=float(k))
        uuids = result.tserver_uuids
        assert len(uuids) == len(set(uuids)) == rf
        assert not set(uuids) & set(dead)
        expected = check_placement(rf, per_location(uuids), live)
        assert result.policy == expected
        assert result.policy_met == expected.met
        # Greedy filling meets the policy exactly when some layout on the live servers does.
        assert result.policy_met == policy_satisfiable(rf, live)
        if not result.policy_met:
            assert result.policy.verdict is Verdict.UNSATISFIABLE


def test_best_effort_places_everything_and_says_why() -> None:
    # RF 5 over three locations of 3, 1 and 1 servers: no location may hold more than 2, but
    # the small ones take one each, so /L0 gets three.
    state = cluster([3, 1, 1])
    result = place_new_tablet(state, "t", b"", 5, now_s=0.0)
    assert sorted(per_location(result.tserver_uuids).values()) == [1, 1, 3]
    assert not result.policy_met
    assert result.policy.verdict is Verdict.UNSATISFIABLE
    assert (
        "violated in /L0 (/L0: 3, /L1: 1, /L2: 1; at most 2 of 5 replicas per location with 3 locations "
        "that have a live tablet server)" in result.explain()
    )


def test_locations_whose_servers_are_all_dead_do_not_count() -> None:
    # Three locations, RF 3, but two of them have every server dead: one location is left,
    # and with one location any layout complies (Kudu's rule, shared with ksck).
    state = cluster([3, 2, 2], dead=["L1-0", "L1-1", "L2-0", "L2-1"])
    result = place_new_tablet(state, "t", b"", 3, now_s=0.0)
    assert sorted(result.tserver_uuids) == ["L0-0", "L0-1", "L0-2"]
    assert result.policy_met
    assert result.policy.num_locations == 1
    # One location down out of three: the two left may hold 2 of 3 replicas each.
    state = cluster([2, 2, 2], dead=["L2-0", "L2-1"])
    result = place_new_tablet(state, "t", b"", 3, now_s=0.0)
    assert sorted(per_location(result.tserver_uuids).values()) == [1, 2]
    assert result.policy_met
    assert result.policy.limit == 2
    # The location back: the same layout is a violation another layout fixes.
    for uuid in ("L2-0", "L2-1"):
        state.set_tserver_live(uuid, True)
    placed = per_location(result.tserver_uuids)
    assert check_placement(3, placed, state.live_servers_per_location()).verdict is Verdict.VIOLATED


@pytest.mark.parametrize(
    ("sizes", "rf", "expected"),
    [
        ([3, 3, 3], 3, [1, 1, 1]),
        ([3, 3], 3, [1, 2]),
        ([3, 3], 4, [2, 2]),
        ([3, 3, 3], 5, [1, 2, 2]),
        ([4, 4, 4], 4, [1, 1, 2]),
        ([2, 2, 2, 2, 2], 7, [1, 1, 1, 2, 2]),
    ],
)
def test_replicas_spread_like_kudu_on_an_empty_cluster(sizes, rf, expected) -> None:
    state = cluster(sizes)
    first = place_new_tablet(state, "t", b"", rf, now_s=0.0)
    assert sorted(per_location(first.tserver_uuids).values()) == expected
    for _ in range(59):
        result = place_new_tablet(state, "t", b"", rf, now_s=0.0)
        assert result.policy_met
        assert max(per_location(result.tserver_uuids).values()) <= max(expected)
    totals = [info.pending_replicas for info in state.tservers()]
    assert max(totals) - min(totals) <= 1


def test_location_load_decides_and_counts_pending_replicas() -> None:
    # /L0 has 4 servers, /L1 one: with RF 1 and no policy pressure, /L0 gets 4 of every 5.
    state = cluster([4, 1])
    placed = [place_new_tablet(state, "t", b"", 1, now_s=0.0).tserver_uuids[0] for _ in range(50)]
    assert per_location(placed) == {"/L0": 40, "/L1": 10}


def test_replacement_excludes_members_and_ignores_dead_ones_for_the_policy() -> None:
    state = cluster([2, 2, 2], dead=["L1-0"])
    # Members on L0-0, L1-0 (dead) and L2-0: the replacement must go to /L1 (its dead member
    # does not count), to the only live server there.
    result = place_replacement(state, "t", b"", 3, ["L0-0", "L1-0", "L2-0"], now_s=0.0)
    assert result.tserver_uuids == ("L1-1",)
    assert result.policy_met
    assert result.policy.replicas_per_location == (("/L0", 1), ("/L1", 1), ("/L2", 1))


def test_replacement_of_a_leaving_member_keeps_the_policy() -> None:
    state = cluster([2, 2, 2])
    result = place_replacement(state, "t", b"", 3, ["L0-0", "L0-1", "L2-0"], now_s=0.0, leaving=["L0-1"])
    assert location_of(result.tserver_uuids[0]) == "/L1"
    assert result.policy_met


def test_replacement_when_the_layout_already_violates_is_best_effort() -> None:
    # Four locations, all but /L0 and /L1 full: the replacement must go to /L0, a majority.
    state = cluster([3, 1, 1, 1])
    result = place_replacement(state, "t", b"", 3, ["L0-0", "L0-1", "L1-0", "L2-0", "L3-0"], now_s=0.0,
                               leaving=["L1-0", "L2-0", "L3-0"])  # fmt: skip
    assert result.tserver_uuids == ("L0-2",)
    assert not result.policy_met
    assert result.policy.verdict is Verdict.VIOLATED
    # With the other locations down, /L0 is the only location left and anything complies.
    state = cluster([3, 1, 1])
    state.set_tserver_live("L1-0", False)
    state.set_tserver_live("L2-0", False)
    result = place_replacement(state, "t", b"", 3, ["L0-0", "L0-1"], now_s=0.0)
    assert result.tserver_uuids == ("L0-2",)
    assert result.policy_met


@pytest.mark.parametrize("rf", [0, -1, True, 2.0, "3"])
def test_bad_replication_factors_are_refused(rf: object) -> None:
    state = cluster([3])
    with pytest.raises(InvalidArgument, match="replication factor"):
        place_new_tablet(state, "t", b"", rf, now_s=0.0)  # type: ignore[arg-type]


def test_bad_requests_are_refused_and_change_nothing() -> None:
    state = cluster([3])
    with pytest.raises(InvalidArgument, match="table id"):
        place_new_tablet(state, "", b"", 1, now_s=0.0)
    with pytest.raises(InvalidArgument, match="range start key must be bytes"):
        place_new_tablet(state, "t", "k", 1, now_s=0.0)  # type: ignore[arg-type]
    with pytest.raises(ServiceUnavailable, match="not enough live tablet servers to place 4 replica"):
        place_new_tablet(state, "t", b"", 4, now_s=0.0)
    with pytest.raises(NotFound, match="unknown tablet server 'nope'"):
        place_replacement(state, "t", b"", 3, ["nope"], now_s=0.0)
    with pytest.raises(AlreadyPresent, match="listed twice"):
        place_replacement(state, "t", b"", 3, ["L0-0", "L0-0"], now_s=0.0)
    with pytest.raises(InvalidArgument, match="not among the current replicas"):
        place_replacement(state, "t", b"", 3, ["L0-0"], now_s=0.0, leaving=["L0-1"])
    with pytest.raises(ServiceUnavailable, match="3 already hold a replica"):
        place_replacement(state, "t", b"", 3, ["L0-0", "L0-1", "L0-2"], now_s=0.0)
    assert all(info.pending_replicas == 0 for info in state.tservers())
    assert not state.locations["/L0"].tables


def test_same_seed_same_placements_different_seed_different_ties() -> None:
    def run(seed: int) -> list[tuple[str, ...]]:
        state = cluster([5, 5, 5], seed=seed)
        return [place_new_tablet(state, f"t{k % 4}", b"", 3, now_s=k * 0.1).tserver_uuids for k in range(200)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_limit_matches_the_policy_module() -> None:
    state = cluster([2, 2])
    result = place_new_tablet(state, "t", b"", 3, now_s=0.0)
    assert result.policy.limit == location_limit(3, 2) == 2


def test_repr_and_explain_are_readable() -> None:
    state = ClusterState(random.Random(0))
    state.register_tserver("a", "/x")
    result = place_new_tablet(state, "t", b"", 1, now_s=0.0)
    assert repr(result) == "PlacementResult(('a',), policy_met=True)"
    assert result.explain() == "placed on a: placement policy met (/x: 1; any layout complies with a single location)"


def test_replicas_of_one_range_spread_over_servers_before_doubling_up() -> None:
    # 30 servers, ten heavily loaded by another table: the 10 RF 3 tablets of one range still land
    # on 30 different servers (range first); in the next 10 each location takes 10 replicas, and
    # every lightly loaded server gets one before a busy one does (table, then total).
    state = cluster([10, 10, 10])
    for i in range(10):
        for _ in range(20):
            state.add_replica("busy", b"", f"L{i % 3}-{i}")
    first = [u for _ in range(10) for u in place_new_tablet(state, "t", b"hot", 3, now_s=0.0).tserver_uuids]
    assert len(set(first)) == 30
    second = [u for _ in range(10) for u in place_new_tablet(state, "t", b"hot", 3, now_s=0.0).tserver_uuids]
    assert Counter(first + second).most_common(1)[0][1] == 2
    busy = {f"L{i % 3}-{i}" for i in range(10)}
    light = set(state.by_uuid) - busy
    assert Counter(u for u in second if u in light) == dict.fromkeys(light, 1)
