"""The master with a location mapping command: registration, placement by location, what it tells clients."""

from __future__ import annotations

import collections
import logging
import shlex
from pathlib import Path

import pytest

from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc.loop import run
from nyala.services import ALTER_TABLE, CONNECT_TO_MASTER, CREATE_TABLE, GET_TABLE_LOCATIONS, LIST_TABLET_SERVERS
from nyala.testing.wait import wait_for_async

from .fake_tserver import FakeTabletServer
from .helpers import Cluster, cluster, create_request, range_step

pytestmark = pytest.mark.timeout(60)

HOSTS = {
    "127.0.0.11": "/dc1/rack1",
    "127.0.0.12": "/dc1/rack1",
    "127.0.0.13": "/dc1/rack2",
    "127.0.0.14": "/dc1/rack2",
    "127.0.0.15": "/dc2/rack1",
    "127.0.0.16": "/dc2/rack1",
    "127.0.0.1": "/dc1/rack2",  # where the test's own client connects from
}


def write_mapping(path: Path, hosts: dict[str, str]) -> str:
    cases = "".join(f"    {h}) echo {loc} ;;\n" for h, loc in hosts.items())
    fallback = '    *) echo "no such host $h" >&2; exit 1 ;;\n'
    text = f'#!/bin/sh\nfor h in "$@"; do\n  case "$h" in\n{cases}{fallback}  esac\ndone\n'
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.chmod(0o755)
    temporary.replace(path)
    return shlex.quote(str(path))


async def add_fakes(c: Cluster, hosts: list[str]) -> list[FakeTabletServer]:
    fakes = []
    for host in hosts:
        ts = FakeTabletServer([c.address], host=host, heartbeat_interval_s=0.05)
        await ts.start()
        c.tservers.append(ts)
        fakes.append(ts)
    return fakes


def test_replicas_spread_over_locations_and_everyone_learns_them(tmp_path: Path) -> None:
    command = write_mapping(tmp_path / "map.sh", HOSTS)

    async def main() -> None:
        async with cluster(tmp_path / "m", num_tservers=0, location_mapping_cmd=command) as c:
            fakes = await add_fakes(c, [h for h in HOSTS if h != "127.0.0.1"])
            await wait_for_async(lambda: c.registered(6), what="registrations")
            listed = await c.call(LIST_TABLET_SERVERS, mpb.ListTabletServersRequestPB())
            by_uuid = {s.instance.permanent_uuid: s.location for s in listed.servers}
            assert by_uuid == {ts.uuid: HOSTS[ts.host] for ts in fakes}

            await c.call(CREATE_TABLE, create_request("t", buckets=4, ranges=((0, 10), (10, 20), (20, 30))))
            locations = await c.call(
                GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=common_pb2.TableIdentifierPB(table_name="t"))
            )
            assert {ts.permanent_uuid: ts.location for ts in locations.ts_infos} == by_uuid
            assert len(locations.tablet_locations) == 12
            per_server: collections.Counter[str] = collections.Counter()
            for tablet in locations.tablet_locations:
                places = sorted(locations.ts_infos[r.ts_info_idx].location for r in tablet.replicas)
                assert places == ["/dc1/rack1", "/dc1/rack2", "/dc2/rack1"]  # 1+1+1
                per_server.update(locations.ts_infos[r.ts_info_idx].permanent_uuid for r in tablet.replicas)
            assert sorted(per_server.values()) == [6] * 6  # range-aware within each location

            # An added range partition is placed the same way.
            add = mpb.AlterTableRequestPB(
                table=common_pb2.TableIdentifierPB(table_name="t"),
                steps=[range_step("add_range_partition", 30, 40)],
                wait=True,
            )
            await c.call(ALTER_TABLE, add)
            locations = await c.call(GET_TABLE_LOCATIONS, mpb.GetTableLocationsRequestPB(table=add.table))
            assert len(locations.tablet_locations) == 16
            for tablet in locations.tablet_locations:
                places = sorted(locations.ts_infos[r.ts_info_idx].location for r in tablet.replicas)
                assert places == ["/dc1/rack1", "/dc1/rack2", "/dc2/rack1"]

            connected = await c.call(CONNECT_TO_MASTER, mpb.ConnectToMasterRequestPB())
            assert connected.client_location == "/dc1/rack2"

    run(main())


def test_a_failing_mapping_refuses_registration_until_it_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "map.sh"
    known = {h: loc for h, loc in HOSTS.items() if h != "127.0.0.16"}
    command = write_mapping(script, known)

    async def main() -> None:
        async with cluster(tmp_path / "m", num_tservers=0, location_mapping_cmd=command) as c:
            [ok, refused] = await add_fakes(c, ["127.0.0.11", "127.0.0.16"])
            await wait_for_async(lambda: c.registered(1), what="the mapped server's registration")
            await wait_for_async(lambda: "127.0.0.16" in caplog.text, what="the refusal in the log")
            assert c.master.ts_manager.get(refused.uuid) is None
            assert f"refused the registration of tablet server {refused.uuid} at 127.0.0.16" in caplog.text
            assert "exited with status 1: no such host 127.0.0.16" in caplog.text

            write_mapping(script, {**known, "127.0.0.16": "/dc9"})  # fixed: the next heartbeat registers
            await wait_for_async(lambda: c.registered(2), what="registration after the fix")
            assert c.master.ts_manager.get(refused.uuid).location == "/dc9"  # type: ignore[union-attr]

            # Re-registration resolves again: a server that moved is placed in its new location.
            write_mapping(script, {**known, "127.0.0.11": "/dc7", "127.0.0.16": "/dc9"})
            ok.restart()
            await wait_for_async(
                lambda: getattr(c.master.ts_manager.get(ok.uuid), "location", "") == "/dc7",
                what="the new location after re-registration",
            )
            await c.call(CREATE_TABLE, create_request("t", buckets=2, rf=1))
            view = c.master.catalog_manager.leader()
            assert view.placement.tserver(ok.uuid).location == "/dc7"

    with caplog.at_level(logging.WARNING, "nyala.master"):
        run(main())
