"""ChangeTServerState, UnregisterTServer and the catalog's view in ListTabletServers, on an in-process master."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nyala import errors
from nyala.catalog import CatalogState
from nyala.master import Master
from nyala.proto import master_pb2 as mpb
from nyala.rpc.loop import run
from nyala.services import CHANGE_TSERVER_STATE, CREATE_TABLE, LIST_TABLET_SERVERS, UNREGISTER_TSERVER
from nyala.testing.wait import wait_for_async

from .helpers import Cluster, cluster, create_request

pytestmark = pytest.mark.timeout(60)

CHANGE = mpb.TServerStateChangePB
UNKNOWN = "e" * 32


def change(uuid: str, kind: int) -> mpb.ChangeTServerStateRequestPB:
    return mpb.ChangeTServerStateRequestPB(change=CHANGE(uuid=uuid, change=kind))  # type: ignore[arg-type]


async def stored(master: Master) -> CatalogState:
    store = master.catalog_manager.store
    assert store is not None
    return await asyncio.to_thread(store.load)


async def listing(c: Cluster) -> dict[str, mpb.ListTabletServersResponsePB.Entry]:
    response = await c.call(LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB())
    assert response.catalog_known
    return {s.instance.permanent_uuid: s for s in response.servers}


def test_maintenance_mode_is_persisted_idempotent_and_listed(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3) as c:
            ts = c.tservers[0]
            assert (await c.call(CHANGE_TSERVER_STATE, change(ts.uuid, CHANGE.ENTER_MAINTENANCE_MODE))).changed
            # Entering again succeeds and changes nothing (Kudu's SetTServerState does the same).
            assert not (await c.call(CHANGE_TSERVER_STATE, change(ts.uuid, CHANGE.ENTER_MAINTENANCE_MODE))).changed
            view = c.master.catalog_manager.leader()
            assert view.in_maintenance(ts.uuid)
            assert not view.in_maintenance(c.tservers[1].uuid)
            assert (await stored(c.master)).in_maintenance(ts.uuid)
            servers = await listing(c)
            assert servers[ts.uuid].state == mpb.MAINTENANCE_MODE
            assert servers[c.tservers[1].uuid].state == mpb.NONE

            assert (await c.call(CHANGE_TSERVER_STATE, change(ts.uuid, CHANGE.EXIT_MAINTENANCE_MODE))).changed
            assert not (await c.call(CHANGE_TSERVER_STATE, change(ts.uuid, CHANGE.EXIT_MAINTENANCE_MODE))).changed
            assert not view.in_maintenance(ts.uuid)
            assert (await stored(c.master)).tserver_states() == {}

    run(main())


def test_bad_state_changes_are_refused_and_change_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=1) as c:
            before = len(await stored(c.master))
            with pytest.raises(errors.NotFound, match=f"tablet server {UNKNOWN} is not registered"):
                await c.call(CHANGE_TSERVER_STATE, change(UNKNOWN, CHANGE.ENTER_MAINTENANCE_MODE))
            with pytest.raises(errors.NotFound, match="no tablet names it"):
                await c.call(CHANGE_TSERVER_STATE, change(UNKNOWN, CHANGE.EXIT_MAINTENANCE_MODE))
            with pytest.raises(errors.InvalidArgument, match="'nope' is not 32 lowercase hex digits"):
                await c.call(CHANGE_TSERVER_STATE, change("nope", CHANGE.ENTER_MAINTENANCE_MODE))
            with pytest.raises(errors.InvalidArgument, match="unknown tablet server state change 0"):
                await c.call(CHANGE_TSERVER_STATE, change(c.tservers[0].uuid, CHANGE.UNKNOWN_STATE_CHANGE))
            with pytest.raises(errors.NotFound, match=f"tablet server {UNKNOWN} is not registered"):
                await c.call(UNREGISTER_TSERVER, mpb.UnregisterTServerRequestPB(uuid=UNKNOWN))
            with pytest.raises(errors.InvalidArgument, match="no tablet server uuid given"):
                await c.call(UNREGISTER_TSERVER, mpb.UnregisterTServerRequestPB())
            assert len(await stored(c.master)) == before
            assert c.master.catalog_manager.leader().catalog.tserver_states() == {}

    run(main())


def test_unregister_refuses_live_servers_and_servers_with_replicas_unless_forced(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, num_tservers=3, tserver_unresponsive_timeout_ms=1000) as c:
            await c.call(CREATE_TABLE, create_request(rf=3, buckets=2))
            holder = c.tservers[1]
            spare = await c.add_tserver()  # holds no replica
            await wait_for_async(lambda: c.master.ts_manager.get(spare.uuid) is not None, what="spare registered")
            with pytest.raises(errors.IllegalState, match=r"is live .* cannot be unregistered"):
                await c.call(UNREGISTER_TSERVER, mpb.UnregisterTServerRequestPB(uuid=spare.uuid, force=True))

            await c.call(CHANGE_TSERVER_STATE, change(spare.uuid, CHANGE.ENTER_MAINTENANCE_MODE))
            holder.heartbeating = spare.heartbeating = False

            async def dead(uuid: str) -> bool:
                return not (await listing(c))[uuid].live

            await wait_for_async(lambda: dead(holder.uuid), what="the holder to be dead")
            await wait_for_async(lambda: dead(spare.uuid), what="the spare to be dead")
            servers = await listing(c)
            # Replica counts come from the catalog, so the dead holder still shows its two.
            assert servers[holder.uuid].num_replicas == 2
            assert servers[spare.uuid].num_replicas == 0

            with pytest.raises(errors.IllegalState, match=r"still holds 2 replicas .*force"):
                await c.call(UNREGISTER_TSERVER, mpb.UnregisterTServerRequestPB(uuid=holder.uuid))
            assert holder.uuid in await listing(c)

            held = await c.call(UNREGISTER_TSERVER, mpb.UnregisterTServerRequestPB(uuid=spare.uuid))
            assert held.num_replicas == 0
            assert spare.uuid not in await listing(c)
            assert not c.master.catalog_manager.leader().in_maintenance(spare.uuid)
            assert (await stored(c.master)).tserver_states() == {}
            with pytest.raises(errors.NotFound):
                await c.call(UNREGISTER_TSERVER, mpb.UnregisterTServerRequestPB(uuid=spare.uuid))

            forced = await c.call(UNREGISTER_TSERVER, mpb.UnregisterTServerRequestPB(uuid=holder.uuid, force=True))
            assert forced.num_replicas == 2
            assert holder.uuid not in await listing(c)
            assert holder.uuid not in c.master.catalog_manager.leader().placement.by_uuid

            # A server that heartbeats again after being unregistered simply registers again.
            spare.heartbeating = True
            await wait_for_async(lambda: c.master.ts_manager.get(spare.uuid) is not None, what="re-registration")
            assert (await listing(c))[spare.uuid].state == mpb.NONE

    run(main())


def test_exiting_maintenance_asks_every_tablet_server_for_a_full_report(tmp_path: Path) -> None:
    """Leaders report a member's health only when it changes, so the failure of a server down
    in maintenance was reported (and left alone) before it left maintenance: full reports
    bring it back to the master, which can then replace its replicas."""

    async def main() -> None:
        async with cluster(tmp_path, num_tservers=2) as c:
            ts = c.tservers[0]
            await wait_for_async(lambda: all(t.full_reports_sent for t in c.tservers), what="first full reports")
            assert (await c.call(CHANGE_TSERVER_STATE, change(ts.uuid, CHANGE.ENTER_MAINTENANCE_MODE))).changed
            before = [t.full_reports_sent for t in c.tservers]
            assert (await c.call(CHANGE_TSERVER_STATE, change(ts.uuid, CHANGE.EXIT_MAINTENANCE_MODE))).changed
            await wait_for_async(
                lambda: all(t.full_reports_sent > n for t, n in zip(c.tservers, before, strict=True)),
                what="a full report from every tablet server after exiting maintenance",
            )

    run(main())
