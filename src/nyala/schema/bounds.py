"""Intervals of encoded range keys."""

from __future__ import annotations

import dataclasses

__all__ = ["RangeBounds", "below"]


@dataclasses.dataclass(frozen=True, slots=True)
class RangeBounds:
    """An encoded range ``[lower, upper)`` of the range key; ``b""`` is unbounded."""

    lower: bytes = b""
    upper: bytes = b""

    def overlaps(self, other: RangeBounds) -> bool:
        return below(self.lower, other.upper) and below(other.lower, self.upper)

    def contains(self, range_key: bytes) -> bool:
        return range_key >= self.lower and below(range_key, self.upper)


def below(lower: bytes, upper: bytes) -> bool:
    """lower < upper, where an empty upper means +infinity."""
    return not upper or lower < upper
