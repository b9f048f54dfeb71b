"""Table operations on the leader: clear errors for bad input that change nothing, alter, lookups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nyala import errors
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc.loop import run
from nyala.schema import Schema
from nyala.services import (
    ALTER_TABLE,
    CREATE_TABLE,
    DELETE_TABLE,
    GET_TABLE_LOCATIONS,
    GET_TABLE_SCHEMA,
    GET_TABLET_LOCATIONS,
    IS_CREATE_TABLE_DONE,
    LIST_TABLES,
)
from nyala.testing.wait import wait_for_async

from .helpers import Cluster, cluster, create_request, range_step

pytestmark = pytest.mark.timeout(60)

STEP = mpb.AlterTableStepPB


def ident(name: str = "t") -> common_pb2.TableIdentifierPB:
    return common_pb2.TableIdentifierPB(table_name=name)


def catalog_size(c: Cluster) -> tuple[int, int, int]:
    """(tables, tablets, applied index): what a refused request must leave unchanged."""
    view = c.master.catalog_manager.leader()
    replica = c.master.catalog_manager.replica
    assert replica is not None
    return sum(1 for _ in view.catalog.all_tables()), sum(1 for _ in view.catalog.all_tablets()), replica.applied_index


def test_bad_create_requests_get_clear_errors_and_change_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            await c.call(CREATE_TABLE, create_request("t"))
            before = catalog_size(c)
            bad_schema = create_request("u")
            bad_schema.schema = b"{"
            nullable_key = create_request("u")
            nullable_key.schema = nullable_key.schema.replace(
                b'"name":"id","nullable":false', b'"name":"id","nullable":true'
            )
            cases: list[tuple[mpb.CreateTableRequestPB, type[errors.NyalaError], str]] = [
                (create_request("t"), errors.AlreadyPresent, "table 't' already exists"),
                (bad_schema, errors.InvalidArgument, "schema is not valid JSON"),
                (nullable_key, errors.InvalidArgument, "primary key column 'id' must not be nullable"),
                (
                    create_request("u", rf=2),
                    errors.InvalidArgument,
                    "replication factor 2: the replication factor must be odd",
                ),
                (create_request("u", rf=5), errors.InvalidArgument, "replication factor 5; 3 tablet servers are alive"),
                (
                    create_request("u", rf=3, buckets=61),
                    errors.InvalidArgument,
                    "over the maximum permitted at creation time",
                ),
                (create_request(""), errors.InvalidArgument, "table name must not be empty"),
            ]
            for request, error, message in cases:
                with pytest.raises(error, match=message):
                    await c.call(CREATE_TABLE, request)
            assert catalog_size(c) == before

    run(main())


def test_lookups_of_unknown_tables_are_not_found_naming_the_table(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=1) as c:
            for method, request in [
                (GET_TABLE_SCHEMA, mpb.GetTableSchemaRequestPB(table=ident("nope"))),
                (GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("nope"))),
                (IS_CREATE_TABLE_DONE, mpb.IsCreateTableDoneRequestPB(table=ident("nope"))),
                (DELETE_TABLE, mpb.DeleteTableRequestPB(table=ident("nope"))),
                (ALTER_TABLE, mpb.AlterTableRequestPB(table=ident("nope"), new_table_name="x")),
            ]:
                with pytest.raises(errors.NotFound, match="table 'nope' not found"):
                    await c.call(method, request)  # type: ignore[arg-type]
            locations = await c.call(GET_TABLET_LOCATIONS, mpb.GetTabletLocationsRequestPB(tablet_ids=["x" * 32]))
            assert [e.tablet_id for e in locations.errors] == ["x" * 32]
            assert not locations.tablet_locations

    run(main())


def test_list_tables_schema_and_tablet_locations(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            t1 = (await c.call(CREATE_TABLE, create_request("orders", buckets=2))).table_id
            await c.call(CREATE_TABLE, create_request("users", buckets=3, rf=1))
            listed = await c.call(LIST_TABLES, mpb.ListTablesRequestPB())
            assert [(t.name, t.num_tablets, t.num_replicas) for t in listed.tables] == [
                ("orders", 2, 3),
                ("users", 3, 1),
            ]
            only = await c.call(LIST_TABLES, mpb.ListTablesRequestPB(name_filter="ord"))
            assert [t.id for t in only.tables] == [t1]
            schema = await c.call(
                GET_TABLE_SCHEMA, mpb.GetTableSchemaRequestPB(table=common_pb2.TableIdentifierPB(table_id=t1))
            )
            assert schema.table_name == "orders"
            assert Schema.from_json(schema.schema).names == ["id", "ts", "v"]
            assert (schema.schema_version, schema.num_replicas, schema.create_table_done) == (0, 3, True)
            view = c.master.catalog_manager.leader()
            ids = [t.tablet_id for t in view.catalog.tablets_of(t1)]
            locations = await c.call(GET_TABLET_LOCATIONS, mpb.GetTabletLocationsRequestPB(tablet_ids=ids))
            assert [loc.tablet_id for loc in locations.tablet_locations] == ids
            assert all(len(loc.replicas) == 3 for loc in locations.tablet_locations)
            assert {i.permanent_uuid for i in locations.ts_infos} == {t.uuid for t in c.tservers}
            # A partition-key range picks the overlapping tablets only; max_returned_locations caps it.
            first = await c.call(
                GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("orders"), max_returned_locations=1)
            )
            assert [loc.tablet_id for loc in first.tablet_locations] == ids[:1]
            second_start = view.catalog.tablets_of(t1)[1].partition.partition_key_start
            tail = await c.call(
                GET_TABLE_LOCATIONS,
                mpb.GetTableLocationsRequestPB(table=ident("orders"), partition_key_start=second_start),
            )
            assert [loc.tablet_id for loc in tail.tablet_locations] == ids[1:]
            with pytest.raises(errors.InvalidArgument, match="is empty"):
                await c.call(
                    GET_TABLE_LOCATIONS,
                    mpb.GetTableLocationsRequestPB(
                        table=ident("orders"), partition_key_start=b"b", partition_key_end=b"a"
                    ),
                )

    run(main())


def test_alter_table_columns_sends_alter_schema_to_leaders_and_waits_for_the_new_version(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            table_id = (await c.call(CREATE_TABLE, create_request("t", buckets=2))).table_id
            add = STEP(
                add_column=STEP.AddColumn(
                    column=json.dumps({"name": "extra", "type": "int32", "nullable": True}).encode()
                )
            )
            request = mpb.AlterTableRequestPB(
                table=ident(),
                new_table_name="t2",
                steps=[add, STEP(rename_column=STEP.RenameColumn(old_name="v", new_name="value"))],
                wait=True,
            )
            response = await c.call(ALTER_TABLE, request)
            assert response.schema_version == 1
            schema = await c.call(GET_TABLE_SCHEMA, mpb.GetTableSchemaRequestPB(table=ident("t2")))
            assert Schema.from_json(schema.schema).names == ["id", "ts", "value", "extra"]
            assert schema.table_id == table_id
            # Every tablet's leader (the first replica) got the new schema and version; followers did not.
            view = c.master.catalog_manager.leader()
            for tablet in view.catalog.tablets_of(table_id):
                leader = next(ts for ts in c.tservers if ts.uuid == tablet.replicas[0])
                alters = [
                    r
                    for r in leader.calls_of("alter")
                    if isinstance(r, tpb.AlterSchemaRequestPB) and r.tablet_id == tablet.tablet_id
                ]
                assert [a.schema_version for a in alters] == [1]
                assert Schema.from_json(alters[0].schema).names == ["id", "ts", "value", "extra"]
                assert leader.tablets[tablet.tablet_id].schema_version == 1
            with pytest.raises(errors.NotFound, match="'t' not found"):
                await c.call(GET_TABLE_SCHEMA, mpb.GetTableSchemaRequestPB(table=ident("t")))

    run(main())


def test_bad_alter_requests_get_clear_errors_and_change_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            await c.call(CREATE_TABLE, create_request("t"))
            await c.call(CREATE_TABLE, create_request("other"))
            before = catalog_size(c)
            cases: list[tuple[mpb.AlterTableRequestPB, type[errors.NyalaError], str]] = [
                (
                    mpb.AlterTableRequestPB(table=ident(), new_table_name="other"),
                    errors.AlreadyPresent,
                    "'other' already exists",
                ),
                (mpb.AlterTableRequestPB(table=ident()), errors.InvalidArgument, "no steps"),
                (
                    mpb.AlterTableRequestPB(table=ident(), steps=[STEP(drop_column=STEP.DropColumn(name="id"))]),
                    errors.InvalidArgument,
                    "cannot drop primary key column 'id'",
                ),
                (
                    mpb.AlterTableRequestPB(table=ident(), steps=[range_step("add_range_partition", 50, 150)]),
                    errors.InvalidArgument,
                    "overlaps",
                ),
            ]
            for request, error, message in cases:
                with pytest.raises(error, match=message):
                    await c.call(ALTER_TABLE, request)
            assert catalog_size(c) == before

    run(main())


def test_add_and_drop_range_partitions_create_and_delete_tablets(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            table_id = (await c.call(CREATE_TABLE, create_request("t", buckets=2, ranges=((0, 100),)))).table_id
            view = c.master.catalog_manager.leader()
            old = {t.tablet_id for t in view.catalog.tablets_of(table_id)}
            request = mpb.AlterTableRequestPB(
                table=ident(),
                steps=[range_step("add_range_partition", 100, 200), range_step("drop_range_partition", 0, 100)],
                wait=True,
            )
            assert (await c.call(ALTER_TABLE, request)).schema_version == 1
            live = view.catalog.tablets_of(table_id)
            assert len(live) == 2
            assert not old & {t.tablet_id for t in live}
            assert all(t.running for t in live)
            assert all(view.catalog.tablet(t).dead for t in old)  # type: ignore[union-attr]
            deleted = {
                r.tablet_id
                for ts in c.tservers
                for r in ts.calls_of("delete")
                if isinstance(r, tpb.DeleteTabletRequestPB)
            }

            def deleted_everywhere() -> bool:
                calls = [r for ts in c.tservers for r in ts.calls_of("delete")]
                return {r.tablet_id for r in calls if isinstance(r, tpb.DeleteTabletRequestPB)} == old

            await wait_for_async(deleted_everywhere, what="DeleteTablet of the dropped range")
            assert deleted <= old

    run(main())


def test_too_few_tablet_servers_right_after_a_master_starts_is_retriable(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=1, tserver_warm_up_ms=60_000) as c:
            with pytest.raises(errors.ServiceUnavailable, match="only 1 tablet servers have registered"):
                await c.call(CREATE_TABLE, create_request("t", rf=3))
            await c.call(CREATE_TABLE, create_request("t", rf=1))  # enough servers for this one

    run(main())
