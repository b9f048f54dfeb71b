"""Choosing the locations of a tablet's replicas under a table's (or range's) placement constraint.

The unconstrained path (:mod:`nyala.placement.location_choice`) keeps every location indexed
for speed.  A constrained tablet is rarer and its candidates are few (the locations inside
its subtrees), so this module ranks them with a plain scan, in the same tiers one level down:

1. only locations inside the subtrees with a free live server are candidates: a replica is
   never placed outside, and when the subtrees lack room the placement fails
   (:class:`~nyala.errors.ServiceUnavailable` naming the policy) rather than going elsewhere;
2. while the tablet has no replica in the leader location yet, a free server there wins;
3. then the group (see :meth:`PlacementConstraint.group_of`) that stays within the policy's
   limit with one more replica, then within the spread target, then the lowest group load,
   then the lowest location load (``R / N`` as in :mod:`nyala.placement.placer`, pending
   replicas counted), ties at random.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nyala.errors import ServiceUnavailable
from nyala.placement.constraint import PlacementConstraint, in_subtree
from nyala.placement.location_choice import spread_target
from nyala.placement.policy import location_limit

if TYPE_CHECKING:
    from nyala.placement.state import ClusterState

__all__ = ["choose_constrained_locations", "group_counts"]


def choose_constrained_locations(
    state: ClusterState,
    constraint: PlacementConstraint,
    count: int,
    replication_factor: int,
    counts: dict[str, int],
    taken: dict[str, int],
) -> list[str]:
    """A location per replica inside ``constraint``; ``counts``: the tablet's staying replicas per
    location, ``taken``: excluded live servers per location."""
    weight = state.clock.weight
    # name -> [numerator, denominator, free servers]; group -> [numerator, denominator]
    candidates: dict[str, list[int]] = {}
    group_load: dict[str, list[int]] = {}
    group_of: dict[str, str] = {}  # computed once per location: the ranking below asks often
    for name, loc in state.locations.items():
        group = constraint.group_of(name)
        if group is None or not loc.live_sids:
            continue
        group_of[name] = group
        numerator = loc.reported * weight + loc.pending
        denominator = len(loc.live_sids) * weight
        load = group_load.setdefault(group, [0, 0])
        load[0] += numerator
        load[1] += denominator
        room = len(loc.live_sids) - taken.get(name, 0)
        if room > 0:
            candidates[name] = [numerator, denominator, room]
    free = sum(c[2] for c in candidates.values())
    if free < count:
        where = ", ".join(constraint.subtrees) or "any location"
        raise ServiceUnavailable(
            f"placement policy ({constraint.describe()}) cannot be met: {free} live tablet server(s) in {where} "
            f"can take a replica, {count} needed; no replica is placed outside {where}"
        )
    limit = location_limit(replication_factor, len(group_load))
    spread = spread_target(replication_factor, len(group_load))
    in_group: dict[str, int] = {}
    for name, n in counts.items():
        group = group_of.get(name) or constraint.group_of(name)
        if group is not None:
            in_group[group] = in_group.get(group, 0) + n
    leader_covered = not constraint.leader_location or any(
        in_subtree(name, constraint.leader_location) for name, n in counts.items() if n > 0
    )
    picked: list[str] = []
    draw = state.rng.random
    for _ in range(count):
        pool = [name for name, c in candidates.items() if c[2] > 0]
        if not leader_covered:
            near_leader = [name for name in pool if in_subtree(name, constraint.leader_location)]
            pool = near_leader or pool
        best: tuple[bool, bool, float, float, float] | None = None
        best_name = ""
        for name in pool:
            group = group_of[name]
            here = in_group.get(group, 0)
            numerator, denominator, _ = candidates[name]
            gnum, gden = group_load[group]
            rank = (here >= limit, here >= spread, gnum / gden, numerator / denominator, draw())
            if best is None or rank < best:
                best, best_name = rank, name
        assert best_name, "a free server was counted but none was found"
        picked.append(best_name)
        entry = candidates[best_name]
        entry[0] += weight
        entry[2] -= 1
        group = group_of[best_name]
        group_load[group][0] += weight
        in_group[group] = in_group.get(group, 0) + 1
        if constraint.leader_location and in_subtree(best_name, constraint.leader_location):
            leader_covered = True
    return picked


def group_counts(
    state: ClusterState, constraint: PlacementConstraint, counts: dict[str, int]
) -> tuple[dict[str, int], dict[str, int], bool]:
    """Replicas per group, live servers per group, and whether any replica is outside."""
    replicas: dict[str, int] = {}
    outside = False
    for name, n in counts.items():
        group = constraint.group_of(name)
        if group is None:
            outside = outside or n > 0
        else:
            replicas[group] = replicas.get(group, 0) + n
    servers: dict[str, int] = {}
    for name, live in state.live_servers_per_location().items():
        group = constraint.group_of(name)
        if group is not None and live:
            servers[group] = servers.get(group, 0) + live
    return replicas, servers, outside
