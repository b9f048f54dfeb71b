"""From predicates to the interval of encoded range keys, and the values a column may take.

The walk over the range columns: equalities on a prefix extend both bounds; the first
column with only a range (or an IN list, taken as its min..max) ends it.  Exclusive bounds
use the successor of an encoded prefix.  Every step may widen the interval, never narrow it
below what matching rows need.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .bounds import RangeBounds
from .keys import encode_prefix, prefix_successor
from .predicate import Op, Predicate
from .types import ColumnType

__all__ = ["intersect", "never_matches", "point_values", "window_from_predicates"]


def never_matches(preds: Sequence[Predicate]) -> bool:
    """True when the predicates on one non-null key column can match no value."""
    return any(p.op is Op.IS_NULL or (p.op is Op.IN and not p.values) for p in preds) or point_values(preds) == []


def point_values(preds: Sequence[Predicate]) -> list[Any] | None:
    """The finite set of values the predicates allow, or None when it is not a finite set."""
    allowed: set[Any] | None = None
    for p in preds:
        if p.op is Op.EQ:
            s = {p.value}
        elif p.op is Op.IN:
            s = set(p.values)
        else:
            continue
        allowed = s if allowed is None else allowed & s
    if allowed is None:
        return None
    return sorted(v for v in allowed if all(p.matches(v) for p in preds))


@dataclasses.dataclass
class _Bound:
    value: Any
    inclusive: bool


def _column_interval(preds: Sequence[Predicate]) -> tuple[_Bound | None, _Bound | None] | None:
    """Tightest [lower, upper] one column's predicates allow; None if it is empty."""
    points = point_values(preds)
    if points is not None:
        return (_Bound(points[0], True), _Bound(points[-1], True)) if points else None
    lo: _Bound | None = None
    hi: _Bound | None = None
    for p in preds:
        if p.op in (Op.GT, Op.GE):
            b = _Bound(p.value, p.op is Op.GE)
            if lo is None or b.value > lo.value or (b.value == lo.value and not b.inclusive):
                lo = b
        elif p.op in (Op.LT, Op.LE):
            b = _Bound(p.value, p.op is Op.LE)
            if hi is None or b.value < hi.value or (b.value == hi.value and not b.inclusive):
                hi = b
    if (
        lo is not None
        and hi is not None
        and (lo.value > hi.value or (lo.value == hi.value and not (lo.inclusive and hi.inclusive)))
    ):
        return None
    return lo, hi


def window_from_predicates(
    types: Sequence[ColumnType], columns: Sequence[str], by_column: Mapping[str, list[Predicate]]
) -> RangeBounds | None:
    """Walk the range columns: equalities extend both bounds, the first inexact column ends it."""
    lo_prefix: list[Any] = []
    hi_prefix: list[Any] = []
    lo_open = hi_open = False  # whether the last bound value is exclusive
    lo_done = hi_done = False
    for name in columns:
        interval = _column_interval(by_column.get(name, []))
        if interval is None:
            return None
        lo, hi = interval
        if not lo_done:
            if lo is None:
                lo_done = True
            else:
                lo_prefix.append(lo.value)
                lo_open, lo_done = not lo.inclusive, not (lo.inclusive and hi is not None and lo.value == hi.value)
        if not hi_done:
            if hi is None:
                hi_done = True
            else:
                hi_prefix.append(hi.value)
                hi_open, hi_done = not hi.inclusive, not (hi.inclusive and lo is not None and lo.value == hi.value)
        if lo_done and hi_done:
            break
    lower = _lower_bytes(types, lo_prefix, lo_open)
    upper = _upper_bytes(types, hi_prefix, hi_open)
    if lower is None or (upper and lower >= upper):
        return None
    return RangeBounds(lower, upper)


def _lower_bytes(types: Sequence[ColumnType], prefix: list[Any], exclusive: bool) -> bytes | None:
    """The inclusive lower bound, or None when no key can be above an exclusive one."""
    if not prefix:
        return b""
    encoded = encode_prefix(types, prefix)
    if not exclusive:
        return encoded
    if len(prefix) == len(types):
        return encoded + b"\x00"
    # Every key whose prefix equals `prefix` is excluded: start after all of them.
    return prefix_successor(encoded) or None


def _upper_bytes(types: Sequence[ColumnType], prefix: list[Any], exclusive: bool) -> bytes:
    if not prefix:
        return b""
    encoded = encode_prefix(types, prefix)
    if exclusive:
        return encoded  # keys with this prefix are excluded, and smaller prefixes sort before it
    return encoded + b"\x00" if len(prefix) == len(types) else prefix_successor(encoded)


def intersect(a: RangeBounds, b: RangeBounds) -> RangeBounds | None:
    lower = max(a.lower, b.lower)
    uppers = [u for u in (a.upper, b.upper) if u]
    upper = min(uppers) if uppers else b""
    if upper and lower >= upper:
        return None
    return RangeBounds(lower, upper)
