"""AlterTable planning: renames, columns, ranges; bad steps are refused and change nothing."""

from __future__ import annotations

import json

import pytest

from nyala.catalog import CatalogState, TableInfo, plan_alter
from nyala.errors import InvalidArgument
from nyala.proto import master_pb2 as mpb

from .helpers import created, range_step

STEP = mpb.AlterTableStepPB


def table_in(state: CatalogState) -> TableInfo:
    table_id = created(state)
    info = state.table(table_id)
    assert info is not None
    return info


def alter(*steps: mpb.AlterTableStepPB, name: str = "") -> mpb.AlterTableRequestPB:
    return mpb.AlterTableRequestPB(new_table_name=name, steps=list(steps))


def add_column(**d: object) -> mpb.AlterTableStepPB:
    return STEP(add_column=STEP.AddColumn(column=json.dumps(d).encode()))


def test_rename_table_only() -> None:
    table = table_in(CatalogState())
    plan = plan_alter(table, alter(name="renamed"))
    assert plan.new_name == "renamed"
    assert plan.schema == table.schema
    assert not plan.added
    assert not plan.dropped


def test_add_drop_rename_columns_keep_ids_and_never_reuse_one() -> None:
    table = table_in(CatalogState())
    plan = plan_alter(
        table,
        alter(
            STEP(drop_column=STEP.DropColumn(name="score")),
            add_column(name="extra", type="int32", nullable=False, default=7),
            STEP(rename_column=STEP.RenameColumn(old_name="name", new_name="label")),
        ),
    )
    assert plan.schema.names == ["id", "ts", "label", "extra"]
    old_ids = {c.name: c.id for c in table.schema.columns}
    new_ids = {c.name: c.id for c in plan.schema.columns}
    assert new_ids["label"] == old_ids["name"]  # a rename keeps the id
    assert new_ids["extra"] > max(old_ids.values())  # the dropped column's id is not reused
    assert plan.schema.column("extra").default == 7
    assert plan.partitioner.schema == plan.schema


@pytest.mark.parametrize("column", ["id", "ts"])  # a hash and a range partitioning column, both key columns
def test_renaming_a_key_column_is_refused(column: str) -> None:
    # Tablet servers refuse any change to the key columns: committing one would strand every tablet.
    table = table_in(CatalogState())
    with pytest.raises(InvalidArgument, match=f"cannot rename primary key column '{column}'"):
        plan_alter(table, alter(STEP(rename_column=STEP.RenameColumn(old_name=column, new_name="renamed"))))


def test_add_and_drop_range_partitions_name_the_tablets_they_add_and_drop() -> None:
    table = table_in(CatalogState())
    plan = plan_alter(
        table, alter(range_step("add_range_partition", 200, 300), range_step("drop_range_partition", 0, 100))
    )
    assert len(plan.added) == 2
    assert len(plan.dropped) == 2
    assert all(p.range.lower == table.partitioner.encode_range_key([200]) for p in plan.added)
    assert all(p.range.lower == table.partitioner.encode_range_key([0]) for p in plan.dropped)
    assert len(plan.partitioner.partitions) == 4


def test_a_range_added_and_dropped_in_one_request_adds_nothing() -> None:
    table = table_in(CatalogState())
    plan = plan_alter(
        table, alter(range_step("add_range_partition", 200, 300), range_step("drop_range_partition", 200, 300))
    )
    assert not plan.added
    assert not plan.dropped


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ((), "has no steps and no new name"),
        ((STEP(),), "step 1 \\(empty step\\).*sets no operation"),
        ((STEP(drop_column=STEP.DropColumn(name="id")),), "cannot drop primary key column 'id'"),
        ((STEP(drop_column=STEP.DropColumn(name="nope")),), "no column 'nope'"),
        ((add_column(name="NAME", type="string"),), "column 'NAME' already exists"),
        ((add_column(name="x", type="int8", nullable=False),), "needs a default"),
        ((add_column(name="x", type="nosuchtype"),), "unknown type 'nosuchtype'"),
        ((STEP(add_column=STEP.AddColumn(column=b"{")),), "not valid JSON"),
        ((STEP(rename_column=STEP.RenameColumn(old_name="name", new_name="score")),), "duplicate column name"),
        ((STEP(rename_column=STEP.RenameColumn(old_name="zz", new_name="y")),), "no column 'zz'"),
        ((range_step("add_range_partition", 50, 150),), "overlaps"),
        (
            (range_step("drop_range_partition", 0, 50),),
            r"no range \[\(0\), \(50\)\); the ranges are \[\(0\), \(100\)\), \[\(100\), \(200\)\)$",
        ),
        ((range_step("add_range_partition", 300, 200),), "not below"),
        (
            (range_step("drop_range_partition", 0, 100), range_step("drop_range_partition", 100, 200)),
            "without any range",
        ),
        ((STEP(add_range_partition=STEP.RangePartition(lower_bound=b'["x"]')),), "not a valid int32"),
        ((STEP(add_range_partition=STEP.RangePartition(lower_bound=b"[1, 2]")),), "one value per range column"),
    ],
)
def test_bad_steps_are_refused_naming_the_step(steps: tuple[mpb.AlterTableStepPB, ...], message: str) -> None:
    table = table_in(CatalogState())
    with pytest.raises(InvalidArgument, match=message):
        plan_alter(table, alter(*steps))


def test_a_bad_later_step_leaves_the_table_unchanged() -> None:
    state = CatalogState()
    table = table_in(state)
    with pytest.raises(InvalidArgument, match="step 2"):
        plan_alter(table, alter(add_column(name="x", type="int8"), STEP(drop_column=STEP.DropColumn(name="ts"))))
    assert state.table(table.table_id) is table
    assert table.schema.names == ["id", "ts", "name", "score"]
    assert not table.schema.has_column("x")
