"""Planning an AlterTable request: the new name, schema and partitioner, and the tablets it adds and drops.

Steps apply in order to a working copy; the first bad step raises InvalidArgument naming it
(and its position) and nothing changes.  Column ids are never reused (the schema carries its
next_column_id, which only grows), even for a column added after a drop, so tablet servers
(which diff schemas by column id) see "drop b, add c" rather than "rename b to c".  Primary key
columns (which include every partitioning column) can be neither dropped nor renamed: a tablet
server's store keeps its key columns fixed and refuses a schema that changes them, so a key
change committed here would leave every tablet unable to reach the new schema version.  Range
bounds arrive as JSON lists of the range columns' values in the form ``ColumnType.to_json`` writes.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from nyala.catalog.entries import TableInfo
from nyala.catalog.placement_policy import NO_PLACEMENT, TablePlacement, constraint_of, existing_range, range_bounds_of
from nyala.catalog.validate import check_table_name
from nyala.errors import InvalidArgument, NotFound
from nyala.proto import master_pb2 as mpb
from nyala.schema import ColumnSchema, Partition, Partitioner, PartitionSchema, RangeBounds, Schema

__all__ = ["AlterPlan", "plan_alter"]


@dataclasses.dataclass(frozen=True)
class AlterPlan:
    """What an AlterTable request changes."""

    new_name: str | None
    schema: Schema
    partitioner: Partitioner
    added: tuple[Partition, ...]  # partitions of added ranges: new tablets
    dropped: tuple[Partition, ...]  # partitions of dropped ranges: their tablets get deleted
    placement: TablePlacement = NO_PLACEMENT  # the table's placement policies after the alter


@dataclasses.dataclass
class _Work:
    schema: Schema
    partition_schema: PartitionSchema
    ranges: list[RangeBounds]
    placement: TablePlacement
    added_ranges: list[RangeBounds] = dataclasses.field(default_factory=list)
    dropped_ranges: list[RangeBounds] = dataclasses.field(default_factory=list)

    def partitioner(self) -> Partitioner:
        return Partitioner(self.schema, self.partition_schema, self.ranges)


def plan_alter(table: TableInfo, request: mpb.AlterTableRequestPB) -> AlterPlan:
    """Apply the request's steps to a copy of ``table``; the caller checks name uniqueness."""
    new_name = request.new_table_name or None
    if new_name is not None:
        check_table_name(new_name)
        if new_name == table.name:
            new_name = None
    if not request.steps and new_name is None and not request.new_table_name:
        raise InvalidArgument(f"AlterTable of table {table.name!r} has no steps and no new name")
    original = table.partitioner
    work = _Work(table.schema, original.partition_schema, list(original.ranges), table.placement)
    for position, step in enumerate(request.steps, 1):
        try:
            _apply_step(work, step)
        except (InvalidArgument, NotFound) as e:
            raise InvalidArgument(f"alter step {position} ({_describe(step)}) of table {table.name!r}: {e}") from None
    partitioner = work.partitioner()
    if not partitioner.partitions:
        raise InvalidArgument(f"AlterTable would leave table {table.name!r} without any range partition")
    added = tuple(p for r in work.added_ranges for p in partitioner.partitions_of_range(r))
    dropped = tuple(p for r in work.dropped_ranges for p in original.partitions_of_range(r))
    placement = work.placement.without_ranges([r for r in work.placement.ranges if r not in work.ranges])
    return AlterPlan(new_name, work.schema, partitioner, added, dropped, placement)


def _describe(step: mpb.AlterTableStepPB) -> str:
    kind = step.WhichOneof("step")
    return kind.replace("_", " ") if kind else "empty step"


def _apply_step(work: _Work, step: mpb.AlterTableStepPB) -> None:
    kind = step.WhichOneof("step")
    if kind == "add_column":
        _add_column(work, step.add_column.column)
    elif kind == "drop_column":
        _drop_column(work, step.drop_column.name)
    elif kind == "rename_column":
        _rename_column(work, step.rename_column.old_name, step.rename_column.new_name)
    elif kind == "add_range_partition":
        _add_range(work, step.add_range_partition)
    elif kind == "drop_range_partition":
        _drop_range(work, step.drop_range_partition)
    elif kind == "set_placement":
        _set_placement(work, step.set_placement)
    else:
        raise InvalidArgument("the step sets no operation")


def _add_column(work: _Work, column_json: bytes) -> None:
    try:
        d = json.loads(column_json)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"the new column is not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise InvalidArgument("the new column must be a JSON object (ColumnSchema.to_dict())")
    column = ColumnSchema.from_dict({"nullable": True, **d, "id": -1}).validated()
    if column.name.lower() in {n.lower() for n in work.schema.names}:
        raise InvalidArgument(f"column {column.name!r} already exists")
    if not column.nullable and column.default is None:
        raise InvalidArgument(f"new non-null column {column.name!r} needs a default for existing rows")
    work.schema = work.schema.add_column(column)  # takes the schema's next_column_id: never reused


def _drop_column(work: _Work, name: str) -> None:
    if not work.schema.has_column(name):
        raise InvalidArgument(f"no column {name!r}; columns are {work.schema.names}")
    if work.schema.is_key(name):
        raise InvalidArgument(f"cannot drop primary key column {name!r}")
    work.schema = work.schema.drop_column(name)


def _rename_column(work: _Work, old: str, new: str) -> None:
    if not work.schema.has_column(old):
        raise InvalidArgument(f"no column {old!r}; columns are {work.schema.names}")
    if not new:
        raise InvalidArgument(f"new name of column {old!r} is empty")
    if work.schema.is_key(old):
        # The partition schema names key columns only, so it never needs renaming here.
        raise InvalidArgument(f"cannot rename primary key column {old!r}: key columns cannot change")
    work.schema = work.schema.rename_column(old, new)


def _bounds(work: _Work, step: mpb.AlterTableStepPB.RangePartition) -> RangeBounds:
    if not work.partition_schema.range_columns:
        raise InvalidArgument("the table has no range partition columns")
    partitioner = work.partitioner()
    lower = _bound_values(work, step.lower_bound, "lower")
    upper = _bound_values(work, step.upper_bound, "upper")
    return partitioner.bounds(lower, upper)


def _bound_values(work: _Work, data: bytes, which: str) -> list[Any] | None:
    if not data:
        return None
    try:
        values = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"{which} bound is not valid JSON: {e}") from None
    columns = work.partition_schema.range_columns
    if not isinstance(values, list) or len(values) != len(columns):
        raise InvalidArgument(
            f"{which} bound must be a JSON list of one value per range column {list(columns)}, got {values!r}"
        )
    return [
        work.schema.column(c).type.from_json(v, f"{which} bound, column {c!r}")
        for c, v in zip(columns, values, strict=True)
    ]


def _set_placement(work: _Work, step: mpb.AlterTableStepPB.SetPlacement) -> None:
    constraint = constraint_of(step.policy)
    if step.HasField("range"):
        partitioner = work.partitioner()
        bounds = existing_range(partitioner, range_bounds_of(work.schema, partitioner, step.range))
        work.placement = work.placement.with_range(bounds, constraint)
    else:
        work.placement = work.placement.with_table(constraint)


def _add_range(work: _Work, step: mpb.AlterTableStepPB.RangePartition) -> None:
    bounds = _bounds(work, step)
    work.partitioner().add_range(bounds)  # raises when it overlaps an existing range
    work.ranges.append(bounds)
    work.added_ranges.append(bounds)


def _drop_range(work: _Work, step: mpb.AlterTableStepPB.RangePartition) -> None:
    bounds = _bounds(work, step)
    work.partitioner().drop_range(bounds)  # NotFound naming the table's ranges when there is no such range
    work.ranges.remove(bounds)
    if bounds in work.added_ranges:
        work.added_ranges.remove(bounds)  # added earlier in this request: it never existed
    else:
        work.dropped_ranges.append(bounds)
