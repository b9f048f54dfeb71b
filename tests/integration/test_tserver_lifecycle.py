"""Tablet-server lifecycle on real processes: maintenance mode across a leader-master failover,
unregistering dead servers, and ``tserver list`` with the catalog's replica counts.

One cluster (3 masters, 3 tablet servers) for the module; the tests run in file order. The
first kills and restarts the leader master, the last kills tablet servers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner, Result
from google.protobuf.message import Message

import nyala
from nyala.client import Client
from nyala.errors import NyalaError
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger, RpcMethod
from nyala.rpc.loop import run
from nyala.services import CONNECT_TO_MASTER, LIST_TABLET_SERVERS
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(240)

ResponseT = TypeVar("ResponseT", bound=Message)
UNKNOWN = "e" * 32


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=3,
        num_tservers=3,
        heartbeat_interval_ms=100,
        master_flags=("--tserver-unresponsive-timeout-ms", "2000"),
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("tserver-lifecycle")), options) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: sum(s.live for s in c.list_tablet_servers()) == 3, what="three live tablet servers")
        yield c


def cli(cluster: MiniCluster, command: Sequence[str], *args: str) -> Result:
    """``nyala COMMAND... MASTERS ARGS...`` in this process."""
    return CliRunner().invoke(main, [*command, cluster.master_addresses_flag, *args, "--timeout-s", "30"])


def ok(cluster: MiniCluster, command: Sequence[str], *args: str) -> str:
    result = cli(cluster, command, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def listing(cluster: MiniCluster) -> dict[str, dict[str, Any]]:
    """``tserver list`` as JSON, by uuid."""
    columns = "uuid,state,live,maintenance,num_replicas,heartbeat,millis_since_heartbeat"
    rows = json.loads(ok(cluster, ["tserver", "list"], "--columns", columns, "--format", "json"))
    return {row["uuid"]: row for row in rows}


def call_master(
    server: ClusterServer, method: RpcMethod[Any, ResponseT], request: Message, timeout_s: float = 2.0
) -> ResponseT:
    async def call() -> ResponseT:
        messenger = Messenger()
        try:
            return await messenger.call(str(server.address), method, request, timeout=timeout_s)
        finally:
            await messenger.close()

    return run(call())


def leader_master(cluster: MiniCluster, among: Sequence[ClusterServer]) -> ClusterServer | None:
    """The ready leader among ``among`` (ConnectToMaster says LEADER only there), if one is."""
    for master in among:
        try:
            if call_master(master, CONNECT_TO_MASTER, mpb.ConnectToMasterRequestPB()).role == common_pb2.LEADER:
                return master
        except NyalaError:
            continue
    return None


def test_maintenance_mode_survives_a_leader_master_failover(cluster: MiniCluster, client: Client) -> None:
    target = cluster.tservers[2].uuid
    # Kudu's spelling works too.
    entered = ok(cluster, ["tserver", "state", "enter_maintenance"], target)
    assert f"tablet server {target} entered maintenance mode" in entered
    again = ok(cluster, ["tserver", "state", "enter-maintenance"], target)
    assert "already was in maintenance mode" in again
    servers = listing(cluster)
    assert servers[target]["state"] == "live (maintenance)"
    assert servers[target]["maintenance"] is True
    assert {servers[u]["state"] for u in servers if u != target} == {"live"}

    old = wait_for(lambda: leader_master(cluster, cluster.masters), what="the leader master")
    cluster.kill(old)
    try:
        others = [m for m in cluster.masters if m is not old]
        new = wait_for(lambda: leader_master(cluster, others), what="a new leader master", timeout_s=60)
        assert new is not old
        # The new leader learned the state from the sys catalog, not from the old leader's memory.
        assert listing(cluster)[target]["state"] == "live (maintenance)"
        exited = ok(cluster, ["tserver", "state", "exit-maintenance"], target)
        assert f"tablet server {target} exited maintenance mode" in exited
        assert "was not in maintenance mode" in ok(cluster, ["tserver", "state", "exit_maintenance"], target)
        assert listing(cluster)[target]["state"] == "live"
    finally:
        cluster.restart(old)


def test_maintenance_of_an_unknown_or_malformed_uuid_is_refused_and_changes_nothing(
    cluster: MiniCluster, client: Client
) -> None:
    before = {u: row["state"] for u, row in listing(cluster).items()}
    result = cli(cluster, ["tserver", "state", "enter-maintenance"], UNKNOWN)
    assert result.exit_code == 1
    assert f"not found: tablet server {UNKNOWN} is not registered with the leader master" in result.output
    result = cli(cluster, ["tserver", "state", "exit-maintenance"], "not-a-uuid")
    assert result.exit_code == 1
    assert "invalid argument: tablet server uuid 'not-a-uuid' is not 32 lowercase hex digits" in result.output
    result = cli(cluster, ["tserver", "unregister"], UNKNOWN, "--force")
    assert result.exit_code == 1
    assert f"not found: tablet server {UNKNOWN} is not registered" in result.output
    after = listing(cluster)
    assert {u: row["state"] for u, row in after.items()} == before
    assert UNKNOWN not in after


def test_unregister_refuses_live_servers_and_replica_holders_and_forgets_dead_ones(
    cluster: MiniCluster, client: Client
) -> None:
    ok(cluster, ["table", "create"], "lifecycle", "-c", "id:int64", "-k", "id",
       "--hash", "id:2", "--num-replicas", "3")  # fmt: skip
    servers = listing(cluster)
    assert {servers[t.uuid]["num_replicas"] for t in cluster.tservers} == {2}

    spare = cluster.add_tserver()  # joins after the table: holds no replica
    wait_for(lambda: listing(cluster).get(spare.uuid, {}).get("live"), what="the spare to register")
    refused = cli(cluster, ["tserver", "unregister"], spare.uuid, "--force")
    assert refused.exit_code == 1
    assert f"illegal state: tablet server {spare.uuid} is live" in refused.output

    holder = cluster.tservers[0]
    cluster.kill(holder)
    cluster.kill(spare)

    def both_dead() -> dict[str, dict[str, Any]] | None:
        listed = listing(cluster)
        return listed if listed[holder.uuid]["state"] == listed[spare.uuid]["state"] == "dead" else None

    servers = wait_for(both_dead, what="the holder and the spare to be dead")
    # Counted from the catalog's committed configs: true for the dead holder too.
    assert servers[holder.uuid]["num_replicas"] == 2
    assert servers[spare.uuid]["num_replicas"] == 0
    assert servers[holder.uuid]["millis_since_heartbeat"] >= 2000

    refused = cli(cluster, ["tserver", "unregister"], holder.uuid)
    assert refused.exit_code == 1
    assert f"tablet server {holder.uuid} still holds 2 replicas" in refused.output
    assert holder.uuid in listing(cluster)

    assert f"unregistered tablet server {spare.uuid}" in ok(cluster, ["tserver", "unregister"], spare.uuid)
    assert spare.uuid not in listing(cluster)

    # Every master forgets it, followers too: they apply the same catalog write.
    def forgotten_everywhere(uuid: str) -> bool:
        for master in cluster.masters:
            response = call_master(master, LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB())
            if uuid in {s.instance.permanent_uuid for s in response.servers}:
                return False
        return True

    wait_for(lambda: forgotten_everywhere(spare.uuid), what="every master to forget the spare")

    forced = ok(cluster, ["tserver", "unregister"], holder.uuid, "--force")
    assert f"unregistered tablet server {holder.uuid}" in forced
    assert "the catalog still places 2 replicas on it" in forced
    assert holder.uuid not in listing(cluster)
    wait_for(lambda: forgotten_everywhere(holder.uuid), what="every master to forget the holder")
