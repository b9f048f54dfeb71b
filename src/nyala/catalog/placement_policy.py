"""Placement policies in the catalog: a table's own, and its ranges' own.

A table entry may carry a ``PlacementPolicyPB`` (the location subtrees its replicas must stay
in and a leader location) and, per range partition, a ``RangePlacementPB`` whose policy
*replaces* the table's for that range's tablets.  Ranges are stored by their encoded bounds
(the ``RangeBounds`` the partitioner keeps), so a policy follows its range across renames and
column changes; dropping a range drops its policy.  Requests name a range by its bound
values as JSON lists, like AlterTable's range steps.

:class:`TablePlacement` is the decoded form the master places tablets with
(:meth:`TablePlacement.for_range`); :func:`constraint_of` validates a request's policy and
raises InvalidArgument naming the problem (a malformed location, a leader location outside
the subtrees).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from nyala.errors import InvalidArgument
from nyala.placement.constraint import PlacementConstraint
from nyala.proto import master_pb2 as mpb
from nyala.schema import Partitioner, RangeBounds, Schema

__all__ = [
    "NO_PLACEMENT",
    "TablePlacement",
    "constraint_of",
    "existing_range",
    "placement_pb",
    "range_bounds_of",
    "range_placement_pbs",
]


def constraint_of(pb: mpb.PlacementPolicyPB) -> PlacementConstraint:
    """The validated constraint a policy message describes (empty message: no constraint)."""
    return PlacementConstraint.of(list(pb.locations), pb.leader_location)


def placement_pb(constraint: PlacementConstraint) -> mpb.PlacementPolicyPB:
    return mpb.PlacementPolicyPB(locations=list(constraint.subtrees), leader_location=constraint.leader_location)


def range_bounds_of(schema: Schema, partitioner: Partitioner, pb: mpb.AlterTableStepPB.RangePartition) -> RangeBounds:
    """The bounds a request names (JSON lists of range-column values; empty: unbounded)."""
    columns = partitioner.partition_schema.range_columns
    if not columns:
        raise InvalidArgument("the table has no range partition columns")
    values: list[list[Any] | None] = []
    for which, data in (("lower", pb.lower_bound), ("upper", pb.upper_bound)):
        if not data:
            values.append(None)
            continue
        try:
            decoded = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise InvalidArgument(f"{which} bound is not valid JSON: {e}") from None
        if not isinstance(decoded, list) or len(decoded) != len(columns):
            raise InvalidArgument(
                f"{which} bound must be a JSON list of one value per range column {list(columns)}, got {decoded!r}"
            )
        values.append(
            [
                schema.column(c).type.from_json(v, f"{which} bound, column {c!r}")
                for c, v in zip(columns, decoded, strict=True)
            ]
        )
    return partitioner.bounds(values[0], values[1])


def existing_range(partitioner: Partitioner, bounds: RangeBounds) -> RangeBounds:
    """``bounds`` when the table has exactly that range; InvalidArgument naming its ranges otherwise."""
    if bounds not in partitioner.ranges:
        shown = ", ".join(partitioner.show_range(r) for r in partitioner.ranges) or "none"
        raise InvalidArgument(f"no range {partitioner.show_range(bounds)}; the ranges are {shown}")
    return bounds


@dataclasses.dataclass(frozen=True)
class TablePlacement:
    """A table's placement policy and its ranges' own policies, decoded."""

    table: PlacementConstraint = dataclasses.field(default_factory=PlacementConstraint)
    ranges: Mapping[RangeBounds, PlacementConstraint] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, entry: mpb.SysTablesEntryPB) -> TablePlacement:
        if not entry.HasField("placement") and not entry.range_placements:
            return NO_PLACEMENT
        ranges = {RangeBounds(r.lower, r.upper): constraint_of(r.policy) for r in entry.range_placements}
        return cls(constraint_of(entry.placement), ranges)

    def for_range(self, bounds: RangeBounds) -> PlacementConstraint:
        """The policy of a tablet of range ``bounds``: the range's own, else the table's."""
        return self.ranges.get(bounds, self.table)

    @property
    def empty(self) -> bool:
        return self.table.empty and not self.ranges

    def with_table(self, constraint: PlacementConstraint) -> TablePlacement:
        return TablePlacement(constraint, self.ranges)

    def with_range(self, bounds: RangeBounds, constraint: PlacementConstraint) -> TablePlacement:
        ranges = dict(self.ranges)
        if constraint.empty:
            ranges.pop(bounds, None)
        else:
            ranges[bounds] = constraint
        return TablePlacement(self.table, ranges)

    def without_ranges(self, dropped: list[RangeBounds]) -> TablePlacement:
        if not any(b in self.ranges for b in dropped):
            return self
        return TablePlacement(self.table, {b: c for b, c in self.ranges.items() if b not in dropped})

    def write_to(self, entry: mpb.SysTablesEntryPB) -> None:
        """Store into a (mutable copy of a) table entry."""
        entry.ClearField("placement")
        del entry.range_placements[:]
        if not self.table.empty:
            entry.placement.CopyFrom(placement_pb(self.table))
        for bounds in sorted(self.ranges, key=lambda b: (b.lower, b.upper)):
            entry.range_placements.add(lower=bounds.lower, upper=bounds.upper, policy=placement_pb(self.ranges[bounds]))


#: A table with no policy of its own (shared: TablePlacement is never mutated).
NO_PLACEMENT = TablePlacement()


def range_placement_pbs(placement: TablePlacement, partitioner: Partitioner) -> list[mpb.RangePlacementPB]:
    """The ranges' policies for a response, each with its range shown as people write it."""
    return [
        mpb.RangePlacementPB(
            lower=bounds.lower, upper=bounds.upper, policy=placement_pb(c), shown=partitioner.show_range(bounds)
        )
        for bounds, c in sorted(placement.ranges.items(), key=lambda item: (item[0].lower, item[0].upper))
    ]
