"""What a scan reads, fixed when the scanner is built: :class:`ScanSpec`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, TypedDict

import pyarrow as pa

from nyala.schema import KeyRange, Predicate, Schema, encode_key

from .replicas import ReadMode, ReplicaSelection

__all__ = ["ScanArgs", "ScanSpec"]


class ScanArgs(TypedDict, total=False):
    """The keyword arguments of every scan call (``table.scanner(columns, predicates, **args)``).

    - ``limit``: at most this many rows in all (None: no limit);
    - ``replica_selection``: LEADER_ONLY (default) or CLOSEST_REPLICA;
    - ``read_mode``: READ_LATEST (default) or READ_YOUR_WRITES;
    - ``ordered``: rows of each tablet in primary-key order, and resumable on another replica
      when a server fails (Kudu's fault-tolerant scan);
    - ``batch_size_bytes``: rows per server response (default 1 MiB);
    - ``lower_bound`` / ``upper_bound``: primary-key bounds, inclusive / exclusive;
    - ``timeout_s``: the deadline of each scan request, retries included.
    """

    limit: int | None
    replica_selection: ReplicaSelection
    read_mode: ReadMode
    ordered: bool
    batch_size_bytes: int | None
    lower_bound: Sequence[Any] | None
    upper_bound: Sequence[Any] | None
    timeout_s: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class ScanSpec:
    """A bound scan: projection, predicates, key range, limit and how to read."""

    projection: tuple[str, ...] | None
    predicates: tuple[Predicate, ...]
    key_range: KeyRange | None
    limit: int | None
    replica_selection: ReplicaSelection
    read_mode: ReadMode
    ordered: bool
    batch_size_bytes: int
    timeout_s: float

    def columns(self, schema: Schema) -> list[str]:
        return list(self.projection) if self.projection is not None else schema.names

    def arrow_schema(self, schema: Schema) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type, c.nullable) for c in map(schema.column, self.columns(schema))])

    def predicates_json(self, schema: Schema) -> bytes:
        return json.dumps([p.to_dict(schema) for p in self.predicates], separators=(",", ":")).encode()

    def encoded_bounds(self, schema: Schema) -> tuple[bytes, bytes]:
        """The key range as encoded primary keys: (inclusive lower, exclusive upper)."""
        if self.key_range is None:
            return b"", b""
        types = [c.type for c in schema.key_columns]
        lower = b"" if self.key_range.lower is None else encode_key(types, self.key_range.lower)
        upper = b"" if self.key_range.upper is None else encode_key(types, self.key_range.upper)
        return lower, upper

    def to_dict(self, schema: Schema) -> dict[str, Any]:
        return {
            "projection": None if self.projection is None else list(self.projection),
            "predicates": [p.to_dict(schema) for p in self.predicates],
            "key_range": None if self.key_range is None else self.key_range.to_dict(schema),
            "limit": self.limit,
            "replica_selection": self.replica_selection.name,
            "read_mode": self.read_mode.name,
            "ordered": self.ordered,
            "batch_size_bytes": self.batch_size_bytes,
            "timeout_s": self.timeout_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], schema: Schema) -> ScanSpec:
        key_range = d.get("key_range")
        projection = d.get("projection")
        return cls(
            projection=None if projection is None else tuple(projection),
            predicates=tuple(Predicate.from_dict(p, schema) for p in d.get("predicates", ())),
            key_range=None if key_range is None else KeyRange.from_dict(key_range, schema),
            limit=d.get("limit"),
            replica_selection=ReplicaSelection[d["replica_selection"]],
            read_mode=ReadMode[d["read_mode"]],
            ordered=bool(d["ordered"]),
            batch_size_bytes=int(d["batch_size_bytes"]),
            timeout_s=float(d["timeout_s"]),
        )
