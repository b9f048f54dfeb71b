"""Placement policies through the leader master's DDL (fake tablet servers in ``/default``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nyala import errors
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc.loop import run
from nyala.services import ALTER_TABLE, CREATE_TABLE, GET_TABLE_SCHEMA

from .helpers import Cluster, cluster, create_request

pytestmark = pytest.mark.timeout(60)

STEP = mpb.AlterTableStepPB


def catalog_size(c: Cluster) -> tuple[int, int, int]:
    view = c.master.catalog_manager.leader()
    replica = c.master.catalog_manager.replica
    assert replica is not None
    return sum(1 for _ in view.catalog.all_tables()), sum(1 for _ in view.catalog.all_tablets()), replica.applied_index


def pinned(name: str, *locations: str, leader: str = "") -> mpb.CreateTableRequestPB:
    request = create_request(name)
    request.placement.CopyFrom(mpb.PlacementPolicyPB(locations=list(locations), leader_location=leader))
    return request


def test_a_policy_the_live_servers_cannot_meet_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            before = catalog_size(c)
            with pytest.raises(errors.InvalidArgument, match=r"cannot be met: 0 live tablet server\(s\) in /asia"):
                await c.call(CREATE_TABLE, pinned("t", "/asia"))
            with pytest.raises(errors.InvalidArgument, match="must begin with '/'"):
                await c.call(CREATE_TABLE, pinned("t", "asia"))
            assert catalog_size(c) == before
            # Every fake tablet server is in /default: a table pinned there is created, and shows it.
            await c.call(CREATE_TABLE, pinned("t", "/default", leader="/default"))
            ident = common_pb2.TableIdentifierPB(table_name="t")
            schema = await c.call(GET_TABLE_SCHEMA, mpb.GetTableSchemaRequestPB(table=ident))
            assert list(schema.placement.locations) == ["/default"]
            assert schema.placement.leader_location == "/default"
            view = c.master.catalog_manager.leader()
            for tablet in view.catalog.all_tablets():
                assert len(tablet.replicas) == 3
            # A new policy is checked the same way; clearing one always works.
            moved = STEP(set_placement=STEP.SetPlacement(policy=mpb.PlacementPolicyPB(locations=["/asia"])))
            altered = catalog_size(c)
            with pytest.raises(errors.InvalidArgument, match="cannot be met"):
                await c.call(ALTER_TABLE, mpb.AlterTableRequestPB(table=ident, steps=[moved]))
            assert catalog_size(c) == altered
            cleared = STEP(set_placement=STEP.SetPlacement())
            await c.call(ALTER_TABLE, mpb.AlterTableRequestPB(table=ident, steps=[cleared]))
            schema = await c.call(GET_TABLE_SCHEMA, mpb.GetTableSchemaRequestPB(table=ident))
            assert schema.placement == mpb.PlacementPolicyPB()

    run(main())


def test_a_range_policy_names_an_existing_range(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            request = create_request("t")
            bounds = STEP.RangePartition(lower_bound=json.dumps([5]).encode(), upper_bound=json.dumps([6]).encode())
            request.range_placements.add(range=bounds, policy=mpb.PlacementPolicyPB(locations=["/default"]))
            with pytest.raises(errors.InvalidArgument, match=r"range placement 1: no range \[\(5\), \(6\)\)"):
                await c.call(CREATE_TABLE, request)

    run(main())


def test_too_few_servers_in_a_policy_right_after_a_master_starts_is_retriable(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=1, tserver_warm_up_ms=60_000) as c:
            request = pinned("t", "/default")
            request.num_replicas = 1
            await c.call(CREATE_TABLE, request)  # enough servers for this one
            with pytest.raises(errors.ServiceUnavailable, match="retry once they have heartbeated"):
                await c.call(CREATE_TABLE, pinned("u", "/elsewhere"))

    run(main())
