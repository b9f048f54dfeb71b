"""Tablet copies between two tablet servers in this process (real RPC on loopback): install,
refusals, a copy in progress, replacing a live replica, failures that leave nothing behind,
and what startup does with a copy a crash interrupted."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from nyala.consensus.core import HardState, RaftConfig, RaftOptions, Role
from nyala.consensus.runtime import ConsensusMetadata
from nyala.errors import AlreadyPresent, IllegalState, NotFound, ServiceUnavailable
from nyala.proto import common_pb2
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.schema import ColumnSchema, OpType, RowOperationOptions, Schema, make_row_operations
from nyala.services import GET_TABLET_SERVER_STATUS, START_TABLET_COPY
from nyala.storage import ScanSpec, StorageOptions
from nyala.testing.wait import wait_for_async
from nyala.tserver import TabletServer, TabletServerOptions
from nyala.tserver.metadata import META_FILE, DataState, TabletMetadata
from nyala.tserver.tablet import TabletReplica

from .conftest import SCHEMA, metadata

Body = Callable[[TabletServer, TabletServer, Messenger], Awaitable[None]]


def options(root: Path, name: str, **changes: Any) -> TabletServerOptions:
    return TabletServerOptions(
        fs_data_dir=str(root / name),
        rpc_bind_address="127.0.0.1:0",
        raft=RaftOptions(raft_tick_interval_ms=10, raft_heartbeat_interval_ms=50),
        storage=StorageOptions(storage_threads=1, flush_threshold_rows=200),
        tablet_copy_transfer_chunk_size_bytes=64 * 1024,
        **changes,
    )


async def two_servers(root: Path, body: Body, **dest_changes: Any) -> None:
    a = TabletServer(options(root, "a"))
    b = TabletServer(options(root, "b", **dest_changes))
    messenger = Messenger()
    await a.start()
    try:
        await b.start()
        try:
            await body(a, b, messenger)
        finally:
            await b.stop()
    finally:
        await a.stop()
        await messenger.close()


async def leading_tablet(server: TabletServer, tablet_id: str = "t1") -> TabletReplica:
    meta = replace(metadata(tablet_id), data_state=DataState.CREATING)
    tablet = await server.tablets.create(meta, RaftConfig.of_voters([server.uuid]))
    await wait_for_async(
        lambda: tablet.raft is not None and tablet.raft.role is Role.LEADER, what="a leader", timeout_s=10
    )
    return tablet


async def write(tablet: TabletReplica, ids: range, schema: Schema = SCHEMA, version: int = 0) -> None:
    rows = [{"id": i, "s": "x" * 200} for i in ids]
    ops = make_row_operations(schema, OpType.INSERT, rows)

    async def written() -> bool:
        await tablet.write(memoryview(ops), version, RowOperationOptions(), 1 << 22)
        return True

    # A fresh leader is CONFIGURING for a moment: ServiceUnavailable until its NO_OP commits.
    await wait_for_async(written, what="the write to be taken", timeout_s=10, retry_on=(ServiceUnavailable,))


def start(source: TabletServer, dest: TabletServer, term: int, **changes: Any) -> tcpb.StartTabletCopyRequestPB:
    request = tcpb.StartTabletCopyRequestPB(
        dest_uuid=dest.uuid,
        tablet_id="t1",
        copy_peer_uuid=source.uuid,
        copy_peer_addr=common_pb2.HostPortPB(host=source.address.host, port=source.address.port),
        caller_uuid=source.uuid,
        caller_term=term,
    )
    for field, value in changes.items():
        setattr(request, field, value)
    return request


async def settled(server: TabletServer, tablet_id: str = "t1", within_s: float = 30) -> TabletReplica | None:
    """The replica once no copy of it runs any more (None when the copy left nothing)."""
    await wait_for_async(
        lambda: tablet_id not in server.tablets.copies_in_progress(), what="the copy to end", timeout_s=within_s
    )
    try:
        return server.tablets.get(tablet_id)
    except NotFound:
        return None


def rows(tablet: TabletReplica) -> int:
    assert tablet.store is not None
    return int(tablet.store.scan(ScanSpec(projection=["id"])).read_all().num_rows)


def test_a_copy_brings_a_running_replica_with_the_sources_rows_schema_and_term(tmp_path: Path) -> None:
    async def body(a: TabletServer, b: TabletServer, messenger: Messenger) -> None:
        tablet = await leading_tablet(a)
        await write(tablet, range(500))
        wider = SCHEMA.add_column(ColumnSchema.of("extra", "int32"))
        await tablet.alter_schema(wider, 1)
        await write(tablet, range(500, 900), wider, 1)  # some rows only in the MemRowSet
        assert tablet.raft is not None
        await messenger.call(b.address, START_TABLET_COPY, start(a, b, tablet.raft.term), timeout=5)
        copied = await settled(b)
        assert copied is not None
        assert copied.state == tpb.RUNNING, copied.failure
        assert rows(copied) == 900
        assert (copied.meta.schema, copied.meta.schema_version, copied.meta.data_state) == (wider, 1, DataState.READY)
        assert copied.raft is not None
        assert copied.raft.applied_index == tablet.raft.applied_index
        cmeta = ConsensusMetadata.load(copied.directory)
        assert cmeta.hard_state.term == tablet.raft.term
        assert cmeta.hard_state.vote == ""
        assert cmeta.committed_config.peer_ids == (a.uuid,)
        assert copied.raft.role is Role.NON_PARTICIPANT  # not a member: Raft ignores it
        assert not (b.data_dir.path / "tablets" / "t1.copy-tmp").exists()
        status = await messenger.call(b.address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
        assert (status.tablet_copies_started, status.tablet_copies_completed, status.tablet_copies_failed) == (1, 1, 0)
        (outcome,) = status.tablet_copies  # what a tool that asked for the copy follows
        assert (outcome.tablet_id, outcome.source_uuid, outcome.state) == (
            "t1",
            a.uuid,
            tpb.TabletCopyStatusPB.COMPLETED,
        )
        assert outcome.total_bytes > 0
        assert outcome.error == ""
        assert status.tablet_copy_bytes_within_location > 0
        assert status.tablet_copy_bytes_across_locations == 0
        served = await messenger.call(a.address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
        assert served.tablet_copy_bytes_served == status.tablet_copy_bytes_within_location
        assert a.copy_sources.sessions() == []  # ended by the destination
        # A live replica is not replaced unless the leader says it cannot catch it up ...
        with pytest.raises(AlreadyPresent, match="already has a live replica here"):
            await messenger.call(b.address, START_TABLET_COPY, start(a, b, tablet.raft.term), timeout=5)
        # ... and not when replication can still catch it up.
        again = start(a, b, tablet.raft.term, replace_live_replica=True, leader_first_index=2)
        with pytest.raises(AlreadyPresent, match="replication can catch it up"):
            await messenger.call(b.address, START_TABLET_COPY, again, timeout=5)
        stale = start(a, b, tablet.raft.term - 1, replace_live_replica=True, leader_first_index=10**6)
        with pytest.raises(IllegalState, match="a newer leader exists"):
            await messenger.call(b.address, START_TABLET_COPY, stale, timeout=5)
        # A replica the leader can no longer catch up is tombstoned and copied again.
        await write(tablet, range(900, 1000), wider, 1)
        again = start(a, b, tablet.raft.term, replace_live_replica=True, leader_first_index=10**6)
        await messenger.call(b.address, START_TABLET_COPY, again, timeout=5)
        recopied = await settled(b)
        assert recopied is not None
        assert recopied is not copied
        assert recopied.state == tpb.RUNNING
        assert rows(recopied) == 1000
        assert copied.state == tpb.TOMBSTONED

    run(two_servers(tmp_path, body))


def test_a_tombstone_is_replaced_only_by_a_caller_of_its_term_or_later(tmp_path: Path) -> None:
    async def body(a: TabletServer, b: TabletServer, messenger: Messenger) -> None:
        tablet = await leading_tablet(a)
        await write(tablet, range(100))
        assert tablet.raft is not None
        term = tablet.raft.term
        stale_tombstone = replace(metadata("t1"), data_state=DataState.TOMBSTONED)
        directory = b.data_dir.path / "tablets" / "t1"
        directory.mkdir(parents=True)
        stale_tombstone.save(directory)
        # The tombstone's term is ahead of the caller's.
        ConsensusMetadata(HardState(term + 5, "zzz"), RaftConfig.of_voters([a.uuid])).save(directory)
        await b.stop()
        restarted = TabletServer(options(tmp_path, "b"))
        await restarted.start()
        try:
            assert restarted.tablets.get("t1").state == tpb.TOMBSTONED
            with pytest.raises(IllegalState, match=rf"in term {term}, but the replica here has seen term {term + 5}"):
                await messenger.call(restarted.address, START_TABLET_COPY, start(a, restarted, term), timeout=5)
            await messenger.call(restarted.address, START_TABLET_COPY, start(a, restarted, term + 5), timeout=5)
            copied = await settled(restarted)
            assert copied is not None
            assert copied.state == tpb.RUNNING
            assert rows(copied) == 100
            cmeta = ConsensusMetadata.load(directory)
            assert (cmeta.hard_state.term, cmeta.hard_state.vote) == (term + 5, "zzz")  # the local term and vote
        finally:
            await restarted.stop()

    run(two_servers(tmp_path, body))


def test_a_copy_in_progress_is_refused_again_and_a_delete_cancels_it(tmp_path: Path) -> None:
    async def body(a: TabletServer, b: TabletServer, messenger: Messenger) -> None:
        tablet = await leading_tablet(a)
        await write(tablet, range(2000))
        assert tablet.raft is not None
        request = start(a, b, tablet.raft.term)
        await messenger.call(b.address, START_TABLET_COPY, request, timeout=5)
        with pytest.raises(IllegalState, match="already in progress"):
            await messenger.call(b.address, START_TABLET_COPY, request, timeout=5)
        await wait_for_async(lambda: b.tablets.find("t1") is not None, what="the copied replica", timeout_s=10)
        copying = b.tablets.get("t1")
        assert copying.state == tpb.COPYING
        with pytest.raises(ServiceUnavailable, match="COPYING, not yet RUNNING"):
            copying.require_running()
        assert copying.raft is None
        with pytest.raises(NotFound):  # the cancelled copy left nothing (there was no tombstone)
            await b.tablets.delete("t1", tombstone=True, reason="test", cas_config_index=None)
        assert b.tablets.copies_in_progress() == []
        tablets = b.data_dir.path / "tablets"
        assert sorted(p.name for p in tablets.iterdir()) == []
        assert b.tablets.stores.tablet_ids_on_disk() == []
        assert b.tablets.copy_client is not None
        assert b.tablets.copy_client.counters.failed == 1
        # The destination ends its session.
        await wait_for_async(lambda: not a.copy_sources.sessions(), what="the session to end", timeout_s=10)

    run(two_servers(tmp_path, body, tablet_copy_throttler_bytes_per_sec=100_000))


def test_a_copy_that_fails_leaves_nothing_and_at_most_so_many_run_at_once(tmp_path: Path) -> None:
    async def body(a: TabletServer, b: TabletServer, messenger: Messenger) -> None:
        tablet = await leading_tablet(a)
        await write(tablet, range(1000))
        assert tablet.raft is not None
        missing = start(a, b, 1, tablet_id="nowhere")
        await messenger.call(b.address, START_TABLET_COPY, missing, timeout=5)
        assert await settled(b, "nowhere") is None
        assert b.tablets.copy_client is not None
        assert b.tablets.copy_client.counters.failed == 1
        (failed,) = b.tablets.copy_statuses()  # the destination tells why, though nothing is left
        assert failed.state == tpb.TabletCopyStatusPB.FAILED
        assert "'nowhere' is not hosted" in failed.error
        await messenger.call(b.address, START_TABLET_COPY, start(a, b, 1), timeout=5)
        with pytest.raises(ServiceUnavailable, match="num_tablets_to_copy_simultaneously"):
            await messenger.call(b.address, START_TABLET_COPY, start(a, b, 1, tablet_id="other"), timeout=5)
        copied = await settled(b)
        assert copied is not None
        assert copied.state == tpb.RUNNING

    run(
        two_servers(tmp_path, body, num_tablets_to_copy_simultaneously=1, tablet_copy_throttler_bytes_per_sec=1_000_000)
    )


def test_startup_cleans_up_a_copy_that_a_crash_interrupted(tmp_path: Path) -> None:
    async def body(a: TabletServer, b: TabletServer, messenger: Messenger) -> None:
        for tablet_id in ("fresh", "over-tombstone"):
            tablet = await leading_tablet(a, tablet_id)
            await write(tablet, range(300))
        tablets, stores = b.data_dir.path / "tablets", b.data_dir.path / "stores"
        # What a crash leaves mid-copy: a COPYING replica with half its files installed and its
        # download beside it; over a tombstone, the tombstone's consensus metadata stays.
        for tablet_id in ("fresh", "over-tombstone"):
            directory = tablets / tablet_id
            directory.mkdir()
            replace(metadata(tablet_id), data_state=DataState.COPYING).save(directory)
            (tablets / f"{tablet_id}.copy-tmp" / "store").mkdir(parents=True)
            (tablets / f"{tablet_id}.copy-tmp" / "store" / f"{tablet_id}.duckdb").write_bytes(b"half" * 100)
            (directory / "wal").mkdir()
            (directory / "wal" / "wal-000000001").write_bytes(b"half")
            (stores / f"{tablet_id}.duckdb").write_bytes(b"half a database")
        ConsensusMetadata(HardState(3, ""), RaftConfig.of_voters([a.uuid])).save(tablets / "over-tombstone")
        await b.stop()
        restarted = TabletServer(options(tmp_path, "b"))
        await restarted.start()
        try:
            assert [t.tablet_id for t in restarted.tablets.tablets()] == ["over-tombstone"]
            tombstone = restarted.tablets.get("over-tombstone")
            assert tombstone.state == tpb.TOMBSTONED
            assert tombstone.meta.tombstone_reason == "a tablet copy did not finish"
            assert json.loads((tablets / "over-tombstone" / META_FILE).read_text())["data_state"] == "TOMBSTONED"
            assert sorted(p.name for p in tablets.iterdir()) == ["over-tombstone"]
            assert sorted(p.name for p in (tablets / "over-tombstone").iterdir()) == ["cmeta", META_FILE]
            assert restarted.tablets.stores.tablet_ids_on_disk() == []
            # The leader asks again, and this time the copy completes.
            await messenger.call(
                restarted.address, START_TABLET_COPY, start(a, restarted, 3, tablet_id="over-tombstone"), timeout=5
            )
            copied = await settled(restarted, "over-tombstone")
            assert copied is not None
            assert copied.state == tpb.RUNNING
            assert rows(copied) == 300
            assert TabletMetadata.load(tablets / "over-tombstone").data_state is DataState.READY
        finally:
            await restarted.stop()

    run(two_servers(tmp_path, body))
