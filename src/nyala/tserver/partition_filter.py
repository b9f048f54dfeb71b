"""Which rows of a write belong to this tablet's partition.

A client maps rows to tablets with its own (possibly stale) view of the table's partitions;
the tablet checks.  A :class:`~nyala.schema.Partitioner` built with only this tablet's range
numbers every bucket combination of that range; a row belongs here when its index is this
partition's.  A tablet that covers the whole key space (no hash dimensions, unbounded range)
skips the work.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from nyala.errors import InvalidArgument
from nyala.schema import Partition, Partitioner, PartitionSchema, RangeBounds, Schema

__all__ = ["PartitionFilter"]


class PartitionFilter:
    """Finds the rows of a batch that fall outside one partition."""

    def __init__(self, schema: Schema, partition_schema: PartitionSchema, partition: Partition) -> None:
        if partition_schema.range_columns:
            ranges = [partition.range]
        elif partition.range != RangeBounds():
            raise InvalidArgument("a table without range columns has only unbounded partitions")
        else:
            ranges = []
        if len(partition.hash_buckets) != len(partition_schema.hash_dimensions):
            raise InvalidArgument(
                f"partition has {len(partition.hash_buckets)} hash buckets but the partition schema has "
                f"{len(partition_schema.hash_dimensions)} hash dimensions"
            )
        self._partitioner = Partitioner(schema, partition_schema, ranges)
        try:
            self._index = self._partitioner.partitions.index(partition)
        except ValueError:
            raise InvalidArgument(
                f"partition {partition.to_dict()} does not exist in partition schema {partition_schema.to_dict()}"
            ) from None
        self.covers_everything = not partition_schema.hash_dimensions and partition.range == RangeBounds()

    def rows_outside(self, keys: pa.Table) -> list[int]:
        """Positions of the rows of ``keys`` (at least the key columns) that belong elsewhere."""
        if self.covers_everything or keys.num_rows == 0:
            return []
        mine = self._index
        outside: list[int] = np.flatnonzero(self._partitioner.partition_indices(keys) != mine).tolist()
        return outside
