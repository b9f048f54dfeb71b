"""The tablet manager on a temporary directory with single-voter Raft replicas: creation,
bootstrap after restart, tombstones, and recovery from interrupted work and damage."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from nyala.common.hostport import HostPort
from nyala.consensus.core import RaftConfig, RaftOptions, Role
from nyala.consensus.runtime import RaftTransport, ReplicaOptions
from nyala.errors import Aborted, AlreadyPresent, NotFound, ServiceUnavailable
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger, RpcServer
from nyala.rpc.loop import run
from nyala.schema import OpType, RowOperationOptions, make_row_operations
from nyala.storage import ScanSpec, StorageOptions
from nyala.testing.wait import wait_for_async
from nyala.tserver.manager import TabletManager
from nyala.tserver.metadata import META_FILE, DataState, TabletMetadata
from nyala.tserver.tablet import TabletReplica

from .conftest import SCHEMA, metadata

ME = "a" * 32
OPTIONS = ReplicaOptions(raft=RaftOptions(raft_tick_interval_ms=10, raft_heartbeat_interval_ms=20))
CONFIG = RaftConfig.of_voters([ME])


async def with_manager(root: Path, body: Callable[[TabletManager], Awaitable[None]]) -> None:
    """Run ``body`` against a manager on ``root`` (opened and bootstrapped), then close it."""
    messenger = Messenger()
    transport = RaftTransport(ME, HostPort("127.0.0.1", 1), messenger, RpcServer(), tick_interval_ms=10)
    transport.start()
    executor = ThreadPoolExecutor(2)
    manager = TabletManager(root, ME, transport, executor, OPTIONS, StorageOptions(storage_threads=1))
    try:
        await manager.open_all()
        await body(manager)
    finally:
        await manager.close()
        await transport.close()
        await messenger.close()
        executor.shutdown()


async def leading(tablet: TabletReplica) -> None:
    await wait_for_async(
        lambda: tablet.raft is not None and tablet.raft.role is Role.LEADER, what="the replica to lead", timeout_s=10
    )


async def insert(tablet: TabletReplica, ids: list[int]) -> int:
    await leading(tablet)
    ops = make_row_operations(SCHEMA, OpType.INSERT, [{"id": i} for i in ids])

    async def written() -> int:
        response = await tablet.write(memoryview(ops), 0, RowOperationOptions(), 1 << 20)
        return response.op_index

    # A fresh leader is CONFIGURING for a moment.
    return await wait_for_async(written, what=f"{len(ids)} rows written", timeout_s=10, retry_on=(ServiceUnavailable,))


def count(tablet: TabletReplica) -> int:
    assert tablet.store is not None
    return int(tablet.store.scan(ScanSpec()).read_all().num_rows)


def test_tablets_come_back_after_a_restart_with_their_rows(tmp_path: Path) -> None:
    async def first(manager: TabletManager) -> None:
        tablet = await manager.create(metadata("t1"), CONFIG)
        assert await manager.create(metadata("t1"), CONFIG) is tablet  # a retried request
        await insert(tablet, [1, 2, 3])

    async def second(manager: TabletManager) -> None:
        tablet = manager.get("t1")
        assert tablet.state == tpb.RUNNING
        assert count(tablet) == 3
        await insert(tablet, [4])
        assert count(tablet) == 4

    run(with_manager(tmp_path, first))
    run(with_manager(tmp_path, second))


def test_a_different_tablet_under_the_same_id_is_refused(tmp_path: Path) -> None:
    async def body(manager: TabletManager) -> None:
        await manager.create(metadata("t1"), CONFIG)
        with pytest.raises(AlreadyPresent, match="Raft members"):
            await manager.create(metadata("t1"), RaftConfig.of_voters([ME, "b" * 32]))
        with pytest.raises(AlreadyPresent, match="another partition"):
            await manager.create(replace(metadata("t1"), table_id="other"), CONFIG)

    run(with_manager(tmp_path, body))


def test_tombstones_keep_consensus_metadata_and_survive_restarts(tmp_path: Path) -> None:
    async def first(manager: TabletManager) -> None:
        tablet = await manager.create(metadata("t1"), CONFIG)
        await insert(tablet, [1])
        with pytest.raises(Aborted, match="cas_config_opid_index"):
            await manager.delete("t1", tombstone=True, reason="x", cas_config_index=-1)
        await manager.delete("t1", tombstone=True, reason="dropped", cas_config_index=None)
        await manager.delete("t1", tombstone=True, reason="again", cas_config_index=None)
        assert tablet.state == tpb.TOMBSTONED
        assert manager.stores.tablet_ids_on_disk() == []
        assert not (tablet.directory / "wal").exists()
        state = tablet.consensus_state()
        assert state is not None
        assert [p.permanent_uuid for p in state.committed_config.peers] == [ME]

    async def second(manager: TabletManager) -> None:
        tablet = manager.get("t1")
        assert tablet.state == tpb.TOMBSTONED
        assert tablet.meta.tombstone_reason == "dropped"
        replaced = await manager.create(metadata("t1"), CONFIG)
        assert replaced.state == tpb.RUNNING
        assert count(replaced) == 0
        await manager.delete("t1", tombstone=False, reason="gone", cas_config_index=None)
        with pytest.raises(NotFound):
            manager.get("t1")
        assert not replaced.directory.exists()

    run(with_manager(tmp_path, first))
    run(with_manager(tmp_path, second))


def test_startup_finishes_interrupted_work_and_isolates_damage(tmp_path: Path) -> None:
    async def setup(manager: TabletManager) -> None:
        for tablet_id in ("good", "broken", "unreadable", "doomed"):
            await manager.create(metadata(tablet_id), CONFIG)
        await insert(manager.get("good"), [1, 2])

    run(with_manager(tmp_path, setup))
    tablets, stores = tmp_path / "tablets", tmp_path / "stores"
    (stores / "broken.duckdb").write_bytes(b"not a database at all" * 100)
    (tablets / "unreadable" / META_FILE).write_text("{garbage")
    doomed = TabletMetadata.load(tablets / "doomed")
    doomed.with_state(DataState.TOMBSTONED, "crash mid-delete").save(tablets / "doomed")
    (tablets / "half-created").mkdir()
    replace(metadata("half-created"), data_state=DataState.CREATING).save(tablets / "half-created")
    (stores / "orphan.duckdb").write_bytes(b"")
    (tablets / "not a tablet!").mkdir()

    async def check(manager: TabletManager) -> None:
        states = {t.tablet_id: t.state for t in manager.tablets()}
        assert states == {"good": tpb.RUNNING, "broken": tpb.FAILED, "doomed": tpb.TOMBSTONED}
        assert "bootstrap failed" in manager.get("broken").failure
        assert count(manager.get("good")) == 2
        assert "unreadable" in manager.unreadable
        assert sorted(manager.stores.tablet_ids_on_disk()) == ["broken", "good", "unreadable"]
        assert not (tablets / "half-created").exists()
        assert (tablets / "not a tablet!").exists()
        assert json.loads((tablets / "doomed" / META_FILE).read_text())["data_state"] == "TOMBSTONED"

    run(with_manager(tmp_path, check))
