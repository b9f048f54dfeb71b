"""Folding the tablet servers' replica metadata into one catalog write (``nyala master unsafe-rebuild``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nyala.catalog import state_from_entries
from nyala.errors import Corruption, InvalidArgument
from nyala.master.unsafe_rebuild import load_rebuild, rebuild_write, save_rebuild
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc.loop import run
from nyala.schema import HashDimension, Partitioner, PartitionSchema
from nyala.services import CREATE_TABLE, DELETE_TABLE
from nyala.testing.wait import wait_for_async

from .helpers import cluster, create_request, table_schema

Status = tpb.ListTabletsResponsePB.StatusPB
A, B, C, D = "a" * 32, "b" * 32, "c" * 32, "d" * 32


def replicas(table_id: str, name: str, *, version: int = 0, buckets: int = 2) -> list[Status]:
    """One replica report per tablet of a hash-partitioned table, on servers A, B, C."""
    schema = table_schema()
    ps = PartitionSchema((HashDimension(("id",), buckets),), ())
    out = []
    for k, partition in enumerate(Partitioner(schema, ps).partitions):
        config = consensus_pb2.RaftConfigPB(opid_index=1)
        for uuid in (A, B, C):
            config.peers.add(permanent_uuid=uuid, member_type=consensus_pb2.VOTER)
        out.append(
            Status(
                tablet_id=f"{table_id[:30]}{k:02d}",
                table_id=table_id,
                table_name=name,
                state=tpb.RUNNING,
                partition=json.dumps(partition.to_dict()).encode(),
                partition_schema=json.dumps(ps.to_dict()).encode(),
                schema=schema.to_json(),
                schema_version=version,
                committed_config=config,
            )
        )
    return out


def test_tables_and_tablets_come_back_from_the_most_advanced_replicas() -> None:
    t1 = replicas("1" * 32, "one")
    old_name = replicas("1" * 32, "one-before-rename")
    for s in old_name:
        s.schema_version = 0
    for s in t1:
        s.schema_version = 2
    # A newer config of the first tablet, seen by one replica: it wins over the older ones.
    moved = Status()
    moved.CopyFrom(t1[0])
    moved.committed_config.opid_index = 9
    del moved.committed_config.peers[2]
    moved.committed_config.peers.add(permanent_uuid=D, member_type=consensus_pb2.VOTER)
    gone = replicas("2" * 32, "deleted")
    for s in gone:
        s.state = tpb.TOMBSTONED
    blank = Status(tablet_id="e" * 32, table_id="3" * 32, table_name="no-metadata", state=tpb.RUNNING)
    rebuilt = rebuild_write([*old_name, *t1, moved, *gone, blank], now_us=5)
    assert rebuilt.tables == {"1" * 32: "one"}
    assert rebuilt.tablets == 2
    assert rebuilt.skipped == [f"tablet {'e' * 32}: no metadata or config in its report"]
    state = state_from_entries(rebuilt.write.mutations)
    table = state.table_by_name("one")
    assert table is not None
    assert (table.version, table.num_replicas) == (2, 3)
    tablets = state.tablets_of(table.table_id)
    assert [t.running for t in tablets] == [True, True]
    first = next(t for t in tablets if t.tablet_id == t1[0].tablet_id)
    assert first.replicas == (A, B, D)
    assert first.entry.committed_config.opid_index == 9
    assert len(table.partitioner.partitions) == 2


def test_two_tables_with_one_name_are_refused_and_a_bad_file_is_corruption(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="two tables share a name"):
        rebuild_write([*replicas("1" * 32, "same"), *replicas("2" * 32, "same")], now_us=0)
    assert load_rebuild(tmp_path) is None
    write = rebuild_write(replicas("1" * 32, "one"), now_us=0).write
    save_rebuild(tmp_path, write)
    assert load_rebuild(tmp_path) == write
    (tmp_path / "unsafe-rebuild-catalog.pb").write_bytes(b"\xff\xff not a protobuf")
    with pytest.raises(Corruption, match="is not a catalog write"):
        load_rebuild(tmp_path)


def test_replicas_whose_metadata_does_not_decode_are_corruption_naming_the_table() -> None:
    bad = replicas("1" * 32, "one")
    bad[0].partition_schema = b"{not json"
    with pytest.raises(Corruption, match="table 'one'"):
        rebuild_write(bad, now_us=0)


def test_a_master_applies_a_rebuild_only_into_a_catalog_without_tables(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "m", num_tservers=3) as c:
            master = c.master
            # A catalog with a table: the rebuild is not applied and its file stays.
            await c.call(CREATE_TABLE, create_request("existing"))
            save_rebuild(master.data_dir.path, rebuild_write(replicas("1" * 32, "one"), now_us=0).write)
            await master._apply_rebuild()
            assert [t.name for t in master.catalog_manager.leader().catalog.live_tables()] == ["existing"]
            assert load_rebuild(master.data_dir.path) is not None
            # Deleted tables are kept as tombstones: a catalog that ever had a table never takes it.
            await c.call(
                DELETE_TABLE, mpb.DeleteTableRequestPB(table=common_pb2.TableIdentifierPB(table_name="existing"))
            )
            await master._apply_rebuild()
            assert load_rebuild(master.data_dir.path) is not None

    run(main())


def test_a_fresh_master_applies_a_saved_rebuild_when_it_becomes_leader(tmp_path: Path) -> None:
    async def main() -> None:
        data = tmp_path / "m"
        save_rebuild(data, rebuild_write(replicas("1" * 32, "one"), now_us=0).write)
        async with cluster(data, num_tservers=3) as c:
            await wait_for_async(
                lambda: [t.name for t in c.master.catalog_manager.leader().catalog.live_tables()] == ["one"],
                what="the rebuilt table",
            )
            assert load_rebuild(c.master.data_dir.path) is None
            assert (c.master.data_dir.path / "unsafe-rebuild-catalog.pb.applied").exists()

    run(main())
