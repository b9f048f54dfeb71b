"""Validation of CreateTable requests that needs no I/O: names, schema, partitioning, limits.

Each check raises InvalidArgument naming the problem and the offending value, before the
master changes anything.  The numbers that depend on the cluster (live tablet servers) are
passed in by the master.
"""

from __future__ import annotations

import dataclasses

from nyala.catalog.placement_policy import NO_PLACEMENT, TablePlacement, constraint_of, existing_range, range_bounds_of
from nyala.common.config import setting
from nyala.errors import InvalidArgument
from nyala.proto import master_pb2 as mpb
from nyala.schema import Partitioner, PartitionSchema, Schema

__all__ = [
    "MAX_ENTRY_VALUE_BYTES",
    "MAX_TABLE_NAME_LENGTH",
    "CatalogOptions",
    "NewTable",
    "check_entry_sizes",
    "check_num_replicas",
    "check_table_name",
    "check_tablet_count",
    "validate_create_table",
]

MAX_TABLE_NAME_LENGTH = 256  # Kudu's --max_identifier_length
# The sys catalog stores each entry as one binary cell of a tablet, whose row operations
# refuse cells over 64 KiB (RowOperationOptions.max_cell_size_bytes).
MAX_ENTRY_VALUE_BYTES = 64 << 10


@dataclasses.dataclass(frozen=True)
class CatalogOptions:
    """Limits the master applies to table creation and alteration (Kudu's flag names)."""

    default_num_replicas: int = setting(
        3, "Replication factor of a new table whose CreateTable request does not name one."
    )
    max_num_replicas: int = setting(
        5, "Largest replication factor a table may have (Kudu allows 7; Nyala supports 1, 3 and 5)."
    )
    allow_unsafe_replication_factor: bool = setting(
        False,
        "Allow even replication factors (2, 4).  An even factor tolerates no more failures than the odd "
        "factor below it, but RF 4 split evenly over two locations keeps every committed write in both, "
        "so the loss of one location loses no data (it does lose availability); Kudu's flag.",
        "unsafe",
    )
    max_create_tablets_per_ts: int = setting(
        60,
        "Largest number of tablet replicas one CreateTable (or one AlterTable adding ranges) may create "
        "per live tablet server.",
    )

    def __post_init__(self) -> None:
        if self.max_num_replicas < 1 or (self.max_num_replicas % 2 == 0 and not self.allow_unsafe_replication_factor):
            raise InvalidArgument(
                f"max_num_replicas must be odd and positive, got {self.max_num_replicas} "
                "(even values need allow_unsafe_replication_factor)"
            )
        if self.default_num_replicas % 2 == 0 and not self.allow_unsafe_replication_factor:
            raise InvalidArgument(
                f"default_num_replicas {self.default_num_replicas} is even; even replication factors need "
                "--allow-unsafe-replication-factor"
            )
        if self.default_num_replicas < 1 or self.default_num_replicas > self.max_num_replicas:
            raise InvalidArgument(
                f"default_num_replicas must be between 1 and max_num_replicas ({self.max_num_replicas}), "
                f"got {self.default_num_replicas}"
            )
        if self.max_create_tablets_per_ts < 1:
            raise InvalidArgument("max_create_tablets_per_ts must be positive")


@dataclasses.dataclass(frozen=True)
class NewTable:
    """A validated CreateTable request."""

    name: str
    schema: Schema
    partitioner: Partitioner
    num_replicas: int
    placement: TablePlacement = NO_PLACEMENT


def check_table_name(name: str) -> None:
    if not name:
        raise InvalidArgument("table name must not be empty")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_TABLE_NAME_LENGTH:
        raise InvalidArgument(f"table name {name[:40]!r}... is longer than {MAX_TABLE_NAME_LENGTH} bytes")
    if "\x00" in name:
        raise InvalidArgument(f"table name {name!r} contains a NUL character")
    if not name.isprintable():
        raise InvalidArgument(f"table name {name!r} contains non-printable characters")


def check_num_replicas(num_replicas: int, live_tservers: int, options: CatalogOptions) -> None:
    """Odd (even only with ``allow_unsafe_replication_factor``), within the limit, and no more than
    the live tablet servers (Kudu's wording)."""
    if num_replicas < 1:
        raise InvalidArgument(f"illegal replication factor {num_replicas}: it must be at least 1")
    if num_replicas % 2 == 0 and not options.allow_unsafe_replication_factor:
        raise InvalidArgument(
            f"illegal replication factor {num_replicas}: the replication factor must be odd (1, 3 or 5); "
            "even factors need the master's --allow-unsafe-replication-factor"
        )
    if num_replicas > options.max_num_replicas:
        raise InvalidArgument(f"illegal replication factor {num_replicas}: the maximum is {options.max_num_replicas}")
    if num_replicas > live_tservers:
        raise InvalidArgument(
            f"not enough live tablet servers to create a table with the requested replication factor "
            f"{num_replicas}; {live_tservers} tablet servers are alive"
        )


def check_tablet_count(num_tablets: int, num_replicas: int, live_tservers: int, options: CatalogOptions) -> None:
    """Kudu's --max_create_tablets_per_ts: replicas created at once per live tablet server."""
    limit = options.max_create_tablets_per_ts * live_tservers
    if num_tablets * num_replicas > limit:
        raise InvalidArgument(
            f"the requested number of tablet replicas ({num_tablets} tablets x {num_replicas} replicas = "
            f"{num_tablets * num_replicas}) is over the maximum permitted at creation time ({limit}: "
            f"{options.max_create_tablets_per_ts} per live tablet server x {live_tservers} live tablet servers)"
        )


def validate_create_table(request: mpb.CreateTableRequestPB, live_tservers: int, options: CatalogOptions) -> NewTable:
    """Everything about a CreateTable request that can be checked without the catalog."""
    check_table_name(request.name)
    schema = Schema.from_json(request.schema) if request.schema else _no_schema()
    if request.partitioner:
        partitioner = Partitioner.from_json(request.partitioner)
        if partitioner.schema != schema:
            raise InvalidArgument(
                f"the partitioner was built for schema {partitioner.schema!r}, not the table's schema {schema!r}"
            )
    else:
        partitioner = Partitioner(schema, PartitionSchema())
    if not partitioner.partitions:
        raise InvalidArgument("the table has range columns but no range partitions: add at least one range")
    num_replicas = request.num_replicas or options.default_num_replicas
    check_num_replicas(num_replicas, live_tservers, options)
    check_tablet_count(len(partitioner.partitions), num_replicas, live_tservers, options)
    return NewTable(request.name, schema, partitioner, num_replicas, _placement_of(request, schema, partitioner))


def _placement_of(request: mpb.CreateTableRequestPB, schema: Schema, partitioner: Partitioner) -> TablePlacement:
    """The table's and its ranges' placement policies, each validated."""
    placement = TablePlacement(constraint_of(request.placement))
    for position, item in enumerate(request.range_placements, 1):
        try:
            if not item.HasField("range"):
                raise InvalidArgument("it names no range")
            bounds = existing_range(partitioner, range_bounds_of(schema, partitioner, item.range))
            if bounds in placement.ranges:
                raise InvalidArgument(f"range {partitioner.show_range(bounds)} has a policy already")
            constraint = constraint_of(item.policy)
            if constraint.empty:
                raise InvalidArgument("its policy is empty")
        except InvalidArgument as e:
            raise InvalidArgument(f"range placement {position}: {e}") from None
        placement = placement.with_range(bounds, constraint)
    return placement


def _no_schema() -> Schema:
    raise InvalidArgument("a table needs a schema (Schema.to_json() in the schema field)")


def check_entry_sizes(write: mpb.CatalogWritePB) -> None:
    """Refuse a write with an entry the sys catalog cannot store (e.g. a table with huge ranges)."""
    for m in write.mutations:
        if len(m.value) > MAX_ENTRY_VALUE_BYTES:
            what = "table" if m.entry_type == mpb.TABLES_ENTRY else "tablet"
            raise InvalidArgument(
                f"the catalog entry of {what} {m.entry_id} would take {len(m.value)} bytes, over the limit of "
                f"{MAX_ENTRY_VALUE_BYTES} bytes (too many columns or range partitions)"
            )
