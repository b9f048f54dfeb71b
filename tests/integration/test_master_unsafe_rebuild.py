"""``nyala master unsafe-rebuild`` on real processes: the master's data is lost, the catalog comes
back from the tablet servers' metadata, and the table's rows are all there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import nyala
from nyala.client import Partitioning, schema
from nyala.master.unsafe_rebuild import REBUILD_FILE
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.services import LIST_TABLETS
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

pytestmark = pytest.mark.timeout(240)


def tablet_states(cluster: MiniCluster) -> dict[str, set[int]]:
    """Per table name: the states of its replicas on every tablet server."""

    async def ask() -> list[tpb.ListTabletsResponsePB]:
        messenger = Messenger()
        try:
            return [
                await messenger.call(ts.address, LIST_TABLETS, tpb.ListTabletsRequestPB(), timeout=10)
                for ts in cluster.tservers
            ]
        finally:
            await messenger.close()

    out: dict[str, set[int]] = {}
    for answer in run(ask()):
        for t in answer.tablets:
            out.setdefault(t.table_name, set()).add(t.state)
    return out


def rebuild(cluster: MiniCluster, data_dir: Path) -> subprocess.CompletedProcess[str]:
    addresses = ",".join(str(ts.address) for ts in cluster.tservers)
    return subprocess.run(
        [sys.executable, "-m", "nyala", "master", "unsafe-rebuild", addresses, "--fs-data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_lost_master_catalog_is_rebuilt_from_the_tablet_servers(tmp_path: Path) -> None:
    with MiniCluster(tmp_path / "cluster", MiniClusterOptions(num_masters=1, num_tservers=3)) as cluster:
        kv = schema([("id", "int64"), ("v", "string")], primary_key=["id"])
        rows = pa.table({"id": pa.array(range(3000), pa.int64()), "v": [f"v{i}" for i in range(3000)]})
        with nyala.connect(cluster.master_addresses_flag) as client:
            table = client.create_table("kept", kv, Partitioning().add_hash_partitions("id", 3), num_replicas=3)
            assert table.insert(rows) == []
            client.create_table("dropped", kv, Partitioning().add_hash_partitions("id", 2), num_replicas=3)
            client.delete_table("dropped")
        wait_for(
            lambda: tablet_states(cluster).get("dropped") == {tpb.TOMBSTONED},
            what="the deleted table's replicas to be tombstoned",
            timeout_s=60,
        )
        (master,) = cluster.masters
        # Refused while the directory still holds a catalog: nothing is overwritten.
        refused = rebuild(cluster, master.data_dir)
        assert refused.returncode == 1
        assert "holds a sys catalog" in refused.stderr
        cluster.kill(master)
        shutil.rmtree(master.data_dir)  # every master's data is lost
        done = rebuild(cluster, master.data_dir)
        assert done.returncode == 0, done.stderr
        assert "rebuilt 1 tables (kept) and 3 tablets from 3 tablet servers" in done.stdout
        cluster.restart(master)
        with nyala.connect(cluster.master_addresses_flag) as client:
            # The table is back with every row; the deleted one stays deleted.
            wait_for(lambda: client.list_tables() == ["kept"], what="the rebuilt catalog", timeout_s=60)
            table = client.open_table("kept")
            back = table.scanner(["id", "v"]).to_arrow().sort_by("id")
            assert back.column("id").to_pylist() == list(range(3000))
            assert table.insert([{"id": 3000, "v": "after"}]) == []  # and it takes writes again
            assert len(client.table_tablets("kept")) == 3
        assert (master.data_dir / (REBUILD_FILE + ".applied")).exists()
        assert not (master.data_dir / REBUILD_FILE).exists()
