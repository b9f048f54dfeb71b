"""The test-only network fault seam over real loopback sockets: a cut stalls, a heal resumes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nyala import errors
from nyala.common.hostport import HostPort
from nyala.proto import rpc_pb2
from nyala.rpc import CallContext, RpcMethod, RpcOptions, RpcServer
from nyala.rpc.netfault import (
    NETWORK_FAULTS_ENV,
    NetworkFaults,
    _ControlFileWatcher,
    applied_path,
    read_applied,
)
from nyala.testing.wait import wait_for_async
from tests.unit.rpc.conftest import Runner, serving

pytestmark = pytest.mark.timeout(60)

Ping = rpc_pb2.PingRequest
Pong = rpc_pb2.PingResponse
COUNT = RpcMethod("TestService", "Count", Ping, Pong)
HOLD = RpcMethod("TestService", "Hold", Ping, Pong)
FAST_CONNECT = RpcOptions(connect_timeout_s=0.3, reconnect_backoff_initial_s=0.001, reconnect_backoff_max_s=0.001)


class Recorder:
    """A server's handlers: one counts the payloads it saw, one waits on an event first."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self.release = asyncio.Event()
        self.holding = 0

    async def count(self, request: Ping, ctx: CallContext) -> Pong:
        self.seen.append(request.payload)
        return Pong(payload=request.payload)

    async def hold(self, request: Ping, ctx: CallContext) -> Pong:
        self.holding += 1
        await self.release.wait()
        return Pong(payload=request.payload)

    def server(self) -> RpcServer:
        server = RpcServer()
        server.add_method(COUNT, self.count)
        server.add_method(HOLD, self.hold)
        return server


async def applied(faults: NetworkFaults, addresses: list[HostPort]) -> None:
    """Change the cut set from another thread, as the control file's watcher does, and wait until applied."""
    futures = await asyncio.to_thread(faults.set_unreachable, addresses)
    for future in futures:
        await asyncio.wrap_future(future)


def test_a_new_connection_to_a_cut_address_hangs_until_the_connect_timeout(run: Runner) -> None:
    async def main() -> None:
        recorder, faults = Recorder(), NetworkFaults()
        async with serving(recorder.server(), FAST_CONNECT, faults=faults) as (server, address, messenger):
            await applied(faults, [address])
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(errors.NetworkError, match="cannot connect"):
                await messenger.call(address, COUNT, Ping(payload=b"a"), timeout=5)
            # It waited like an unanswered SYN rather than failing at once like a refusal.
            assert loop.time() - started >= FAST_CONNECT.connect_timeout_s * 0.9
            assert recorder.seen == []
            assert server._connections == set()

            await applied(faults, [])
            pong = await wait_for_async(
                lambda: messenger.call(address, COUNT, Ping(payload=b"b"), timeout=5),
                what="a call after the heal",
                retry_on=(errors.NetworkError,),
            )
            assert pong.payload == b"b"

    run(main())


def test_a_connection_attempt_waiting_on_a_cut_connects_when_it_heals(run: Runner) -> None:
    async def main() -> None:
        recorder, faults = Recorder(), NetworkFaults()
        async with serving(recorder.server(), faults=faults) as (_, address, messenger):
            await applied(faults, [address])
            call = asyncio.ensure_future(messenger.call(address, COUNT, Ping(payload=b"late"), timeout=30))
            await wait_for_async(lambda: faults._changed, what="the connection attempt to wait on the cut")
            assert not call.done()
            await applied(faults, [])
            assert (await call).payload == b"late"

    run(main())


def test_a_cut_stalls_an_open_connection_both_ways_and_a_heal_delivers_what_was_held(run: Runner) -> None:
    async def main() -> None:
        recorder, faults = Recorder(), NetworkFaults()
        async with serving(recorder.server(), faults=faults) as (server, address, messenger):
            await messenger.call(address, COUNT, Ping(payload=b"before"))
            # A request already at the server when the cut comes: its answer never arrives.
            held = asyncio.ensure_future(messenger.call(address, HOLD, Ping(payload=b"held"), timeout=0.5))
            await wait_for_async(lambda: recorder.holding == 1, what="the held call to reach its handler")
            await applied(faults, [address])
            recorder.release.set()
            with pytest.raises(errors.TimedOut):
                await held
            # A request sent during the cut is not written: it times out and the server sees nothing.
            with pytest.raises(errors.TimedOut):
                await messenger.call(address, COUNT, Ping(payload=b"during"), timeout=0.3)
            assert recorder.seen == [b"before"]
            assert len(server._connections) == 1  # the connection was stalled, not closed

            await applied(faults, [])
            # Nothing was lost or torn: the held request arrives, and the same connection serves on.
            assert (await messenger.call(address, COUNT, Ping(payload=b"after"))).payload == b"after"
            assert recorder.seen == [b"before", b"during", b"after"]
            assert len(server._connections) == 1

    run(main())


def test_only_the_cut_address_is_affected(run: Runner) -> None:
    async def main() -> None:
        first, second, faults = Recorder(), Recorder(), NetworkFaults()
        async with (
            serving(first.server(), FAST_CONNECT, faults=faults) as (_, cut, messenger),
            serving(second.server()) as (_, reachable, _),
        ):
            await applied(faults, [cut])
            assert (await messenger.call(reachable, COUNT, Ping(payload=b"ok"))).payload == b"ok"
            with pytest.raises(errors.NetworkError):
                await messenger.call(cut, COUNT, Ping(payload=b"no"), timeout=5)
            assert faults.unreachable == frozenset({cut})

    run(main())


def test_the_control_file_is_applied_then_acknowledged(tmp_path: Path) -> None:
    control = tmp_path / "server.json"
    faults = NetworkFaults()
    watcher = _ControlFileWatcher(faults, control)
    watcher.check()  # no file: nothing cut, version 0 acknowledged
    assert faults.unreachable == frozenset()
    assert read_applied(control) == 0

    control.write_text(json.dumps({"version": 4, "unreachable": ["127.0.0.2:7051", "127.0.0.3:7050"]}))
    watcher.check()
    assert faults.unreachable == {HostPort("127.0.0.2", 7051), HostPort("127.0.0.3", 7050)}
    assert read_applied(control) == 4

    control.write_text("{not json")
    watcher.check()  # an unreadable file changes nothing and is not acknowledged
    assert faults.unreachable == {HostPort("127.0.0.2", 7051), HostPort("127.0.0.3", 7050)}
    assert read_applied(control) == 4

    control.write_text(json.dumps({"version": 5, "unreachable": []}))
    watcher.check()
    assert faults.unreachable == frozenset()
    assert read_applied(control) == 5
    assert applied_path(control).name == "server.json.applied"


def test_only_a_server_started_with_the_variable_turns_the_seam_on(tmp_path: Path) -> None:
    """In a child interpreter: the messenger of a server is governed, the variable is consumed."""
    control = tmp_path / "faults.json"
    control.write_text(json.dumps({"version": 1, "unreachable": ["127.0.0.9:7050"]}))
    probe = (
        "import os\n"
        "from nyala.rpc.netfault import NETWORK_FAULTS_ENV, active_faults, install_from_environment\n"
        "before = active_faults()\n"
        "faults = install_from_environment()\n"
        "print(before is None, sorted(map(str, faults.unreachable)), NETWORK_FAULTS_ENV in os.environ)\n"
        "print(install_from_environment() is None)\n"
    )
    env = {**os.environ, NETWORK_FAULTS_ENV: str(control)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.splitlines() == ["True ['127.0.0.9:7050'] False", "True"]
    assert read_applied(control) == 1

    env.pop(NETWORK_FAULTS_ENV)
    unset = "from nyala.rpc.netfault import active_faults, install_from_environment\n"
    unset += "print(install_from_environment(), active_faults())\n"
    out = subprocess.run([sys.executable, "-c", unset], env=env, capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "None None"
