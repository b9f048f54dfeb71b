"""Changing the set of masters online, on real processes: add (by command and by auto-join),
remove (a follower, the leader), idempotent re-runs and refused bad input.

Each test runs its own MiniCluster (stopped by PID even on failure) and the real ``nyala``
command line in subprocesses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message

import nyala
from nyala.client import Client, schema
from nyala.common.hostport import HostPort
from nyala.errors import Aborted, IllegalState, NyalaError
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger, RpcMethod
from nyala.rpc.loop import run
from nyala.services import REMOVE_MASTER
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

pytestmark = pytest.mark.timeout(300)

ResponseT = TypeVar("ResponseT", bound=Message)
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")


def nyala_cli(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nyala", *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )


async def call_once(address: HostPort, method: RpcMethod[Any, ResponseT], request: Message) -> ResponseT:
    messenger = Messenger()
    try:
        return await messenger.call(address, method, request, timeout=30)
    finally:
        await messenger.close()


def masters_flag(cluster: MiniCluster, servers: list[ClusterServer] | None = None) -> str:
    return ",".join(str(m.address) for m in (servers if servers is not None else cluster.masters))


def voters(client: Client) -> dict[str, str]:
    """uuid -> role of every master listed as a reachable VOTER."""
    return {m.uuid: m.role for m in client.list_masters(timeout_s=30) if m.member_type == "VOTER" and not m.error}


def leaders_voters(flag: str) -> dict[str, str]:
    """:func:`voters` as the current leader sees them (a fresh client finds it; a removed
    master still answers ListMasters with its own, stale view)."""
    with nyala.connect(flag, timeout_s=60) as client:
        return voters(client)


def tserver_masters(server: ClusterServer) -> set[str]:
    try:
        return set(json.loads((server.data_dir / "masters.json").read_text())["masters"])
    except FileNotFoundError:
        return set()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(num_masters=1, num_tservers=1, webserver=False)
    with MiniCluster(tmp_path / "cluster", options) as mc:
        yield mc


class Load:
    """Writes and DDL from a background thread until stopped; remembers what was acknowledged."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.table = client.create_table("load", SCHEMA, num_replicas=1)
        self.acked: list[int] = []
        self.tables_created = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        key = 0
        while not self._stop.is_set():
            keys = list(range(key, key + 20))
            try:
                failed = {e.row["id"] for e in self.table.insert([{"id": k, "v": f"v{k}"} for k in keys], timeout_s=60)}
                self.acked.extend(k for k in keys if k not in failed)
                if key % 100 == 0:
                    name = f"ddl-{key}"
                    self.client.create_table(name, SCHEMA, num_replicas=1, timeout_s=60)
                    self.client.delete_table(name, timeout_s=60)
                    self.tables_created += 1
            except NyalaError as e:  # an outcome the load cannot know: those rows are not counted
                self.errors.append(f"{type(e).__name__}: {e}")
            key += 20


def test_grow_from_one_to_three_masters_under_load_and_lose_the_old_leader(cluster: MiniCluster) -> None:
    old_leader = cluster.masters[0]
    tserver = cluster.tservers[0]
    with nyala.connect(str(old_leader.address), timeout_s=60) as client:
        with Load(client) as load:
            wait_for(lambda: len(load.acked) >= 100, what="the load to write", timeout_s=60)
            # The second master by the command, the third by itself.
            second = cluster.add_master()
            result = nyala_cli("master", "add", str(old_leader.address), str(second.address), "--wait-secs", "90")
            assert result.returncode == 0, result.stderr
            assert "is a VOTER" in result.stdout
            cluster.add_master(auto_join=True)
            wait_for(lambda: len(voters(client)) == 3, what="three voting masters", timeout_s=90)
            created_before = load.tables_created
            wait_for(lambda: load.tables_created > created_before, what="DDL to go on", timeout_s=60)
        assert load.tables_created > 0
        everyone = {str(m.address) for m in cluster.masters}
        # The tablet server and the client learned the new masters without a restart.
        wait_for(lambda: tserver_masters(tserver) == everyone, what="the tablet server to remember 3 masters")
        wait_for(
            lambda: (client.list_tables(), set(client.master_addresses))[1] == everyone,
            what="the client to learn the 3 masters",
        )
        cluster.kill(old_leader)
        table = client.create_table("after", SCHEMA, num_replicas=1, timeout_s=90)
        assert table.insert([{"id": 1, "v": "x"}]) == []
        assert client.leader_master != str(old_leader.address)
        assert "after" in client.list_tables()
        wait_for(
            lambda: all(s.live for s in client.list_tablet_servers()),
            what="the tablet server to heartbeat to the new leader",
            retry_on=(NyalaError,),
        )
        # No acknowledged write was lost.
        ids = set(client.open_table("load").scanner(columns=["id"]).to_arrow().column("id").to_pylist())
        assert set(load.acked) <= ids
        # The tablet server's flags still name only the dead master: restarted, it reaches the
        # new ones from what it remembered (a new tablet goes RUNNING only on its report).
        cluster.restart(tserver)
        again = client.create_table("after-tserver-restart", SCHEMA, num_replicas=1, timeout_s=90)
        assert again.insert([{"id": 2, "v": "y"}]) == []
    # A restart with the new set of masters is accepted.
    second = cluster.masters[1]
    cluster.kill(second)
    cluster.restart(second)
    with nyala.connect(masters_flag(cluster, cluster.masters[1:]), timeout_s=60) as client:
        wait_for(lambda: len(voters(client)) == 2, what="both live masters voting", retry_on=(NyalaError,))


def test_remove_a_follower_and_the_leader_and_rerun_both(cluster: MiniCluster) -> None:
    second = cluster.add_master(auto_join=True)
    third = cluster.add_master(auto_join=True)
    flag = masters_flag(cluster)
    with nyala.connect(flag, timeout_s=60) as client:
        wait_for(lambda: len(voters(client)) == 3, what="three voting masters", timeout_s=90)
        roles = voters(client)
        leader_uuid = next(u for u, r in roles.items() if r == "LEADER")
        follower = next(m for m in cluster.masters if m.uuid != leader_uuid)
        removed = nyala_cli("master", "remove", flag, str(follower.address))
        assert removed.returncode == 0, removed.stderr
        assert f"master {follower.uuid} removed" in removed.stdout
        again = nyala_cli("master", "remove", flag, follower.uuid)
        assert again.returncode == 0, again.stderr
        assert "was removed already" in again.stdout
        assert set(voters(client)) == {m.uuid for m in cluster.masters} - {follower.uuid}
        # The tablet server stops heartbeating to the removed master and remembers the rest.
        rest = {str(m.address) for m in cluster.masters if m.uuid != follower.uuid}
        wait_for(lambda: tserver_masters(cluster.tservers[0]) == rest, what="the tablet server to drop the master")
        cluster.kill(follower)
        # The leader: it hands leadership over first.
        removed = nyala_cli("master", "remove", flag, leader_uuid)
        assert removed.returncode == 0, removed.stderr
        remaining = [m for m in cluster.masters if m.uuid not in {follower.uuid, leader_uuid}]
        assert len(remaining) == 1
        assert leaders_voters(flag) == {remaining[0].uuid: "LEADER"}
        # The last master cannot go.
        last = nyala_cli("master", "remove", flag, remaining[0].uuid)
        assert last.returncode != 0
        assert "last master" in last.stderr
        assert leaders_voters(flag) == {remaining[0].uuid: "LEADER"}
        assert client.create_table("still", SCHEMA, num_replicas=1, timeout_s=60) is not None
    del second, third


def test_bad_membership_changes_are_refused_and_change_nothing(cluster: MiniCluster) -> None:
    second = cluster.add_master(auto_join=True)
    cluster.add_master(auto_join=True)
    flag = masters_flag(cluster)
    with nyala.connect(flag, timeout_s=60) as client:
        wait_for(lambda: len(voters(client)) == 3, what="three voting masters", timeout_s=90)
        before = client.list_masters()
        # Re-running add for a member: nothing changes.
        again = nyala_cli("master", "add", flag, str(second.address))
        assert again.returncode == 0, again.stderr
        assert "was a member already" in again.stdout
        # Unknown master.
        unknown = nyala_cli("master", "remove", flag, "127.0.0.1:1")
        assert unknown.returncode != 0
        assert "is not a master of this cluster" in unknown.stderr
        # An address that is not a master (a tablet server).
        not_master = nyala_cli("master", "add", flag, str(cluster.tservers[0].address), "--timeout-s", "10")
        assert not_master.returncode != 0
        assert "not a Nyala master" in not_master.stderr
        # A stale compare-and-set index: refused, nothing removed.
        leader_uuid = next(u for u, r in voters(client).items() if r == "LEADER")
        leader_address = next(m.address for m in cluster.masters if m.uuid == leader_uuid)
        follower_uuid = next(u for u in voters(client) if u != leader_uuid)
        with pytest.raises(Aborted, match="CAS_FAILED"):
            run(
                call_once(
                    leader_address,
                    REMOVE_MASTER,
                    mpb.RemoveMasterRequestPB(uuid=follower_uuid, cas_config_opid_index=999),
                )
            )
        # Breaking the majority: with one follower dead, removing the other live follower
        # would leave the leader and a dead master.
        dead, live = [m for m in cluster.masters if m.uuid != leader_uuid]
        cluster.kill(dead)
        # At once, while the leader's last answer from the dead master is still recent: only
        # answers after the request count.  (Counting the recent one made the leader append a
        # REMOVE_PEER whose majority was dead; it never committed and no leader was elected.)
        with pytest.raises(IllegalState, match="majority"):
            run(call_once(leader_address, REMOVE_MASTER, mpb.RemoveMasterRequestPB(uuid=live.uuid)))
        broken = nyala_cli("master", "remove", flag, str(live.address))
        assert broken.returncode != 0
        assert "majority" in broken.stderr
        after = client.list_masters()
        # Every master still listed as it was (the dead one shows its error instead of a uuid).
        assert [(m.rpc_addresses, m.member_type) for m in after] == [(m.rpc_addresses, m.member_type) for m in before]
        assert set(leaders_voters(flag)) == {leader_uuid, live.uuid}
        # A master joins by itself even while one of the masters it is told about is down.
        fourth = cluster.add_master(auto_join=True)
        wait_for(
            lambda: set(leaders_voters(flag)) == {leader_uuid, live.uuid, fourth.uuid},
            what="the fourth master to join with one master down",
            timeout_s=90,
            retry_on=(NyalaError,),
        )
    del second
