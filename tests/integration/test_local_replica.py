"""``nyala local-replica`` on the data directory of a real tablet server: refused while it runs,
then list, cmeta print/set-term/rewrite and delete once it is stopped, and the server's restart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner, Result

import nyala
from nyala.client import Partitioning, schema
from nyala.errors import NyalaError
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.services import GET_CONSENSUS_STATE, LIST_TABLETS
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(240)

T = TypeVar("T")
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")


def local_replica(*args: str) -> Result:
    return CliRunner().invoke(main, ["local-replica", *args])


def ok(*args: str) -> str:
    result = local_replica(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


def listed(data_dir: Path) -> dict[str, dict[str, Any]]:
    columns = "tablet_id,table_name,state,term,voted_for,config_index,unsafe_config_change,peers,error"
    rows = json.loads(ok("list", str(data_dir), "--columns", columns, "--format", "json"))
    return {r["tablet_id"]: r for r in rows}


def rpc(server: ClusterServer, method: Any, request: Any) -> Any:
    async def call() -> Any:
        messenger = Messenger()
        try:
            return await messenger.call(server.address, method, request, timeout=5.0)
        finally:
            await messenger.close()

    return asyncio.run(call())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    with MiniCluster(tmp_path / "mc", MiniClusterOptions(num_masters=1, num_tservers=1)) as mc:
        yield mc


def test_local_replica_on_a_stopped_tablet_server(cluster: MiniCluster) -> None:
    tserver = cluster.tservers[0]
    data_dir = tserver.data_dir
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as client:
        wait_for(
            lambda: True if any(s.live for s in client.list_tablet_servers()) else None,
            what="a live tserver",
            timeout_s=60,
        )
        table = client.create_table("t", SCHEMA, Partitioning().add_hash_partitions("id", 2), num_replicas=1)
        assert table.insert([{"id": i, "v": f"v{i}"} for i in range(100)]) == []
        tablet_a, tablet_b = sorted(t.tablet_id for t in table.tablets())
    uuid = tserver.uuid

    # While the server runs, every command refuses its directory and changes nothing.
    pid = tserver.process.pid
    for args in (
        ["list", str(data_dir)],
        ["delete", str(data_dir), tablet_a],
        ["cmeta", "print-replica-uuids", str(data_dir), tablet_a],
        ["cmeta", "set-term", str(data_dir), tablet_a, "99"],
        ["cmeta", "rewrite-raft-config", str(data_dir), tablet_a, uuid],
    ):
        refused = local_replica(*args)
        assert refused.exit_code == 1, refused.output
        assert f"is in use by a running server (tserver pid {pid}); stop the server first" in refused.output
    tserver.process.stop()

    replicas = listed(data_dir)
    assert set(replicas) == {tablet_a, tablet_b}
    for replica in replicas.values():
        assert replica["table_name"] == "t"
        assert replica["state"] == "READY"
        assert replica["term"] >= 1
        assert replica["peers"] == [uuid]
        assert replica["error"] is None
    assert "2 replicas in" in ok("list", str(data_dir))
    assert ok("cmeta", "print-replica-uuids", str(data_dir), tablet_a).strip() == uuid
    assert json.loads(ok("cmeta", "print_replica_uuids", str(data_dir), tablet_a, "--format", "json")) == {
        "tablet_id": tablet_a,
        "uuids": [uuid],
    }

    # set-term only raises the term.
    term = replicas[tablet_b]["term"]
    lower = local_replica("cmeta", "set-term", str(data_dir), tablet_b, str(term))
    assert lower.exit_code == 1
    assert f"new term {term} must be higher than the current term {term} of tablet {tablet_b}" in lower.output
    raised = ok("cmeta", "set-term", str(data_dir), tablet_b, str(term + 50))
    assert f"term raised from {term} to {term + 50}" in raised
    assert listed(data_dir)[tablet_b]["term"] == term + 50
    assert listed(data_dir)[tablet_b]["voted_for"] is None

    # rewrite-raft-config replaces the members, marks the config unsafe and keeps a backup.
    bad = local_replica("cmeta", "rewrite-raft-config", str(data_dir), tablet_b, "not-a-uuid:127.0.0.1:7050")
    assert bad.exit_code == 1
    assert "expected UUID[:HOST:PORT] with a 32-hex-digit server uuid" in bad.output
    other = "f" * 32
    away = local_replica("cmeta", "rewrite_raft_config", str(data_dir), tablet_a, f"{other}:127.0.0.1:7050")
    assert away.exit_code == 0, away.output
    assert f"this server ({uuid}) is not a member of the new config" in away.stderr
    ok("cmeta", "rewrite-raft-config", str(data_dir), tablet_b, f"{uuid}:{tserver.address}")
    rewritten = listed(data_dir)
    assert rewritten[tablet_a]["peers"] == [other]
    assert rewritten[tablet_b]["peers"] == [uuid]
    assert rewritten[tablet_b]["unsafe_config_change"] is True
    assert len(list((data_dir / "tablets" / tablet_b).glob("cmeta.pre_rewrite.*"))) == 2  # set-term, rewrite

    # delete tombstones: rows and log go, metadata and consensus metadata stay.
    missing = local_replica("delete", str(data_dir), "0" * 32)
    assert missing.exit_code == 1
    assert f"no replica of tablet {'0' * 32} in {data_dir}" in missing.output
    deleted = ok("delete", str(data_dir), tablet_a)
    assert f"tombstoned tablet {tablet_a}" in deleted
    assert not (data_dir / "stores" / f"{tablet_a}.duckdb").exists()
    assert not (data_dir / "tablets" / tablet_a / "wal").exists()
    assert (data_dir / "tablets" / tablet_a / "cmeta").exists()
    assert (data_dir / "stores" / f"{tablet_b}.duckdb").exists()
    after = listed(data_dir)
    assert after[tablet_a]["state"] == "TOMBSTONED"
    assert after[tablet_a]["peers"] == [other]
    assert after[tablet_b]["state"] == "READY"
    assert "already tombstoned" in ok("delete", str(data_dir), tablet_a)

    # The server starts on the changed directory: tablet A stays a tombstone, tablet B leads
    # in a term above the one set, with the rewritten config.
    cluster.restart(tserver)
    states = rpc(tserver, LIST_TABLETS, tpb.ListTabletsRequestPB())
    assert {t.tablet_id: t.state for t in states.tablets}[tablet_a] == tpb.TOMBSTONED

    def leading() -> cpb.ConsensusStatePB | None:
        request = cpb.GetConsensusStateRequestPB(dest_uuid=uuid, tablet_ids=[tablet_b])
        try:
            states = rpc(tserver, GET_CONSENSUS_STATE, request).tablets
        except NyalaError:  # still bootstrapping
            return None
        return states[0] if states and states[0].leader_uuid == uuid else None

    state = wait_for(leading, what=f"tablet {tablet_b} to elect a leader", timeout_s=60)
    assert state.current_term > term + 50
    assert [p.permanent_uuid for p in state.committed_config.peers] == [uuid]

    # --clean-unsafe removes every trace, once the server is stopped again.
    tserver.process.stop()
    assert "removed every trace" in ok("delete", str(data_dir), tablet_a, "--clean-unsafe")
    assert not (data_dir / "tablets" / tablet_a).exists()
    assert set(listed(data_dir)) == {tablet_b}


def test_local_replica_refuses_what_is_not_a_tablet_server_directory(tmp_path: Path) -> None:
    result = local_replica("list", str(tmp_path / "nope"))
    assert result.exit_code == 1
    assert f"{tmp_path / 'nope'} is not a Nyala server's data directory (it has no instance file)" in result.output
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "instance").write_text("a" * 32 + "\n")  # a master's directory has no tablets/
    result = local_replica("list", str(tmp_path / "m"))
    assert result.exit_code == 1
    assert "is not a tablet server's data directory (it has no tablets/ directory)" in result.output
