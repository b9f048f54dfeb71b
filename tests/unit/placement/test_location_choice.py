"""Location choice: the indexed heap and the per-tablet scan agree with a brute-force greedy."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nyala.placement import ClusterState, place_new_tablet
from nyala.placement.location_choice import choose_locations_indexed, choose_locations_scan, spread_target
from nyala.placement.policy import location_limit

from .helpers import cluster


def brute_force(
    state: ClusterState, count: int, rf: int, counts: dict[str, int], taken: dict[str, int], with_pending: bool
) -> list[str] | None:
    """Greedy by (over limit, over spread, load), returning None when a step has a tie."""
    locations = state.locations
    limit, spread = location_limit(rf, len(locations)), spread_target(rf, len(locations))
    weight = state.clock.weight if with_pending else 1
    here = dict(counts)
    extra: dict[str, int] = {}
    picked: list[str] = []
    for _ in range(count):
        ranks = []
        for name, loc in locations.items():
            if len(loc.live_sids) - taken.get(name, 0) - extra.get(name, 0) <= 0:
                continue
            base = loc.reported * weight + loc.pending if with_pending else loc.reported
            load = (base + extra.get(name, 0) * weight) / (len(loc.live_sids) * weight)
            ranks.append(((here.get(name, 0) >= limit, here.get(name, 0) >= spread, load), name))
        ranks.sort()
        if len(ranks) > 1 and ranks[0][0] == ranks[1][0]:
            return None
        name = ranks[0][1]
        here[name] = here.get(name, 0) + 1
        extra[name] = extra.get(name, 0) + 1
        picked.append(name)
    return picked


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 7), min_size=2, max_size=6),
    rf=st.integers(1, 7),
    seed=st.integers(0, 10_000),
    history=st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=40),
)
def test_indexed_and_scan_choices_match_the_greedy(sizes, rf, seed, history) -> None:
    state = cluster(sizes, seed)
    uuids = sorted(state.by_uuid)
    for step, (index, reported) in enumerate(history):
        uuid = uuids[index % len(uuids)]
        if reported:
            state.add_replica("bg", bytes([index % 3]), uuid)
        else:
            place_new_tablet(state, f"bg{index % 4}", b"", 1, now_s=step * 7.0)  # pending, decaying
    rf = min(rf, len(uuids))
    counts = {f"/L{seed % len(sizes)}": 1} if rf > 1 else {}
    taken = {f"/L{(seed + 1) % len(sizes)}": 1} if sizes[(seed + 1) % len(sizes)] > 1 else {}
    count = rf - sum(counts.values())
    for with_pending in (True, False):
        expected = brute_force(state, count, rf, counts, taken, with_pending)
        assume(expected is not None)
        scan = choose_locations_scan(state, count, rf, counts, taken, with_pending=with_pending)
        assert scan == expected
    picked = choose_locations_indexed(state, count, rf, counts, taken)
    assert picked == brute_force(state, count, rf, counts, taken, True)
    # Twice in a row: the heap survives between tablets once the replicas are recorded, as the
    # placer records them (a pending replica on a live server of each location chosen).
    for name in picked:
        loc = state.locations[name]
        server = state.servers[min(loc.live_sids)]
        assert server is not None
        state.record_pending(loc, *state.contexts(loc, "t", b""), server)
    again = brute_force(state, count, rf, counts, taken, True)
    if again is not None:  # no tie to break at random
        assert choose_locations_indexed(state, count, rf, counts, taken) == again


def test_spread_targets() -> None:
    assert [spread_target(r, 2) for r in (1, 2, 3, 4, 5)] == [1, 1, 1, 2, 2]
    assert [spread_target(r, 3) for r in (1, 2, 3, 4, 5, 7)] == [1, 1, 1, 1, 2, 3]
    assert spread_target(3, 1) == 3
