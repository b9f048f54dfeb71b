"""Building table schemas and partitioning from Python: the DDL helpers.

A schema is a :class:`nyala.schema.Schema`.  :func:`schema` builds one from ``(name, type)``
pairs or :class:`ColumnSchema` objects; :func:`schema_from_arrow` from a pyarrow schema.  In
both, the primary-key columns are moved to the front (Nyala, like Kudu, keeps them leading)
and made non-null.

:class:`Partitioning` is a small builder in the manner of Kudu's ``CreateTableOptions``:
zero or more hash levels (columns, buckets, seed), then optional range columns with explicit
``[lower, upper)`` range partitions.  Range columns without any range partition mean one
unbounded range; no hash levels and no range columns mean a single tablet.  As in Kudu, a
bound may be given as exclusive (lower) or inclusive (upper) with :class:`RangePartitionBound`;
the table keeps the equivalent ``[lower, upper)`` (the bound's next key).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from nyala.errors import InvalidArgument
from nyala.schema import ColumnSchema, HashDimension, Partitioner, PartitionSchema, RangeBounds, Schema

__all__ = ["Partitioning", "RangePartition", "RangePartitionBound", "RangeValues", "schema", "schema_from_arrow"]

#: A range bound: one value per range column (a bare value for a single column), or None for unbounded.
RangeValues = Sequence[Any] | Any | None

ColumnSpec = ColumnSchema | tuple[str, str] | tuple[str, str, bool]


def schema(columns: Sequence[ColumnSpec], primary_key: Sequence[str] | str) -> Schema:
    """A schema from columns given as ``ColumnSchema`` or ``(name, type[, nullable])`` tuples.

    ``schema([("id", "int64"), ("name", "string")], primary_key="id")``
    """
    built = []
    for spec in columns:
        if isinstance(spec, ColumnSchema):
            built.append(spec)
        elif isinstance(spec, tuple) and len(spec) in (2, 3):
            nullable = bool(spec[2]) if len(spec) == 3 else True
            built.append(ColumnSchema.of(spec[0], spec[1], nullable=nullable))
        else:
            raise InvalidArgument(f"a column is a ColumnSchema or a (name, type[, nullable]) tuple, not {spec!r}")
    return _with_key_first(built, _names(primary_key, "primary_key"))


def schema_from_arrow(arrow_schema: pa.Schema, primary_key: Sequence[str] | str) -> Schema:
    """A schema with the fields of ``arrow_schema`` and ``primary_key`` as its key."""
    keys = _names(primary_key, "primary_key")
    missing = [k for k in keys if arrow_schema.get_field_index(k) < 0]
    if missing:
        raise InvalidArgument(f"primary key columns {missing} are not in the Arrow schema {arrow_schema.names}")
    reordered = pa.schema([arrow_schema.field(k) for k in keys] + [f for f in arrow_schema if f.name not in keys])
    return Schema.from_arrow(reordered, keys)


def _with_key_first(columns: list[ColumnSchema], keys: list[str]) -> Schema:
    by_name = {c.name: c for c in columns}
    missing = [k for k in keys if k not in by_name]
    if missing:
        raise InvalidArgument(f"primary key columns {missing} are not among the columns {list(by_name)}")
    key_cols = [dataclasses.replace(by_name[k], nullable=False) for k in keys]
    return Schema.of(key_cols + [c for c in columns if c.name not in keys], keys)


def _names(value: Sequence[str] | str, what: str) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgument(f"{what} must name at least one column, got {value!r}")
    return names


class RangePartitionBound(enum.Enum):
    """Whether a range bound's own key is in the range (Kudu's ``RangePartitionBound``)."""

    INCLUSIVE_BOUND = "INCLUSIVE_BOUND"
    EXCLUSIVE_BOUND = "EXCLUSIVE_BOUND"


@dataclasses.dataclass(frozen=True, slots=True)
class RangePartition:
    """A range partition to add or drop; by default ``[lower, upper)``, None unbounded.

    ``RangePartition([1], [10], upper_bound_type=RangePartitionBound.INCLUSIVE_BOUND)`` is the
    range ``[1, 11)`` of an integer range column.
    """

    lower: RangeValues = None
    upper: RangeValues = None
    lower_bound_type: RangePartitionBound = RangePartitionBound.INCLUSIVE_BOUND
    upper_bound_type: RangePartitionBound = RangePartitionBound.EXCLUSIVE_BOUND

    @classmethod
    def of(cls, spec: RangePartition | tuple[RangeValues, RangeValues]) -> RangePartition:
        """A RangePartition from itself or a ``(lower, upper)`` pair."""
        if isinstance(spec, RangePartition):
            return spec
        if isinstance(spec, tuple) and len(spec) == 2:
            return cls(spec[0], spec[1])
        raise InvalidArgument(f"a range partition is a RangePartition or a (lower, upper) pair, not {spec!r}")

    def bounds(self, partitioner: Partitioner) -> RangeBounds:
        """The encoded ``[lower, upper)`` of this range for ``partitioner``'s range columns."""
        lower, upper = self.values(partitioner)
        return partitioner.bounds(lower, upper)

    def values(self, partitioner: Partitioner) -> tuple[list[Any] | None, list[Any] | None]:
        """The range as ``[inclusive lower, exclusive upper)`` values, checked against the types."""
        columns = partitioner.partition_schema.range_columns
        for bound_type in (self.lower_bound_type, self.upper_bound_type):
            if not isinstance(bound_type, RangePartitionBound):
                raise InvalidArgument(f"a bound type is a RangePartitionBound, not {bound_type!r}")
        return partitioner.half_open(
            _values(self.lower, columns),
            _values(self.upper, columns),
            lower_inclusive=self.lower_bound_type is RangePartitionBound.INCLUSIVE_BOUND,
            upper_inclusive=self.upper_bound_type is RangePartitionBound.INCLUSIVE_BOUND,
        )


class Partitioning:
    """How a new table is split into tablets: hash levels, range columns, range partitions.

    ``Partitioning().add_hash_partitions("id", 4).set_range_partition_columns("day")
    .add_range_partition(lower=[date(2024, 1, 1)], upper=[date(2025, 1, 1)])``
    """

    def __init__(self) -> None:
        self._hash: list[HashDimension] = []
        self._range_columns: tuple[str, ...] | None = None
        self._ranges: list[RangePartition] = []

    def add_hash_partitions(self, columns: Sequence[str] | str, num_buckets: int, seed: int = 0) -> Partitioning:
        """Add a hash level: rows go to ``murmur2_64(columns, seed) % num_buckets``."""
        self._hash.append(HashDimension(tuple(_names(columns, "hash columns")), num_buckets, seed))
        return self

    def set_range_partition_columns(self, columns: Sequence[str] | str) -> Partitioning:
        """Range-partition on these key columns (an empty list: no range partitioning)."""
        self._range_columns = () if not columns else tuple(_names(columns, "range columns"))
        return self

    def add_range_partition(
        self,
        lower: RangeValues = None,
        upper: RangeValues = None,
        lower_bound_type: RangePartitionBound = RangePartitionBound.INCLUSIVE_BOUND,
        upper_bound_type: RangePartitionBound = RangePartitionBound.EXCLUSIVE_BOUND,
    ) -> Partitioning:
        """Add the range ``[lower, upper)`` (or with the bound types given); None is unbounded.
        Ranges need not cover everything."""
        self._ranges.append(RangePartition(lower, upper, lower_bound_type, upper_bound_type))
        return self

    def build(self, table_schema: Schema) -> Partitioner:
        """The Partitioner for ``table_schema``; InvalidArgument names any mistake."""
        range_columns = self._range_columns or ()
        if self._ranges and not range_columns:
            raise InvalidArgument("add_range_partition() needs set_range_partition_columns() first")
        partition_schema = PartitionSchema(tuple(self._hash), range_columns)
        partition_schema.validate(table_schema)
        empty = Partitioner(table_schema, partition_schema, [RangeBounds()] if not range_columns else [])
        bounds = [r.bounds(empty) for r in self._ranges]
        if range_columns and not bounds:
            bounds = [RangeBounds()]
        return Partitioner(table_schema, partition_schema, bounds or [RangeBounds()])


def _values(bound: RangeValues, columns: tuple[str, ...]) -> list[Any] | None:
    if bound is None:
        return None
    if isinstance(bound, str | bytes) or not isinstance(bound, Sequence):
        return [bound]
    values = list(bound)
    if len(values) != len(columns):
        raise InvalidArgument(f"a range bound needs one value per range column {list(columns)}, got {bound!r}")
    return values
