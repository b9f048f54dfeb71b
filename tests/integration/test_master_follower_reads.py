"""Follower masters serve catalog reads within a staleness bound (KUDU-500), as real processes.

Three master processes and fake tablet servers: a follower answers ListTables,
GetTableSchema, GetTableLocations, GetTabletLocations and ListTabletServers from its applied
catalog when the request allows the staleness it can prove; with the leader and the other
follower paused (SIGSTOP, so no new leader can be elected) the last master's catalog ages:
reads within the bound go on, reads beyond it are refused naming the leader, and reads
resume once the others are back.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nyala import errors
from nyala.client import AsyncClient, ClientOptions
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc.loop import run
from nyala.services import (
    CREATE_TABLE,
    GET_TABLE_LOCATIONS,
    GET_TABLE_SCHEMA,
    GET_TABLET_LOCATIONS,
    LIST_TABLES,
    LIST_TABLET_SERVERS,
)
from nyala.testing.wait import wait_for_async
from tests.integration.test_master_processes import fake_tservers, ident, masters, registered
from tests.unit.master.helpers import create_request

pytestmark = pytest.mark.timeout(150)

BOUND_MS = 30_000


def replica_sets(response: mpb.GetTableLocationsResponsePB) -> dict[str, tuple[tuple[str, int], ...]]:
    """Per tablet: (server uuid, role) of each replica."""
    uuids = [ts.permanent_uuid for ts in response.ts_infos]
    return {
        loc.tablet_id: tuple(sorted((uuids[r.ts_info_idx], r.role) for r in loc.replicas))
        for loc in response.tablet_locations
    }


def test_follower_masters_serve_reads_within_the_bound_and_refuse_beyond_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with masters(tmp_path, 3) as cluster:
            await asyncio.gather(*(cluster.start(i) for i in range(3)))
            leader = await cluster.leader()
            followers = [i for i in range(3) if i != leader]
            async with fake_tservers(cluster.addresses, 3) as tservers:
                await registered(cluster, range(3), tservers)
                await cluster.call(leader, CREATE_TABLE, create_request("t", buckets=2), timeout=20)
                table = ident("t")

                # Without a bound a follower refuses catalog reads and names the leader, as before.
                with pytest.raises(errors.NotTheLeader) as caught:
                    await cluster.call(followers[0], LIST_TABLES, mpb.ListTablesRequestPB())
                assert caught.value.leader_hint == cluster.addresses[leader]

                async def leader_locations() -> dict[str, tuple[tuple[str, int], ...]] | None:
                    # Until every tablet's leader is persisted (reported by its tablet server).
                    answer = await cluster.call(
                        leader, GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=table)
                    )
                    sets = replica_sets(answer)
                    led = all(any(role == common_pb2.LEADER for _, role in s) for s in sets.values())
                    return sets if len(sets) == 2 and led else None

                expected = await wait_for_async(leader_locations, what="locations with leaders", timeout_s=20)
                for f in followers:
                    # With a bound every follower answers from its applied catalog: the same
                    # replicas, and the leaders the catalog holds.
                    async def same_locations(f: int = f) -> bool:
                        request = mpb.GetTableLocationsRequestPB(table=table, max_staleness_ms=BOUND_MS)
                        try:
                            answer = await cluster.call(f, GET_TABLE_LOCATIONS, request)
                        except (errors.ServiceUnavailable, errors.NotFound):
                            # Within the bound its catalog may not have applied the table yet, or
                            # still has its tablets CREATING: both are right answers of a stale read.
                            return False
                        return replica_sets(answer) == expected

                    await wait_for_async(
                        same_locations, what=f"master {f} to serve the leader's locations", timeout_s=20
                    )
                    listed = await cluster.call(f, LIST_TABLES, mpb.ListTablesRequestPB(max_staleness_ms=BOUND_MS))
                    assert [(t.name, t.num_tablets) for t in listed.tables] == [("t", 2)]
                    schema = await cluster.call(
                        f, GET_TABLE_SCHEMA, mpb.GetTableSchemaRequestPB(table=table, max_staleness_ms=BOUND_MS)
                    )
                    assert schema.create_table_done
                    assert schema.table_name == "t"
                    tablet_id = sorted(expected)[0]
                    one = await cluster.call(
                        f,
                        GET_TABLET_LOCATIONS,
                        mpb.GetTabletLocationsRequestPB(tablet_ids=[tablet_id, "nope"], max_staleness_ms=BOUND_MS),
                    )
                    assert [loc.tablet_id for loc in one.tablet_locations] == [tablet_id]
                    assert [e.tablet_id for e in one.errors] == ["nope"]
                    servers = await cluster.call(
                        f, LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB(max_staleness_ms=BOUND_MS)
                    )
                    assert servers.catalog_known
                    assert sum(s.num_replicas for s in servers.servers) == 6  # 2 tablets x 3 replicas

                fast = ClientOptions(rpc_attempt_timeout_ms=500, retry_backoff_max_ms=50)
                patient = await AsyncClient.connect(cluster.addresses, options=fast, master_read_staleness_ms=BOUND_MS)
                strict = await AsyncClient.connect(cluster.addresses, options=fast, master_read_staleness_ms=300)
                try:
                    assert await patient.list_tables() == ["t"]
                    # Pause the leader and the other follower: the last master cannot elect a
                    # leader, and the catalog it applied ages from the leader's last message.
                    lone = followers[0]
                    for i in (leader, followers[1]):
                        await asyncio.to_thread(cluster.procs[i].pause)
                    assert await patient.list_tables() == ["t"]
                    assert len(await patient.table_tablets("t")) == 2

                    async def refused() -> errors.NotTheLeader | None:
                        try:
                            await cluster.call(lone, LIST_TABLES, mpb.ListTablesRequestPB(max_staleness_ms=300))
                        except errors.NotTheLeader as e:
                            return e
                        return None

                    refusal = await wait_for_async(refused, what="a 300 ms bound to be refused", timeout_s=20)
                    assert "more than the 300 ms" in str(refusal)
                    # The leader it last knew, or none once it gave up on it and campaigns.
                    assert refusal.leader_hint in ("", cluster.addresses[leader])
                    with pytest.raises(errors.TimedOut, match="more than the 300 ms"):
                        await strict.list_tables(timeout_s=3)
                    # Within its bound the patient client still reads, from the last master.
                    assert await patient.list_tables() == ["t"]

                    for i in (leader, followers[1]):
                        cluster.procs[i].resume()

                    async def fresh_again() -> bool:
                        return await refused() is None

                    await wait_for_async(fresh_again, what="reads within 300 ms after the resume", timeout_s=30)
                    assert await strict.list_tables(timeout_s=10) == ["t"]
                finally:
                    await patient.close()
                    await strict.close()

    run(main())
