"""Seed 002's known issues of multi-master Kudu, each a regression test named after its Kudu id.

Masters are real processes; tablet servers are fakes in the test's event loop (they answer
CreateTablet / DeleteTablet / AlterSchema and heartbeat to every master).  Every master process
is stopped by PID in a ``finally``, even when a test fails.

- KUDU-1358: CreateTable right after a master election spreads replicas over every live server.
- KUDU-1353: AlterTable and GetTableLocations right after a failover see every replica.
- KUDU-1374: a deletion and an alter the old leader decided, lost on the way, are carried out
  by the new one.
- KUDU-495: a master that loses leadership while replicating fails that operation cleanly and
  keeps running.
- Appendix A (fencing): a tablet server of another cluster, or reporting a tablet the catalog
  never had, has nothing deleted.
- Five masters: with two killed the catalog goes on; with three it stops with a clear error and
  resumes when one comes back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from nyala import errors
from nyala.client import AsyncClient, ClientOptions
from nyala.proto import common_pb2, rpc_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import PING
from nyala.rpc.loop import run
from nyala.services import (
    ALTER_TABLE,
    CREATE_TABLE,
    DELETE_TABLE,
    GET_MASTER_REGISTRATION,
    GET_TABLE_LOCATIONS,
)
from nyala.testing.wait import wait_for_async
from tests.integration.test_master_processes import (
    MasterProcesses,
    fake_tservers,
    ident,
    masters,
    registered,
    table_names,
)
from tests.unit.master.fake_tserver import FakeTablet, FakeTabletServer
from tests.unit.master.helpers import create_request, table_schema

pytestmark = pytest.mark.timeout(150)

STEP = mpb.AlterTableStepPB


def replicas_by_server(tservers: list[FakeTabletServer], table_id: str) -> Counter[str]:
    return Counter(ts.uuid for ts in tservers for t in ts.tablets.values() if t.table_id == table_id)


async def kill_leader(cluster: MasterProcesses, among: list[int]) -> tuple[int, int]:
    """Kill the current leader; returns (the killed one, the new leader among the rest)."""
    old = await cluster.leader(among=among)
    await cluster.kill(old)
    rest = [i for i in among if i != old]
    return old, await cluster.leader(among=rest)


def test_kudu_1358_create_table_right_after_a_master_election_spreads_over_every_live_server(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path, 3) as cluster:
            await asyncio.gather(*(cluster.start(i) for i in range(3)))
            async with fake_tservers(cluster.addresses, 4) as tservers:
                await registered(cluster, range(3), tservers)
                _, new_leader = await kill_leader(cluster, [0, 1, 2])
                # At once: the new leader knows every tablet server (they heartbeat to all
                # masters), so 4 tablets x 3 replicas land on all four, three each.
                created = await cluster.call(new_leader, CREATE_TABLE, create_request("t", buckets=4), timeout=30)
                counts = replicas_by_server(tservers, created.table_id)
                assert sorted(counts.values()) == [3, 3, 3, 3], counts

    run(main())


def test_kudu_1353_alter_table_and_locations_right_after_a_failover_see_every_replica(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path, 3) as cluster:
            await asyncio.gather(*(cluster.start(i) for i in range(3)))
            async with fake_tservers(cluster.addresses, 3) as tservers:
                await registered(cluster, range(3), tservers)
                leader = await cluster.leader()
                await cluster.call(leader, CREATE_TABLE, create_request("t", buckets=2), timeout=30)
                _, new_leader = await kill_leader(cluster, [0, 1, 2])
                # The replica sets come from the catalog, not from reports the new leader has
                # not had yet: every replica and every tablet's leader at once.
                locations = await cluster.call(
                    new_leader, GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("t"))
                )
                assert len(locations.tablet_locations) == 2
                for loc in locations.tablet_locations:
                    assert len(loc.replicas) == 3
                    assert [r.role for r in loc.replicas].count(common_pb2.LEADER) == 1
                add = STEP(
                    add_column=STEP.AddColumn(
                        column=json.dumps({"name": "extra", "type": "int32", "nullable": True}).encode()
                    )
                )
                altered = await cluster.call(
                    new_leader,
                    ALTER_TABLE,
                    mpb.AlterTableRequestPB(table=ident("t"), steps=[add], wait=True),
                    timeout=30,
                )
                assert altered.schema_version == 1
                leaders = [
                    t for ts in tservers for t in ts.tablets.values() if t.config.peers[0].permanent_uuid == ts.uuid
                ]
                assert len(leaders) == 2
                assert all(t.schema_version == 1 for t in leaders)

    run(main())


def test_kudu_1374_operations_the_old_leader_decided_are_carried_out_by_the_new_leader(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path, 3) as cluster:
            await asyncio.gather(*(cluster.start(i) for i in range(3)))
            async with fake_tservers(cluster.addresses, 3) as tservers:
                await registered(cluster, range(3), tservers)
                leader = await cluster.leader()
                await cluster.call(leader, CREATE_TABLE, create_request("gone", buckets=2), timeout=30)
                kept = await cluster.call(leader, CREATE_TABLE, create_request("kept", buckets=2), timeout=30)
                # The deletions and alters the leader decides are lost on the way (answered, not
                # done), and the tablets' state does not change, so no incremental report shows
                # them again: only a full report to a new leader can.
                for ts in tservers:
                    ts.ignore_deletes = ts.ignore_alters = True
                gone = {t for ts in tservers for t, tablet in ts.tablets.items() if tablet.table_id != kept.table_id}
                await cluster.call(leader, DELETE_TABLE, mpb.DeleteTableRequestPB(table=ident("gone")), timeout=30)
                add = STEP(
                    add_column=STEP.AddColumn(
                        column=json.dumps({"name": "extra", "type": "int32", "nullable": True}).encode()
                    )
                )
                await cluster.call(
                    leader, ALTER_TABLE, mpb.AlterTableRequestPB(table=ident("kept"), steps=[add]), timeout=30
                )

                def sent(method: str, tablets: set[str]) -> set[str]:
                    return {getattr(r, "tablet_id", "") for ts in tservers for r in ts.calls_of(method)} & tablets

                kept_tablets = {t for ts in tservers for t, x in ts.tablets.items() if x.table_id == kept.table_id}
                await wait_for_async(
                    lambda: sent("delete", gone) == gone and sent("alter", kept_tablets) == kept_tablets,
                    what="the old leader's DeleteTablet and AlterSchema calls",
                    timeout_s=20,
                )
                assert all(
                    t.state == tpb.RUNNING and t.schema_version == 0 for ts in tservers for t in ts.tablets.values()
                )
                await cluster.kill(leader)
                for ts in tservers:
                    ts.ignore_deletes = ts.ignore_alters = False
                # The new leader asks every tablet server for a full report and acts again.
                await cluster.leader(among=[i for i in range(3) if i != leader])

                def carried_out() -> bool:
                    deleted = all(
                        t.state == tpb.TOMBSTONED for ts in tservers for k, t in ts.tablets.items() if k in gone
                    )
                    leaders = [
                        t
                        for ts in tservers
                        for t in ts.tablets.values()
                        if t.table_id == kept.table_id and t.config.peers[0].permanent_uuid == ts.uuid
                    ]
                    return deleted and all(t.schema_version == 1 for t in leaders)

                await wait_for_async(carried_out, what="the new leader to delete and alter", timeout_s=30)

    run(main())


def test_kudu_495_a_master_losing_leadership_while_replicating_fails_the_operation_and_keeps_running(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with masters(tmp_path, 3) as cluster:
            await asyncio.gather(*(cluster.start(i) for i in range(3)))
            async with fake_tservers(cluster.addresses, 3) as tservers:
                await registered(cluster, range(3), tservers)
                old = await cluster.leader()
                followers = [i for i in range(3) if i != old]
                for i in followers:
                    await asyncio.to_thread(cluster.procs[i].pause)
                # The leader takes the write but cannot replicate it: no follower answers.
                create = asyncio.ensure_future(cluster.call(old, CREATE_TABLE, create_request("x"), timeout=60))
                for _ in range(2):  # answered after the CreateTable on the same connection: it was taken
                    await cluster.call(old, PING, rpc_pb2.PingRequest())
                # The followers elect a new leader while the old one is paused; when it comes
                # back it learns the new term and its write is replaced.
                await asyncio.to_thread(cluster.procs[old].pause)
                for i in followers:
                    cluster.procs[i].resume()
                new_leader = await cluster.leader(among=followers)
                cluster.procs[old].resume()
                # A clean error: its write was replaced by the new leader's log (Aborted), or it had
                # stepped down already for want of a majority (NotTheLeader).
                with pytest.raises((errors.NotTheLeader, errors.Aborted)):
                    await create
                # It keeps running, as a follower of the new leader.
                assert cluster.procs[old].running
                assert await cluster.leader() == new_leader
                registration = await cluster.call(old, GET_MASTER_REGISTRATION, mpb.GetMasterRegistrationRequestPB())
                assert registration.role == common_pb2.FOLLOWER
                # The write's outcome was unknown to the caller: the paused followers may have had
                # it in their socket buffers, and a new leader commits what it holds.  Either way
                # the catalog is whole and consistent on every master.
                names = await table_names(cluster, new_leader)
                assert names in ([], ["x"])
                # And the catalog takes writes again.
                await cluster.call(new_leader, CREATE_TABLE, create_request("y"), timeout=30)
                assert await table_names(cluster, new_leader) == sorted([*names, "y"])

    run(main())


def test_fencing_a_tserver_of_another_cluster_or_with_an_unknown_tablet_has_nothing_deleted(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path / "a", 1) as a, masters(tmp_path / "b", 1) as b:
            await asyncio.gather(a.start(0), b.start(0))
            await asyncio.gather(a.leader(), b.leader())
            async with fake_tservers(a.addresses, 3) as ours, fake_tservers(b.addresses, 1) as (wrong,):
                await registered(a, [0], ours)
                await registered(b, [0], [wrong])
                await a.call(0, CREATE_TABLE, create_request("t", buckets=2), timeout=30)
                await a.call(0, CREATE_TABLE, create_request("gone", buckets=2), timeout=30)
                gone = await tablet_ids(a, "gone")
                # A stray tablet the catalog never had, on one of cluster a's servers, in a full report.
                config = next(iter(ours[0].tablets.values())).config
                stray = FakeTablet("f" * 32, "e" * 32, config, 0)
                ours[0].tablets[stray.tablet_id] = stray
                reports = ours[0].full_reports_sent
                ours[0].restart()
                await wait_for_async(
                    lambda: ours[0].full_reports_sent > reports, what="the full report with the stray", timeout_s=20
                )
                # A server holding cluster a's tablets that heartbeats to cluster b's master.
                wrong.tablets = {k: dataclasses.replace(t) for k, t in ours[1].tablets.items()}
                reports = wrong.full_reports_sent
                wrong.restart()
                await wait_for_async(
                    lambda: wrong.full_reports_sent > reports and wrong.leader_master,
                    what="cluster b's master to get the full report",
                    timeout_s=20,
                )
                # Deleting what the catalog has a record of works (the deleted table's tombstones) ...
                await a.call(0, DELETE_TABLE, mpb.DeleteTableRequestPB(table=ident("gone")), timeout=30)

                def gone_deleted() -> bool:
                    return all(
                        t.state == tpb.TOMBSTONED for ts in ours for t in ts.tablets.values() if t.tablet_id in gone
                    )

                await wait_for_async(gone_deleted, what="the deleted table's replicas to go", timeout_s=20)
                # ... and cluster b's master works too (a table of its own on its one server) ...
                own = await b.call(0, CREATE_TABLE, create_request("bt", buckets=2, rf=1), timeout=30)
                assert replicas_by_server([wrong], own.table_id) == {wrong.uuid: 2}
                # ... while nothing a catalog has no record of was deleted.
                assert ours[0].tablets[stray.tablet_id].state == tpb.RUNNING
                assert stray.tablet_id not in {getattr(c, "tablet_id", "") for c in ours[0].calls_of("delete")}
                assert wrong.calls_of("delete") == []
                assert all(t.state == tpb.RUNNING for t in wrong.tablets.values())
                assert await table_names(b, 0) == ["bt"]

    run(main())


async def tablet_ids(cluster: MasterProcesses, name: str) -> set[str]:
    answer = await cluster.call(0, GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident(name)))
    return {loc.tablet_id for loc in answer.tablet_locations}


def test_five_masters_go_on_with_two_killed_and_stop_with_three_until_one_returns(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path, 5) as cluster:
            await asyncio.gather(*(cluster.start(i) for i in range(5)))
            async with fake_tservers(cluster.addresses, 3) as tservers:
                await registered(cluster, range(5), tservers)
                alive = list(range(5))
                # Two killed (the leader first): the other three elect a leader and go on.
                killed, leader = await kill_leader(cluster, alive)
                alive.remove(killed)
                second = next(i for i in alive if i != leader)
                await cluster.kill(second)
                alive.remove(second)
                leader = await cluster.leader(among=alive)
                await cluster.call(leader, CREATE_TABLE, create_request("t"), timeout=30)
                assert await table_names(cluster, leader) == ["t"]
                # Three killed: two masters are no majority.  The leader steps down (it cannot hear
                # from a majority) and catalog operations stop with a clear error naming every
                # master's answer.
                third = next(i for i in alive if i != leader)
                await cluster.kill(third)
                alive.remove(third)
                client = await AsyncClient.connect(
                    cluster.addresses, options=ClientOptions(rpc_attempt_timeout_ms=1000)
                )
                try:
                    with pytest.raises(errors.TimedOut, match="no leader master found among") as caught:
                        await client.create_table("u", table_schema(), timeout_s=5)
                    assert "FOLLOWER" in str(caught.value) or "CANDIDATE" in str(caught.value)
                finally:
                    await client.close()
                # One comes back: three of five again, and the catalog resumes.
                await cluster.start(third)
                alive.append(third)
                leader = await cluster.leader(among=alive)

                async def created() -> bool:
                    try:
                        await cluster.call(leader, CREATE_TABLE, create_request("v"), timeout=10)
                    except errors.AlreadyPresent:
                        return True
                    except (errors.TimedOut, errors.NotTheLeader, errors.ServiceUnavailable):
                        return False
                    return True

                await wait_for_async(created, what="a catalog write after a master returned", timeout_s=40)
                assert {"t", "v"} <= set(await table_names(cluster, leader))

    run(main())
