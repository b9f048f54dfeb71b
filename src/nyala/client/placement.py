"""A table's placement policy as the client gives and shows it (docs/placement.md).

``PlacementPolicy(locations=("/eu",), leader_location="/eu/dc1")``: the location subtrees a
table's (or one range's) replicas must stay in, with no majority of a tablet's replicas in any
one location one level below them, and where its leaders should be.  A plain string or a list
of strings is accepted wherever a policy is, meaning the locations alone.  The master checks
the locations (syntax, and that the subtrees hold enough live tablet servers); the client only
shapes the request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nyala.errors import InvalidArgument
from nyala.proto import master_pb2 as mpb

__all__ = ["NO_POLICY", "PlacementLike", "PlacementPolicy", "RangePlacement"]


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementPolicy:
    """Where a table's (or range's) replicas may go, and where its leader should be."""

    locations: tuple[str, ...] = ()
    leader_location: str = ""

    @classmethod
    def of(cls, value: PlacementLike) -> PlacementPolicy:
        if isinstance(value, PlacementPolicy):
            return value
        if isinstance(value, str):
            return cls((value,))
        if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
            return cls(tuple(value))
        raise InvalidArgument(
            f"a placement policy is a PlacementPolicy, a location or a list of locations, not {value!r}"
        )

    @classmethod
    def from_pb(cls, pb: mpb.PlacementPolicyPB) -> PlacementPolicy:
        return cls(tuple(pb.locations), pb.leader_location)

    def to_pb(self) -> mpb.PlacementPolicyPB:
        return mpb.PlacementPolicyPB(locations=list(self.locations), leader_location=self.leader_location)

    @property
    def empty(self) -> bool:
        return not self.locations and not self.leader_location

    def __str__(self) -> str:
        if self.empty:
            return "none"
        parts = []
        if self.locations:
            parts.append("replicas in " + ", ".join(self.locations))
        if self.leader_location:
            parts.append(f"leader in {self.leader_location}")
        return "; ".join(parts)


PlacementLike = PlacementPolicy | str | Sequence[str]

#: No policy of its own (the cluster-wide policy only).
NO_POLICY = PlacementPolicy()


@dataclasses.dataclass(frozen=True, slots=True)
class RangePlacement:
    """A range partition's own policy, as the master shows it."""

    range: str  # the range as people write it, ``[(2024-01-01), (2025-01-01))``
    lower: bytes  # its encoded bounds
    upper: bytes
    policy: PlacementPolicy
