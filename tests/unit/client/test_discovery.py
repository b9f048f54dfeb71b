"""Finding the leader master: parallel ConnectToMaster, hints, retries, clear failures."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import socket
from collections.abc import Iterator
from typing import cast

import pytest

import nyala
from nyala.client import AsyncClient, ClientOptions, connect
from nyala.client._retry import Deadline
from nyala.client.masters import MasterProxy
from nyala.common.hostport import HostPort
from nyala.errors import IllegalState, InvalidArgument, NotFound, TimedOut
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger
from nyala.services import LIST_TABLES
from tests.unit.client.conftest import Runner
from tests.unit.client.fakes import FakeCluster
from tests.unit.client.helpers import FAST, hashed, kv_schema


@pytest.fixture
def three_masters() -> Iterator[FakeCluster]:
    fake = FakeCluster(num_masters=3, num_tservers=3)
    yield fake
    fake.close()


def test_connect_finds_the_leader_among_three_masters(three_masters: FakeCluster) -> None:
    three_masters.leader_master = 2
    with connect(three_masters.master_addresses, options=FAST) as client:
        assert client.leader_master == str(three_masters.masters[2].address)
        assert client.cluster_id == "fake-cluster"
        assert client.list_tables() == []


def test_catalog_calls_follow_the_not_the_leader_hint(three_masters: FakeCluster) -> None:
    with connect(three_masters.master_addresses, options=FAST) as client:
        client.create_table("t", kv_schema(), hashed(2))
        three_masters.leader_master = 1  # leadership moves; the client still believes in master 0
        assert client.list_tables() == ["t"]
        assert client.leader_master == str(three_masters.masters[1].address)
        assert three_masters.masters[0].calls["ListTables"] == 1  # refused once, with the hint


def test_a_follower_hint_is_used_when_the_leader_is_not_configured(three_masters: FakeCluster) -> None:
    three_masters.leader_master = 2
    only_followers = ",".join(str(m.address) for m in three_masters.masters[:2])
    with connect(only_followers, options=FAST) as client:
        assert client.leader_master == str(three_masters.masters[2].address)


def test_service_unavailable_is_retried(three_masters: FakeCluster) -> None:
    three_masters.unavailable_catalog_calls = 3
    with connect(three_masters.master_addresses, options=FAST) as client:
        assert client.list_tables() == []
    assert three_masters.unavailable_catalog_calls == 0


def test_no_reachable_master_times_out_naming_each_master() -> None:
    with socket.socket() as s:
        # Held, never listening, for the whole test: refused, and no other process can take the port.
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        options = ClientOptions(retry_backoff_initial_ms=5, retry_backoff_max_ms=20)
        with pytest.raises(TimedOut, match=address):
            connect(address, timeout_s=0.5, options=options)


def test_bad_master_addresses_are_refused_clearly() -> None:
    with pytest.raises(InvalidArgument, match="port"):
        connect("127.0.0.1:notaport")
    with pytest.raises(InvalidArgument, match="at least one"):
        connect(" , ")


def test_nyala_connect_is_exported_lazily(cluster: FakeCluster) -> None:
    with nyala.connect(cluster.master_addresses, options=FAST) as client:
        assert client.table_exists("nope") is False
        with pytest.raises(NotFound, match="nope"):
            client.open_table("nope")


def test_async_client_on_the_callers_loop(cluster: FakeCluster, run: Runner) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(cluster.master_addresses, options=FAST) as client:
            table = await client.create_table("a", kv_schema(), hashed(2), num_replicas=1)
            assert await table.insert([{"id": 1, "name": "x", "v": 1.0}]) == []
            assert await table.count() == 1
            assert await client.list_tables() == ["a"]

    run(main())


def test_an_async_client_refuses_a_foreign_loop(cluster: FakeCluster, run: Runner) -> None:
    home = asyncio.new_event_loop()
    client = home.run_until_complete(AsyncClient.connect(cluster.master_addresses, options=FAST))

    async def elsewhere() -> None:
        with pytest.raises(IllegalState, match="another event loop"):
            await client.list_tables()

    try:
        run(elsewhere())
    finally:
        home.run_until_complete(client.close())
        home.close()


def test_the_sync_client_refuses_calls_from_its_own_loop(cluster: FakeCluster) -> None:
    with connect(cluster.master_addresses, options=FAST) as client:

        async def inside() -> None:
            with pytest.raises(IllegalState, match="client's loop"):
                client.list_tables()

        client.run(inside())


class SlowMessenger:
    """Every call times out at its attempt timeout."""

    async def call(self, address: HostPort, method: object, request: object, timeout: float) -> object:
        await asyncio.sleep(timeout + 0.01)
        raise TimedOut(f"call to {address} timed out")


@pytest.mark.parametrize(("deadline_s", "attempt_ms", "forgotten"), [(0.05, 10_000, False), (1.0, 20, True)])
def test_the_leader_master_is_forgotten_only_when_it_did_not_answer_in_a_whole_attempt(
    run: Runner, deadline_s: float, attempt_ms: int, forgotten: bool
) -> None:
    leader = HostPort("127.0.0.1", 7051)

    async def scenario() -> HostPort | None:
        options = dataclasses.replace(ClientOptions(), rpc_attempt_timeout_ms=attempt_ms)
        proxy = MasterProxy([leader], cast(Messenger, SlowMessenger()), options, random.Random(0))
        proxy.leader = leader
        with pytest.raises(TimedOut):
            await proxy.call(LIST_TABLES, mpb.ListTablesRequestPB(), Deadline(deadline_s, "listing tables"))
        return proxy.leader

    # A call cut short by its own deadline keeps the leader; a master silent for a whole
    # attempt is forgotten (and rediscovered by the next call).
    assert run(scenario()) == (None if forgotten else leader)
