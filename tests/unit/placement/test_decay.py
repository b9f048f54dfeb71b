from __future__ import annotations

import pytest

from nyala.errors import InvalidArgument
from nyala.placement import PlacementOptions, place_new_tablet
from nyala.placement.decay import REBASE_HALF_LIVES, SCALE_BITS, DecayClock

from .helpers import cluster


def test_weight_doubles_every_half_life_and_is_quantized() -> None:
    clock = DecayClock(PlacementOptions())
    assert clock.advance(100.0) == 0
    start = clock.weight
    assert start == 1 << SCALE_BITS
    clock.advance(100.9)  # same 1 s quantum
    assert clock.weight == start
    clock.advance(160.0)
    assert clock.weight == 2 * start
    clock.advance(190.0)
    assert clock.weight == round(2.0 ** (SCALE_BITS + 1.5))


def test_rebase_shifts_by_whole_half_lives() -> None:
    clock = DecayClock(PlacementOptions())
    clock.advance(0.0)
    assert clock.advance(60.0 * (REBASE_HALF_LIVES + 0.5)) == REBASE_HALF_LIVES
    assert clock.weight == round(2.0 ** (SCALE_BITS + 0.5))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1"])
def test_clock_refuses_non_numbers(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="finite number"):
        DecayClock(PlacementOptions()).advance(bad)  # type: ignore[arg-type]


def test_clock_refuses_going_backwards_and_keeps_its_time() -> None:
    clock = DecayClock(PlacementOptions())
    clock.advance(10.0)
    with pytest.raises(InvalidArgument, match="time went backwards"):
        clock.advance(9.0)
    clock.advance(10.0)


def test_options_are_validated() -> None:
    with pytest.raises(InvalidArgument):
        PlacementOptions(tserver_last_replica_creations_halflife_ms=0)
    with pytest.raises(InvalidArgument):
        PlacementOptions(placement_decay_quantum_ms=120_000)


def test_pending_replicas_decay_with_the_injected_clock() -> None:
    state = cluster([1])
    place_new_tablet(state, "t", b"", 1, now_s=1000.0)
    assert state.tserver("L0-0").pending_replicas == 1.0
    state.advance_clock(1060.0)
    assert state.tserver("L0-0").pending_replicas == pytest.approx(0.5)
    state.advance_clock(1180.0)
    assert state.tserver("L0-0").pending_replicas == pytest.approx(0.125)
    assert state.replica_counts("L0-0", "t", b"") == pytest.approx((0.125, 0.125, 0.125))


@pytest.mark.parametrize(("now_s", "winner"), [(30.0, "L0-0"), (59.0, "L0-0"), (61.0, "L0-1"), (600.0, "L0-1")])
def test_decayed_pending_replicas_lose_to_a_reported_one_after_one_half_life(now_s: float, winner: str) -> None:
    # L0-0 hosts one reported replica; L0-1 got two pending ones at t=0, weighing 2 * 2**(-t/60):
    # more than 1 before t=60 s, less after.
    state = cluster([2])
    state.add_replica("old", b"", "L0-0")
    state.set_tserver_live("L0-0", False)
    for _ in range(2):
        assert place_new_tablet(state, "old", b"", 1, now_s=0.0).tserver_uuids == ("L0-1",)
    state.set_tserver_live("L0-0", True)
    assert place_new_tablet(state, "new", b"", 1, now_s=now_s).tserver_uuids == (winner,)


def test_pending_is_forgotten_after_a_rebase() -> None:
    state = cluster([2])
    place_new_tablet(state, "t", b"k", 1, now_s=0.0)
    state.advance_clock(60.0 * (SCALE_BITS + REBASE_HALF_LIVES + 1))
    assert all(info.pending_replicas == 0 for info in state.tservers())
    assert not state.locations["/L0"].tables  # the contexts emptied out are dropped
