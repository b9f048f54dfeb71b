"""The leader master's one-step decisions about a tablet's config (Kudu's 3-4-3 scheme)."""

from __future__ import annotations

from nyala.consensus.core import PeerHealth
from nyala.master.quorum import (
    Member,
    eviction_tie_break,
    should_add,
    should_evict,
    should_step_down_for_replacement,
)
from nyala.placement import PlacementConstraint

H, F, FU, U = PeerHealth.HEALTHY, PeerHealth.FAILED, PeerHealth.FAILED_UNRECOVERABLE, PeerHealth.UNKNOWN


def voter(uuid: str, health: PeerHealth = H, *, replace: bool = False) -> Member:
    return Member(uuid, True, health, replace=replace)


def non_voter(uuid: str, health: PeerHealth = U, *, promote: bool = True) -> Member:
    return Member(uuid, False, health, promote=promote)


def test_a_healthy_config_is_left_alone() -> None:
    config = [voter("a"), voter("b"), voter("c")]
    assert should_evict(config, "a", 3) is None
    assert not should_add(config, 3)
    assert not should_step_down_for_replacement(config, "a", 3)


def test_a_failed_voter_is_replaced_before_it_is_evicted() -> None:
    # 3-4-3: first a non-voter is added (the failed voter stays, so the majority stays 2 of 3).
    config = [voter("a"), voter("b"), voter("c", F)]
    assert should_evict(config, "a", 3) is None
    assert should_add(config, 3)
    # While the new replica is copied and catches up, nothing more happens.
    config.append(non_voter("d"))
    assert should_evict(config, "a", 3) is None
    assert not should_add(config, 3)
    # Promoted: the failed voter goes.
    config[3] = voter("d")
    assert should_evict(config, "a", 3) == "c"


def test_an_unrecoverable_voter_is_evicted_at_once_when_a_majority_stays_healthy() -> None:
    config = [voter("a"), voter("b"), voter("c", FU)]
    assert should_evict(config, "a", 3) == "c"


def test_a_failed_non_voter_goes_first() -> None:
    config = [voter("a"), voter("b"), voter("c", F), non_voter("d", F)]
    assert should_evict(config, "a", 3) == "d"


def test_a_move_evicts_the_replaced_voter_once_its_replacement_is_a_voter() -> None:
    config = [voter("a"), voter("b"), voter("c", replace=True), non_voter("d")]
    assert not should_add(config, 3)  # the move's non-voter is already there
    assert should_evict(config, "a", 3) is None
    config[3] = voter("d")
    assert should_evict(config, "a", 3) == "c"


def test_a_leader_marked_replace_is_asked_to_step_down_and_never_evicted() -> None:
    config = [voter("a", replace=True), voter("b"), voter("c"), voter("d")]
    assert should_evict(config, "a", 3) is None
    assert should_step_down_for_replacement(config, "a", 3)
    # Before its replacement is promoted it stays leader.
    config[3] = non_voter("d")
    assert not should_step_down_for_replacement(config, "a", 3)


def test_a_config_with_a_replace_and_no_replacement_gets_a_non_voter() -> None:
    assert should_add([voter("a"), voter("b"), voter("c", replace=True)], 3)


def test_failures_of_servers_in_maintenance_do_not_count() -> None:
    config = [voter("a"), voter("b"), voter("c", F)]
    assert not should_add(config, 3, ignored={"c"})
    assert should_add(config, 3, ignored={"x"})


def test_nothing_is_added_or_evicted_without_a_healthy_majority() -> None:
    config = [voter("a"), voter("b", F), voter("c", F)]
    assert not should_add(config, 3)
    assert should_evict(config, "a", 3) is None
    assert should_evict([voter("a"), voter("b")], "", 1) is None  # no leader known


def test_over_replication_evicts_from_the_most_crowded_location() -> None:
    where = {"a": "/l1", "b": "/l1", "c": "/l2", "d": "/l3"}.__getitem__
    config = [voter("a"), voter("b"), voter("c"), voter("d")]
    assert should_evict(config, "a", 3, eviction_tie_break(where, config)) == "b"
    assert should_evict(config, "b", 3, eviction_tie_break(where, config)) == "a"
    # A worse-ranked replica still goes first.
    config[2] = voter("c", U)
    assert should_evict(config, "a", 3, eviction_tie_break(where, config)) == "c"


def test_over_replication_evicts_outside_a_table_policy_first_then_from_the_most_crowded_group() -> None:
    where = {"a": "/eu/r1", "b": "/eu/r1/x", "c": "/eu/r2", "d": "/us"}.__getitem__
    config = [voter("a"), voter("b"), voter("c"), voter("d")]
    eu = PlacementConstraint.of(["/eu"])
    assert should_evict(config, "a", 3, eviction_tie_break(where, config, eu)) == "d"
    inside = [voter("a"), voter("b"), voter("c"), voter("e")]
    where_e = {"a": "/eu/r1", "b": "/eu/r1/x", "c": "/eu/r2", "e": "/eu/r3"}.__getitem__
    # /eu/r1 and /eu/r1/x are one group: one of its two members goes.
    assert should_evict(inside, "c", 3, eviction_tie_break(where_e, inside, eu)) in {"a", "b"}
    assert should_evict(inside, "a", 3, eviction_tie_break(where_e, inside, eu)) == "b"


def test_an_excess_non_voter_goes_when_enough_voters_are_healthy() -> None:
    config = [voter("a"), voter("b"), voter("c"), non_voter("d", H, promote=False)]
    assert should_evict(config, "a", 3) == "d"
