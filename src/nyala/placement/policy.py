"""The placement policy: how many replicas of one tablet a single location may hold.

Seed 000 fixes one policy for the whole cluster (not configurable):

- with more than two locations, no location holds a majority of a tablet's replicas, so a
  location holds at most ``floor(r / 2)``;
- with exactly two locations, a location holds at most ``floor(r / 2) + 1`` for odd ``r``, and
  exactly half for even ``r`` (seed 000's "location-aware durability": an even replication
  factor split evenly over two locations keeps every committed write, which a majority of the
  replicas holds, in both locations, so losing one location loses no data; it does lose
  availability, since the half that is left is not a majority);
- with one location (or none) there is nothing to spread over and any layout complies.

**Which locations count** (decided once, here, and used by the master, ksck, the web pages and
the rebalancer alike; Kudu's rule): a location counts only while it has at least one *live*
tablet server, its size is its number of live servers, and a replica counts toward its
location only while its server is live.  During the outage of a whole location the policy is
therefore judged over the locations that are left: a tablet re-replicated best effort into
them complies, and once the location is back (its servers live again) the same layout is a
violation that the policy fixer repairs.  :func:`policy_locations` and :func:`check_tablet`
apply the rule; :func:`check_placement` is the check on counts they feed.

The policy is best effort: placement still succeeds when it cannot be met and says so.  Whether it *can* be met
depends on the cluster: a location can hold no more replicas of a tablet than it has servers,
so the policy is satisfiable only if ``sum over locations of min(limit, servers)`` reaches
``r``.  Replication factor 1 over three or more locations is never satisfiable (the single
replica is a majority); Nyala reports that as UNSATISFIABLE rather than as a fixable violation,
which is what Kudu's rebalancer calls "unfixable".

Kudu's rebalancer uses a stricter rule for even ``r`` with more than two locations (``r / 2``
replicas in one location already count as a violation).  Nyala keeps the seed's rule (no
majority) there; the benchmark reports Kudu's rule beside it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from nyala.errors import InvalidArgument

__all__ = [
    "PolicyCheck",
    "Verdict",
    "check_placement",
    "check_tablet",
    "location_limit",
    "policy_locations",
    "policy_satisfiable",
]


class Verdict(enum.Enum):
    """The outcome of checking one tablet's layout against the policy."""

    MET = "met"
    VIOLATED = "violated"  # another layout on this cluster would comply
    UNSATISFIABLE = "unsatisfiable"  # no layout on this cluster's servers complies


def location_limit(replication_factor: int, num_locations: int) -> int:
    """The most replicas of one tablet that a single location may hold under the policy."""
    if replication_factor < 1:
        raise InvalidArgument(f"replication factor must be at least 1, got {replication_factor}")
    if num_locations <= 1:
        return replication_factor
    if num_locations == 2:
        if replication_factor % 2 == 0:
            return replication_factor // 2  # an even split: durable through the loss of either location
        return min(replication_factor, replication_factor // 2 + 1)
    return replication_factor // 2


def policy_satisfiable(replication_factor: int, servers_per_location: Mapping[str, int]) -> bool:
    """Whether some layout of ``replication_factor`` replicas on these servers meets the policy."""
    limit = location_limit(replication_factor, len(servers_per_location))
    return sum(min(limit, n) for n in servers_per_location.values()) >= replication_factor


class PolicyCheck(NamedTuple):
    """The policy verdict for one tablet, naming the replica count of every location it uses."""

    verdict: Verdict
    replication_factor: int
    num_locations: int
    limit: int
    replicas_per_location: tuple[tuple[str, int], ...]

    @property
    def met(self) -> bool:
        return self.verdict is Verdict.MET

    @property
    def offending_locations(self) -> tuple[str, ...]:
        return tuple(loc for loc, n in self.replicas_per_location if n > self.limit)

    def explain(self) -> str:
        """One line for logs and ksck: the counts per location and what the policy allows."""
        counts = ", ".join(f"{loc}: {n}" for loc, n in self.replicas_per_location) or "no replicas"
        rule = (
            "any layout complies with a single location"
            if self.num_locations <= 1
            else f"at most {self.limit} of {self.replication_factor} replicas per location "
            f"with {self.num_locations} locations that have a live tablet server"
        )
        if self.verdict is Verdict.MET:
            return f"placement policy met ({counts}; {rule})"
        where = ", ".join(self.offending_locations)
        why = (
            "no layout on this cluster's servers can comply"
            if self.verdict is Verdict.UNSATISFIABLE
            else "another layout would comply"
        )
        return f"placement policy violated in {where} ({counts}; {rule}); {why}"


def check_placement(
    replication_factor: int,
    replicas_per_location: Mapping[str, int],
    servers_per_location: Mapping[str, int],
) -> PolicyCheck:
    """Check a tablet whose replicas sit ``replicas_per_location``; the cluster is ``servers_per_location``.

    ``servers_per_location`` lists every location the policy counts and how many servers it has
    (:func:`policy_locations` builds it from the tablet servers' liveness); locations holding
    replicas but absent from it are refused.  Callers that start from tablet servers should use
    :func:`check_tablet`, which applies the rule of which locations count.
    """
    for location in replicas_per_location:
        if location not in servers_per_location:
            unknown = sorted(set(replicas_per_location) - set(servers_per_location))
            raise InvalidArgument(f"replicas placed in unknown locations {unknown}")
    num_locations = len(servers_per_location)
    limit = location_limit(replication_factor, num_locations)
    counts = tuple(sorted([item for item in replicas_per_location.items() if item[1] > 0]))
    if max(replicas_per_location.values(), default=0) <= limit:
        verdict = Verdict.MET
    elif policy_satisfiable(replication_factor, servers_per_location):
        verdict = Verdict.VIOLATED
    else:
        verdict = Verdict.UNSATISFIABLE
    return PolicyCheck(verdict, replication_factor, num_locations, limit, counts)


def policy_locations(tservers: Iterable[tuple[str, bool]]) -> dict[str, int]:
    """The locations the policy counts and their sizes, from each tablet server's (location, live).

    A location counts only while it has a live tablet server, and its size is its number of live
    servers (Kudu's rule: a location with no live tablet server is not a location for the policy).
    """
    sizes: dict[str, int] = {}
    for location, live in tservers:
        if live:
            sizes[location] = sizes.get(location, 0) + 1
    return sizes


def check_tablet(
    replication_factor: int, replicas: Iterable[str], tservers: Mapping[str, tuple[str, bool]]
) -> PolicyCheck:
    """The policy verdict on a tablet whose replicas are on ``replicas`` (tablet server uuids).

    ``tservers`` maps every registered tablet server's uuid to its (location, live).  Only
    replicas on live servers count, in the locations :func:`policy_locations` counts; replicas
    on unknown or dead servers are left out (the tablet is under-replicated, which is reported
    apart; the policy is about where the replicas that serve it are).
    """
    sizes = policy_locations(tservers.values())
    counts: dict[str, int] = {}
    for uuid in replicas:
        where = tservers.get(uuid)
        if where is not None and where[1]:
            counts[where[0]] = counts.get(where[0], 0) + 1
    return check_placement(replication_factor, counts, sizes)
