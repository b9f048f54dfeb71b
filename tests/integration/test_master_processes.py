"""Masters as real processes: election, registration on every master, failover, restarts.

Tablet servers are fakes running in the test's event loop (the real ones are tested with the
whole cluster); they answer CreateTablet/DeleteTablet/AlterSchema and heartbeat to every
master.  Every master process is stopped by PID in a ``finally``, even when a test fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message

from nyala import errors
from nyala.proto import common_pb2, rpc_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc import PING, Messenger, RpcMethod
from nyala.rpc.loop import run
from nyala.server import ServerStatus
from nyala.services import (
    CONNECT_TO_MASTER,
    CREATE_TABLE,
    GET_MASTER_REGISTRATION,
    GET_TABLE_LOCATIONS,
    LIST_MASTERS,
    LIST_TABLES,
    LIST_TABLET_SERVERS,
)
from nyala.testing.process import ServerProcess
from nyala.testing.wait import wait_for_async
from tests.unit.master.fake_tserver import FakeTabletServer
from tests.unit.master.helpers import create_request

pytestmark = pytest.mark.timeout(120)

ResponseT = TypeVar("ResponseT", bound=Message)
PORT = 17051
FLAGS = [
    "--raft-tick-interval-ms", "20",
    "--raft-heartbeat-interval-ms", "100",
    "--heartbeat-interval-ms", "100",
    "--tserver-unresponsive-timeout-ms", "2000",
]  # fmt: skip


class MasterProcesses:
    """``n`` master processes on their own loopback addresses, and a messenger to reach them."""

    def __init__(self, root: Path, n: int) -> None:
        prefix = f"127.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
        self.addresses = [f"{prefix}.{i + 1}:{PORT}" for i in range(n)]
        self.dirs = [root / f"master-{i}" for i in range(n)]
        flag = ",".join(self.addresses)
        self.procs = [
            ServerProcess(
                f"master-{i}",
                [sys.executable, "-m", "nyala", "master", "start", "--fs-data-dir", str(self.dirs[i]),
                 "--rpc-bind-address", self.addresses[i], "--master-addresses", flag, *FLAGS],
                root / "logs" / f"master-{i}.log",
            )
            for i in range(n)
        ]  # fmt: skip
        self.messenger = Messenger()

    async def call(
        self, i: int, method: RpcMethod[Any, ResponseT], request: Message, timeout: float = 5.0
    ) -> ResponseT:
        return await self.messenger.call(self.addresses[i], method, request, timeout=timeout)

    async def start(self, i: int) -> None:
        self.procs[i].start()
        await self.wait_ready(i)

    async def wait_ready(self, i: int) -> None:
        """Until the process announced itself in server.json and answers Ping."""

        def ready() -> bool:
            status = ServerStatus.read(self.dirs[i])
            return status is not None and status.pid == self.procs[i].pid

        await asyncio.to_thread(self.procs[i].wait_ready, ready, 60.0)
        await self.call(i, PING, rpc_pb2.PingRequest())

    async def kill(self, i: int) -> None:
        await asyncio.to_thread(self.procs[i].kill)

    async def stop_all(self) -> None:
        for proc in self.procs:
            await asyncio.to_thread(proc.stop)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail(20)}" for p in self.procs)

    async def leader(self, among: Sequence[int] | None = None, within_s: float = 30.0) -> int:
        """The index of the ready leader, once every master in ``among`` agrees on its address."""
        among = list(range(len(self.procs))) if among is None else list(among)

        async def agreed_leader() -> int | None:
            answers: list[mpb.ConnectToMasterResponsePB | None] = []
            for i in among:
                try:
                    answers.append(await self.call(i, CONNECT_TO_MASTER, mpb.ConnectToMasterRequestPB(), 1.0))
                except errors.NyalaError:
                    answers.append(None)
            leaders = [i for i, a in zip(among, answers, strict=True) if a is not None and a.role == common_pb2.LEADER]
            hints = {a.leader_address for a in answers if a is not None}
            return leaders[0] if len(leaders) == 1 and hints == {self.addresses[leaders[0]]} else None

        return await wait_for_async(agreed_leader, what=f"one leader that masters {among} agree on", timeout_s=within_s)


@contextlib.asynccontextmanager
async def masters(root: Path, n: int) -> AsyncIterator[MasterProcesses]:
    cluster = MasterProcesses(root, n)
    try:
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop_all()
        await cluster.messenger.close()


@contextlib.asynccontextmanager
async def fake_tservers(addresses: Sequence[str], n: int) -> AsyncIterator[list[FakeTabletServer]]:
    servers = [FakeTabletServer(addresses, heartbeat_interval_s=0.1) for _ in range(n)]
    try:
        for ts in servers:
            await ts.start()
        yield servers
    finally:
        for ts in servers:
            await ts.stop()


async def registered(cluster: MasterProcesses, among: Sequence[int], tservers: Sequence[FakeTabletServer]) -> None:
    """Until every master in ``among`` lists every tablet server as live."""
    for i in among:

        async def known(i: int = i) -> bool:
            servers = (await cluster.call(i, LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB())).servers
            return {s.instance.permanent_uuid for s in servers if s.live} == {t.uuid for t in tservers}

        await wait_for_async(known, what=f"master {i} to list every tablet server as live", timeout_s=20)


def ident(name: str) -> common_pb2.TableIdentifierPB:
    return common_pb2.TableIdentifierPB(table_name=name)


async def table_names(cluster: MasterProcesses, i: int) -> list[str]:
    return [t.name for t in (await cluster.call(i, LIST_TABLES, mpb.ListTablesRequestPB())).tables]


def test_one_master_serves_the_catalog_and_keeps_it_across_restarts(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path, 1) as cluster, fake_tservers(cluster.addresses, 3) as tservers:
            await cluster.start(0)
            assert await cluster.leader() == 0
            await registered(cluster, [0], tservers)
            registration = await cluster.call(0, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB())
            assert registration.role == common_pb2.LEADER
            assert registration.cluster_id
            table_id = (await cluster.call(0, CREATE_TABLE, create_request("t", buckets=3), timeout=20)).table_id
            assert all(len(ts.tablets) == 3 for ts in tservers)
            # kill -9, then a clean restart: the catalog and cluster id are intact each time.
            for stop in ("kill", "restart"):
                if stop == "kill":
                    await cluster.kill(0)
                    await cluster.start(0)
                else:
                    await asyncio.to_thread(cluster.procs[0].stop)
                    await cluster.start(0)
                await cluster.leader()
                assert await table_names(cluster, 0) == ["t"]
                again = await cluster.call(0, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB())
                assert again.cluster_id == registration.cluster_id
                locations = await cluster.call(0, GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("t")))
                assert len(locations.tablet_locations) == 3
                assert {loc.tablet_id for loc in locations.tablet_locations} == set(tservers[0].tablets)
            assert table_id

    run(main())


def test_three_masters_elect_a_leader_and_survive_the_leaders_sigkill(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path, 3) as cluster:
            # One master alone cannot open the catalog: it answers registration, refuses catalog calls.
            await cluster.start(0)
            alone = await cluster.call(0, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB())
            assert alone.role == common_pb2.UNKNOWN_ROLE
            with pytest.raises(errors.ServiceUnavailable, match="not open yet"):
                await cluster.call(0, LIST_TABLES, mpb.ListTablesRequestPB())
            await cluster.start(1)
            await cluster.start(2)
            leader = await cluster.leader()
            followers = [i for i in range(3) if i != leader]

            async def cluster_ids() -> set[str]:
                return {
                    (await cluster.call(i, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB())).cluster_id
                    for i in range(3)
                }

            async def one_cluster_id() -> bool:
                ids = await cluster_ids()
                return len(ids) == 1 and "" not in ids

            # The leader wrote it; the followers applied it.
            await wait_for_async(one_cluster_id, what="one cluster id on every master", timeout_s=20)
            cluster_id = await cluster_ids()
            async with fake_tservers(cluster.addresses, 3) as tservers:
                # Every master knows every tablet server (they heartbeat to all masters).
                for i in range(3):

                    async def registered(i: int = i) -> bool:
                        servers = (await cluster.call(i, LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB())).servers
                        return {s.instance.permanent_uuid for s in servers if s.live} == {t.uuid for t in tservers}

                    await wait_for_async(registered, what=f"master {i} to list every tablet server", timeout_s=20)
                listed = await cluster.call(followers[0], LIST_MASTERS, mpb.ListMastersRequestPB())
                roles = sorted(m.role for m in listed.masters)
                assert roles == sorted([common_pb2.LEADER, common_pb2.FOLLOWER, common_pb2.FOLLOWER])
                for f in followers:
                    with pytest.raises(errors.NotTheLeader) as caught:
                        await cluster.call(f, CREATE_TABLE, create_request("t"))
                    assert caught.value.leader_hint == cluster.addresses[leader]
                await cluster.call(leader, CREATE_TABLE, create_request("t", buckets=2), timeout=20)

                # SIGKILL the leader: the other two elect a new one and the catalog goes on.
                await cluster.kill(leader)
                new_leader = await cluster.leader(among=followers)
                assert new_leader != leader
                assert await table_names(cluster, new_leader) == ["t"]
                listed = await cluster.call(new_leader, LIST_MASTERS, mpb.ListMastersRequestPB())
                errors_by_host = {m.registration.rpc_addresses[0].host: m.error for m in listed.masters}
                assert errors_by_host[cluster.addresses[leader].split(":")[0]]  # the killed one is unreachable
                assert sum(1 for e in errors_by_host.values() if e) == 1
                await cluster.call(new_leader, CREATE_TABLE, create_request("u", rf=1), timeout=20)
                locations = await cluster.call(
                    new_leader, GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("t"))
                )
                assert len(locations.tablet_locations) == 2
                assert all(len(loc.replicas) == 3 for loc in locations.tablet_locations)
                # The killed master comes back as a follower with the whole catalog.
                await cluster.start(leader)
                assert await cluster.leader() == new_leader

                # All masters stopped and restarted: the catalog is intact.
                await cluster.stop_all()
                for proc in cluster.procs:
                    proc.start()
                for i in range(3):
                    await cluster.wait_ready(i)
                final = await cluster.leader()
                await wait_for_async(one_cluster_id, what="one cluster id after the restart", timeout_s=20)
                assert await cluster_ids() == cluster_id
                assert await table_names(cluster, final) == ["t", "u"]
                done = await cluster.call(final, GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("u")))
                assert len(done.tablet_locations) == 2

    run(main())
