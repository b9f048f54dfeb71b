"""The tablet-server registry: registration, restarts, liveness by heartbeat age."""

from __future__ import annotations

import pytest

from nyala.errors import IllegalState, InvalidArgument
from nyala.master.ts_manager import TSManager
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def heartbeat(uuid: str, seqno: int, *, register: bool = False, port: int = 7050) -> mpb.TSHeartbeatRequestPB:
    request = mpb.TSHeartbeatRequestPB(instance=common_pb2.NodeInstancePB(permanent_uuid=uuid, instance_seqno=seqno))
    if register:
        request.registration.rpc_addresses.add(host="127.0.0.2", port=port)
    return request


def test_registration_restart_and_liveness() -> None:
    clock = Clock()
    ts = TSManager(unresponsive_timeout_ms=3000, clock=clock)
    assert ts.heartbeat(heartbeat("a", 1)).needs_reregister  # unknown: register first
    outcome = ts.heartbeat(heartbeat("a", 1, register=True))
    assert outcome.registered
    assert outcome.descriptor is not None
    assert str(outcome.descriptor.address) == "127.0.0.2:7050"
    assert not ts.heartbeat(heartbeat("a", 1)).needs_reregister
    # A restarted process (higher instance) must register again.
    assert ts.heartbeat(heartbeat("a", 2)).needs_reregister
    ts.heartbeat(heartbeat("a", 2, register=True, port=7060))
    assert str(ts.address_of("a")) == "127.0.0.2:7060"
    with pytest.raises(IllegalState, match="old instance 1"):
        ts.heartbeat(heartbeat("a", 1))
    # Liveness is heartbeat age against the timeout.
    descriptor = ts.get("a")
    assert descriptor is not None
    assert ts.is_live(descriptor)
    clock.now += 2.9
    assert ts.is_live(descriptor)
    clock.now += 0.2
    assert not ts.is_live(descriptor)
    assert ts.live() == []
    ts.heartbeat(heartbeat("a", 2))
    assert ts.live() == [descriptor]
    assert [p.permanent_uuid for p in ts.peer_addresses()] == ["a"]


def test_bad_heartbeats_are_refused() -> None:
    ts = TSManager(unresponsive_timeout_ms=1000)
    with pytest.raises(InvalidArgument, match="without a tablet server uuid"):
        ts.heartbeat(mpb.TSHeartbeatRequestPB())
    no_address = heartbeat("a", 1)
    no_address.registration.software_version = "x"
    with pytest.raises(InvalidArgument, match="has no RPC address"):
        ts.heartbeat(no_address)
    with pytest.raises(InvalidArgument, match="bad RPC address"):
        ts.heartbeat(heartbeat("a", 1, register=True, port=0))
    assert ts.all() == []


def test_the_address_book_version_changes_only_with_the_addresses() -> None:
    ts = TSManager(unresponsive_timeout_ms=3000)
    v0 = ts.addresses_version
    ts.heartbeat(heartbeat("a", 1, register=True))
    v1 = ts.addresses_version
    assert v1 != v0
    book = ts.peer_addresses()
    assert ts.peer_addresses() is book  # built once per version
    ts.heartbeat(heartbeat("a", 1))
    ts.heartbeat(heartbeat("a", 2, register=True))  # a restart at the same address: same book
    assert ts.addresses_version == v1
    ts.heartbeat(heartbeat("a", 3, register=True, port=7061))  # moved
    assert ts.addresses_version != v1
    assert [p.rpc_address.port for p in ts.peer_addresses()] == [7061]
    v2 = ts.addresses_version
    ts.forget("a")
    assert ts.addresses_version != v2
    assert ts.peer_addresses() == []
    # Another registry (another master, or this one restarted) starts from another version.
    assert TSManager(unresponsive_timeout_ms=3000).addresses_version != v0
