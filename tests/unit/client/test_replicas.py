"""Replica ordering for reads, and the retry/backoff helpers: pure functions, no servers."""

from __future__ import annotations

import asyncio

import pytest

from nyala.client._retry import Backoff, Deadline
from nyala.client.meta_cache import ServerInfo, TabletLocation
from nyala.client.options import ClientOptions
from nyala.client.replicas import ReplicaSelection, location_affinity, order_replicas
from nyala.common.errors import InvalidArgument, ServiceUnavailable, TimedOut
from nyala.common.hostport import HostPort
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
        deadline = Deadline(0.05, "waiting for the test")
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
