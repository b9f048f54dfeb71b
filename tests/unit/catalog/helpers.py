"""Schemas, partitioners and requests shared by the catalog tests."""

from __future__ import annotations

import json

from nyala.catalog import (
    CatalogOptions,
    CatalogState,
    NewTablet,
    create_table_write,
    validate_create_table,
)
from nyala.proto import master_pb2 as mpb
from nyala.schema import ColumnSchema, HashDimension, Partitioner, PartitionSchema, Schema

OPTIONS = CatalogOptions()


def schema() -> Schema:
    return Schema.of(
        [
            ColumnSchema.of("id", "int64", nullable=False),
            ColumnSchema.of("ts", "int32", nullable=False),
            ColumnSchema.of("name", "string"),
            ColumnSchema.of("score", "double"),
        ],
        ["id", "ts"],
    )


def partitioner(
    s: Schema | None = None, *, buckets: int = 2, ranges: list[tuple[int, int]] | None = None
) -> Partitioner:
    """``buckets`` hash buckets on id and int32 ranges on ts (default [0, 100) and [100, 200))."""
    s = s or schema()
    ps = PartitionSchema((HashDimension(("id",), buckets),), ("ts",))
    p = Partitioner(s, ps, [])
    bounds = [p.bounds([lo], [hi]) for lo, hi in (ranges if ranges is not None else [(0, 100), (100, 200)])]
    return Partitioner(s, ps, bounds)


def create_request(
    name: str = "t", *, num_replicas: int = 3, buckets: int = 2, ranges: list[tuple[int, int]] | None = None
) -> mpb.CreateTableRequestPB:
    s = schema()
    part = partitioner(s, buckets=buckets, ranges=ranges)
    return mpb.CreateTableRequestPB(
        name=name, schema=s.to_json(), partitioner=part.to_json(), num_replicas=num_replicas
    )


def servers(n: int = 3) -> tuple[str, ...]:
    return tuple(f"{i:032x}" for i in range(1, n + 1))


def created(state: CatalogState, name: str = "t", table_id: str = "a" * 32) -> str:
    """Create a table in ``state`` the way the master does; returns the table id."""
    new = validate_create_table(create_request(name), 3, OPTIONS)
    tablets = [NewTablet(f"{table_id[:24]}{i:08x}", p, servers()) for i, p in enumerate(new.partitioner.partitions)]
    state.apply(create_table_write(table_id, new, tablets, now_us=1))
    return table_id


def range_step(kind: str, lo: int | None, hi: int | None) -> mpb.AlterTableStepPB:
    rp = mpb.AlterTableStepPB.RangePartition(
        lower_bound=b"" if lo is None else json.dumps([lo]).encode(),
        upper_bound=b"" if hi is None else json.dumps([hi]).encode(),
    )
    step = mpb.AlterTableStepPB()
    getattr(step, kind).CopyFrom(rp)
    return step
