"""``nyala`` admin commands against real processes: master list terms, the table alter verbs, scans."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import nyala
from nyala.client import Client
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    # Three masters for the term test; one tablet server is enough for the alter verbs (RF 1).
    options = MiniClusterOptions(num_masters=3, num_tservers=1)
    with MiniCluster(Path(tmp_path_factory.mktemp("cli-cluster")), options) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: any(s.live for s in c.list_tablet_servers()), what="a live tablet server", timeout_s=60)
        yield c


def run(cluster: MiniCluster, *args: str) -> Result:
    """``nyala GROUP COMMAND MASTERS ARGS...`` in this process."""
    group, command, *rest = args
    return CliRunner().invoke(main, [group, command, cluster.master_addresses_flag, *rest, "--timeout-s", "30"])


def ok(cluster: MiniCluster, *args: str) -> str:
    result = run(cluster, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def describe(cluster: MiniCluster, table: str) -> dict[str, Any]:
    described: dict[str, Any] = json.loads(ok(cluster, "table", "describe", table, "--format", "json"))
    return described


def scan(cluster: MiniCluster, table: str, *where: str) -> list[dict[str, Any]]:
    args = [a for w in where for a in ("-w", w)]
    out = ok(cluster, "table", "scan", table, "--format", "json", *args)
    return sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["id"])


def test_master_list_shows_every_masters_own_term(cluster: MiniCluster, client: Client) -> None:
    listed: list[dict[str, Any]] = []

    def settled() -> bool:
        nonlocal listed
        result = run(cluster, "master", "list", "--columns", "uuid,role,term,error", "--format", "json")
        listed = json.loads(result.stdout) if result.exit_code == 0 else []
        roles = sorted(m["role"] for m in listed)
        # A follower learns the leader's term from its first heartbeat: wait for that.
        return roles == ["FOLLOWER", "FOLLOWER", "LEADER"] and len({m["term"] for m in listed}) == 1

    wait_for(settled, what="one leader and three masters on one term", timeout_s=60)
    assert all(m["term"] > 0 and not m["error"] for m in listed), listed


CREATE = [
    "-c", "id:int64", "-c", "name:string", "-c", "v:double", "-c", "note:string",
    "-k", "id", "--range-columns", "id", "--range", "0", "100", "--num-replicas", "1",
]  # fmt: skip


def test_alter_verbs_end_to_end(cluster: MiniCluster, client: Client) -> None:
    ok(cluster, "table", "create", "events", *CREATE)
    table = client.open_table("events")
    assert table.insert([{"id": i, "name": f"s{i}", "v": float(i), "note": "it's"} for i in range(0, 100, 10)]) == []

    # A SQL-style literal matches, in '=' and in IN lists.
    assert [r["id"] for r in scan(cluster, "events", "name = 's30'")] == [30]
    assert [r["id"] for r in scan(cluster, "events", "name in ('s10', 's20', 'nope')")] == [10, 20]
    assert len(scan(cluster, "events", "note = 'it''s'")) == 10

    added = ok(cluster, "table", "add-range-partition", "events", "[100]", "[200]")
    assert "added range partition [(100), (200)) to table events" in added
    ok(cluster, "table", "add_range_partition", "events", "[199]", "[299]",
       "--lower-bound-type", "EXCLUSIVE_BOUND", "--upper-bound-type", "INCLUSIVE_BOUND")  # fmt: skip
    assert "[(200), (300))" in describe(cluster, "events")["partitioning"]
    table.refresh()
    assert table.insert([{"id": 150, "name": "s150"}, {"id": 299, "name": "s299"}]) == []
    assert [r["id"] for r in scan(cluster, "events", "id >= 100")] == [150, 299]

    dropped = ok(cluster, "table", "drop-range-partition", "events", "[0]", "[100]")
    assert "dropped range partition [(0), (100)) of table events" in dropped
    assert [r["id"] for r in scan(cluster, "events")] == [150, 299]

    ok(cluster, "table", "rename-column", "events", "name", "label")
    ok(cluster, "table", "delete-column", "events", "v")
    ok(cluster, "table", "rename-table", "events", "happenings")
    described = describe(cluster, "happenings")
    assert [c["name"] for c in described["columns"]] == ["id", "label", "note"]
    assert described["schema_version"] == 6
    assert scan(cluster, "happenings", "label = 's150'") == [{"id": 150, "label": "s150", "note": None}]
    assert "events" not in client.list_tables()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rename-table", "nope", "x"], "not found: table 'nope' not found"),
        (
            ["rename-table", "fixed", "other"],
            "already present: cannot rename table 'fixed': table 'other' already exists",
        ),
        (["rename-column", "fixed", "zz", "y"], "no column 'zz'"),
        (["rename-column", "fixed", "id", "key"], "cannot rename primary key column 'id'"),
        (["rename-column", "fixed", "name", "V"], "duplicate column name 'v' (names are case-insensitive"),
        (["delete-column", "fixed", "id"], "cannot drop primary key column 'id'"),
        (["delete-column", "fixed", "zz"], "no column 'zz'"),
        (["add-range-partition", "fixed", "[50]", "[150]"], "overlaps range"),
        (["add-range-partition", "fixed", "[]", "[10]"], "overlaps range"),
        (["drop-range-partition", "fixed", "[0]", "[50]"], "no range [(0), (50)); the ranges are [(0), (100))\n"),
        (["drop-range-partition", "fixed", "[0]", "[100]"], "without any range partition"),
        (["add-range-partition", "fixed", "['a']", "[]"], "not a valid int64"),
        (["add-range-partition", "fixed", "[1, 2]", "[]"], "has 2 values; the range columns are ['id']"),
    ],
)
def test_bad_alters_are_refused_and_change_nothing(
    cluster: MiniCluster, client: Client, args: list[str], message: str
) -> None:
    if not client.table_exists("fixed"):
        ok(cluster, "table", "create", "fixed", *CREATE)
        ok(cluster, "table", "create", "other", *CREATE)
    before = describe(cluster, "fixed")
    result = run(cluster, "table", *args)
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert describe(cluster, "fixed") == before
