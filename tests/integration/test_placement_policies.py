"""Per-table placement policies with real processes: a table pinned to ``/eu`` with its leaders
in ``/eu/r2``, on a cluster with four servers in three ``/eu`` racks and three in ``/us``.

The tests run in file order on one cluster: bad input is refused and changes nothing; the
pinned table is created inside ``/eu`` with one replica per rack; its leaders move to
``/eu/r2`` and come back there after that server restarts; a server of ``/eu/r1`` is lost and
its replicas are re-replicated inside ``/eu``; a new location joins ``/us`` and the CLI
rebalancer moves nothing of the pinned table out of ``/eu``; a policy changed with
``nyala table set-placement`` is flagged by ksck until the rebalancer's policy fixer moves the
replicas; ksck says why a table whose only server is gone cannot be re-replicated.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import nyala
from nyala.client import Client, Partitioning, PlacementPolicy, schema
from nyala.errors import InvalidArgument, NyalaError
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for
from nyala.tools.cli import main

from .replica_kit import TabletProbe, Writer, check_no_acked_row_lost, consensus_states

pytestmark = pytest.mark.timeout(420)

LOCATIONS = {"/eu/r1": 2, "/eu/r2": 1, "/eu/r3": 1, "/us/east": 2, "/us/west": 1}
SCHEMA = schema([("id", "int64"), ("v", "string")], primary_key="id")
PINNED = "pinned"
FREE = "free"
EU = PlacementPolicy(("/eu",), leader_location="/eu/r2")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(
        num_masters=1,
        raft_tick_interval_ms=50,
        raft_heartbeat_interval_ms=200,
        heartbeat_interval_ms=200,
        master_flags=("--tserver-unresponsive-timeout-ms", "3000"),
        tserver_flags=(
            *("--follower-unavailable-considered-failed-sec", "3"),
            *("--tablet-copy-start-interval-ms", "500"),
        ),
    )
    with MiniCluster(Path(tmp_path_factory.mktemp("policies")), options, locations=LOCATIONS) as mc:
        yield mc


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[Client]:
    with nyala.connect(cluster.master_addresses_flag, timeout_s=60) as c:
        wait_for(lambda: sum(s.live for s in c.list_tablet_servers()) == 7, what="seven live tablet servers")
        yield c


def cli(cluster: MiniCluster, *args: str) -> Result:
    return CliRunner().invoke(main, [*args[:2], cluster.master_addresses_flag, *args[2:]], catch_exceptions=False)


Layout = dict[str, list[tuple[str, str, str]]]


def layout(client: Client, table: str) -> Layout:
    """tablet id -> sorted (location, role, uuid) of its replicas, as the master knows them."""
    tablets = client.open_table(table).tablets()
    return {t.tablet_id: sorted((r.location, r.role, r.uuid) for r in t.replicas) for t in tablets}


def settled(client: Client, table: str, rf: int = 3) -> Layout | None:
    found = layout(client, table)
    for replicas in found.values():
        roles = sorted(role for _, role, _ in replicas)
        if len(replicas) != rf or roles != sorted(["LEADER"] + ["FOLLOWER"] * (rf - 1)):
            return None
    return found


def assert_pinned(found: Layout) -> None:
    for tablet_id, replicas in found.items():
        locations = [loc for loc, _, _ in replicas]
        assert all(loc.startswith("/eu/") for loc in locations), (tablet_id, replicas)


def leaders_in(client: Client, location: str) -> Layout | None:
    found = settled(client, PINNED)
    if found is None:
        return None
    ok = all(any(role == "LEADER" and loc == location for loc, role, _ in r) for r in found.values())
    return found if ok else None


def test_bad_policies_are_refused_and_change_nothing(cluster: MiniCluster, client: Client) -> None:
    with pytest.raises(InvalidArgument, match="empty component"):
        client.create_table("bad", SCHEMA, num_replicas=3, placement="/eu//r1")
    with pytest.raises(InvalidArgument, match=r"cannot be met: 0 live tablet server\(s\) in /asia"):
        client.create_table("bad", SCHEMA, num_replicas=3, placement="/asia")
    with pytest.raises(InvalidArgument, match=r"cannot be met: 1 live tablet server\(s\) in /eu/r2"):
        client.create_table("bad", SCHEMA, num_replicas=3, placement="/eu/r2")
    with pytest.raises(InvalidArgument, match="outside the table's locations"):
        client.create_table("bad", SCHEMA, num_replicas=3, placement=PlacementPolicy(("/eu",), "/us/east"))
    assert "bad" not in client.list_tables()
    result = cli(cluster, "table", "set-placement", "no-such-table", "--placement", "/eu")
    assert result.exit_code != 0
    assert "no-such-table" in result.output
    client.create_table(FREE, SCHEMA, Partitioning().add_hash_partitions("id", 4), num_replicas=3)
    version = client.open_table(FREE).schema_version
    for args, message in [
        (("--placement", "eu"), "must begin with '/'"),
        (("--placement", "/eu,,/us"), "comma-separated locations"),
        (("--placement", "/asia"), "cannot be met"),
        (("--clear", "--placement", "/eu"), "--clear removes the policy"),
        ((), "give --placement, --leader-location, or --clear"),
    ]:
        result = cli(cluster, "table", "set-placement", FREE, *args)
        assert result.exit_code != 0, (args, result.output)
        assert message in result.output, (args, result.output)
    table = client.open_table(FREE)
    assert table.placement.empty
    assert table.schema_version == version


def test_a_pinned_table_is_created_inside_its_subtree_one_replica_per_rack(
    cluster: MiniCluster, client: Client
) -> None:
    client.create_table(PINNED, SCHEMA, Partitioning().add_hash_partitions("id", 4), num_replicas=3, placement=EU)
    found = wait_for(lambda: settled(client, PINNED), what="the pinned table's tablets running")
    assert_pinned(found)
    for replicas in found.values():
        assert sorted(loc for loc, _, _ in replicas) == ["/eu/r1", "/eu/r2", "/eu/r3"]
    assert client.open_table(PINNED).placement == EU
    described = cli(cluster, "table", "describe", PINNED)
    assert described.exit_code == 0, described.output
    assert "Placement policy: replicas in /eu; leader in /eu/r2" in described.output
    as_json = json.loads(cli(cluster, "table", "describe", PINNED, "--format", "json").stdout)
    assert as_json["placement"] == {"locations": ["/eu"], "leader_location": "/eu/r2"}
    (master,) = cluster.masters
    with urllib.request.urlopen(f"{master.url}/api/tables/{PINNED}", timeout=10) as response:
        page = json.loads(response.read())
    assert page["table"]["placement_policy"] == "replicas in /eu; leader in /eu/r2"


def test_a_range_policy_replaces_the_table_policy_for_its_tablets(cluster: MiniCluster, client: Client) -> None:
    partitioning = Partitioning().set_range_partition_columns(["id"]).add_range_partition(0, 100)
    partitioning = partitioning.add_range_partition(100, 200)
    client.create_table(
        "ranged", SCHEMA, partitioning, num_replicas=3, placement="/eu", range_placements=[((0, 100), "/us")]
    )
    table = client.open_table("ranged")
    assert [(r.range, r.policy) for r in table.range_placements] == [("[(0), (100))", PlacementPolicy(("/us",)))]
    found = wait_for(lambda: settled(client, "ranged"), what="the ranged table's tablets running")
    by_range = {t.partition: found[t.tablet_id] for t in table.tablets()}
    assert len(by_range) == 2
    for partition, replicas in by_range.items():
        wanted = "/us/" if "(0), (100)" in partition else "/eu/"
        assert all(loc.startswith(wanted) for loc, _, _ in replicas), (partition, replicas)
    client.delete_table("ranged")
    created = cli(
        cluster, "table", "create", "ranged_cli", "-c", "id:int64", "-c", "v:string", "-k", "id",
        "--range-columns", "id", "--range", "0", "100", "--range", "100", "200",
        "--placement", "/eu", "--range-placement", "0", "100", "/us",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    described = cli(cluster, "table", "describe", "ranged_cli")
    assert "Placement policy: replicas in /eu" in described.output
    assert "range [(0), (100)): replicas in /us" in described.output
    client.delete_table("ranged_cli")


def test_leaders_move_to_the_leader_location_and_return_after_a_restart(cluster: MiniCluster, client: Client) -> None:
    wait_for(lambda: leaders_in(client, "/eu/r2"), what="every leader in /eu/r2", timeout_s=60)
    (r2,) = cluster.tservers_in("/eu/r2")
    # A planned restart: in maintenance mode its replicas are not replaced while it is down.
    assert client.change_tserver_state(r2.uuid, maintenance=True)
    try:
        pinned = set(layout(client, PINNED))
        terms = {c.tablet_id: c.current_term for c in consensus_states(client, r2) if c.tablet_id in pinned}
        assert len(terms) == 4
        cluster.restart(r2)

        # A restarted server comes back as a follower: leading again takes new elections, which
        # only the master's leader transfers call for here.
        def led_again() -> bool:
            states = [c for c in consensus_states(client, r2) if c.tablet_id in pinned]
            return len(states) == 4 and all(
                c.role == common_pb2.LEADER and c.current_term > terms[c.tablet_id] for c in states
            )

        wait_for(led_again, what="the restarted server to lead every tablet again, in a new term", timeout_s=90)
        wait_for(lambda: leaders_in(client, "/eu/r2"), what="the master to see every leader in /eu/r2")
    finally:
        client.change_tserver_state(r2.uuid, maintenance=False)


def test_a_lost_server_is_re_replicated_inside_the_subtree(cluster: MiniCluster, client: Client) -> None:
    before = wait_for(lambda: settled(client, PINNED), what="the pinned table settled")
    r1 = cluster.tservers_in("/eu/r1")
    held = {uuid for replicas in before.values() for _, _, uuid in replicas}
    victim: ClusterServer = next(s for s in r1 if s.uuid in held)
    with Writer(cluster.master_addresses_flag, PINNED) as writer:
        writer.wait_for_rows(100, "the first writes")
        cluster.kill(victim)

        def healed() -> Layout | None:
            found = settled(client, PINNED)
            if found is None or any(uuid == victim.uuid for r in found.values() for _, _, uuid in r):
                return None
            return found

        after = wait_for(healed, what="the pinned table re-replicated", timeout_s=120)
        writer.wait_for_rows(100, "writes after healing")
    assert writer.failures == [], writer.failures
    assert_pinned(after)
    for replicas in after.values():
        assert sorted(loc for loc, _, _ in replicas) == ["/eu/r1", "/eu/r2", "/eu/r3"]
    check_no_acked_row_lost(cluster, client, sorted(after), writer.acked)
    cluster.restart(victim)
    wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 7, what="the lost server back")


def test_rebalancing_never_moves_a_pinned_replica_out_of_its_subtree(cluster: MiniCluster, client: Client) -> None:
    cluster.add_location("/us/south", 2)
    wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 9, what="nine live tablet servers")
    before_free = wait_for(lambda: settled(client, FREE), what="the free table settled")
    result = cli(cluster, "cluster", "rebalance", "--timeout-s", "30", "--max-run-time-sec", "240")
    assert result.exit_code == 0, result.output
    after_free = wait_for(lambda: settled(client, FREE), what="the free table settled after rebalancing")
    south = {s.uuid for s in cluster.tservers_in("/us/south")}
    moved = any(uuid in south for r in after_free.values() for _, _, uuid in r)
    assert moved, ("nothing of the free table went to the new location", before_free, after_free)
    pinned = wait_for(lambda: settled(client, PINNED), what="the pinned table settled after rebalancing")
    assert_pinned(pinned)
    # The /eu/r1 server that came back empty took its share of the pinned table again.
    r1_load = [sum(uuid == s.uuid for r in pinned.values() for _, _, uuid in r) for s in cluster.tservers_in("/eu/r1")]
    assert min(r1_load) >= 1, r1_load


def test_a_changed_policy_is_flagged_then_fixed_by_the_rebalancer(cluster: MiniCluster, client: Client) -> None:
    result = cli(cluster, "table", "set-placement", FREE, "--placement", "/us")
    assert result.exit_code == 0, result.output
    assert client.open_table(FREE).placement == PlacementPolicy(("/us",))
    outside = [t for t, r in layout(client, FREE).items() if any(loc.startswith("/eu") for loc, _, _ in r)]
    assert outside, "the free table had no replica in /eu to fix"
    report = cli(cluster, "cluster", "ksck", "--format", "json")
    warnings = json.loads(report.stdout)["warnings"]
    assert any("breaks its placement policy" in w and "outside the table's locations" in w for w in warnings), warnings
    result = cli(cluster, "cluster", "rebalance", "--timeout-s", "30", "--max-run-time-sec", "240")
    assert result.exit_code == 0, result.output

    def inside_us() -> Layout | None:
        found = settled(client, FREE)
        if found is None or any(not loc.startswith("/us/") for r in found.values() for loc, _, _ in r):
            return None
        return found

    wait_for(inside_us, what="every replica of the free table in /us", timeout_s=120)
    warnings = json.loads(cli(cluster, "cluster", "ksck", "--format", "json").stdout)["warnings"]
    assert not any(f"table '{FREE}'" in w for w in warnings), warnings


def test_ksck_says_why_a_policy_cannot_be_met(cluster: MiniCluster, client: Client) -> None:
    client.create_table("west", SCHEMA, num_replicas=1, placement="/us/west")
    wait_for(lambda: settled(client, "west", rf=1), what="the /us/west table running")
    (west,) = cluster.tservers_in("/us/west")
    cluster.kill(west)
    try:

        def flagged() -> list[str] | None:
            report = json.loads(cli(cluster, "cluster", "ksck", "--format", "json").stdout)
            found = [w for w in report["warnings"] if "table 'west'" in w and "cannot be met" in w]
            return found or None

        (warning,) = wait_for(flagged, what="ksck to flag the /us/west table", timeout_s=60)
        assert "only 0 live tablet server(s) in /us/west" in warning
        assert all(loc == "/us/west" for r in layout(client, "west").values() for loc, _, _ in r)
    finally:
        cluster.restart(west)


def test_policies_survive_a_master_restart(cluster: MiniCluster, client: Client) -> None:
    (master,) = cluster.masters
    cluster.restart(master)

    def reloaded() -> PlacementPolicy | None:
        try:
            return client.open_table(PINNED).placement
        except NyalaError:
            return None  # the master is still becoming leader

    assert wait_for(reloaded, what="the pinned table's policy after the master restart") == EU
    assert client.open_table(FREE).placement == PlacementPolicy(("/us",))


def test_a_tablet_whose_locations_have_no_free_server_stays_under_replicated(
    cluster: MiniCluster, client: Client
) -> None:
    # Three single-server locations hold the table; losing one leaves no server inside to
    # re-replicate to, while seven servers outside could take a replica.
    tight = PlacementPolicy(("/eu/r2", "/eu/r3", "/us/west"))
    wait_for(lambda: sum(s.live for s in client.list_tablet_servers()) == 9, what="every tablet server live")
    client.create_table("tight", SCHEMA, Partitioning().add_hash_partitions("id", 2), num_replicas=3, placement=tight)
    wait_for(lambda: settled(client, "tight"), what="the tight table running")
    (r3,) = cluster.tservers_in("/eu/r3")
    probes = [TabletProbe(cluster, client, tablet_id) for tablet_id in layout(client, "tight")]
    cluster.kill(r3)
    try:
        # Once each leader calls the lost member FAILED, the master looks for a replacement.
        wait_for(
            lambda: all(p.health_of(r3.uuid) == cpb.FAILED for p in probes),
            what="the leaders to call the lost member failed",
            timeout_s=90,
        )

        def reported() -> list[str] | None:
            report = json.loads(cli(cluster, "cluster", "ksck", "--format", "json", "--tables", "tight").stdout)
            statuses = {t["status"] for t in report["tablets"]}
            unmet = [w for w in report["warnings"] if "cannot be met" in w]
            return unmet if statuses == {"UNDER_REPLICATED"} and unmet else None

        (warning,) = wait_for(reported, what="ksck to call the tight table under-replicated, and say why", timeout_s=90)
        assert "only 2 live tablet server(s) in /eu/r2, /eu/r3, /us/west" in warning
        for replicas in layout(client, "tight").values():
            assert {loc for loc, _, _ in replicas} <= {"/eu/r2", "/eu/r3", "/us/west"}, replicas
    finally:
        cluster.restart(r3)
