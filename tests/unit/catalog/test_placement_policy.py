"""Placement policies in the catalog: set at creation, changed by AlterTable, stored, decoded."""

from __future__ import annotations

import json

import pytest

from nyala.catalog import (
    CatalogState,
    NewTablet,
    TableInfo,
    alter_table_write,
    create_table_write,
    plan_alter,
    validate_create_table,
)
from nyala.errors import InvalidArgument
from nyala.placement import PlacementConstraint
from nyala.proto import master_pb2 as mpb

from .helpers import OPTIONS, create_request, range_step, servers

STEP = mpb.AlterTableStepPB
EU = mpb.PlacementPolicyPB(locations=["/eu"], leader_location="/eu/dc1")


def range_pb(lo: int, hi: int) -> STEP.RangePartition:
    return STEP.RangePartition(lower_bound=json.dumps([lo]).encode(), upper_bound=json.dumps([hi]).encode())


def create(request: mpb.CreateTableRequestPB, table_id: str = "a" * 32) -> TableInfo:
    new = validate_create_table(request, 3, OPTIONS)
    tablets = [NewTablet(f"{table_id[:24]}{i:08x}", p, servers()) for i, p in enumerate(new.partitioner.partitions)]
    state = CatalogState()
    state.apply(create_table_write(table_id, new, tablets, now_us=1))
    table = state.table(table_id)
    assert table is not None
    return table


def test_create_stores_the_table_and_range_policies() -> None:
    request = create_request()
    request.placement.CopyFrom(EU)
    request.range_placements.add(range=range_pb(100, 200), policy=mpb.PlacementPolicyPB(locations=["/us"]))
    table = create(request)
    assert table.placement.table == PlacementConstraint(("/eu",), "/eu/dc1")
    first, second = table.partitioner.ranges
    assert table.placement.for_range(first) == PlacementConstraint(("/eu",), "/eu/dc1")
    assert table.placement.for_range(second) == PlacementConstraint(("/us",))
    # Decoding the stored entry again (a master restart or a new leader) gives the same policies.
    again = TableInfo.of(table.table_id, mpb.SysTablesEntryPB.FromString(table.entry.SerializeToString()))
    assert again.placement == table.placement


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (mpb.PlacementPolicyPB(locations=["eu"]), "must begin with '/'"),
        (mpb.PlacementPolicyPB(locations=["/eu", "/eu/r1"]), "lies inside /eu"),
        (mpb.PlacementPolicyPB(locations=["/eu"], leader_location="/us"), "outside the table's locations"),
        (mpb.PlacementPolicyPB(leader_location="us"), "leader location"),
    ],
)
def test_create_refuses_a_bad_policy(policy: mpb.PlacementPolicyPB, message: str) -> None:
    request = create_request()
    request.placement.CopyFrom(policy)
    with pytest.raises(InvalidArgument, match=message):
        validate_create_table(request, 3, OPTIONS)


def test_create_refuses_a_range_policy_for_a_range_it_does_not_have() -> None:
    request = create_request()
    request.range_placements.add(range=range_pb(0, 50), policy=EU)
    with pytest.raises(InvalidArgument, match=r"range placement 1: no range \[\(0\), \(50\)\)"):
        validate_create_table(request, 3, OPTIONS)
    request = create_request()
    request.range_placements.add(policy=EU)
    with pytest.raises(InvalidArgument, match="names no range"):
        validate_create_table(request, 3, OPTIONS)


def test_alter_sets_clears_and_drops_policies() -> None:
    table = create(create_request())
    assert table.placement.empty
    set_table = STEP(set_placement=STEP.SetPlacement(policy=EU))
    set_range = STEP(
        set_placement=STEP.SetPlacement(policy=mpb.PlacementPolicyPB(locations=["/us"]), range=range_pb(0, 100))
    )
    plan = plan_alter(table, mpb.AlterTableRequestPB(steps=[set_table, set_range]))
    write = alter_table_write(table, plan, [], [])
    state = CatalogState()
    state.apply(create_table_write(table.table_id, validate_create_table(create_request(), 3, OPTIONS), [], now_us=1))
    state.apply(write)
    altered = state.table(table.table_id)
    assert altered is not None
    first, second = altered.partitioner.ranges
    assert altered.placement.for_range(first) == PlacementConstraint(("/us",))
    assert altered.placement.for_range(second) == PlacementConstraint(("/eu",), "/eu/dc1")
    # Dropping the range drops its policy; clearing the table's leaves none.
    clear = STEP(set_placement=STEP.SetPlacement())
    plan = plan_alter(altered, mpb.AlterTableRequestPB(steps=[range_step("drop_range_partition", 0, 100), clear]))
    assert plan.placement.empty


def test_alter_refuses_a_policy_for_an_unknown_range() -> None:
    table = create(create_request())
    step = STEP(set_placement=STEP.SetPlacement(policy=EU, range=range_pb(5, 6)))
    with pytest.raises(InvalidArgument, match=r"alter step 1 \(set placement\).*no range"):
        plan_alter(table, mpb.AlterTableRequestPB(steps=[step]))
