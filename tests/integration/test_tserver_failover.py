"""kill -9 of a tablet leader under write load, restart of the killed server, restart of all:
no write acknowledged to the writer is ever lost."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nyala import errors
from nyala.proto import rpc_pb2
from nyala.proto import tserver_pb2 as tpb
from nyala.services import CREATE_TABLET, WRITE
from nyala.testing.wait import wait_for

from .tserver_kit import Cluster, Driver, create_request, insert_ops

pytestmark = pytest.mark.timeout(240)

FLAGS = ["--heartbeat-interval-ms", "300", "--raft-tick-interval-ms", "25", "--raft-heartbeat-interval-ms", "150"]
TABLET = "failover"
BATCH_ROWS = 50


@dataclass
class Writer:
    """Writes batches of fresh keys through whoever leads, as a client would, and records
    what was acknowledged.  A retried batch (its first outcome unknown) may find its own
    rows already present; any other row error is a failure."""

    cluster: Cluster
    acked: set[int] = field(default_factory=set)
    batches: int = 0
    max_op_index: int = 0
    problems: list[str] = field(default_factory=list)
    stopping: bool = False

    async def run(self) -> None:
        servers = self.cluster.servers
        target, batch_no = 0, 0
        while not self.stopping:
            ids = range(batch_no * BATCH_ROWS, (batch_no + 1) * BATCH_ROWS)
            ops, retried = insert_ops(ids), False
            while not self.stopping:
                try:
                    response = await self.cluster.messenger.call(
                        servers.addresses[target],
                        WRITE,
                        tpb.WriteRequestPB(tablet_id=TABLET),
                        sidecars=[ops],
                        timeout=3,
                    )
                except errors.NotTheLeader as e:
                    target = servers.index_of(e.leader_hint) if e.leader_hint else (target + 1) % 3
                except errors.RetriableError:
                    target = (target + 1) % 3
                else:
                    self._take(response, ids, retried)
                    break
                retried = True
                await asyncio.sleep(0.02)
            batch_no += 1

    def _take(self, response: tpb.WriteResponsePB, ids: range, retried: bool) -> None:
        codes = {e.code for e in response.per_row_errors}
        if codes and not (retried and codes == {rpc_pb2.ALREADY_PRESENT}):
            self.problems.append(f"batch {ids}: unexpected row errors {list(response.per_row_errors)[:3]}")
        self.acked.update(ids)
        self.batches += 1
        self.max_op_index = max(self.max_op_index, response.op_index)


def all_ids(d: Driver, i: int, min_applied_index: int) -> set[int]:
    """Every row on replica ``i`` once it has applied ``min_applied_index`` (retrying while it starts)."""

    def scan() -> list[int] | None:
        try:
            return d.ids(i, TABLET, read_mode=tpb.READ_YOUR_WRITES, min_applied_index=min_applied_index)
        except (errors.ServiceUnavailable, errors.TimedOut, errors.NetworkError, errors.NotFound):
            return None

    ids = wait_for(scan, what=f"replica {i} to serve a scan at index {min_applied_index}", timeout_s=60)
    assert len(ids) == len(set(ids))
    return set(ids)


def wait_batches(writer: Writer, count: int, within_s: float) -> None:
    wait_for(lambda: writer.batches >= count, what=f"{count} acknowledged batches", timeout_s=within_s)


def test_a_killed_leader_loses_no_acknowledged_write_and_restarts_cleanly(tmp_path: Path) -> None:
    cluster = Cluster.start(tmp_path, 3, FLAGS)
    try:
        cluster.wait_registered()
        d, servers = cluster.driver, cluster.servers
        peers = dict(zip(servers.uuids, servers.addresses, strict=True))
        for i, uuid in enumerate(servers.uuids):
            d.call(servers.addresses[i], CREATE_TABLET, create_request(uuid, TABLET, servers.uuids, peers=peers))
        d.leader(TABLET)
        writer = Writer(cluster)
        running = asyncio.run_coroutine_threadsafe(writer.run(), cluster.loop.loop)
        try:
            wait_batches(writer, 20, 30)
            old_leader = d.leader(TABLET)
            servers.kill(old_leader)
            killed_at = writer.batches
            wait_batches(writer, killed_at + 20, 60)
        finally:
            writer.stopping = True
            running.result(30)
        assert writer.problems == []
        assert len(writer.acked) >= 40 * BATCH_ROWS
        alive = [i for i in range(3) if i != old_leader]
        new_leader = d.leader(TABLET, alive=alive)
        assert new_leader != old_leader
        on_leader = all_ids(d, new_leader, writer.max_op_index)
        assert writer.acked <= on_leader

        servers.start([old_leader])  # bootstrap: store at its applied index, WAL replayed after it
        assert all_ids(d, old_leader, writer.max_op_index) == on_leader
        assert d.consensus(old_leader, TABLET).applied_index >= writer.max_op_index

        for i in range(3):
            servers.kill(i)
        servers.start()
        leader = d.leader(TABLET)
        for i in {leader, old_leader}:
            assert all_ids(d, i, writer.max_op_index) == on_leader
    finally:
        cluster.stop()
