from __future__ import annotations

import pytest

from nyala.errors import InvalidArgument
from nyala.placement import (
    Verdict,
    check_placement,
    check_tablet,
    location_limit,
    policy_locations,
    policy_satisfiable,
)


@pytest.mark.parametrize(
    ("rf", "locations", "limit"),
    [
        (3, 1, 3),
        (1, 2, 1),
        (3, 2, 2),
        (4, 2, 2),
        (2, 2, 1),
        (6, 2, 3),
        (5, 2, 3),
        (1, 3, 0),
        (3, 3, 1),
        (4, 3, 2),
        (5, 3, 2),
        (7, 5, 3),
    ],
)
def test_location_limit_follows_the_seed(rf: int, locations: int, limit: int) -> None:
    assert location_limit(rf, locations) == limit


def test_limit_refuses_a_replication_factor_below_one() -> None:
    with pytest.raises(InvalidArgument, match="at least 1"):
        location_limit(0, 3)


def test_check_names_the_violation_and_its_counts() -> None:
    servers = {"/a": 2, "/b": 2, "/c": 2}
    check = check_placement(3, {"/a": 2, "/b": 1}, servers)
    assert check.verdict is Verdict.VIOLATED
    assert not check.met
    assert check.offending_locations == ("/a",)
    assert check.replicas_per_location == (("/a", 2), ("/b", 1))
    text = check.explain()
    assert "violated in /a" in text
    assert "/a: 2, /b: 1" in text
    assert "at most 1 of 3" in text
    assert "another layout would comply" in text


def test_check_met_and_unsatisfiable() -> None:
    assert check_placement(3, {"/a": 1, "/b": 1, "/c": 1}, {"/a": 1, "/b": 1, "/c": 1}).met
    assert check_placement(3, {"/a": 3}, {"/a": 5}).met  # one location: nothing to spread over
    # Two locations and an even RF: an even split, durable through the loss of either location.
    assert check_placement(4, {"/a": 2, "/b": 2}, {"/a": 3, "/b": 3}).met
    assert check_placement(4, {"/a": 3, "/b": 1}, {"/a": 3, "/b": 3}).verdict is Verdict.VIOLATED
    assert check_placement(4, {"/a": 3, "/b": 1}, {"/a": 3, "/b": 1}).verdict is Verdict.UNSATISFIABLE
    # A 100-server location and two one-server locations cannot take RF 5 without a majority.
    check = check_placement(5, {"/big": 3, "/s1": 1, "/s2": 1}, {"/big": 100, "/s1": 1, "/s2": 1})
    assert check.verdict is Verdict.UNSATISFIABLE
    assert "no layout on this cluster's servers can comply" in check.explain()
    assert check_placement(1, {"/a": 1}, {"/a": 1, "/b": 1, "/c": 1}).verdict is Verdict.UNSATISFIABLE


def test_check_refuses_unknown_locations() -> None:
    with pytest.raises(InvalidArgument, match=r"unknown locations \['/zz'\]"):
        check_placement(3, {"/zz": 1}, {"/a": 3})


def test_satisfiable_counts_servers_per_location() -> None:
    assert policy_satisfiable(3, {"/a": 1, "/b": 1, "/c": 1})
    assert not policy_satisfiable(3, {"/a": 5, "/b": 1, "/c": 0})
    assert policy_satisfiable(5, {"/a": 2, "/b": 2, "/c": 1})
    assert not policy_satisfiable(5, {"/a": 2, "/b": 2})  # two locations hold at most 3 + ... 2 servers each


def test_only_locations_with_a_live_server_count_and_only_replicas_on_live_servers() -> None:
    tservers = {"a1": ("/a", True), "a2": ("/a", True), "b1": ("/b", True), "c1": ("/c", False), "c2": ("/c", False)}
    assert policy_locations(tservers.values()) == {"/a": 2, "/b": 1}
    # /c is out: two locations left, at most 2 of 3 each; the replica on c1 does not count.
    check = check_tablet(3, ["a1", "a2", "b1", "c1"], tservers)
    assert check.met
    assert check.num_locations == 2
    assert check.replicas_per_location == (("/a", 2), ("/b", 1))
    # /c back: three locations, at most 1 each; the layout can be fixed.
    back = {**tservers, "c1": ("/c", True), "c2": ("/c", True)}
    check = check_tablet(3, ["a1", "a2", "b1"], back)
    assert check.verdict is Verdict.VIOLATED
    assert check.offending_locations == ("/a",)
    # Replicas on unknown servers are left out rather than refused.
    assert check_tablet(3, ["a1", "b1", "zz"], back).met


@pytest.mark.parametrize(
    ("live", "verdict"),
    [
        ({"/a": 3, "/b": 3, "/c": 3}, Verdict.VIOLATED),  # three live locations: at most 1 each
        ({"/a": 3, "/b": 3}, Verdict.MET),  # /c down: two locations, at most 2 each
        ({"/a": 3}, Verdict.MET),  # one location: anything complies
    ],
)
def test_the_verdict_of_a_layout_follows_the_live_locations(live: dict[str, int], verdict: Verdict) -> None:
    servers = {f"{loc[1:]}{i}": (loc, loc in live) for loc in ("/a", "/b", "/c") for i in range(3)}
    assert check_tablet(3, ["a0", "a1", "b0"], servers).verdict is verdict
