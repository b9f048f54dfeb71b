"""Replica ordering for reads, and the retry/backoff helpers: pure functions, no servers."""

from __future__ import annotations

import asyncio

import pytest

from nyala.client._retry import Backoff, Deadline
from nyala.client.meta_cache import ServerInfo, TabletLocation
from nyala.client.options import ClientOptions
from nyala.client.replicas import ReplicaSelection, location_affinity, order_replicas
from nyala.common.hostport import HostPort
from nyala.errors import InvalidArgument, ServiceUnavailable, TimedOut
from nyala.proto import common_pb2
from nyala.schema import Partition, RangeBounds

SERVERS = {
    "a": ServerInfo("a", HostPort("10.0.0.1", 7050), "/dc1/rack1"),
    "b": ServerInfo("b", HostPort("10.0.0.2", 7050), "/dc1/rack2"),
    "c": ServerInfo("c", HostPort("10.0.0.3", 7050), "/dc2/rack1"),
}
TABLET = TabletLocation(
    "t1",
    Partition.make((), RangeBounds()),
    (("a", common_pb2.FOLLOWER), ("b", common_pb2.LEADER), ("c", common_pb2.FOLLOWER)),
    "b",
)


def order(
    selection: ReplicaSelection,
    *,
    local: frozenset[str] = frozenset(),
    where: str = "",
    salt: int = 1,
    tablet: TabletLocation = TABLET,
) -> list[str]:
    return order_replicas(tablet, SERVERS, selection, local_hosts=local, client_location=where, salt=salt)


def test_leader_only_is_the_leader_or_nothing() -> None:
    assert order(ReplicaSelection.LEADER_ONLY) == ["b"]
    unknown = TabletLocation(TABLET.tablet_id, TABLET.partition, TABLET.replicas, "")
    assert order(ReplicaSelection.LEADER_ONLY, tablet=unknown) == []


def test_closest_prefers_this_host_then_the_nearest_location() -> None:
    assert order(ReplicaSelection.CLOSEST_REPLICA, local=frozenset({"10.0.0.3"}))[0] == "c"
    assert order(ReplicaSelection.CLOSEST_REPLICA, where="/dc1/rack2")[0] == "b"
    assert order(ReplicaSelection.CLOSEST_REPLICA, where="/dc2")[0] == "c"
    assert location_affinity("/dc1/rack1", "/dc1/rack2") == 1
    assert location_affinity("", "/dc1") == 0


def test_closest_is_stable_per_salt_and_varies_across_salts() -> None:
    firsts = {order(ReplicaSelection.CLOSEST_REPLICA, salt=s)[0] for s in range(50)}
    assert order(ReplicaSelection.CLOSEST_REPLICA, salt=7) == order(ReplicaSelection.CLOSEST_REPLICA, salt=7)
    assert firsts == {"a", "b", "c"}
    assert sorted(order(ReplicaSelection.CLOSEST_REPLICA)) == ["a", "b", "c"]  # every replica, as fallbacks


async def keep_waiting(backoff: Backoff, deadline: Deadline) -> None:
    while True:
        await backoff.wait(deadline, ServiceUnavailable("busy"))


def test_backoff_grows_and_stops_at_the_deadline() -> None:
    async def main() -> None:
        options = ClientOptions(retry_backoff_initial_ms=1, retry_backoff_max_ms=4)
        # Room for ~100 waits: a GC pause or a preempted process must not decide the count.
        deadline = Deadline(0.5, "waiting for the test")
        backoff = Backoff(options)
        with pytest.raises(TimedOut, match=r"waiting for the test.*ServiceUnavailable: busy"):
            await keep_waiting(backoff, deadline)
        assert backoff.attempts >= 5

    asyncio.run(main())


def test_client_options_are_validated() -> None:
    with pytest.raises(InvalidArgument, match="operation_timeout_ms"):
        ClientOptions(operation_timeout_ms=0)
    with pytest.raises(InvalidArgument, match="watermark"):
        ClientOptions(session_flush_watermark_pct=0)


LOOPBACK = {
    "r1": ServerInfo("r1", HostPort("127.5.5.10", 7050), "/dc1/rack1"),
    "r2": ServerInfo("r2", HostPort("127.5.5.11", 7050), "/dc1/rack2"),
    "r2x": ServerInfo("r2x", HostPort("127.5.5.12", 7050), "/dc1/rack2/x"),
    "d2": ServerInfo("d2", HostPort("127.5.5.13", 7050), "/dc2/rack1"),
}


def loopback_order(where: str, uuids: tuple[str, ...], salt: int = 1) -> list[str]:
    tablet = TabletLocation("t", TABLET.partition, tuple((u, common_pb2.FOLLOWER) for u in uuids), "")
    return order_replicas(
        tablet, LOOPBACK, ReplicaSelection.CLOSEST_REPLICA, local_hosts=frozenset(), client_location=where, salt=salt
    )


def test_on_one_machine_with_locations_the_location_decides_not_the_loopback_address() -> None:
    # Every server is on loopback, so all are "this host"; Kudu's rule (same location or none)
    # keeps the client's location first anyway.
    for salt in range(20):
        assert loopback_order("/dc1/rack2", ("r1", "d2", "r2"), salt)[0] == "r2"
        assert loopback_order("/dc1/rack1", ("r2", "d2", "r1"), salt)[0] == "r1"


def test_the_same_location_beats_a_deeper_one_and_a_longer_prefix_beats_a_shorter() -> None:
    for salt in range(20):
        assert loopback_order("/dc1/rack2", ("r2x", "r2"), salt)[0] == "r2"  # exact before /dc1/rack2/x
        assert loopback_order("/dc1/rack3", ("d2", "r1"), salt) == ["r1", "d2"]  # shares /dc1
        assert loopback_order("/dc1/rack2", ("d2", "r1", "r2x", "r2"), salt) == ["r2", "r2x", "r1", "d2"]


def test_without_a_client_location_loopback_servers_are_all_local_and_spread_by_salt() -> None:
    firsts = {loopback_order("", ("r1", "r2", "d2"), salt)[0] for salt in range(50)}
    assert firsts == {"r1", "r2", "d2"}
