"""Location-aware, range-aware replica placement (pure: no I/O, no clock, no global randomness).

How it works, in order of a request's path:

- :mod:`~nyala.placement.location` validates location labels (``/dc1/rack1``).
- :mod:`~nyala.placement.policy` is the placement policy: with more than two locations no
  location holds a majority of a tablet's replicas, with two at most ``floor(r/2) + 1`` (half
  for an even ``r``); it checks a layout and names the per-location counts of a violation.  It
  also decides, once for every caller, which locations count: those with a live server.
- :class:`~nyala.placement.state.ClusterState` is the master's view: tablet servers with their
  location and liveness, and their replicas counted in total, per table and per range, each
  as reported plus pending-and-decaying (:mod:`~nyala.placement.decay`).  The master updates
  it incrementally and passes its clock in as a number.  It owns the index that ranks servers
  and keeps it current on every change.
- :func:`place_new_tablet` and :func:`place_replacement` (:mod:`~nyala.placement.placer`) place
  the replicas of a tablet in a ``ClusterState``: locations first
  (:mod:`~nyala.placement.location_choice`: lowest load, policy limits first, best effort beyond
  them), then a server in each location through the indexed range-aware ranking of
  :mod:`~nyala.placement.ranking` (fewest replicas of the range, then of the table, then in
  total; counts packed as in :mod:`~nyala.placement.tally`), and records each choice as pending.
- :mod:`~nyala.placement.constraint` is a table's (or range's) own policy: the location
  subtrees its replicas must stay in, the no-majority rule one level down inside them, and
  a leader location; :mod:`~nyala.placement.constraint_choice` places a constrained tablet.
- :mod:`~nyala.placement.reference` is the plain full scan that Kudu runs: the oracle of the
  tests and the baseline of the benchmark.
- :mod:`~nyala.placement.rebalance` plans replica moves from a cluster snapshot: drain, fix
  the policy, balance across locations, then within each location (Kudu's phases).

Imports point one way: the leaves (``options``, ``location``, ``policy``, ``tally``,
``decay``) at the bottom, then ``state``, then ``ranking`` and ``location_choice`` (which
search the state), then ``placer`` and ``reference`` beside it.  ``rebalance`` works on its
own snapshot of the cluster and needs only the leaves.

Randomness (tie-breaking) comes from the ``random.Random`` given to ``ClusterState``, so a
seeded generator makes every placement reproducible.
"""

from __future__ import annotations

from nyala.placement.constraint import ConstraintCheck, PlacementConstraint, check_constraint
from nyala.placement.location import common_prefix_depth, location_components, validate_location
from nyala.placement.options import PlacementOptions
from nyala.placement.placer import PlacementResult, place_new_tablet, place_replacement
from nyala.placement.policy import (
    PolicyCheck,
    Verdict,
    check_placement,
    check_tablet,
    location_limit,
    policy_locations,
    policy_satisfiable,
)
from nyala.placement.rebalance import ClusterInfo, Move, Plan, RebalanceOptions, TabletInfo, plan_moves
from nyala.placement.selection import select_moves
from nyala.placement.state import ClusterState, TServerInfo

__all__ = [
    "ClusterInfo",
    "ClusterState",
    "ConstraintCheck",
    "Move",
    "PlacementConstraint",
    "PlacementOptions",
    "PlacementResult",
    "Plan",
    "PolicyCheck",
    "RebalanceOptions",
    "TServerInfo",
    "TabletInfo",
    "Verdict",
    "check_constraint",
    "check_placement",
    "check_tablet",
    "common_prefix_depth",
    "location_components",
    "location_limit",
    "place_new_tablet",
    "place_replacement",
    "plan_moves",
    "policy_locations",
    "policy_satisfiable",
    "select_moves",
    "validate_location",
]
