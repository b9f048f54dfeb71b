"""Planning replica moves: drain, fix the policy, balance across locations, then within each.

This is the pure core that a rebalancer (the CLI tool or the master's background task) drives:
a :class:`ClusterInfo` snapshot goes in, an ordered list of :class:`Move` comes out, each
planned against the layout left by the moves before it.  The phases follow Kudu's rebalancer
and seed 000:

0. **Drain**: every replica on a server being decommissioned moves to the best server that
   keeps the tablet within the policy.  Every phase counts locations, their loads and the
   policy's limit over the servers that stay, so the plan is the drained cluster's.
1. **Fix the policy**: a tablet whose location holds more than the policy's limit moves
   replicas out of it, one at a time, from the most loaded server there (preferring a follower)
   to the least loaded location that stays within the limit.  A violation no layout can fix
   (:attr:`nyala.placement.policy.Verdict.UNSATISFIABLE`) is reported, not chased.
2. **Across locations**: per balancing key (a table, or a (table, range) in range mode) the
   load of a location is replicas / servers; while the most and the least loaded differ by
   more than ``load_imbalance_threshold`` (Kudu's 1.0), move a replica from the first to the
   second, if that keeps its tablet within the policy and narrows the gap.  When no such move
   exists between a pair, the next pair is tried.  In range mode each table is then balanced
   as a whole the same way (moving replicas of the ranges whose loads differ most first):
   a range of a few tablets never differs by more than the threshold, which left a new, empty
   location empty where Kudu's range mode stops too.  Last, all keys are balanced together,
   so that keys each within the threshold do not add up to a wide gap between locations.
3. **Within each location**, as if it were a cluster of its own (Kudu's two-dimensional
   greedy): first each key's skew (max - min replicas per server) down to 1, moving from the
   server holding most of the key to the one holding least (ties: by total load); then the
   location's total skew down to 1, moving a replica of a key the source holds more of than the
   destination, so no key's balance gets worse.  A state where no such move exists is accepted,
   as Kudu does.

Phases 1 to 3 can each be turned off (Kudu's ``--disable_policy_fixer``,
``--disable_cross_location_rebalancing``, ``--disable_intra_location_rebalancing``); draining
always runs, since it is asked for by naming the servers.

A tablet may carry its table's (or range's) own constraint
(:class:`~nyala.placement.constraint.PlacementConstraint`): no move ever lands outside its
subtrees, the policy's limit counts the groups one level below them instead of locations, the
fixer first brings replicas found outside back inside (when no server inside can take one the
tablet is reported unfixable and left alone) and last gives a tablet with a leader location
but no replica there one (so the master can move its leadership there), and cross-location
balancing of a key only looks at the locations its tablets may use and never takes away a
tablet's last replica in its leader location.

Every move is checked against the policy: a move never makes a tablet's layout violate it.
Planning again on the planned layout (with the same options) yields no moves.  Ties are broken
by ``rng``.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nyala.common.config import setting
from nyala.errors import InvalidArgument
from nyala.placement.constraint import PlacementConstraint, in_subtree
from nyala.placement.location import validate_location
from nyala.placement.policy import location_limit, policy_satisfiable

if TYPE_CHECKING:
    from random import Random

__all__ = ["ClusterInfo", "Move", "Plan", "RebalanceOptions", "TabletInfo", "plan_moves"]


@dataclasses.dataclass(frozen=True, slots=True)
class TabletInfo:
    """One tablet: its balancing identity and the tablet servers holding its replicas."""

    tablet_id: str
    table_id: str
    range_key: bytes
    replication_factor: int
    replicas: tuple[str, ...]
    leader: str | None = None
    #: The table's (or range's) own placement policy; None: the cluster-wide policy only.
    constraint: PlacementConstraint | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterInfo:
    """The live tablet servers (uuid -> location), the tablets, and the servers to drain."""

    tservers: Mapping[str, str]
    tablets: Sequence[TabletInfo]
    draining: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True, slots=True)
class Move:
    tablet_id: str
    from_uuid: str
    to_uuid: str
    phase: str  # "drain", "policy", "cross-location", "key", "total"


@dataclasses.dataclass(frozen=True, slots=True)
class RebalanceOptions:
    """Knobs of the move planner (Kudu's names where it has them)."""

    load_imbalance_threshold: float = setting(
        1.0,
        "Smallest difference of per-server load between two locations, for one table (or range), "
        "that cross-location balancing acts on; it keeps small locations from churning.",
        "advanced",
    )
    enable_range_rebalancing: bool = setting(
        True, "Balance each (table, range start key) on its own instead of each table.", "stable"
    )
    max_moves: int = setting(0, "Stop planning after this many moves; 0 plans until balanced.", "stable")
    disable_policy_fixer: bool = setting(
        False, "Skip phase 1: leave tablets that violate the placement policy as they are.", "stable"
    )
    disable_cross_location_rebalancing: bool = setting(
        False, "Skip phase 2: do not move replicas between locations to even out their load.", "stable"
    )
    disable_intra_location_rebalancing: bool = setting(
        False, "Skip phase 3: do not move replicas between the servers of one location.", "stable"
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    moves: list[Move]
    unfixable: list[str]  # tablets violating the policy (or their constraint) that no layout here can fix


class _StopPlanning(Exception):
    """Raised inside the model when ``max_moves`` moves have been planned."""


def plan_moves(cluster: ClusterInfo, rng: Random, options: RebalanceOptions | None = None) -> Plan:
    """Plan the moves that drain, fix the policy and balance ``cluster``."""
    options = options or RebalanceOptions()
    model = _Model(cluster, rng, options)
    unfixable: list[str] = []
    try:
        model.drain()
        if not options.disable_policy_fixer:
            unfixable = model.fix_policy()
        if not options.disable_cross_location_rebalancing:
            model.balance_across_locations()
        if not options.disable_intra_location_rebalancing:
            for location in sorted(model.servers_of):
                model.balance_keys_within(location)
                model.balance_totals_within(location)
    except _StopPlanning:
        pass
    return Plan(model.moves, unfixable)


class _Model:
    """The layout as the moves planned so far leave it, with the counts the phases rank by."""

    def __init__(self, cluster: ClusterInfo, rng: Random, options: RebalanceOptions) -> None:
        self.rng = rng
        self.options = options
        self.location_of = dict(cluster.tservers)
        self.draining = set(cluster.draining)
        self.servers_of: dict[str, list[str]] = defaultdict(list)
        for uuid, location in sorted(self.location_of.items()):
            validate_location(location)
            self.servers_of[location].append(uuid)
        unknown = self.draining - set(self.location_of)
        if unknown:
            raise InvalidArgument(f"draining unknown tablet servers {sorted(unknown)}")
        # The servers that stay, per location (locations left with none are gone).  Loads and
        # the policy count only these, so that the plan is the one the drained cluster would
        # get: planning again once the drained servers are gone finds nothing to do.
        self.active_of: dict[str, list[str]] = {}
        for location, uuids in self.servers_of.items():
            staying = [u for u in uuids if u not in self.draining]
            if staying:
                self.active_of[location] = staying
        self.tablets = {t.tablet_id: t for t in cluster.tablets}
        self.constraint_of: dict[str, PlacementConstraint] = {
            t.tablet_id: t.constraint for t in cluster.tablets if t.constraint is not None and t.constraint.strict
        }
        self._groups: dict[PlacementConstraint, dict[str, int]] = {}
        self.leader_location_of: dict[str, str] = {
            t.tablet_id: t.constraint.leader_location
            for t in cluster.tablets
            if t.constraint is not None and t.constraint.leader_location
        }
        #: Whether any tablet has a policy of its own (when none has, the phases skip the checks).
        self.constrained = bool(self.constraint_of or self.leader_location_of)
        self.members: dict[str, set[str]] = {}
        self.key_of: dict[str, tuple[str, bytes]] = {}
        self.total: dict[str, int] = dict.fromkeys(self.location_of, 0)
        self.per_table: dict[tuple[str, str], int] = defaultdict(int)  # (table, server) -> replicas
        self.leaders: dict[str, int] = defaultdict(int)  # server -> leader replicas it holds
        self.by_key: dict[tuple[str, bytes], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for tablet in cluster.tablets:
            self._add_tablet(tablet)
        self.moves: list[Move] = []

    def _add_tablet(self, tablet: TabletInfo) -> None:
        if tablet.tablet_id in self.members:
            raise InvalidArgument(f"tablet {tablet.tablet_id} is listed twice")
        if len(set(tablet.replicas)) != len(tablet.replicas):
            raise InvalidArgument(f"tablet {tablet.tablet_id} lists a tablet server twice")
        unknown = sorted(set(tablet.replicas) - set(self.location_of))
        if unknown:
            raise InvalidArgument(f"tablet {tablet.tablet_id} has replicas on unknown tablet servers {unknown}")
        key = (tablet.table_id, tablet.range_key if self.options.enable_range_rebalancing else b"")
        self.key_of[tablet.tablet_id] = key
        self.members[tablet.tablet_id] = set(tablet.replicas)
        for uuid in tablet.replicas:
            self.total[uuid] += 1
            self.per_table[(tablet.table_id, uuid)] += 1
            self.by_key[key][uuid].add(tablet.tablet_id)
        if tablet.leader is not None and tablet.leader in tablet.replicas:
            self.leaders[tablet.leader] += 1

    # ------------------------------------------------------------------ bookkeeping

    def move(self, tablet_id: str, source: str, target: str, phase: str) -> None:
        members = self.members[tablet_id]
        assert source in members, (tablet_id, source)
        assert target not in members, (tablet_id, target)
        assert not self._breaks_policy(tablet_id, source, target), (tablet_id, source, target)
        key = self.key_of[tablet_id]
        members.remove(source)
        members.add(target)
        self.total[source] -= 1
        self.total[target] += 1
        table_id = key[0]
        self.per_table[(table_id, source)] -= 1
        self.per_table[(table_id, target)] += 1
        if self.tablets[tablet_id].leader == source and self.leaders[source] > 0:
            self.leaders[source] -= 1  # the leader's replica moved: where the new one lands is unknown
        self.by_key[key][source].discard(tablet_id)
        self.by_key[key][target].add(tablet_id)
        self.moves.append(Move(tablet_id, source, target, phase))
        if self.options.max_moves and len(self.moves) >= self.options.max_moves:
            raise _StopPlanning

    def unit_of(self, tablet_id: str, location: str) -> str | None:
        """What the policy counts ``location`` as for this tablet: the location itself, or with
        a constraint its group one level below the subtrees (None: outside them)."""
        constraint = self.constraint_of.get(tablet_id)
        return location if constraint is None else constraint.group_of(location)

    def allows(self, tablet_id: str, location: str) -> bool:
        constraint = self.constraint_of.get(tablet_id)
        return constraint is None or constraint.allows(location)

    def counts_per_location(self, tablet_id: str) -> dict[str, int]:
        """The tablet's replicas per policy unit (see :meth:`unit_of`); outside ones are not counted."""
        counts: dict[str, int] = defaultdict(int)
        constraint = self.constraint_of.get(tablet_id)
        if constraint is None:  # the common case, kept as cheap as it was
            for uuid in self.members[tablet_id]:
                counts[self.location_of[uuid]] += 1
            return counts
        for uuid in self.members[tablet_id]:
            unit = constraint.group_of(self.location_of[uuid])
            if unit is not None:
                counts[unit] += 1
        return counts

    def outside(self, tablet_id: str) -> list[str]:
        """The tablet's members outside its constraint, the most loaded first."""
        if tablet_id not in self.constraint_of:
            return []
        away = [u for u in self.members[tablet_id] if not self.allows(tablet_id, self.location_of[u])]
        return sorted(away, key=lambda u: (u == self.tablets[tablet_id].leader, -self.total[u], u))

    def servers_per_unit(self, tablet_id: str) -> dict[str, int]:
        """The staying servers per policy unit the tablet may use."""
        constraint = self.constraint_of.get(tablet_id)
        if constraint is None:
            return {loc: len(uuids) for loc, uuids in self.active_of.items()}
        groups = self._groups.get(constraint)
        if groups is None:
            groups = {}
            for loc, uuids in self.active_of.items():
                group = constraint.group_of(loc)
                if group is not None:
                    groups[group] = groups.get(group, 0) + len(uuids)
            self._groups[constraint] = groups
        return groups

    def limit(self, tablet_id: str) -> int:
        units = len(self.active_of) if tablet_id not in self.constraint_of else len(self.servers_per_unit(tablet_id))
        return location_limit(self.tablets[tablet_id].replication_factor, units)

    def _breaks_policy(self, tablet_id: str, source: str, target: str) -> bool:
        """Whether the move makes the tablet's layout worse under the policy.

        A move may always stay within a location or land within the limit; beyond the limit
        (best effort, for tablets whose violation nothing can fix) it may not raise the
        tablet's highest count per location.
        """
        to_location = self.location_of[target]
        constraint = self.constraint_of.get(tablet_id)
        if constraint is None:  # the cluster-wide policy alone, as cheap as it always was
            if to_location == self.location_of[source]:
                return False
            counts = self.counts_per_location(tablet_id)
            after = counts.get(to_location, 0) + 1
            return after > self.limit(tablet_id) and after > max(counts.values())
        if not constraint.allows(to_location):
            return True  # a strict constraint: never, not even within the location it is in
        to_unit = self.unit_of(tablet_id, to_location)
        if to_unit == self.unit_of(tablet_id, self.location_of[source]):
            return False
        counts = self.counts_per_location(tablet_id)
        after = counts.get(to_unit or "", 0) + 1
        return after > self.limit(tablet_id) and after > max(counts.values(), default=0)

    def _strands_leader_location(self, tablet_id: str, source: str, to_location: str) -> bool:
        """Whether the move takes away the tablet's last replica in its leader location (balancing
        never does; draining and the policy fixer may, since they must move the replica)."""
        wanted = self.leader_location_of.get(tablet_id)
        if not wanted or in_subtree(to_location, wanted) or not in_subtree(self.location_of[source], wanted):
            return False
        near = sum(in_subtree(self.location_of[u], wanted) for u in self.members[tablet_id])
        return near <= 1

    def key_count(self, key: tuple[str, bytes], uuid: str) -> int:
        return len(self.by_key[key].get(uuid, ()))

    def best_target(self, tablet_id: str, location: str) -> str | None:
        """The server of ``location`` with the fewest replicas of the tablet's key, then of its
        table, then in total (the placement's ranking), then the fewest leaders: a leader's
        replica is the last the policy fixer moves, so a server holding one is the one most
        likely to stay loaded."""
        key = self.key_of[tablet_id]
        members = self.members[tablet_id]
        if self.constraint_of and not self.allows(tablet_id, location):
            return None
        candidates = [u for u in self.servers_of[location] if u not in members and u not in self.draining]
        if not candidates:
            return None
        per_table = self.per_table
        leaders = self.leaders
        return self._lowest(
            candidates, lambda u: (self.key_count(key, u), per_table[(key[0], u)], self.total[u], leaders[u])
        )

    def _lowest(self, uuids: Sequence[str], rank: Callable[[str], Any]) -> str:
        ranked = [(rank(u), u) for u in uuids]
        best = min(r for r, _ in ranked)
        ties = [u for r, u in ranked if r == best]
        return ties[0] if len(ties) == 1 else self.rng.choice(ties)

    def location_load(self, location: str) -> float:
        return sum(self.total[u] for u in self.active_of[location]) / len(self.active_of[location])

    def best_location(self, tablet_id: str, exclude: str | None = None, *, best_effort: bool = False) -> str | None:
        """The least loaded location that can take one more replica of the tablet within the policy.

        With ``best_effort`` a location beyond the limit is acceptable if it does not raise the
        tablet's highest count per location (draining must not strand a replica).
        """
        counts = self.counts_per_location(tablet_id)
        allowed = self.limit(tablet_id)
        if best_effort:
            allowed = max(allowed, max(counts.values(), default=0))
        members = self.members[tablet_id]
        constraint = self.constraint_of.get(tablet_id)
        options = [
            loc
            for loc, servers in self.active_of.items()
            if loc != exclude
            and (constraint is None or constraint.allows(loc))
            and counts.get(loc if constraint is None else constraint.group_of(loc) or "", 0) + 1 <= allowed
            and any(u not in members and u not in self.draining for u in servers)
        ]
        if not options:
            return None
        return self._lowest(options, self.location_load)

    # ------------------------------------------------------------------ phases

    def drain(self) -> None:
        for uuid in sorted(self.draining):
            for key in sorted(self.by_key):
                for tablet_id in sorted(self.by_key[key].get(uuid, ())):
                    here = self.location_of[uuid]
                    # Staying put keeps the policy as it is (never outside a constraint: see best_target).
                    target = self.best_target(tablet_id, here)
                    if target is None:
                        location = self.best_location(tablet_id, exclude=here, best_effort=True)
                        target = self.best_target(tablet_id, location) if location else None
                    if target is not None:
                        self.move(tablet_id, uuid, target, "drain")

    def fix_policy(self) -> list[str]:
        unfixable = []
        cluster_servers = {loc: len(uuids) for loc, uuids in self.active_of.items()}
        for tablet_id in sorted(self.members):
            constrained = tablet_id in self.constraint_of
            if constrained and not self._bring_inside(tablet_id):
                unfixable.append(tablet_id)
                continue
            limit = self.limit(tablet_id)
            servers = self.servers_per_unit(tablet_id) if constrained else cluster_servers
            while True:
                counts = self.counts_per_location(tablet_id)
                over = [loc for loc, n in counts.items() if n > limit]
                if not over:
                    break
                if not policy_satisfiable(self.tablets[tablet_id].replication_factor, servers):
                    unfixable.append(tablet_id)
                    break
                destination = self.best_location(tablet_id)
                target = self.best_target(tablet_id, destination) if destination else None
                if target is None:
                    unfixable.append(tablet_id)
                    break
                self.move(tablet_id, self._source_in(tablet_id, max(over, key=counts.__getitem__)), target, "policy")
            if tablet_id in self.leader_location_of:
                self._reach_leader_location(tablet_id)
        return unfixable

    def _reach_leader_location(self, tablet_id: str) -> None:
        """Give a tablet with a leader location but no replica there one, when a move into it
        keeps the policy, so that the master can hand its leadership over."""
        wanted = self.leader_location_of.get(tablet_id)
        members = self.members[tablet_id]
        if not wanted or any(in_subtree(self.location_of[u], wanted) for u in members):
            return
        leader = self.tablets[tablet_id].leader
        counts = self.counts_per_location(tablet_id)
        sources = sorted(
            members,
            key=lambda u: (
                u == leader,
                -counts.get(self.unit_of(tablet_id, self.location_of[u]) or "", 0),
                -self.total[u],
                u,
            ),
        )
        inside = [loc for loc in self.active_of if in_subtree(loc, wanted) and self.allows(tablet_id, loc)]
        for location in sorted(inside, key=lambda loc: (self.location_load(loc), loc)):
            target = self.best_target(tablet_id, location)
            if target is None:
                continue
            for source in sources:
                if not self._breaks_policy(tablet_id, source, target):
                    self.move(tablet_id, source, target, "policy")
                    return

    def _bring_inside(self, tablet_id: str) -> bool:
        """Move the tablet's replicas found outside its constraint back inside; False when one
        cannot move (no server inside can take it; the moves planned before it stay)."""
        away = self.outside(tablet_id)
        for uuid in away:
            destination = self.best_location(tablet_id) or self.best_location(tablet_id, best_effort=True)
            target = self.best_target(tablet_id, destination) if destination else None
            if target is None:
                return False
            self.move(tablet_id, uuid, target, "policy")
        return True

    def _source_in(self, tablet_id: str, unit: str) -> str:
        """The tablet's replica in policy ``unit`` on the most loaded server, a follower if possible."""
        leader = self.tablets[tablet_id].leader
        here = [u for u in self.members[tablet_id] if self.unit_of(tablet_id, self.location_of[u]) == unit]
        return max(here, key=lambda u: (u != leader, u in self.draining, self.total[u], u))

    def balance_across_locations(self) -> None:
        if len(self.active_of) < 2:
            return
        for key in sorted(self.by_key):
            while self._one_cross_location_move(key):
                pass
        if self.options.enable_range_rebalancing:
            # A range of a few tablets never differs by more than the threshold between
            # locations (one replica moves its per-server load by 1 / servers), so balancing
            # ranges alone leaves, e.g., a new empty location empty.  Balance each table as a
            # whole too, moving replicas of the ranges whose loads differ most.
            keys_of: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
            for key in sorted(self.by_key):
                keys_of[key[0]].append(key)
            for keys in keys_of.values():
                while self._one_cross_location_move(*keys, guards=lambda k: [(k,)]):
                    pass
        # Every key within the threshold can still add up to a wide gap between locations (20
        # tables each one replica per server apart is 20 per server): balance all keys together
        # too, taking from the keys most in favour of the source.
        tables: dict[str, tuple[tuple[str, bytes], ...]] = defaultdict(tuple)
        for key in sorted(self.by_key):
            tables[key[0]] += (key,)
        everything = sorted(self.by_key)
        while self._one_cross_location_move(*everything, guards=lambda k: [(k,), tables[k[0]]]):
            pass

    def _spread(self, keys: Sequence[tuple[str, bytes]], moved: tuple[str, str] | None = None) -> float:
        """Highest minus lowest per-server load of ``keys`` among locations, after moving one
        replica from ``moved[0]`` to ``moved[1]`` when given."""
        usable = self._usable_locations(*keys)
        loads = {loc: sum(self._key_load(key, loc) for key in keys) for loc in self.active_of if loc in usable}
        if moved is not None:
            # A location outside the keys' policy holds none of them: the move cannot touch it.
            if moved[0] in loads:
                loads[moved[0]] -= 1 / len(self.active_of[moved[0]])
            if moved[1] in loads:
                loads[moved[1]] += 1 / len(self.active_of[moved[1]])
        return max(loads.values()) - min(loads.values()) if loads else 0.0

    def _key_load(self, key: tuple[str, bytes], location: str) -> float:
        uuids = self.active_of[location]
        return sum(self.key_count(key, u) for u in uuids) / len(uuids)

    def _one_cross_location_move(
        self,
        *keys: tuple[str, bytes],
        guards: Callable[[tuple[str, bytes]], Sequence[Sequence[tuple[str, bytes]]]] | None = None,
    ) -> bool:
        """One move that narrows the gap between two locations' load of ``keys`` taken together.

        With ``guards``, a replica of key ``k`` moves only if no group of ``guards(k)`` (the key
        itself, its table) then spreads beyond the threshold, or beyond its spread before: the
        narrower balancing done first stays done, so planning again finds nothing.
        """
        usable = self._usable_locations(*keys)
        per_location = {loc: sum(self._key_load(key, loc) for key in keys) for loc in self.active_of if loc in usable}
        order = sorted(per_location, key=per_location.__getitem__)
        threshold = self.options.load_imbalance_threshold
        for source_loc in reversed(order):
            for target_loc in order:
                gap = per_location[source_loc] - per_location[target_loc]
                if gap <= threshold:
                    break
                narrowed = abs(
                    per_location[source_loc]
                    - 1 / len(self.active_of[source_loc])
                    - per_location[target_loc]
                    - 1 / len(self.active_of[target_loc])
                )
                if narrowed >= gap:
                    continue
                # Of several keys, the one whose own loads differ most between the two goes first.
                ranked = sorted(keys, key=lambda k: (self._key_load(k, target_loc) - self._key_load(k, source_loc), k))
                for key in ranked:
                    if guards is not None and any(
                        self._spread(group, (source_loc, target_loc)) > max(threshold, self._spread(group))
                        for group in guards(key)
                    ):
                        continue
                    if self._move_key_between(key, source_loc, target_loc):
                        return True
        return False

    def _usable_locations(self, *keys: tuple[str, bytes]) -> Collection[str]:
        """The locations some tablet of ``keys`` may use (all of them unless every tablet is constrained)."""
        if not self.constraint_of:
            return self.active_of
        constraints = set()
        for key in keys:
            for tablet_ids in self.by_key[key].values():
                for tablet_id in tablet_ids:
                    constraint = self.constraint_of.get(tablet_id)
                    if constraint is None:
                        return self.active_of
                    constraints.add(constraint)
        return {loc for loc in self.active_of if any(c.allows(loc) for c in constraints)}

    def _move_key_between(self, key: tuple[str, bytes], source_loc: str, target_loc: str) -> bool:
        per_table = self.per_table
        sources = sorted(
            self.active_of[source_loc],
            key=lambda u: (-self.key_count(key, u), -per_table[(key[0], u)], -self.total[u], u),
        )
        for source in sources:
            for tablet_id in sorted(self.by_key[key].get(source, ())):
                if self.constrained and (
                    not self.allows(tablet_id, target_loc)
                    or self._strands_leader_location(tablet_id, source, target_loc)
                ):
                    continue
                target_unit = self.unit_of(tablet_id, target_loc)
                counts = self.counts_per_location(tablet_id)
                same_unit = target_unit == self.unit_of(tablet_id, source_loc)
                if not same_unit and counts.get(target_unit or "", 0) + 1 > self.limit(tablet_id):
                    continue
                target = self.best_target(tablet_id, target_loc)
                if target is not None:
                    self.move(tablet_id, source, target, "cross-location")
                    return True
        return False

    def balance_keys_within(self, location: str) -> None:
        servers = [u for u in self.servers_of[location] if u not in self.draining]
        if len(servers) < 2:
            return
        for key in sorted(self.by_key):
            while True:
                counts = {u: self.key_count(key, u) for u in servers}
                if max(counts.values()) - min(counts.values()) <= 1:
                    break
                if not self._move_within(key, servers, counts, "key"):
                    break

    def balance_totals_within(self, location: str) -> None:
        servers = [u for u in self.servers_of[location] if u not in self.draining]
        if len(servers) < 2:
            return
        while True:
            source = max(servers, key=lambda u: (self.total[u], u))
            target = min(servers, key=lambda u: (self.total[u], u))
            if self.total[source] - self.total[target] <= 1:
                return
            if not self._move_total(source, target):
                return

    def _move_within(self, key: tuple[str, bytes], servers: list[str], counts: dict[str, int], phase: str) -> bool:
        """Move one replica of ``key`` from a server holding the most of it to one holding the least."""
        high, low = max(counts.values()), min(counts.values())
        sources = sorted((u for u in servers if counts[u] == high), key=lambda u: (-self.total[u], u))
        targets = sorted((u for u in servers if counts[u] <= low + 0), key=lambda u: (self.total[u], u))
        for source in sources:
            for target in targets:
                tablet_id = self._movable(key, source, target)
                if tablet_id is not None:
                    self.move(tablet_id, source, target, phase)
                    return True
        return False

    def _move_total(self, source: str, target: str) -> bool:
        """Move a replica of a key the source holds more of than the target, the widest gap first.

        Among keys with the same gap, the one whose table the source holds most more of than the
        target goes first: in range mode that keeps each table's skew down too, where taking the
        ranges in name order would fill a new server with the first tables only.
        """
        keys = [k for k in self.by_key if self.key_count(k, source) > self.key_count(k, target)]
        table_gap: dict[str, int] = defaultdict(int)
        if self.options.enable_range_rebalancing:
            for k in self.by_key:
                table_gap[k[0]] += self.key_count(k, target) - self.key_count(k, source)
        keys.sort(key=lambda k: (self.key_count(k, target) - self.key_count(k, source), table_gap[k[0]], k))
        for key in keys:
            tablet_id = self._movable(key, source, target)
            if tablet_id is not None:
                self.move(tablet_id, source, target, "total")
                return True
        return False

    def _movable(self, key: tuple[str, bytes], source: str, target: str) -> str | None:
        """A tablet of ``key`` on ``source`` without a replica on ``target``, a follower first."""
        candidates = [t for t in self.by_key[key].get(source, ()) if target not in self.members[t]]
        if self.constrained:  # never out of a tablet's subtrees, nor its last replica out of its leader location
            candidates = [
                t
                for t in candidates
                if not (
                    self._breaks_policy(t, source, target)
                    or self._strands_leader_location(t, source, self.location_of[target])
                )
            ]
        if not candidates:
            return None
        return min(candidates, key=lambda t: (self.tablets[t].leader == source, t))
