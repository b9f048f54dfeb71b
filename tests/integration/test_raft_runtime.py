"""The consensus runtime over real sockets and real fsyncs: several servers in one process."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from nyala import errors
from nyala.common.hostport import HostPort
from nyala.consensus.core import LogEntry, RaftConfig, RaftOptions, Role
from nyala.consensus.runtime import RaftReplica, RaftTransport, ReplicaOptions
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.rpc import Messenger, RpcServer
from nyala.rpc.loop import run
from nyala.services import DELIVER
from nyala.testing.wait import wait_for_async

pytestmark = pytest.mark.timeout(120)

TICK_MS = 20
OPTIONS = ReplicaOptions(raft=RaftOptions(raft_tick_interval_ms=TICK_MS, raft_heartbeat_interval_ms=100))


class ListStateMachine:
    """Keeps every applied payload in order; forgets everything on restart (replays the WAL)."""

    def __init__(self) -> None:
        self.applied: list[tuple[int, bytes]] = []

    def applied_index(self) -> int:
        return 0

    def apply(self, entries: Sequence[LogEntry]) -> Sequence[Any]:
        for e in entries:
            self.applied.append((e.index, e.payload))
        return [e.index for e in entries]


class Server:
    """One 'tablet server': an RPC server, a messenger, a transport and its replicas."""

    def __init__(self, uuid: str, root: Path) -> None:
        self.uuid = uuid
        self.root = root
        self.replicas: dict[str, RaftReplica] = {}
        self.machines: dict[str, ListStateMachine] = {}

    async def start(self, port: int = 0) -> None:
        self.rpc = RpcServer()
        self.messenger = Messenger()
        self.transport = RaftTransport(
            self.uuid, HostPort("127.0.0.1", port), self.messenger, self.rpc, tick_interval_ms=TICK_MS
        )
        self.address = await self.rpc.start(f"127.0.0.1:{port}")
        self.transport.address = self.address
        self.transport.start()

    async def add(self, group: str, config: RaftConfig | None, peers: dict[str, HostPort]) -> RaftReplica:
        for uuid, address in peers.items():
            self.transport.directory.learn(uuid, address)
        machine = self.machines[group] = ListStateMachine()
        directory = self.root / group
        if config is not None:
            replica = await RaftReplica.create(
                directory, group, self.uuid, config, machine, self.transport, options=OPTIONS
            )
        else:
            replica = await RaftReplica.open(directory, group, self.uuid, machine, self.transport, options=OPTIONS)
        self.replicas[group] = replica
        return replica

    async def stop(self) -> None:
        for replica in self.replicas.values():
            await replica.close()
        self.replicas.clear()
        await self.transport.close()
        await self.messenger.close()
        await self.rpc.stop()


async def make_cluster(root: Path, n: int, groups: Sequence[str]) -> list[Server]:
    servers = [Server(f"ts-{i}", root / f"ts-{i}") for i in range(n)]
    for s in servers:
        await s.start()
    peers = {s.uuid: s.address for s in servers}
    config = RaftConfig.of_voters(peers)
    for group in groups:
        for s in servers:
            await s.add(group, config, peers)
    return servers


async def leader_of(servers: Sequence[Server], group: str, within_s: float = 20.0) -> RaftReplica:
    """The replica that leads ``group`` and accepts writes, once there is one."""

    async def running_leader() -> RaftReplica | None:
        for s in servers:
            replica = s.replicas.get(group)
            if replica is not None and replica.role is Role.LEADER:
                try:
                    await replica.read_index()  # only a RUNNING leader confirms reads
                    return replica
                except errors.NyalaError:
                    pass
        return None

    return await wait_for_async(running_leader, what=f"a running leader of {group}", timeout_s=within_s)


async def replicate(servers: Sequence[Server], group: str, payload: bytes) -> int:
    """Write through whoever leads, retrying as a client would; returns the entry's index."""

    async def replicated() -> int:
        leader = await leader_of(servers, group)
        result: int = await leader.replicate(payload)
        return result

    return await wait_for_async(
        replicated,
        what=f"{payload!r} replicated in {group}",
        timeout_s=30,
        retry_on=(errors.NotTheLeader, errors.ServiceUnavailable, errors.Aborted),
    )


async def applied_everywhere(servers: Sequence[Server], group: str, count: int) -> None:
    await wait_for_async(
        lambda: all(len(s.machines[group].applied) >= count for s in servers if group in s.replicas),
        what=f"{count} entries of {group} applied everywhere",
    )


async def stop_all(servers: Sequence[Server]) -> None:
    for s in servers:
        await s.stop()


def test_three_replicas_elect_a_leader_and_apply_the_same_entries_in_order(tmp_path: Path) -> None:
    async def main() -> None:
        servers = await make_cluster(tmp_path, 3, ["t1"])
        try:
            payloads = [f"write-{i}".encode() for i in range(50)]
            indexes = [await replicate(servers, "t1", p) for p in payloads]
            assert indexes == sorted(indexes)
            await applied_everywhere(servers, "t1", 50)
            logs = [[p for _, p in s.machines["t1"].applied] for s in servers]
            assert logs[0] == logs[1] == logs[2] == payloads
        finally:
            await stop_all(servers)

    run(main())


def test_concurrent_proposals_are_all_applied_once(tmp_path: Path) -> None:
    async def main() -> None:
        servers = await make_cluster(tmp_path, 3, ["t1"])
        try:
            leader = await leader_of(servers, "t1")
            payloads = [f"c-{i}".encode() for i in range(300)]
            await asyncio.gather(*(leader.replicate(p) for p in payloads))
            await applied_everywhere(servers, "t1", 300)
            for s in servers:
                assert sorted(p for _, p in s.machines["t1"].applied) == sorted(payloads)
        finally:
            await stop_all(servers)

    run(main())


def test_a_follower_refuses_writes_and_names_the_leader(tmp_path: Path) -> None:
    async def main() -> None:
        servers = await make_cluster(tmp_path, 3, ["t1"])
        try:
            leader = await leader_of(servers, "t1")
            follower = next(s.replicas["t1"] for s in servers if s.uuid != leader.peer_id)
            await wait_for_async(lambda: follower.leader_id == leader.peer_id, what="the follower to know the leader")
            with pytest.raises(errors.NotTheLeader) as caught:
                await follower.replicate(b"x")
            assert caught.value.leader_hint == leader.peer_id
        finally:
            await stop_all(servers)

    run(main())


def test_writes_go_on_after_the_leader_dies_and_it_catches_up_on_return(tmp_path: Path) -> None:
    async def main() -> None:
        servers = await make_cluster(tmp_path, 3, ["t1"])
        try:
            acknowledged = [await replicate(servers, "t1", f"a-{i}".encode()) for i in range(20)]
            leader = await leader_of(servers, "t1")
            dead = next(s for s in servers if s.uuid == leader.peer_id)
            port = dead.address.port
            await dead.stop()
            alive = [s for s in servers if s is not dead]
            acknowledged += [await replicate(alive, "t1", f"b-{i}".encode()) for i in range(20)]
            new_leader = await leader_of(alive, "t1")
            assert new_leader.peer_id != dead.uuid
            # The dead server comes back on the same address from its WAL and metadata alone.
            await dead.start(port)
            await dead.add("t1", None, {s.uuid: s.address for s in alive})
            await applied_everywhere(servers, "t1", 40)
            expected = [f"a-{i}".encode() for i in range(20)] + [f"b-{i}".encode() for i in range(20)]
            for s in servers:
                assert [p for _, p in s.machines["t1"].applied] == expected
            assert len(set(acknowledged)) == 40
        finally:
            await stop_all(servers)

    run(main())


def test_every_replica_restarted_from_disk_recovers_every_entry(tmp_path: Path) -> None:
    async def main() -> None:
        servers = await make_cluster(tmp_path, 3, ["t1"])
        try:
            for i in range(30):
                await replicate(servers, "t1", f"r-{i}".encode())
            ports = [s.address.port for s in servers]
            await stop_all(servers)
            for s, port in zip(servers, ports, strict=True):
                await s.start(port)
            peers = {s.uuid: s.address for s in servers}
            for s in servers:
                await s.add("t1", None, peers)
            await replicate(servers, "t1", b"after-restart")
            await applied_everywhere(servers, "t1", 31)
            for s in servers:
                applied = [p for _, p in s.machines["t1"].applied]
                assert applied == [f"r-{i}".encode() for i in range(30)] + [b"after-restart"]
        finally:
            await stop_all(servers)

    run(main())


def test_a_replica_restarted_alone_applies_what_it_knew_committed(tmp_path: Path) -> None:
    async def main() -> None:
        servers = await make_cluster(tmp_path, 3, ["t1"])
        try:
            for i in range(20):
                await replicate(servers, "t1", f"r-{i}".encode())
            await applied_everywhere(servers, "t1", 20)
            ports = [s.address.port for s in servers]
            await stop_all(servers)
            alone = servers[0]  # no quorum, so no leader: only its own metadata says what is committed
            await alone.start(ports[0])
            await alone.add("t1", None, {s.uuid: s.address for s in servers[1:]})
            await wait_for_async(lambda: len(alone.machines["t1"].applied) >= 20, what="20 entries applied alone")
            assert [p for _, p in alone.machines["t1"].applied][-20:] == [f"r-{i}".encode() for i in range(20)]
            assert alone.replicas["t1"].role is not Role.LEADER
        finally:
            await stop_all(servers)

    run(main())


def test_heartbeats_of_many_groups_share_one_call_per_peer_and_interval(tmp_path: Path) -> None:
    async def main() -> None:
        groups = [f"g{i}" for i in range(24)]
        servers = await make_cluster(tmp_path, 3, groups)
        try:
            for group in groups:
                await leader_of(servers, group)
            before = [(s.transport.delivers_sent, s.transport.messages_sent) for s in servers]
            loop = asyncio.get_running_loop()
            started = loop.time()
            directed_pairs = 3 * 2
            interval_s = OPTIONS.raft.raft_heartbeat_interval_ms / 1000

            def calls_so_far() -> int:
                return sum(s.transport.delivers_sent - b[0] for s, b in zip(servers, before, strict=True))

            # Idle on purpose: only heartbeats and their answers flow.  Wait for about five
            # intervals' worth of coalesced calls, then hold the count against the time it took:
            # a call per group instead (24 times as many) would get there within one interval.
            await wait_for_async(
                lambda: calls_so_far() >= 2 * directed_pairs * 5, what="five intervals of heartbeat calls"
            )
            elapsed_s = loop.time() - started
            calls = calls_so_far()
            messages = sum(s.transport.messages_sent - b[1] for s, b in zip(servers, before, strict=True))
            intervals = elapsed_s / interval_s
            # Per interval and directed pair: one call of heartbeats and one of answers, whatever
            # the number of groups (Kudu's coalesced multi-Raft heartbeats).  Slack for ticks
            # that slip on a loaded machine.
            assert calls <= 2 * directed_pairs * (intervals + 1) * 1.5, f"{calls} calls in {elapsed_s:.2f} s"
            assert messages / calls >= 6, f"{messages} messages in {calls} calls"
        finally:
            await stop_all(servers)

    run(main())


def test_a_deliver_meant_for_another_server_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        servers = await make_cluster(tmp_path, 3, ["t1"])
        messenger = Messenger()
        try:
            target = servers[0]
            term_before = target.replicas["t1"].term
            bogus = cpb.DeliverRequestPB(sender_uuid="intruder", dest_uuid="someone-else")
            bogus.messages.add(
                group_id="t1", sender="intruder", recipient=target.uuid, term=10**6
            ).timeout_now.SetInParent()
            with pytest.raises(errors.InvalidArgument, match="reached server 'ts-0'"):
                await messenger.call(target.address, DELIVER, bogus)
            empty = cpb.DeliverRequestPB(sender_uuid="intruder", dest_uuid=target.uuid)
            empty.messages.add(group_id="t1", sender="intruder", recipient=target.uuid, term=10**6)
            with pytest.raises(errors.InvalidArgument, match="has no body"):
                await messenger.call(target.address, DELIVER, empty)
            assert target.replicas["t1"].term == term_before
            unknown = cpb.DeliverRequestPB(sender_uuid="x", dest_uuid=target.uuid)
            unknown.messages.add(group_id="nope", sender="x", recipient=target.uuid, term=1).heartbeat.SetInParent()
            response = await messenger.call(target.address, DELIVER, unknown)
            assert list(response.unknown_groups) == ["nope"]
        finally:
            await messenger.close()
            await stop_all(servers)

    run(main())


def test_a_replica_closed_before_its_tasks_ran_leaves_nothing_behind(tmp_path: Path) -> None:
    async def main() -> None:
        server = Server("solo", tmp_path)
        await server.start()
        try:
            replica = await server.add("g", RaftConfig.of_voters(["solo"]), {})
            await replica.close()  # at once: its pipeline tasks never got to run
            with pytest.raises(errors.ServiceUnavailable, match="shut down"):
                await replica.replicate(b"x")
        finally:
            await server.stop()
        gc.collect()  # a never-awaited coroutine would surface here (filterwarnings=error)

    run(main())
