"""A table's (or a range's) own placement policy: the subtrees its replicas must stay in, and
where its leader should be.

Seed 000's use cases 3 and 4: a :class:`PlacementConstraint` names one or more location
*subtrees* (``/eu`` holds ``/eu``, ``/eu/rack1``, ``/eu/rack1/row2``, never ``/eu2``) and
optionally a *leader location* (a subtree the tablet's leader should be in).

- **Strict**: no replica is ever placed outside the subtrees, not even to keep the
  replication factor; a tablet that cannot be placed inside stays under-replicated.
- **No majority one level down**: inside the subtrees the cluster-wide rule of
  :mod:`nyala.placement.policy` applies to the *groups* one level below each subtree
  (``/eu/rack1`` and ``/eu/rack2`` for ``/eu``; a server labelled exactly ``/eu`` is a group
  of its own).  So a table pinned to a zone still survives the loss of one rack when the zone
  has three racks or more.  With several subtrees, the groups of all of them count together.
- **Leader affinity**: placement puts at least one replica in the leader location when it
  has a free live server there; the master transfers leadership to such a replica when the
  leader is elsewhere.  It is a preference: the tablet keeps a leader outside the location
  rather than none.

An empty constraint (no subtrees, no leader location) is the cluster-wide policy alone.
Pure and immutable: the master builds one per table or range from the catalog.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from nyala.errors import InvalidArgument
from nyala.placement.location import validate_location
from nyala.placement.policy import PolicyCheck, Verdict, location_limit, policy_satisfiable

__all__ = ["ConstraintCheck", "PlacementConstraint", "check_constraint", "groups_of", "in_subtree"]

#: More subtrees than this in one policy is almost certainly a mistake (and keeps entries small).
MAX_SUBTREES = 16


def in_subtree(location: str, subtree: str) -> bool:
    """Whether ``location`` is ``subtree`` or lies below it (``/eu/r1`` is in ``/eu``; ``/eu2`` is not)."""
    return location == subtree or location.startswith(subtree + "/")


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementConstraint:
    """Where a table's (or range's) replicas may go, and where its leader should be."""

    subtrees: tuple[str, ...] = ()
    leader_location: str = ""

    @classmethod
    def of(cls, subtrees: Iterable[str] = (), leader_location: str = "") -> PlacementConstraint:
        """A validated constraint; :class:`InvalidArgument` names what is wrong."""
        if isinstance(subtrees, str):
            raise InvalidArgument("placement locations must be a list of locations, not one string")
        listed = list(subtrees)
        if len(listed) > MAX_SUBTREES:
            raise InvalidArgument(f"a placement policy names at most {MAX_SUBTREES} locations, got {len(listed)}")
        for subtree in listed:
            try:
                validate_location(subtree)
            except InvalidArgument as e:
                raise InvalidArgument(f"placement policy: {e}") from None
        if len(set(listed)) != len(listed):
            raise InvalidArgument(f"placement policy names a location twice: {listed}")
        for a in listed:
            for b in listed:
                if a != b and in_subtree(a, b):
                    raise InvalidArgument(f"placement policy: location {a} lies inside {b}; name only {b}")
        if leader_location:
            try:
                validate_location(leader_location)
            except InvalidArgument as e:
                raise InvalidArgument(f"placement policy, leader location: {e}") from None
            if listed and not any(in_subtree(leader_location, s) for s in listed):
                raise InvalidArgument(
                    f"placement policy: leader location {leader_location} is outside the table's locations {listed}"
                )
        return cls(tuple(sorted(listed)), leader_location)

    @property
    def empty(self) -> bool:
        return not self.subtrees and not self.leader_location

    @property
    def strict(self) -> bool:
        """Whether replicas are confined to subtrees."""
        return bool(self.subtrees)

    def allows(self, location: str) -> bool:
        """Whether a replica may sit in ``location``."""
        return not self.subtrees or any(in_subtree(location, s) for s in self.subtrees)

    def leader_allowed(self, location: str) -> bool:
        """Whether a leader in ``location`` meets the leader affinity."""
        return not self.leader_location or in_subtree(location, self.leader_location)

    def group_of(self, location: str) -> str | None:
        """The unit the no-majority rule counts ``location`` in: the subtree's child holding it
        (the location itself when there are no subtrees), None outside the subtrees."""
        if not self.subtrees:
            return location
        for subtree in self.subtrees:
            if location == subtree:
                return subtree
            if location.startswith(subtree + "/"):
                child = location[len(subtree) + 1 :].split("/", 1)[0]
                return f"{subtree}/{child}"
        return None

    def describe(self) -> str:
        """One line for the CLI and logs."""
        if self.empty:
            return "cluster-wide policy only"
        parts = []
        if self.subtrees:
            parts.append("replicas in " + ", ".join(self.subtrees))
        if self.leader_location:
            parts.append(f"leader in {self.leader_location}")
        return "; ".join(parts)


def groups_of(constraint: PlacementConstraint, servers_per_location: Mapping[str, int]) -> dict[str, int]:
    """Servers per group inside the constraint (groups with no server left out)."""
    groups: dict[str, int] = {}
    for location, n in servers_per_location.items():
        group = constraint.group_of(location)
        if group is not None and n > 0:
            groups[group] = groups.get(group, 0) + n
    return groups


@dataclasses.dataclass(frozen=True, slots=True)
class ConstraintCheck:
    """A tablet's layout against its constraint: replicas outside, the rule one level down, the leader."""

    outside: tuple[str, ...]  # locations of replicas outside the subtrees
    policy: PolicyCheck  # the no-majority rule over the groups
    inside_servers: int  # servers inside the subtrees
    leader_misplaced: bool

    @property
    def met(self) -> bool:
        return not self.outside and self.policy.met and not self.leader_misplaced

    @property
    def satisfiable(self) -> bool:
        enough = self.inside_servers >= self.policy.replication_factor
        return enough and self.policy.verdict is not Verdict.UNSATISFIABLE

    def explain(self, constraint: PlacementConstraint) -> str:
        problems = []
        if self.inside_servers < self.policy.replication_factor:
            problems.append(
                f"only {self.inside_servers} live tablet server(s) in {', '.join(constraint.subtrees)}, fewer than "
                f"the {self.policy.replication_factor} replicas: the policy cannot be met"
            )
        if self.outside:
            problems.append(f"replicas outside the table's locations, in {', '.join(self.outside)}")
        if not self.policy.met:
            problems.append(self.policy.explain())
        if self.leader_misplaced:
            problems.append(f"leader outside {constraint.leader_location}")
        return "; ".join(problems) or f"placement policy met ({constraint.describe()})"


def check_constraint(
    constraint: PlacementConstraint,
    replication_factor: int,
    replica_locations: Iterable[str],
    servers_per_location: Mapping[str, int],
    leader_location: str | None = None,
) -> ConstraintCheck:
    """Check a tablet whose replicas sit in ``replica_locations`` (one entry per replica).

    ``servers_per_location``: the servers that count (Kudu: live ones), per location;
    ``leader_location``: where the tablet's leader is, None when unknown (not checked).
    """
    groups = groups_of(constraint, servers_per_location)
    counts: dict[str, int] = {}
    outside: list[str] = []
    for location in replica_locations:
        group = constraint.group_of(location)
        if group is None:
            outside.append(location)
        else:
            counts[group] = counts.get(group, 0) + 1
    limit = location_limit(replication_factor, len(groups))
    over = max(counts.values(), default=0) > limit
    if not over:
        verdict = Verdict.MET
    elif policy_satisfiable(replication_factor, groups):
        verdict = Verdict.VIOLATED
    else:
        verdict = Verdict.UNSATISFIABLE
    policy = PolicyCheck(
        verdict, replication_factor, len(groups), limit, tuple(sorted(i for i in counts.items() if i[1] > 0))
    )
    leader_misplaced = leader_location is not None and not constraint.leader_allowed(leader_location)
    return ConstraintCheck(tuple(sorted(outside)), policy, sum(groups.values()), leader_misplaced)
