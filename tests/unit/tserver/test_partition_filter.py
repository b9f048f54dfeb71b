"""A tablet finds the rows of a write that belong to another partition."""

from __future__ import annotations

import pyarrow as pa
import pytest

from nyala.errors import InvalidArgument
from nyala.schema import ColumnSchema, HashDimension, Partition, Partitioner, PartitionSchema, RangeBounds, Schema
from nyala.tserver.partition_filter import PartitionFilter

SCHEMA = Schema.of(
    [ColumnSchema.of("h", "int64", nullable=False), ColumnSchema.of("r", "string", nullable=False)], ["h", "r"]
)
HASHED_AND_RANGED = PartitionSchema((HashDimension(("h",), 3),), ("r",))


def partitioner() -> Partitioner:
    base = Partitioner(SCHEMA, HASHED_AND_RANGED)
    return Partitioner(SCHEMA, HASHED_AND_RANGED, [base.bounds(None, ["m"]), base.bounds(["m"], None)])


def test_each_row_is_inside_exactly_the_partition_the_partitioner_picks() -> None:
    table = pa.table({"h": pa.array(range(60), pa.int64()), "r": [chr(ord("a") + i % 26) for i in range(60)]})
    p = partitioner()
    expected = [p.partitions[i] for i in p.partition_indices(table)]
    for partition in p.partitions:
        outside = set(PartitionFilter(SCHEMA, HASHED_AND_RANGED, partition).rows_outside(table))
        assert outside == {i for i, owner in enumerate(expected) if owner != partition}


def test_rows_outside_every_range_are_outside() -> None:
    base = Partitioner(SCHEMA, PartitionSchema((), ("r",)))
    bounds = base.bounds(["c"], ["f"])
    partition = Partition.make((), bounds)
    table = pa.table({"h": pa.array([1, 2, 3], pa.int64()), "r": ["a", "d", "z"]})
    assert PartitionFilter(SCHEMA, PartitionSchema((), ("r",)), partition).rows_outside(table) == [0, 2]


def test_a_tablet_covering_everything_checks_nothing() -> None:
    partition = Partitioner(SCHEMA, PartitionSchema()).partitions[0]
    check = PartitionFilter(SCHEMA, PartitionSchema(), partition)
    assert check.covers_everything
    assert check.rows_outside(pa.table({"h": pa.array([1], pa.int64()), "r": ["x"]})) == []


@pytest.mark.parametrize(
    ("partition", "message"),
    [
        (Partition.make((0,), RangeBounds()), "hash buckets"),
        (Partition.make((7, 0), RangeBounds()), "does not exist"),
    ],
)
def test_partitions_that_do_not_fit_the_schema_are_refused(partition: Partition, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        PartitionFilter(SCHEMA, PartitionSchema((HashDimension(("h",), 3), HashDimension(("r",), 2))), partition)
