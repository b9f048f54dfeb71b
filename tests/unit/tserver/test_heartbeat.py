"""The heartbeater against an in-process stand-in master: registration, full and incremental
reports, acknowledgement only on success, learned addresses, early heartbeats."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

from nyala.common.hostport import HostPort
from nyala.consensus.runtime import PeerDirectory
from nyala.errors import ServiceUnavailable
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import CallContext, Messenger, RpcServer
from nyala.rpc.loop import run
from nyala.services import TS_HEARTBEAT
from nyala.testing.wait import wait_for_async
from nyala.tserver.heartbeat import MASTERS_FILE, Heartbeater, remembered_masters
from nyala.tserver.tablet import TabletReplica


class FakeTablet:
    def __init__(self, tablet_id: str) -> None:
        self.tablet_id = tablet_id
        self.state = tpb.RUNNING
        self.term = 1

    def signature(self) -> tuple[object, ...]:
        return (self.state, self.term)

    def report(self) -> mpb.ReportedTabletPB:
        return mpb.ReportedTabletPB(tablet_id=self.tablet_id, state=self.state)


class FakeMaster:
    """Answers heartbeats with what the test sets in ``next``; records every request."""

    def __init__(self) -> None:
        self.requests: list[mpb.TSHeartbeatRequestPB] = []
        self.next = mpb.TSHeartbeatResponsePB(leader_master=True)
        self.fail = False
        self.rpc = RpcServer()
        self.rpc.add_method(TS_HEARTBEAT, self.heartbeat)

    def heartbeat(self, request: mpb.TSHeartbeatRequestPB, ctx: CallContext) -> mpb.TSHeartbeatResponsePB:
        if self.fail:
            raise ServiceUnavailable("master is busy")
        self.requests.append(request)
        return self.next


Scenario = Callable[[FakeMaster, Heartbeater, dict[str, FakeTablet], PeerDirectory], Awaitable[None]]


def with_master(scenario: Scenario, interval_ms: int = 60_000) -> None:
    async def main() -> None:
        master = FakeMaster()
        address = await master.rpc.start("127.0.0.1:0")
        messenger = Messenger()
        tablets = {t: FakeTablet(t) for t in ("a", "b")}
        directory = PeerDirectory()
        heartbeater = Heartbeater(
            [address],
            messenger,
            common_pb2.NodeInstancePB(permanent_uuid="ts-1", instance_seqno=1),
            lambda: common_pb2.ServerRegistrationPB(software_version="test"),
            lambda: [cast(TabletReplica, t) for t in tablets.values()],
            directory,
            interval_ms=interval_ms,
            rpc_timeout_ms=5000,
        )
        try:
            await scenario(master, heartbeater, tablets, directory)
        finally:
            await heartbeater.stop()
            await messenger.close()
            await master.rpc.stop()

    run(main())


def reported(request: mpb.TSHeartbeatRequestPB) -> tuple[bool, list[str], list[str]]:
    report = request.tablet_report
    return report.is_incremental, [t.tablet_id for t in report.updated_tablets], list(report.removed_tablet_ids)


def test_full_report_first_then_only_what_changed() -> None:
    async def scenario(master: FakeMaster, hb: Heartbeater, tablets: dict[str, FakeTablet], _: PeerDirectory) -> None:
        link = hb.links[0]
        await hb.heartbeat(link)
        await hb.heartbeat(link)
        tablets["b"].term = 2
        del tablets["a"]
        await hb.heartbeat(link)
        await hb.heartbeat(link)
        first, second, third, fourth = master.requests
        assert first.HasField("registration")
        assert not second.HasField("registration")
        assert reported(first) == (False, ["a", "b"], [])
        assert reported(second) == (True, [], [])
        assert reported(third) == (True, ["b"], ["a"])
        assert reported(fourth) == (True, [], [])
        assert [r.tablet_report.sequence_number for r in master.requests] == [1, 2, 3, 4]
        assert first.num_live_tablets == 2

    with_master(scenario)


def test_reregistration_and_full_report_on_request() -> None:
    async def scenario(master: FakeMaster, hb: Heartbeater, tablets: dict[str, FakeTablet], _: PeerDirectory) -> None:
        link = hb.links[0]
        await hb.heartbeat(link)
        master.next = mpb.TSHeartbeatResponsePB(needs_full_tablet_report=True)
        await hb.heartbeat(link)
        master.next = mpb.TSHeartbeatResponsePB(needs_reregister=True)
        await hb.heartbeat(link)
        master.next = mpb.TSHeartbeatResponsePB()
        await hb.heartbeat(link)
        assert [reported(r)[0] for r in master.requests] == [False, True, False, False]
        assert [r.HasField("registration") for r in master.requests] == [True, False, False, True]

    with_master(scenario)


def test_a_failed_heartbeat_acknowledges_nothing() -> None:
    async def scenario(master: FakeMaster, hb: Heartbeater, tablets: dict[str, FakeTablet], _: PeerDirectory) -> None:
        link = hb.links[0]
        await hb.heartbeat(link)
        tablets["a"].state = tpb.FAILED
        master.fail = True
        assert await hb.heartbeat(link) is None
        master.fail = False
        await hb.heartbeat(link)
        assert reported(master.requests[-1]) == (True, ["a"], [])
        assert link.consecutive_failures == 0

    with_master(scenario)


def test_tserver_addresses_are_learned() -> None:
    async def scenario(master: FakeMaster, hb: Heartbeater, _: dict[str, FakeTablet], directory: PeerDirectory) -> None:
        master.next = mpb.TSHeartbeatResponsePB(
            tserver_addresses=[
                tpb.PeerAddressPB(permanent_uuid="ts-2", rpc_address=common_pb2.HostPortPB(host="127.0.0.2", port=7050))
            ]
        )
        await hb.heartbeat(hb.links[0])
        assert directory.get("ts-2") == HostPort("127.0.0.2", 7050)

    with_master(scenario)


def test_the_address_book_version_is_echoed_so_the_master_sends_it_only_when_it_changed() -> None:
    async def scenario(master: FakeMaster, hb: Heartbeater, _: dict[str, FakeTablet], directory: PeerDirectory) -> None:
        book = [
            tpb.PeerAddressPB(permanent_uuid="ts-2", rpc_address=common_pb2.HostPortPB(host="127.0.0.2", port=7050))
        ]
        master.next = mpb.TSHeartbeatResponsePB(tserver_addresses=book, tserver_addresses_version=41)
        await hb.heartbeat(hb.links[0])
        assert master.requests[-1].tserver_addresses_version == 0  # it had none
        master.next = mpb.TSHeartbeatResponsePB(tserver_addresses_version=41)  # unchanged: no list
        await hb.heartbeat(hb.links[0])
        assert master.requests[-1].tserver_addresses_version == 41
        assert directory.get("ts-2") == HostPort("127.0.0.2", 7050)  # kept
        moved = [
            tpb.PeerAddressPB(permanent_uuid="ts-2", rpc_address=common_pb2.HostPortPB(host="127.0.0.3", port=7050))
        ]
        master.next = mpb.TSHeartbeatResponsePB(tserver_addresses=moved, tserver_addresses_version=42)
        await hb.heartbeat(hb.links[0])
        await hb.heartbeat(hb.links[0])
        assert master.requests[-1].tserver_addresses_version == 42
        assert directory.get("ts-2") == HostPort("127.0.0.3", 7050)

    with_master(scenario)


def test_trigger_sends_a_heartbeat_without_waiting_for_the_interval() -> None:
    async def scenario(master: FakeMaster, hb: Heartbeater, tablets: dict[str, FakeTablet], _: PeerDirectory) -> None:
        hb.start()
        await wait_for_async(lambda: len(master.requests) >= 1, what="the first heartbeat", timeout_s=10)
        tablets["a"].term = 5
        hb.trigger()
        # The interval is a minute: only the trigger can send this one within the wait.
        await wait_for_async(lambda: len(master.requests) >= 2, what="the triggered heartbeat", timeout_s=10)
        assert reported(master.requests[1]) == (True, ["a"], [])

    with_master(scenario, interval_ms=60_000)


def test_the_leader_masters_set_of_masters_is_followed_and_remembered(tmp_path: Path) -> None:
    async def main() -> None:
        leader, other = FakeMaster(), FakeMaster()
        leader_address = await leader.rpc.start("127.0.0.1:0")
        other_address = await other.rpc.start("127.0.0.1:0")
        gone = HostPort("127.0.0.1", 1)  # a removed master: never answers
        messenger = Messenger()
        masters_file = tmp_path / MASTERS_FILE
        hb = Heartbeater(
            [leader_address, gone],
            messenger,
            common_pb2.NodeInstancePB(permanent_uuid="ts-1", instance_seqno=1),
            lambda: common_pb2.ServerRegistrationPB(software_version="test"),
            list,
            PeerDirectory(),
            interval_ms=60_000,
            rpc_timeout_ms=5000,
            masters_file=masters_file,
        )
        try:
            hb.start()
            # The leader names the masters of now: one added, one removed.
            leader.next = mpb.TSHeartbeatResponsePB(
                leader_master=True,
                master_addresses=[
                    common_pb2.HostPortPB(host=a.host, port=a.port) for a in (leader_address, other_address)
                ],
            )
            hb.trigger()
            await wait_for_async(lambda: len(other.requests) > 0, what="a heartbeat to the added master")
            assert [link.address for link in hb.links] == [leader_address, other_address]
            await wait_for_async(
                lambda: remembered_masters(masters_file) == [leader_address, other_address],
                what="the masters remembered",
            )
        finally:
            await hb.stop()
        # A restart starts from the remembered masters plus its flags.
        again = Heartbeater(
            [gone],
            messenger,
            common_pb2.NodeInstancePB(permanent_uuid="ts-1", instance_seqno=2),
            lambda: common_pb2.ServerRegistrationPB(),
            list,
            PeerDirectory(),
            interval_ms=60_000,
            rpc_timeout_ms=5000,
            masters_file=masters_file,
        )
        assert [link.address for link in again.links] == [leader_address, other_address, gone]
        await messenger.close()
        await leader.rpc.stop()
        await other.rpc.stop()

    run(main())


def test_a_damaged_masters_file_is_ignored(tmp_path: Path) -> None:
    (tmp_path / MASTERS_FILE).write_text("{not json")
    assert remembered_masters(tmp_path / MASTERS_FILE) == []
    assert remembered_masters(tmp_path / "absent.json") == []
