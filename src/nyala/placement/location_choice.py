"""Choosing the location of each replica of one tablet.

A location is ranked by ``(over the policy limit, over the spread target, load, random)``
where the first two say whether one more replica of this tablet would exceed
:func:`nyala.placement.policy.location_limit` or :func:`spread_target`, and the load is
``R / N``: ``N`` live servers, ``R`` their replicas (reported, plus decayed pending ones when
the strategy counts them), plus the replicas of this tablet already assigned there.

:func:`choose_locations_scan` ranks every location for every tablet: O(locations).  With
pending replicas counted, a location's load only grows until the generation or the decay weight
changes, so :func:`choose_locations_indexed` keeps the locations in a heap across tablets and
refreshes an out-of-date entry when it surfaces (the same lower-bound argument as
:mod:`nyala.placement.ranking`): a tablet then costs O(replicas x log locations).  Only the few
locations the tablet already touches (its members, its excluded servers, what it was just
assigned) are ranked explicitly.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush, heapreplace
from typing import TYPE_CHECKING

from nyala.placement.policy import location_limit

if TYPE_CHECKING:
    from nyala.placement.state import ClusterState

__all__ = ["choose_locations_indexed", "choose_locations_scan", "spread_target"]


def spread_target(replication_factor: int, num_locations: int) -> int:
    """Kudu's preferred most replicas per location: below half with 3+ locations, half with 2."""
    if num_locations <= 1:
        return replication_factor
    if num_locations == 2:
        return max(1, replication_factor // 2)
    return max(1, (replication_factor - 1) // 2)


def choose_locations_scan(
    state: ClusterState,
    count: int,
    replication_factor: int,
    counts: dict[str, int],
    taken: dict[str, int],
    *,
    with_pending: bool,
) -> list[str]:
    """A location per replica, ranking every location (``taken``: excluded live servers per location)."""
    locations = state.locations
    # Only locations with a live server count for the policy (nyala.placement.policy).
    num_locations = len(state.live_servers_per_location())
    limit = location_limit(replication_factor, num_locations)
    spread = spread_target(replication_factor, num_locations)
    weight = state.clock.weight if with_pending else 1
    draw = state.rng.getrandbits
    # Candidates ranked (over the limit, over the spread target, load, random tie-breaker),
    # carrying (name, load numerator, denominator, replicas here, free servers).
    heap: list[tuple[bool, bool, float, int, str, int, int, int, int]] = []
    for name, loc in locations.items():
        room = len(loc.live_sids) - taken.get(name, 0)
        if room > 0:
            numerator = loc.reported * weight + loc.pending if with_pending else loc.reported
            denominator = len(loc.live_sids) * weight
            here = counts.get(name, 0)
            heap.append(
                (
                    here >= limit,
                    here >= spread,
                    numerator / denominator,
                    draw(32),
                    name,
                    numerator,
                    denominator,
                    here,
                    room,
                )
            )
    heapify(heap)
    picked: list[str] = []
    for _ in range(count):
        _, _, _, _, name, numerator, denominator, here, room = heappop(heap)
        picked.append(name)
        # The replica now counts toward the location's load, as in Kudu.
        numerator, here, room = numerator + weight, here + 1, room - 1
        if room > 0:
            entry = (
                here >= limit,
                here >= spread,
                numerator / denominator,
                draw(32),
                name,
                numerator,
                denominator,
                here,
                room,
            )
            heappush(heap, entry)
    return picked


def choose_locations_indexed(
    state: ClusterState, count: int, replication_factor: int, counts: dict[str, int], taken: dict[str, int]
) -> list[str]:
    """The same choice as :func:`choose_locations_scan` with pending replicas counted, from the heap."""
    locations = state.locations
    weight = state.clock.weight
    # Only locations with a live server count for the policy (nyala.placement.policy).
    num_locations = len(state.live_servers_per_location())
    limit = location_limit(replication_factor, num_locations)
    spread = spread_target(replication_factor, num_locations)
    heap = _location_heap(state)
    if spread == 1 and not counts and not taken and count <= len(heap):
        # A new tablet whose replicas each want a location of their own (RF 3 over three or more
        # locations, the common case): a location that took one is outranked by every untouched
        # one, so the choice is simply the ``count`` least loaded locations.
        return _least_loaded(state, heap, count)
    untouched_tiers = (limit <= 0, False)  # a location holding nothing of the tablet yet
    # Touched locations: name -> [replicas of this tablet there, assigned now, free servers left].
    touched: dict[str, list[int]] = {}
    for name in (*counts, *taken):
        touched[name] = [counts.get(name, 0), 0, len(locations[name].live_sids) - taken.get(name, 0)]
    popped: list[tuple[float, int, str]] = []  # taken off the heap for this tablet, put back at the end
    picked: list[str] = []
    for _ in range(count):
        top = _least_loaded_untouched(state, heap, touched, popped)
        best: tuple[bool, bool, float] | None = None
        best_name = ""
        for name, (here, extra, room) in touched.items():
            if room <= 0 or (top is not None and (here >= limit, here >= spread) > untouched_tiers):
                continue  # full, or outranked by any untouched location whatever the loads
            loc = locations[name]
            load = (loc.reported * weight + loc.pending + extra * weight) / (len(loc.live_sids) * weight)
            rank = (here >= limit, here >= spread, load)
            # Equal ranks among the few touched locations: a fair coin keeps the choice random.
            if best is None or rank < best or (rank == best and state.rng.getrandbits(1)):
                best, best_name = rank, name
        # On a tie with a touched location, prefer the untouched one: it spreads the tablet.
        if top is not None and (best is None or (*untouched_tiers, top[0]) <= best):
            best_name = top[2]
            popped.append(heappop(heap))
            touched[best_name] = [0, 0, len(locations[best_name].live_sids)]
        assert best_name, "no location has a free server; the caller checked there are enough"
        entry = touched[best_name]
        entry[0] += 1
        entry[1] += 1
        entry[2] -= 1
        picked.append(best_name)
    for kept in popped:
        heappush(heap, kept)  # its load only grew since: still a valid lower bound
    return picked


def _least_loaded(state: ClusterState, heap: list[tuple[float, int, str]], count: int) -> list[str]:
    """The ``count`` least loaded locations of the heap, refreshing out-of-date entries on the way."""
    locations = state.locations
    weight = state.clock.weight
    draw = state.rng.getrandbits
    picked: list[str] = []
    while len(picked) < count:
        load, _, name = heap[0]
        loc = locations[name]
        current = (loc.reported * weight + loc.pending) / (len(loc.live_sids) * weight)
        if current == load:
            heappop(heap)
            picked.append(name)
        else:
            heapreplace(heap, (current, draw(32), name))
    for name in picked:
        # Put it back with the load it has once the caller records the replica on one of its
        # live servers (pending at the current weight): exactly what the next look computes,
        # so it is not refreshed again, and a lower bound whatever else is added later.
        loc = locations[name]
        after = (loc.reported * weight + loc.pending + weight) / (len(loc.live_sids) * weight)
        heappush(heap, (after, draw(32), name))
    return picked


def _least_loaded_untouched(
    state: ClusterState,
    heap: list[tuple[float, int, str]],
    touched: dict[str, list[int]],
    popped: list[tuple[float, int, str]],
) -> tuple[float, int, str] | None:
    """The heap's lowest up-to-date (load, tie-breaker, name) outside ``touched`` (left on top)."""
    locations = state.locations
    weight = state.clock.weight
    while heap:
        load, tie, name = heap[0]
        if name in touched:
            popped.append(heappop(heap))
            continue
        loc = locations[name]
        current = (loc.reported * weight + loc.pending) / (len(loc.live_sids) * weight)
        if current == load:
            return load, tie, name
        heapreplace(heap, (current, state.rng.getrandbits(32), name))
    return None


def _location_heap(state: ClusterState) -> list[tuple[float, int, str]]:
    """Every location with a live server, keyed by load; rebuilt after a generation or weight change."""
    weight = state.clock.weight
    if state.location_heap_gen != state.gen or state.location_heap_weight != weight:
        draw = state.rng.getrandbits
        heap = [
            ((loc.reported * weight + loc.pending) / (len(loc.live_sids) * weight), draw(32), name)
            for name, loc in state.locations.items()
            if loc.live_sids
        ]
        heapify(heap)
        state.location_heap, state.location_heap_gen, state.location_heap_weight = heap, state.gen, weight
    return state.location_heap
