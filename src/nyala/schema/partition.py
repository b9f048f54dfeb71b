"""Hash and range partitioning, the row-to-tablet function, and partition pruning.

A :class:`PartitionSchema` has zero or more hash dimensions (columns, buckets, seed) and a
list of range columns; all are primary-key columns.  A row's *partition key* is, for each
hash dimension, its bucket as 4 big-endian bytes (``murmur2_64(encoded columns, seed) %
buckets``), followed by the encoded range columns.  A table's ranges are explicit
``[lower, upper)`` bounds on the encoded range key (``b""`` means unbounded); they need not
cover the key space, so a row may fall in no partition.  Each range is split into one
:class:`Partition` per combination of hash buckets.  Partitions sort by partition key and do
not overlap, so the row-to-partition function is a binary search.

Pruning turns predicates into, per hash dimension, a set of possible buckets (when every
column of the dimension has an equality or IN list) and an interval of the encoded range key
(equalities on a prefix of the range columns, then one bounded column).  A partition is kept
when its buckets and its range intersect those.  Pruning never drops a partition that can
hold a matching row; it may keep some that cannot.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from nyala.errors import InvalidArgument, NotFound

from .bounds import RangeBounds, below
from .keys import decode_key, encode_key, key_successor, murmur2_64, murmur2_64_fixed
from .predicate import KeyRange, Predicate
from .pruning import intersect, never_matches, point_values, window_from_predicates
from .schema import Schema
from .types import DataType

__all__ = ["HashDimension", "Partition", "PartitionSchema", "Partitioner", "RangeBounds", "show_value"]


def _to_numpy(array: pa.Array | pa.ChunkedArray) -> npt.NDArray[Any]:
    """A null-free Arrow array as numpy (a copy only when it is chunked)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    values: npt.NDArray[Any] = array.to_numpy(zero_copy_only=True)
    return values


# Column types hashed in Arrow: their key encoding is a fixed-width integer.
_FIXED_WIDTH = {DataType.INT8: 1, DataType.INT16: 2, DataType.INT32: 4, DataType.INT64: 8, DataType.DATE: 4}
_FIXED_WIDTH[DataType.TIMESTAMP] = 8
_STORAGE = {1: pa.int8(), 2: pa.int16(), 4: pa.int32(), 8: pa.int64()}
MAX_PRUNING_COMBINATIONS = 4096  # beyond this many IN-list combinations, keep all buckets


@dataclasses.dataclass(frozen=True, slots=True)
class HashDimension:
    columns: tuple[str, ...]
    num_buckets: int
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "num_buckets": self.num_buckets, "seed": self.seed}


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Partition:
    """The slice of a table one tablet holds: hash buckets plus a range of the range key."""

    partition_key_start: bytes
    partition_key_end: bytes  # exclusive; b"" means unbounded
    hash_buckets: tuple[int, ...]
    range: RangeBounds

    @classmethod
    def make(cls, hash_buckets: tuple[int, ...], bounds: RangeBounds) -> Partition:
        prefix = b"".join(b.to_bytes(4, "big") for b in hash_buckets)
        start = prefix + bounds.lower
        if bounds.upper:
            end = prefix + bounds.upper
        elif hash_buckets:
            # The range is unbounded above: the partition ends where the next bucket begins.
            end = prefix[:-4] + (hash_buckets[-1] + 1).to_bytes(4, "big")
        else:
            end = b""
        return cls(start, end, hash_buckets, bounds)

    def contains_key(self, partition_key: bytes) -> bool:
        return partition_key >= self.partition_key_start and below(partition_key, self.partition_key_end)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hash_buckets": list(self.hash_buckets),
            "range_lower": self.range.lower.hex(),
            "range_upper": self.range.upper.hex(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Partition:
        try:
            bounds = RangeBounds(bytes.fromhex(d["range_lower"]), bytes.fromhex(d["range_upper"]))
            return cls.make(tuple(int(b) for b in d["hash_buckets"]), bounds)
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed partition description {dict(d)!r}: {e}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionSchema:
    """How a table is split: hash dimensions, then range columns (both on key columns)."""

    hash_dimensions: tuple[HashDimension, ...] = ()
    range_columns: tuple[str, ...] = ()

    def validate(self, schema: Schema) -> None:
        used: set[str] = set()
        for dim in self.hash_dimensions:
            if not dim.columns:
                raise InvalidArgument("a hash dimension needs at least one column")
            if len(set(dim.columns)) != len(dim.columns):
                raise InvalidArgument(f"hash dimension {list(dim.columns)} repeats a column")
            if not 2 <= dim.num_buckets <= 1 << 20:
                raise InvalidArgument(
                    f"hash dimension {list(dim.columns)}: buckets must be >= 2, got {dim.num_buckets}"
                )
            if not 0 <= dim.seed < 1 << 32:
                raise InvalidArgument(f"hash dimension {list(dim.columns)}: seed must be a 32-bit unsigned int")
            for name in dim.columns:
                _check_key_column(schema, name, "hash")
                if name in used:
                    raise InvalidArgument(f"column {name!r} is in more than one hash dimension")
                used.add(name)
        if len(set(self.range_columns)) != len(self.range_columns):
            raise InvalidArgument(f"range columns {list(self.range_columns)} repeat a column")
        for name in self.range_columns:
            _check_key_column(schema, name, "range")

    def to_dict(self) -> dict[str, Any]:
        return {"hash": [d.to_dict() for d in self.hash_dimensions], "range_columns": list(self.range_columns)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionSchema:
        try:
            dims = tuple(
                HashDimension(tuple(str(c) for c in h["columns"]), int(h["num_buckets"]), int(h.get("seed", 0)))
                for h in d.get("hash", ())
            )
            return cls(dims, tuple(str(c) for c in d.get("range_columns", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed partition schema: {e}") from None


def _check_key_column(schema: Schema, name: str, kind: str) -> None:
    if not schema.has_column(name):
        raise InvalidArgument(f"{kind} partition column {name!r} is not in the schema")
    if not schema.is_key(name):
        raise InvalidArgument(f"{kind} partition column {name!r} must be a primary key column")


class Partitioner:
    """A table's partition schema with its current ranges: maps rows to partitions and prunes."""

    def __init__(self, schema: Schema, partition_schema: PartitionSchema, ranges: Iterable[RangeBounds] = ()) -> None:
        partition_schema.validate(schema)
        self.schema = schema
        self.partition_schema = partition_schema
        self._range_types = [schema.column(c).type for c in partition_schema.range_columns]
        self._hash_types = [[schema.column(c).type for c in d.columns] for d in partition_schema.hash_dimensions]
        ranges = list(ranges) if partition_schema.range_columns else [RangeBounds()]
        if not partition_schema.range_columns and ranges != [RangeBounds()]:
            raise InvalidArgument("a table without range columns has exactly one unbounded range")
        self.ranges = _sorted_disjoint(ranges)
        self.partitions = sorted(
            Partition.make(buckets, bounds)
            for bounds in self.ranges
            for buckets in itertools.product(*(range(d.num_buckets) for d in partition_schema.hash_dimensions))
        )
        self._starts = [p.partition_key_start for p in self.partitions]

    # --- ranges ------------------------------------------------------------------------------

    def encode_range_key(self, values: Sequence[Any]) -> bytes:
        """Encode one value per range column (a range bound or a row's range key)."""
        cols = self.partition_schema.range_columns
        if len(values) != len(cols):
            raise InvalidArgument(f"a range bound needs one value per range column {list(cols)}, got {values!r}")
        checked = [
            self.schema.column(c).type.check(v, f"range bound, column {c!r}") for c, v in zip(cols, values, strict=True)
        ]
        return encode_key(self._range_types, checked)

    def decode_range_key(self, data: bytes) -> tuple[Any, ...]:
        return decode_key(self._range_types, data)

    def bounds(
        self,
        lower: Sequence[Any] | None,
        upper: Sequence[Any] | None,
        *,
        lower_inclusive: bool = True,
        upper_inclusive: bool = False,
    ) -> RangeBounds:
        """Range bounds from values, None unbounded: ``lower`` inclusive and ``upper`` exclusive
        unless told otherwise (Kudu's range bound types)."""
        lo_values, hi_values = self.half_open(
            lower, upper, lower_inclusive=lower_inclusive, upper_inclusive=upper_inclusive
        )
        lo = b"" if lo_values is None else self.encode_range_key(lo_values)
        hi = b"" if hi_values is None else self.encode_range_key(hi_values)
        if hi and lo >= hi:
            raise InvalidArgument(
                f"range lower bound {_show_values(lower)} is not below upper bound {_show_values(upper)}"
            )
        return RangeBounds(lo, hi)

    def half_open(
        self,
        lower: Sequence[Any] | None,
        upper: Sequence[Any] | None,
        *,
        lower_inclusive: bool = True,
        upper_inclusive: bool = False,
    ) -> tuple[list[Any] | None, list[Any] | None]:
        """The same range as ``[inclusive lower, exclusive upper)`` values, the form tables keep.

        An exclusive lower bound becomes the next key; an inclusive upper bound becomes the
        next key, or unbounded after the largest key.  Values are checked against the types.
        """
        cols = self.partition_schema.range_columns
        checked: list[list[Any] | None] = []
        for bound in (lower, upper):
            if bound is None:
                checked.append(None)
                continue
            if len(bound) != len(cols):
                raise InvalidArgument(f"a range bound needs one value per range column {list(cols)}, got {bound!r}")
            checked.append(
                [
                    self.schema.column(c).type.check(v, f"range bound, column {c!r}")
                    for c, v in zip(cols, bound, strict=True)
                ]
            )
        lo, hi = checked
        if lo is not None and not lower_inclusive:
            following = key_successor(self._range_types, lo)
            if following is None:
                raise InvalidArgument(
                    f"exclusive lower bound {_show_values(lower)} is the largest key: the range would be empty"
                )
            lo = following
        if hi is not None and upper_inclusive:
            hi = key_successor(self._range_types, hi)  # None: the largest key, so no upper bound
        return lo, hi

    def add_range(self, bounds: RangeBounds) -> Partitioner:
        """A partitioner with one more range; it may not overlap an existing one."""
        if not self.partition_schema.range_columns:
            raise InvalidArgument("the table has no range columns")
        for existing in self.ranges:
            if existing.overlaps(bounds):
                raise InvalidArgument(f"new range {self.show_range(bounds)} overlaps range {self.show_range(existing)}")
        return Partitioner(self.schema, self.partition_schema, [*self.ranges, bounds])

    def drop_range(self, bounds: RangeBounds) -> Partitioner:
        if bounds not in self.ranges:
            shown = ", ".join(self.show_range(r) for r in self.ranges) or "none"
            raise NotFound(f"no range {self.show_range(bounds)}; the ranges are {shown}")
        return Partitioner(self.schema, self.partition_schema, [r for r in self.ranges if r != bounds])

    def partitions_of_range(self, bounds: RangeBounds) -> list[Partition]:
        return [p for p in self.partitions if p.range == bounds]

    def show_range(self, bounds: RangeBounds) -> str:
        """``[(2024-01-01), (+inf))``: a range as people write it, for messages and tools."""

        def show(bound: bytes, unbounded: str) -> str:
            return ", ".join(show_value(v) for v in self.decode_range_key(bound)) if bound else unbounded

        return f"[({show(bounds.lower, '-inf')}), ({show(bounds.upper, '+inf')}))"

    # --- rows ----------------------------------------------------------------------------

    def partition_key(self, row: Mapping[str, Any]) -> bytes:
        """The partition key of a row given as column name -> canonical value."""
        parts = [
            self.bucket(i, [row[c] for c in dim.columns]).to_bytes(4, "big")
            for i, dim in enumerate(self.partition_schema.hash_dimensions)
        ]
        parts.append(encode_key(self._range_types, [row[c] for c in self.partition_schema.range_columns]))
        return b"".join(parts)

    def bucket(self, dimension: int, values: Sequence[Any]) -> int:
        dim = self.partition_schema.hash_dimensions[dimension]
        return murmur2_64(encode_key(self._hash_types[dimension], values), dim.seed) % dim.num_buckets

    def find(self, partition_key: bytes) -> Partition:
        """The partition holding ``partition_key``; NotFound when no range covers it."""
        i = self.index_of(partition_key)
        if i < 0:
            raise NotFound(f"no range partition covers partition key {partition_key.hex()}")
        return self.partitions[i]

    def index_of(self, partition_key: bytes) -> int:
        """The index in :attr:`partitions` of the partition holding ``partition_key``, or -1."""
        i = bisect.bisect_right(self._starts, partition_key) - 1
        return i if i >= 0 and self.partitions[i].contains_key(partition_key) else -1

    def partition_for_row(self, row: Mapping[str, Any]) -> Partition:
        return self.find(self.partition_key(row))

    def partition_indices(self, table: pa.Table | pa.RecordBatch) -> npt.NDArray[np.int64]:
        """For each row of an Arrow table with the table's types: the index of its partition in
        :attr:`partitions`, or -1 when no range covers it.  The same answer as
        :meth:`partition_for_row`, computed column-wise (integer hash and range columns in
        Arrow and numpy, without a Python object per row: clients and servers run this on
        every written row).
        """
        dims = self.partition_schema.hash_dimensions
        buckets = [self._bucket_column(i, table) for i in range(len(dims))]
        if not self.partition_schema.range_columns:
            ranges: npt.NDArray[np.int64] | None = np.zeros(table.num_rows, np.int64)
        else:
            ranges = self._range_index_column(table)
        if ranges is not None:
            # Partitions sort by buckets, then range: the index is a mixed-radix number.
            out = np.zeros(table.num_rows, np.int64)
            for dim, column in zip(dims, buckets, strict=True):
                out = out * dim.num_buckets + column
            return np.where(ranges >= 0, out * len(self.ranges) + ranges, -1)
        names = self.partition_schema.range_columns
        range_values = zip(*(table.column(c).to_pylist() for c in names), strict=True)
        prefixes = zip(*(b.tolist() for b in buckets), strict=True) if buckets else itertools.repeat(())
        indices = []
        seen: dict[tuple[tuple[int, ...], tuple[Any, ...]], int] = {}  # range keys often repeat
        for bucket_tuple, values in zip(prefixes, range_values, strict=False):
            found = seen.get((bucket_tuple, values))
            if found is None:
                key = b"".join(b.to_bytes(4, "big") for b in bucket_tuple) + encode_key(self._range_types, values)
                i = bisect.bisect_right(self._starts, key) - 1
                found = seen[(bucket_tuple, values)] = i if i >= 0 and self.partitions[i].contains_key(key) else -1
            indices.append(found)
        return np.array(indices, np.int64)

    def _range_index_column(self, table: pa.Table | pa.RecordBatch) -> npt.NDArray[np.int64] | None:
        """Each row's index in :attr:`ranges` (-1: none), in Arrow, for one integer-like range
        column; None for other range schemas."""
        if len(self._range_types) != 1 or self._range_types[0].type not in _FIXED_WIDTH:
            return None
        column = table.column(self.partition_schema.range_columns[0])
        arrow_type = self._range_types[0].to_arrow()
        index = pa.repeat(pa.scalar(-1, pa.int32()), table.num_rows)
        for i, bounds in enumerate(self.ranges):
            inside = pa.repeat(pa.scalar(True), table.num_rows)
            if bounds.lower:
                lower = pa.scalar(self.decode_range_key(bounds.lower)[0], arrow_type)
                inside = pc.and_(inside, pc.greater_equal(column, lower))
            if bounds.upper:
                upper = pa.scalar(self.decode_range_key(bounds.upper)[0], arrow_type)
                inside = pc.and_(inside, pc.less(column, upper))
            index = pc.if_else(inside, pa.scalar(i, pa.int32()), index)
        return _to_numpy(index).astype(np.int64)

    def _bucket_column(self, dimension: int, table: pa.Table | pa.RecordBatch) -> npt.NDArray[np.int64]:
        dim = self.partition_schema.hash_dimensions[dimension]
        types = self._hash_types[dimension]
        if len(types) == 1 and (width := _FIXED_WIDTH.get(types[0].type)):
            values = table.column(dim.columns[0])
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            if values.null_count:
                raise InvalidArgument(f"hash partition column {dim.columns[0]!r} has nulls")
            hashes = murmur2_64_fixed(_to_numpy(values.cast(_STORAGE[width])), dim.seed)
            return (hashes % np.uint64(dim.num_buckets)).astype(np.int64)
        cache: dict[tuple[Any, ...], int] = {}
        out = []
        for values in zip(*(table.column(c).to_pylist() for c in dim.columns), strict=True):
            bucket = cache.get(values)
            if bucket is None:
                bucket = cache[values] = self.bucket(dimension, values)
            out.append(bucket)
        return np.array(out, np.int64)

    # --- pruning -------------------------------------------------------------------------

    def prune(self, predicates: Sequence[Predicate], key_range: KeyRange | None = None) -> list[Partition]:
        """Partitions that may hold rows matching all ``predicates`` (bound) and ``key_range``."""
        by_column: dict[str, list[Predicate]] = {}
        for p in predicates:
            by_column.setdefault(p.column, []).append(p)
        if any(self.schema.is_key(c) and never_matches(ps) for c, ps in by_column.items()):
            return []
        bucket_sets = [self._possible_buckets(i, by_column) for i in range(len(self.partition_schema.hash_dimensions))]
        window = self._range_window(by_column, key_range)
        if window is None:
            return []
        return [
            p
            for p in self.partitions
            if p.range.overlaps(window) and all(b in s for b, s in zip(p.hash_buckets, bucket_sets, strict=True))
        ]

    def _possible_buckets(self, dimension: int, by_column: Mapping[str, list[Predicate]]) -> set[int]:
        dim = self.partition_schema.hash_dimensions[dimension]
        choices = []
        for name in dim.columns:
            values = point_values(by_column.get(name, []))
            if values is None:
                return set(range(dim.num_buckets))
            choices.append(values)
        combos = 1
        for c in choices:
            combos *= len(c)
        if combos > MAX_PRUNING_COMBINATIONS:
            return set(range(dim.num_buckets))
        return {self.bucket(dimension, list(combo)) for combo in itertools.product(*choices)}

    def _range_window(self, by_column: Mapping[str, list[Predicate]], key_range: KeyRange | None) -> RangeBounds | None:
        """The interval of encoded range keys that matching rows can have, or None if empty."""
        window = window_from_predicates(self._range_types, self.partition_schema.range_columns, by_column)
        if window is None:
            return None
        if key_range is not None and self._range_is_key_prefix():
            window = intersect(window, self._window_from_key_range(key_range))
        return window

    def _range_is_key_prefix(self) -> bool:
        cols = self.partition_schema.range_columns
        return bool(cols) and list(cols) == self.schema.key_names[: len(cols)]

    def _window_from_key_range(self, key_range: KeyRange) -> RangeBounds:
        n = len(self.partition_schema.range_columns)
        # Keys >= lower have a range prefix >= lower's prefix; keys < upper have one <= upper's.
        lo = b"" if key_range.lower is None else encode_key(self._range_types, key_range.lower[:n])
        hi = b"" if key_range.upper is None else encode_key(self._range_types, key_range.upper[:n]) + b"\x00"
        return RangeBounds(lo, hi)

    def to_json(self) -> bytes:
        d = {
            "schema": self.schema.to_dict(),
            "partition_schema": self.partition_schema.to_dict(),
            "ranges": [[r.lower.hex(), r.upper.hex()] for r in self.ranges],
        }
        return json.dumps(d, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Partitioner:
        try:
            d = json.loads(data)
            ranges = [RangeBounds(bytes.fromhex(lo), bytes.fromhex(hi)) for lo, hi in d["ranges"]]
            return cls(Schema.from_dict(d["schema"]), PartitionSchema.from_dict(d["partition_schema"]), ranges)
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed partitioning description: {e}") from None


def show_value(value: Any) -> str:
    """A key value as text: dates and times in ISO 8601, strings quoted."""
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, str | bytes):
        return repr(value)
    return str(value)


def _show_values(values: Sequence[Any] | None) -> str:
    return "(unbounded)" if values is None else f"({', '.join(show_value(v) for v in values)})"


def _sorted_disjoint(ranges: list[RangeBounds]) -> list[RangeBounds]:
    out = sorted(ranges, key=lambda r: r.lower)
    for a, b in itertools.pairwise(out):
        if a.overlaps(b):
            raise InvalidArgument(f"ranges overlap: [{a.lower.hex()}, {a.upper.hex()}) and [{b.lower.hex()}, ...)")
    for r in out:
        if r.upper and r.lower >= r.upper:
            raise InvalidArgument(f"empty range [{r.lower.hex()}, {r.upper.hex()})")
    return out
