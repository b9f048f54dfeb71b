"""What the leader master does about one tablet's Raft config: evict, add, step down, or nothing.

Pure functions of the config its leader reported (members, attributes and each member's health
as the leader sees it), the replication factor and the servers in maintenance: Kudu's
``raft_prepare_replacement_before_eviction`` scheme (3-4-3), decided one step per report.

- :func:`should_evict` names a member to remove, or None.  The leader is never removed.  A
  member that needs a tablet copy the leader cannot start (FAILED_UNRECOVERABLE) goes first
  (a non-voter before a voter), then other non-voters, then other voters ranked failed,
  ``replace``, unknown, healthy.  Voters go only while more than the replication factor
  remain (or the member is unrecoverable) and a majority of the smaller config stays healthy;
  failed non-voters go whenever a majority is healthy, and any non-voter once enough healthy
  voters without ``replace`` exist, so copies never pile up on servers.
- :func:`should_add` says whether the config is under-replicated: fewer than the replication
  factor of voters that will stay (not failed, not ``replace``) plus non-voters waiting for
  promotion; failures of servers in maintenance do not count (a planned restart).  Only when
  a majority of voters is healthy, since the change must commit.
- :func:`should_step_down_for_replacement`: a leader marked ``replace`` cannot be evicted, so
  once its replacement is a healthy voter it is asked to hand leadership over.
- :func:`eviction_tie_break` orders members of equal rank for over-replication: the member in
  the location holding most of the tablet's replicas goes first, so the removal keeps the
  placement policy best; with a table's own policy, a member outside its subtrees goes before
  any inside, and crowding is counted per group one level below them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence

from nyala.consensus.core import PeerHealth
from nyala.placement.constraint import PlacementConstraint

__all__ = [
    "Member",
    "eviction_tie_break",
    "majority",
    "should_add",
    "should_evict",
    "should_step_down_for_replacement",
]

_FAILED = (PeerHealth.FAILED, PeerHealth.FAILED_UNRECOVERABLE)


@dataclasses.dataclass(frozen=True, slots=True)
class Member:
    """One member of a committed config with its health as the tablet's leader reports it."""

    uuid: str
    voter: bool
    health: PeerHealth = PeerHealth.UNKNOWN
    promote: bool = False
    replace: bool = False

    @property
    def failed(self) -> bool:
        return self.health in _FAILED


def majority(voters: int) -> int:
    return voters // 2 + 1


def should_add(members: Sequence[Member], replication_factor: int, ignored: Collection[str] = ()) -> bool:
    """Whether to add a NON_VOTER with ``promote``; ``ignored``: servers in maintenance."""
    voters = healthy = leaving = to_promote = 0
    for m in members:
        if m.voter:
            voters += 1
            if m.replace or (m.failed and m.uuid not in ignored):
                leaving += 1
            healthy += m.health is PeerHealth.HEALTHY
        elif m.promote and (not m.failed or m.uuid in ignored):
            to_promote += 1  # a new non-voter is UNKNOWN until the leader finds its log's end
    under_replicated = replication_factor > voters - leaving + to_promote
    return under_replicated and healthy >= majority(voters)


def _rank(m: Member) -> int:
    rank = {PeerHealth.FAILED_UNRECOVERABLE: 8, PeerHealth.FAILED: 4, PeerHealth.HEALTHY: 0}.get(m.health, 1)
    return rank + (2 if m.voter and m.replace else 0)


def should_evict(
    members: Sequence[Member],
    leader: str,
    replication_factor: int,
    tie_break: Callable[[Member], object] = lambda m: m.uuid,
) -> str | None:
    """The member to remove now, or None.  ``tie_break`` orders members of equal rank (lowest first)."""
    if not leader:
        return None
    voters = healthy = viable = with_replace = 0
    leader_replace = False
    voter_candidates: list[Member] = []
    non_voters: list[Member] = []
    for m in members:
        if not m.voter:
            non_voters.append(m)
            continue
        if m.uuid == leader and m.health is not PeerHealth.HEALTHY:
            return None  # a leader always sees itself healthy; anything else is a report to distrust
        voters += 1
        if m.health is PeerHealth.HEALTHY:
            healthy += 1
            viable += not m.replace
        if m.replace:
            with_replace += 1
            leader_replace |= m.uuid == leader
        if m.uuid != leader:
            voter_candidates.append(m)
    non_voter_failed = any(m.failed for m in non_voters)
    non_voter_unrecoverable = any(m.health is PeerHealth.FAILED_UNRECOVERABLE for m in non_voters)
    voter_failed = any(m.failed for m in voter_candidates)
    voter_unrecoverable = any(m.health is PeerHealth.FAILED_UNRECOVERABLE for m in voter_candidates)
    voter_unknown = any(m.health is PeerHealth.UNKNOWN for m in voter_candidates)

    evict_non_voter = bool(non_voters) and (viable >= replication_factor or non_voter_failed)
    evict_non_voter = evict_non_voter and healthy >= majority(voters)

    only_leader_replaced = with_replace == 1 and leader_replace
    evict_voter = (
        viable > replication_factor
        or voter_failed
        or (viable >= replication_factor and voter_unknown)
        or (
            healthy >= replication_factor
            and not only_leader_replaced
            and (with_replace > replication_factor or (with_replace >= replication_factor and viable > 0))
        )
        or (not only_leader_replaced and with_replace > 0 and healthy > replication_factor)
    )
    evict_voter = (
        evict_voter
        and bool(voter_candidates)
        and (voters > replication_factor or voter_unrecoverable)
        and healthy >= majority(voters - 1)
    )

    def pick(candidates: list[Member]) -> str:
        return min(candidates, key=lambda m: (-_rank(m), tie_break(m))).uuid

    if evict_non_voter and non_voter_unrecoverable:
        return pick(non_voters)
    if evict_voter and voter_unrecoverable:
        return pick(voter_candidates)
    if evict_non_voter:
        return pick(non_voters)
    if evict_voter:
        return pick(voter_candidates)
    return None


def should_step_down_for_replacement(members: Sequence[Member], leader: str, replication_factor: int) -> bool:
    """Whether the leader, marked ``replace``, should hand over now that its replacement is in."""
    voters = [m for m in members if m.voter]
    healthy = sum(m.health is PeerHealth.HEALTHY for m in voters)
    marked = any(m.uuid == leader and m.replace for m in voters)
    return bool(leader) and marked and healthy > replication_factor and healthy >= majority(len(voters))


def eviction_tie_break(
    location_of: Callable[[str], str], members: Sequence[Member], constraint: PlacementConstraint | None = None
) -> Callable[[Member], object]:
    """Among members of equal rank, one outside the table's policy first, then the one in the
    most crowded location (group, with a policy), then by uuid."""
    if constraint is not None and constraint.strict:

        def unit(uuid: str) -> str | None:
            return constraint.group_of(location_of(uuid))
    else:

        def unit(uuid: str) -> str | None:
            return location_of(uuid)

    crowd: dict[str | None, int] = {}
    for m in members:
        if m.voter:
            crowd[unit(m.uuid)] = crowd.get(unit(m.uuid), 0) + 1
    strict = constraint is not None and constraint.strict
    return lambda m: (not (strict and unit(m.uuid) is None), -crowd.get(unit(m.uuid), 0), m.uuid)
