"""Placing the replicas of a new tablet, or one replacement replica, in two steps.

**Locations first.**  Each replica goes to the location with the lowest load ``R / N`` (``N``
live servers; ``R`` their reported replicas plus decayed pending replicas, plus the replicas of
this tablet already assigned to the location), ties broken at random, in three tiers:

1. locations that stay within the policy's limit (:func:`nyala.placement.policy.location_limit`)
   with one more replica come before those that would not;
2. among those, locations within Kudu's *spread* target come first: fewer than half of the
   replicas with more than two locations, at most half with two.  For odd ``r`` this is
   the policy itself; for even ``r`` it spreads further (RF 4 over three locations is 2+1+1,
   never 2+2+0, so losing any one location but the fullest keeps a majority);
3. then the lowest load (:mod:`nyala.placement.location_choice` keeps the locations indexed).

This is how placement stays best effort: it never refuses for the policy's sake, it reports.
The greedy choice meets the policy whenever any layout on the live servers can (each location
is filled up to ``min(limit, free servers)`` before any goes beyond).

Unlike Kudu, which counts only reported replicas in a location's load, Nyala also counts the
pending ones, so a burst of creations (one table after another, before heartbeats) does not
keep choosing the location that merely looked emptiest at the start.

**Then servers.**  Within each chosen location the server with the lowest (range, table,
total) load wins (:mod:`nyala.placement.ranking`), and the placement is recorded as pending
on it at once, so the next replica of the burst sees it.

Re-replication is the same code placing one replica: the tablet's current members are
excluded, and only members on live servers (and not about to leave) count toward their
location, so a dead replica never blocks its location.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from nyala.errors import InvalidArgument, ServiceUnavailable
from nyala.placement import ranking
from nyala.placement.constraint_choice import choose_constrained_locations, group_counts
from nyala.placement.location_choice import choose_locations_indexed, choose_locations_scan
from nyala.placement.policy import PolicyCheck, check_placement, location_limit

if TYPE_CHECKING:
    from nyala.placement.constraint import PlacementConstraint
    from nyala.placement.state import ClusterState, Context, Location, Server

__all__ = ["NYALA", "PlacementResult", "Strategy", "place_new_tablet", "place_replacement"]

ServerChooser = Callable[["ClusterState", "Location", "Context", "Context", set[int]], "int | None"]


@dataclasses.dataclass(frozen=True, slots=True)
class Strategy:
    """How a placement picks servers and weighs locations (the benchmark swaps these)."""

    name: str
    choose_server: ServerChooser
    location_load_counts_pending: bool


NYALA = Strategy("nyala", ranking.choose_server, location_load_counts_pending=True)


class PlacementResult:
    """The servers chosen for the new replicas, and the policy verdict on the resulting layout."""

    __slots__ = ("_check", "_counts", "_servers", "policy_met", "replication_factor", "tserver_uuids")

    def __init__(
        self,
        tserver_uuids: tuple[str, ...],
        replication_factor: int,
        replicas_per_location: dict[str, int],
        servers_per_location: dict[str, int],
    ) -> None:
        self.tserver_uuids = tserver_uuids
        self.replication_factor = replication_factor
        limit = location_limit(replication_factor, len(servers_per_location))
        self.policy_met = max(replicas_per_location.values()) <= limit
        self._counts = replicas_per_location
        self._servers = servers_per_location  # a snapshot: the state replaces, never mutates, it
        self._check: PolicyCheck | None = None

    @property
    def policy(self) -> PolicyCheck:
        """The full verdict (computed on first use: most callers only need ``policy_met``)."""
        if self._check is None:
            self._check = check_placement(self.replication_factor, self._counts, self._servers)
        return self._check

    def explain(self) -> str:
        return f"placed on {', '.join(self.tserver_uuids)}: {self.policy.explain()}"

    def __repr__(self) -> str:
        return f"PlacementResult({self.tserver_uuids!r}, policy_met={self.policy_met})"


def place_new_tablet(
    state: ClusterState,
    table_id: str,
    range_key: bytes,
    replication_factor: int,
    *,
    now_s: float,
    strategy: Strategy = NYALA,
    constraint: PlacementConstraint | None = None,
) -> PlacementResult:
    """Choose ``replication_factor`` distinct live servers for a new tablet of ``(table_id, range_key)``.

    ``constraint``: the table's (or range's) own placement policy (:mod:`nyala.placement.constraint`).
    """
    _check_request(table_id, range_key, replication_factor)
    if now_s != state.clock.last_now_s:
        state.advance_clock(now_s)
    if constraint is not None and not constraint.empty:
        return _place_constrained(
            state, table_id, range_key, replication_factor, replication_factor, [], set(), constraint
        )
    return _place(state, table_id, range_key, replication_factor, replication_factor, [], set(), strategy)


def place_replacement(
    state: ClusterState,
    table_id: str,
    range_key: bytes,
    replication_factor: int,
    current_replicas: Sequence[str],
    *,
    now_s: float,
    leaving: Collection[str] = (),
    strategy: Strategy = NYALA,
    constraint: PlacementConstraint | None = None,
) -> PlacementResult:
    """Choose one server for an extra replica of a tablet whose members are ``current_replicas``.

    ``leaving`` names members about to be removed (marked for replacement); like members on
    dead servers they do not count toward their location, but no member is ever chosen again.
    With a strict ``constraint`` the replica goes inside its subtrees or nowhere.
    """
    _check_request(table_id, range_key, replication_factor)
    excluded = state.sids_of(current_replicas)
    unknown = sorted(set(leaving) - set(current_replicas))
    if unknown:
        raise InvalidArgument(f"leaving replicas {unknown} are not among the current replicas")
    leaving_sids = set(state.sids_of(leaving))
    staying = [sid for sid in excluded if sid not in leaving_sids and _server(state, sid).live]
    state.advance_clock(now_s)
    if constraint is not None and not constraint.empty:
        return _place_constrained(state, table_id, range_key, replication_factor, 1, staying, set(excluded), constraint)
    return _place(state, table_id, range_key, replication_factor, 1, staying, set(excluded), strategy)


def _place(
    state: ClusterState,
    table_id: str,
    range_key: bytes,
    replication_factor: int,
    count: int,
    staying: list[int],
    excluded: set[int],
    strategy: Strategy,
) -> PlacementResult:
    locations = state.locations
    available = state.live_servers
    taken: dict[str, int] = {}  # excluded live servers per location
    for sid in excluded:
        server = _server(state, sid)
        if server.live:
            taken[server.location] = taken.get(server.location, 0) + 1
            available -= 1
    if available < count:
        raise ServiceUnavailable(
            f"not enough live tablet servers to place {count} replica(s) of table {table_id!r} "
            f"range {range_key!r}: {state.live_servers} live, {len(excluded)} already hold a replica"
        )
    counts: dict[str, int] = {}
    for sid in staying:
        name = _server(state, sid).location
        counts[name] = counts.get(name, 0) + 1
    if len(locations) == 1:
        chosen_locations = [next(iter(locations))] * count  # nothing to choose, and no limit
    elif strategy.location_load_counts_pending:
        chosen_locations = choose_locations_indexed(state, count, replication_factor, counts, taken)
    else:
        chosen_locations = choose_locations_scan(state, count, replication_factor, counts, taken, with_pending=False)
    chosen: list[str] = []
    choose_server = strategy.choose_server
    servers = state.servers
    contexts: dict[str, tuple[Context, Context]] = {}
    for name in chosen_locations:
        loc = locations[name]
        pair = contexts.get(name)
        if pair is None:
            pair = contexts[name] = state.contexts(loc, table_id, range_key)
        tctx, rctx = pair
        picked = choose_server(state, loc, tctx, rctx, excluded)
        assert picked is not None, f"location {name} had a free server but none was chosen"
        excluded.add(picked)
        placed = servers[picked]
        assert placed is not None
        state.record_pending(loc, tctx, rctx, placed)
        chosen.append(placed.uuid)
        counts[name] = counts.get(name, 0) + 1
    return PlacementResult(tuple(chosen), replication_factor, counts, state.live_servers_per_location())


def _place_constrained(
    state: ClusterState,
    table_id: str,
    range_key: bytes,
    replication_factor: int,
    count: int,
    staying: list[int],
    excluded: set[int],
    constraint: PlacementConstraint,
) -> PlacementResult:
    """:func:`_place` for a tablet with its own policy: locations from the scan of
    :mod:`nyala.placement.constraint_choice`, servers as always.  Kept apart so that the
    unconstrained hot path pays nothing for constraints."""
    taken: dict[str, int] = {}
    for sid in excluded:
        server = _server(state, sid)
        if server.live:
            taken[server.location] = taken.get(server.location, 0) + 1
    counts: dict[str, int] = {}
    for sid in staying:
        name = _server(state, sid).location
        counts[name] = counts.get(name, 0) + 1
    chosen_locations = choose_constrained_locations(state, constraint, count, replication_factor, counts, taken)
    chosen: list[str] = []
    for name in chosen_locations:
        loc = state.locations[name]
        tctx, rctx = state.contexts(loc, table_id, range_key)
        picked = ranking.choose_server(state, loc, tctx, rctx, excluded)
        assert picked is not None, f"location {name} had a free server but none was chosen"
        excluded.add(picked)
        placed = _server(state, picked)
        state.record_pending(loc, tctx, rctx, placed)
        chosen.append(placed.uuid)
        counts[name] = counts.get(name, 0) + 1
    # The policy one level down: the groups inside the subtrees stand for the locations.
    in_groups, servers_in_groups, outside = group_counts(state, constraint, counts)
    result = PlacementResult(tuple(chosen), replication_factor, in_groups, servers_in_groups)
    result.policy_met = result.policy_met and not outside
    return result


def _server(state: ClusterState, sid: int) -> Server:
    server = state.servers[sid]
    assert server is not None
    return server


def _check_request(table_id: object, range_key: object, replication_factor: object) -> None:
    if not isinstance(table_id, str) or not table_id:
        raise InvalidArgument(f"table id must be a non-empty string, got {table_id!r}")
    if not isinstance(range_key, bytes):
        raise InvalidArgument(f"range start key must be bytes, got {type(range_key).__name__}")
    if isinstance(replication_factor, bool) or not isinstance(replication_factor, int) or replication_factor < 1:
        raise InvalidArgument(f"replication factor must be an integer of at least 1, got {replication_factor!r}")
