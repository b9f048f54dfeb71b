"""Turning a NewScanRequestPB into a store scan: projection, predicates, key bounds, order, limit.

Everything the caller sends is checked against the tablet's schema first; a problem is an
InvalidArgument naming the field, and nothing is opened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nyala.errors import Corruption, InvalidArgument
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import KeyRange, Predicate, Schema, decode_key
from nyala.storage import ScanSpec

__all__ = ["PlannedScan", "plan_scan"]


@dataclass(frozen=True, slots=True)
class PlannedScan:
    """The store's scan, the columns sent to the caller, and whether keys are reported."""

    spec: ScanSpec
    output_columns: list[str]
    ordered: bool


def plan_scan(request: tpb.NewScanRequestPB, schema: Schema) -> PlannedScan:
    output = _projection(request, schema)
    if request.limit < 0:
        raise InvalidArgument(f"scan limit must be >= 0 (0: no limit), got {request.limit}")
    ordered = request.order_by_primary_key
    if request.last_primary_key and not ordered:
        raise InvalidArgument("last_primary_key resumes an ordered scan: set order_by_primary_key too")
    read = output + [k for k in schema.key_names if k not in output] if ordered else output
    spec = ScanSpec(
        projection=read,
        predicates=_predicates(request.predicates, schema),
        key_range=_key_range(request, schema),
        limit=request.limit or None,
        ordered=ordered,
    )
    return PlannedScan(spec, output, ordered)


def _projection(request: tpb.NewScanRequestPB, schema: Schema) -> list[str]:
    columns = list(request.projected_columns) or schema.names
    seen: set[str] = set()
    for name in columns:
        if not schema.has_column(name):
            raise InvalidArgument(f"scan projects unknown column {name!r}; columns are {schema.names}")
        if name in seen:
            raise InvalidArgument(f"scan projects column {name!r} twice")
        seen.add(name)
    return columns


def _predicates(data: bytes, schema: Schema) -> list[Predicate]:
    if not data:
        return []
    try:
        items: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"scan predicates are not valid JSON: {e}") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InvalidArgument("scan predicates must be a JSON list of predicate objects")
    return [Predicate.from_dict(item, schema) for item in items]


def _key_range(request: tpb.NewScanRequestPB, schema: Schema) -> KeyRange | None:
    lower = _key(request.lower_bound_primary_key, schema, "lower_bound_primary_key")
    upper = _key(request.exclusive_upper_bound_primary_key, schema, "exclusive_upper_bound_primary_key")
    resume = _key(request.last_primary_key, schema, "last_primary_key")
    if resume is not None and (lower is None or resume >= lower):
        return KeyRange(resume, upper, lower_inclusive=False)
    if lower is None and upper is None:
        return None
    return KeyRange(lower, upper)


def _key(data: bytes, schema: Schema, what: str) -> tuple[Any, ...] | None:
    if not data:
        return None
    try:
        return decode_key([c.type for c in schema.key_columns], data)
    except (Corruption, UnicodeDecodeError) as e:
        raise InvalidArgument(f"{what} is not an encoded primary key of this table: {e}") from None
