from __future__ import annotations

import pytest

from nyala.errors import InvalidArgument
from nyala.placement import Verdict, check_placement, location_limit, policy_satisfiable


@pytest.mark.parametrize(
    ("rf", "locations", "limit"),
    [
        (3, 1, 3),
        (1, 2, 1),
        (2, 2, 2),
        (3, 2, 2),
        (4, 2, 3),
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
    assert check_placement(4, {"/a": 3, "/b": 1}, {"/a": 3, "/b": 3}).met  # two locations: floor(4/2)+1
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
