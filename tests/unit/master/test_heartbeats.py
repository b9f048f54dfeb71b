"""Tablet servers and the leader master: registration, reports, tablet creation and deletion, liveness."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from nyala import errors
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc.loop import run
from nyala.services import (
    CREATE_TABLE,
    DELETE_TABLE,
    GET_TABLE_LOCATIONS,
    IS_CREATE_TABLE_DONE,
    LIST_TABLET_SERVERS,
    TS_HEARTBEAT,
)
from nyala.testing.wait import wait_for_async

from .fake_tserver import FakeTabletServer
from .helpers import cluster, create_request

pytestmark = pytest.mark.timeout(60)


def all_tombstoned(ts: FakeTabletServer) -> bool:
    return bool(ts.tablets) and all(t.state == tpb.TOMBSTONED for t in ts.tablets.values())


def ident(name: str) -> common_pb2.TableIdentifierPB:
    return common_pb2.TableIdentifierPB(table_name=name)


def test_unknown_tserver_is_asked_to_register_and_heartbeats_list_tserver_addresses_when_changed(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=2) as c:
            stranger = mpb.TSHeartbeatRequestPB(instance=common_pb2.NodeInstancePB(permanent_uuid="f" * 32))
            response = await c.call(TS_HEARTBEAT, stranger)
            assert response.needs_reregister
            assert response.leader_master
            assert {a.permanent_uuid for a in response.tserver_addresses} == {t.uuid for t in c.tservers}
            assert response.tserver_addresses_version == c.master.ts_manager.addresses_version
            assert c.master.ts_manager.get("f" * 32) is None
            # A server that holds the current version gets no list; one with another version does.
            stranger.tserver_addresses_version = response.tserver_addresses_version
            assert not (await c.call(TS_HEARTBEAT, stranger)).tserver_addresses
            stranger.tserver_addresses_version += 1
            assert len((await c.call(TS_HEARTBEAT, stranger)).tserver_addresses) == 2
            # Each fake registered and sent exactly one full report so far (asked only once per term).
            assert all(t.full_reports_sent == 1 for t in c.tservers)
            # A restarted tablet server (higher instance) must register and report in full again.
            ts = c.tservers[0]
            ts.restart()
            await wait_for_async(lambda: ts.full_reports_sent == 2, what="full report after restart")
            assert c.master.ts_manager.get(ts.uuid).instance_seqno == ts.instance_seqno  # type: ignore[union-attr]

    run(main())


def test_create_table_waits_until_every_tablet_reports_a_leader(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path) as c:
            response = await c.call(CREATE_TABLE, create_request(buckets=2, ranges=((0, 100), (100, 200))))
            view = c.master.catalog_manager.leader()
            tablets = view.catalog.tablets_of(response.table_id)
            assert len(tablets) == 4
            assert all(t.running for t in tablets)
            # Every replica got exactly one CreateTablet with the whole config and peer addresses.
            creates = [r for ts in c.tservers for r in ts.calls_of("create")]
            assert len(creates) == 4 * 3
            for request in creates:
                assert isinstance(request, tpb.CreateTabletRequestPB)
                assert len(request.config.peers) == 3
                assert {p.permanent_uuid for p in request.peer_addresses} == {
                    p.permanent_uuid for p in request.config.peers
                }
            # The RUNNING state, leader and config are persisted, and locations name the leader.
            assert all(t.leader_uuid == t.replicas[0] for t in tablets)
            locations = await c.call(GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("t")))
            assert [loc.tablet_id for loc in locations.tablet_locations] == [t.tablet_id for t in tablets]
            assert locations.ttl_millis == 300_000
            for loc, tablet in zip(locations.tablet_locations, tablets, strict=True):
                leaders = [
                    locations.ts_infos[r.ts_info_idx].permanent_uuid
                    for r in loc.replicas
                    if r.role == common_pb2.LEADER
                ]
                assert leaders == [tablet.replicas[0]]
            done = await c.call(IS_CREATE_TABLE_DONE, mpb.IsCreateTableDoneRequestPB(table=ident("t")))
            assert done.done

    run(main())


def test_tablets_stay_creating_until_a_leader_is_reported_and_creation_is_retried(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=1) as c:
            ts = c.tservers[0]
            ts.fail_creates = True
            with pytest.raises(errors.TimedOut):  # the master's, or the RPC layer's under load
                await c.call(CREATE_TABLE, create_request(rf=1, buckets=2), timeout=1.0)
            # The table exists anyway, its tablets CREATING; locations are not available yet.
            done = await c.call(IS_CREATE_TABLE_DONE, mpb.IsCreateTableDoneRequestPB(table=ident("t")))
            assert not done.done
            with pytest.raises(errors.ServiceUnavailable, match="is not running yet"):
                await c.call(GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("t")))
            attempts = len(ts.calls_of("create"))
            await wait_for_async(lambda: len(ts.calls_of("create")) >= attempts + 2, what="CreateTablet retries")
            ts.fail_creates = False

            async def all_done() -> bool:
                r = await c.call(IS_CREATE_TABLE_DONE, mpb.IsCreateTableDoneRequestPB(table=ident("t")))
                return r.done

            view = c.master.catalog_manager.leader()
            await wait_for_async(lambda: view.create_done(view.catalog.find_table(ident("t"))), what="tablets RUNNING")
            assert await all_done()

    run(main())


def test_delete_table_tombstones_replicas_and_redeletes_a_replica_reported_again(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path) as c:
            table_id = (await c.call(CREATE_TABLE, create_request(buckets=2))).table_id
            forgetful = c.tservers[0]
            forgetful.ignore_deletes = True
            await c.call(DELETE_TABLE, mpb.DeleteTableRequestPB(table=ident("t")))
            view = c.master.catalog_manager.leader()
            assert all(t.dead for t in view.catalog.tablets_of(table_id, include_dead=True))
            for ts in c.tservers[1:]:
                await wait_for_async(functools.partial(all_tombstoned, ts), what="tombstones")
            assert len(forgetful.calls_of("delete")) == 2  # one per tablet
            # The forgetful server "lost" the deletes; after a restart it reports the tablets again
            # and the master deletes them again.
            forgetful.ignore_deletes = False
            forgetful.restart()
            await wait_for_async(lambda: len(forgetful.calls_of("delete")) >= 4, what="DeleteTablet re-sent")
            await wait_for_async(functools.partial(all_tombstoned, forgetful), what="tombstones after restart")
            with pytest.raises(errors.NotFound, match="'t' not found"):
                await c.call(GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=ident("t")))
            with pytest.raises(errors.NotFound, match="'t' not found"):
                await c.call(DELETE_TABLE, mpb.DeleteTableRequestPB(table=ident("t")))

    run(main())


def test_a_silent_tserver_becomes_dead_and_gets_no_new_replicas(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3, tserver_unresponsive_timeout_ms=1000) as c:
            silent = c.tservers[2]
            silent.heartbeating = False

            async def live_of(uuid: str) -> bool:
                servers = (await c.call(LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB())).servers
                return next(s.live for s in servers if s.instance.permanent_uuid == uuid)

            def silent_is_live() -> bool:
                descriptor = c.master.ts_manager.get(silent.uuid)
                assert descriptor is not None
                return c.master.ts_manager.is_live(descriptor)

            await wait_for_async(lambda: not silent_is_live(), what="the silent server to be dead")
            assert not await live_of(silent.uuid)
            assert await live_of(c.tservers[0].uuid)
            with pytest.raises(errors.InvalidArgument, match="replication factor 3; 2 tablet servers are alive"):
                await c.call(CREATE_TABLE, create_request(rf=3))
            table_id = (await c.call(CREATE_TABLE, create_request(rf=1, buckets=8))).table_id
            view = c.master.catalog_manager.leader()
            chosen = {u for t in view.catalog.tablets_of(table_id) for u in t.replicas}
            assert chosen == {c.tservers[0].uuid, c.tservers[1].uuid}
            assert not silent.calls_of("create")
            silent.heartbeating = True
            await wait_for_async(silent_is_live, what="the silent server to be live again")

    run(main())
