"""Tablet copy between real tablet-server processes: a follower left behind the leader's log is
caught up by an automatic copy; kill -9 of the destination and of the source in the middle of
a copy; bad input over real RPC; and, with locations, a copy from a replica in the destination's
location rather than from the leader.

Every server keeps only a short log in memory (``--log-cache-entries``) and small WAL
segments, so that a follower stopped for a few hundred writes needs entries the leader no
longer holds.  Copies that must be interrupted are throttled so that they take seconds.
Every test waits for conditions (never for a fixed time) within bounds, and stops every
process it started, even when it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import crc32c
import pytest

import nyala
from nyala import errors
from nyala.client import schema
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import OpType, make_row_operations
from nyala.services import (
    BEGIN_TABLET_COPY_SESSION,
    CHECK_TABLET_COPY_SESSION_ACTIVE,
    CREATE_TABLET,
    END_TABLET_COPY_SESSION,
    FETCH_DATA,
    GET_CONSENSUS_STATE,
    GET_TABLET_SERVER_STATUS,
    LEADER_STEP_DOWN,
    LIST_TABLETS,
    START_TABLET_COPY,
)
from nyala.testing.minicluster import ClusterServer, MiniCluster, MiniClusterOptions
from nyala.testing.wait import wait_for

from .tserver_kit import SCHEMA, Cluster, LoopThread, _make_messenger, create_request

pytestmark = pytest.mark.timeout(300)

TABLET = "copied"
# Short in-memory logs, small WAL segments, frequent flushes, prompt copy requests.
COPY_FLAGS = [
    "--log-cache-entries", "100",
    "--flush-threshold-rows", "200",
    "--log-segment-size-bytes", "65536",
    "--log-max-segments-to-retain", "2",
    "--tablet-copy-start-interval-ms", "300",
    "--tablet-copy-transfer-chunk-size-bytes", "65536",
]  # fmt: skip
FLAGS = [
    "--heartbeat-interval-ms", "300",
    "--raft-tick-interval-ms", "25",
    "--raft-heartbeat-interval-ms", "150",
    *COPY_FLAGS,
]  # fmt: skip
# About 400 KB/s: a tablet of a few MB takes seconds to copy, long enough to be interrupted.
SLOW = [*FLAGS, "--tablet-copy-throttler-bytes-per-sec", "400000"]


def start_cluster(tmp_path: Path, count: int, flags: Sequence[str]) -> Cluster:
    cluster = Cluster.start(tmp_path, count, flags)
    try:
        cluster.wait_registered()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = start_cluster(tmp_path, 3, FLAGS)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def slow_cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = start_cluster(tmp_path, 4, SLOW)
    try:
        yield c
    finally:
        c.stop()


def create_on(cluster: Cluster, members: Sequence[int]) -> int:
    """Create the test tablet on ``members``; returns its leader."""
    servers = cluster.servers
    uuids = [servers.uuids[i] for i in members]
    peers = {servers.uuids[i]: servers.addresses[i] for i in range(len(servers.uuids))}
    for i in members:
        request = create_request(servers.uuids[i], TABLET, uuids, peers=peers)
        cluster.driver.call(servers.addresses[i], CREATE_TABLET, request)
    return cluster.driver.leader(TABLET, alive=members)


def upsert(cluster: Cluster, ids: range, payload_bytes: int = 16) -> None:
    """Write through the leader; upserts, so that a retried batch changes nothing."""
    rows = [{"id": i, "v": float(i), "s": os.urandom(payload_bytes).hex()} for i in ids]
    response = cluster.driver.write(TABLET, make_row_operations(SCHEMA, OpType.UPSERT, rows), within_s=60)
    assert list(response.per_row_errors) == []


def ids_on(cluster: Cluster, i: int) -> list[int] | None:
    try:
        return cluster.driver.ids(i, TABLET)
    except errors.NyalaError:
        return None


def all_have(cluster: Cluster, members: Sequence[int], expected: list[int], within_s: float = 90) -> None:
    for i in members:

        def holds(i: int = i) -> bool:
            return ids_on(cluster, i) == expected

        wait_for(holds, what=f"server {i}'s rows", timeout_s=within_s)


def status(cluster: Cluster, i: int) -> tpb.GetTabletServerStatusResponsePB:
    return cluster.driver.call(
        cluster.servers.addresses[i], GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB()
    )


def listed(cluster: Cluster, i: int) -> tpb.ListTabletsResponsePB.StatusPB | None:
    """The test tablet as server ``i`` lists it (None when it has no such replica or is down)."""
    try:
        response = cluster.driver.call(cluster.servers.addresses[i], LIST_TABLETS, tpb.ListTabletsRequestPB())
    except errors.NyalaError:
        return None
    return next((t for t in response.tablets if t.tablet_id == TABLET), None)


def copy_tmp(cluster: Cluster, i: int) -> Path:
    return cluster.servers.dirs[i] / "tablets" / f"{TABLET}.copy-tmp"


def downloading(cluster: Cluster, i: int) -> bool | None:
    """True once server ``i`` has downloaded some, not all, of the store file."""
    path = copy_tmp(cluster, i) / "store" / f"{TABLET}.duckdb"
    try:
        return True if path.stat().st_size > 0 else None
    except FileNotFoundError:
        return None


def start_copy(cluster: Cluster, dest: int, source: int, leader: int, tablet_id: str = TABLET) -> None:
    servers = cluster.servers
    term = cluster.driver.consensus(leader, TABLET).current_term
    address = servers.addresses[source]
    request = tcpb.StartTabletCopyRequestPB(
        dest_uuid=servers.uuids[dest],
        tablet_id=tablet_id,
        copy_peer_uuid=servers.uuids[source],
        copy_peer_addr=common_pb2.HostPortPB(host=address.host, port=address.port),
        caller_uuid=servers.uuids[leader],
        caller_term=term,
    )
    cluster.driver.call(servers.addresses[dest], START_TABLET_COPY, request)


def leave_behind(cluster: Cluster, follower: int, first_id: int, batches: int, rows: int = 20) -> int:
    """Stop ``follower``, write ``batches`` batches (far more entries than the leader keeps in
    memory), start it again; returns the next free id."""
    cluster.servers.processes[follower].stop()
    next_id = first_id
    for _ in range(batches):
        upsert(cluster, range(next_id, next_id + rows))
        next_id += rows
    cluster.servers.start([follower])
    return next_id


# -- (a) the automatic copy of a lagging follower -----------------------------------------------


def test_a_follower_behind_the_leaders_log_is_caught_up_by_a_tablet_copy(cluster: Cluster) -> None:
    leader = create_on(cluster, [0, 1, 2])
    follower = (leader + 1) % 3
    upsert(cluster, range(100))
    all_have(cluster, [0, 1, 2], list(range(100)))
    next_id = leave_behind(cluster, follower, 100, 300)
    # The leader's log no longer holds what the follower lacks: only a copy brings it back.
    # The test's connection to the restarted follower may still be backing off from its downtime.
    wait_for(
        lambda: status(cluster, follower).tablet_copies_completed or None,
        what="a tablet copy",
        timeout_s=90,
        retry_on=(errors.NetworkError,),
    )
    expected = list(range(next_id))
    all_have(cluster, [0, 1, 2], expected)
    done = status(cluster, follower)
    assert done.tablet_copies_failed == 0
    assert done.tablet_copy_bytes_within_location > 0  # no locations: everything is one location
    assert done.tablet_copy_bytes_across_locations == 0
    # The copied replica is a member again: later writes reach it by replication alone.
    upsert(cluster, range(next_id, next_id + 50))
    all_have(cluster, [0, 1, 2], list(range(next_id + 50)))
    assert status(cluster, follower).tablet_copies_started == done.tablet_copies_started
    leader_status = status(cluster, cluster.driver.leader(TABLET))
    assert leader_status.tablet_copy_bytes_served > 0


# -- (b) kill -9 of the destination in the middle of a copy -----------------------------------------


def test_a_destination_killed_mid_copy_cleans_up_and_is_copied_again(slow_cluster: Cluster) -> None:
    cluster = slow_cluster
    leader = create_on(cluster, [0, 1, 2])
    follower = (leader + 1) % 3
    for start in range(0, 8000, 1000):  # a few MB that do not compress: seconds at 400 KB/s
        upsert(cluster, range(start, start + 1000), payload_bytes=200)
    next_id = leave_behind(cluster, follower, 8000, 250)
    expected = list(range(next_id))
    wait_for(lambda: downloading(cluster, follower), what="the follower to be downloading its copy", timeout_s=90)
    cluster.servers.kill(follower)
    # Half there on disk: the metadata says COPYING and the download is incomplete.
    meta = json.loads((cluster.servers.dirs[follower] / "tablets" / TABLET / "tablet_meta.json").read_text())
    assert meta["data_state"] == "COPYING"
    assert copy_tmp(cluster, follower).exists()

    cluster.servers.start([follower])
    log = cluster.servers.processes[follower].log_tail(400)
    assert "a tablet copy that did not finish; deleting what it installed" in log
    assert "the download of a tablet copy that did not finish" in log
    # The leader asks again (the replica is now a tombstone); it is never RUNNING half-copied.
    seen: set[str] = set()

    def copied() -> bool | None:
        tablet = listed(cluster, follower)
        if tablet is None:
            return None
        seen.add(tpb.TabletStatePB.Name(tablet.state))
        if tablet.state == tpb.RUNNING:
            assert tablet.num_rows == len(expected), f"a RUNNING replica with {tablet.num_rows} rows"
            return True
        return None

    wait_for(copied, what="the copy to be made again and installed", timeout_s=120)
    assert seen <= {"TOMBSTONED", "COPYING", "BOOTSTRAPPING", "RUNNING"}
    all_have(cluster, [0, 1, 2], expected)
    assert not copy_tmp(cluster, follower).exists()
    assert status(cluster, follower).tablet_copies_completed == 1


# -- (c) kill -9 of the source in the middle of a copy ------------------------------------------------


def test_a_copy_whose_source_dies_fails_cleanly_and_succeeds_from_another_source(slow_cluster: Cluster) -> None:
    cluster = slow_cluster
    leader = create_on(cluster, [0, 1, 2])
    source = next(i for i in (0, 1, 2) if i != leader)
    for start in range(0, 8000, 1000):
        upsert(cluster, range(start, start + 1000), payload_bytes=200)
    expected = list(range(8000))
    all_have(cluster, [0, 1, 2], expected)
    # Server 3 lacks the tablet: copy it there from a follower, and kill that follower mid-copy.
    start_copy(cluster, 3, source, leader)
    wait_for(lambda: downloading(cluster, 3), what="server 3 to be downloading", timeout_s=60)
    listed_while_copying = listed(cluster, 3)
    assert listed_while_copying is not None
    assert listed_while_copying.state == tpb.COPYING
    cluster.servers.kill(source)
    wait_for(lambda: status(cluster, 3).tablet_copies_failed or None, what="the copy to fail", timeout_s=60)
    # Cleanly: nothing half-there, no download left, no store file.
    assert listed(cluster, 3) is None
    assert not copy_tmp(cluster, 3).exists()
    assert not list((cluster.servers.dirs[3] / "stores").glob(f"{TABLET}.duckdb*"))
    assert "tablet copy of copied from" in cluster.servers.processes[3].log_tail(200)
    # The tablet itself carries on with two of its three replicas; the copy is made again, from the leader.
    upsert(cluster, range(8000, 8100))
    expected = list(range(8100))
    start_copy(cluster, 3, leader, leader)
    wait_for(
        lambda: True if ids_on(cluster, 3) == expected else None, what="server 3's copy from the leader", timeout_s=120
    )
    final = status(cluster, 3)
    assert (final.tablet_copies_started, final.tablet_copies_completed, final.tablet_copies_failed) == (2, 1, 1)
    cluster.servers.start([source])
    all_have(cluster, [0, 1, 2], expected)


# -- (d) bad input over real RPC --------------------------------------------------------------------


def test_bad_tablet_copy_calls_are_refused_with_the_problem_named(cluster: Cluster) -> None:
    leader = create_on(cluster, [0, 1])
    upsert(cluster, range(500))
    d, servers = cluster.driver, cluster.servers
    address = servers.addresses[leader]
    me = servers.uuids[2]

    with pytest.raises(errors.NotFound, match="'nowhere' is not hosted"):
        d.call(
            address,
            BEGIN_TABLET_COPY_SESSION,
            tcpb.BeginTabletCopySessionRequestPB(requestor_uuid=me, tablet_id="nowhere"),
        )
    with pytest.raises(errors.InvalidArgument, match=r"tablet id '\.\./x'"):
        d.call(
            address,
            BEGIN_TABLET_COPY_SESSION,
            tcpb.BeginTabletCopySessionRequestPB(requestor_uuid=me, tablet_id="../x"),
        )
    begun = d.call(
        address, BEGIN_TABLET_COPY_SESSION, tcpb.BeginTabletCopySessionRequestPB(requestor_uuid=me, tablet_id=TABLET)
    )
    sid, store = begun.session_id, begun.files[0]
    assert store.kind == tcpb.STORE_FILE

    def fetch(
        file_id: int, offset: int, max_length: int = 0, session: bytes = sid
    ) -> tuple[tcpb.FetchDataResponsePB, bytes]:
        request = tcpb.FetchDataRequestPB(session_id=session, file_id=file_id, offset=offset, max_length=max_length)
        response, sidecars = d.call_with_sidecars(address, FETCH_DATA, request)
        return response, bytes(sidecars[0]) if sidecars else b""

    for offset, problem in [
        (-1, "offset -1 is outside file 0"),
        (store.size_bytes + 1, "is outside file 0"),
        (2**62, "is outside"),
    ]:
        with pytest.raises(errors.InvalidArgument, match=problem):
            fetch(0, offset)
    with pytest.raises(errors.InvalidArgument, match="file id 42 is not in tablet copy session"):
        fetch(42, 0)
    with pytest.raises(errors.InvalidArgument, match="max_length must be >= 0"):
        fetch(0, 0, -1)
    with pytest.raises(errors.NotFound, match="is not active on this server"):
        fetch(0, 0, session=b"garbage")
    # Out of order and in odd sizes: every chunk is right where it says it is.
    size, piece = store.size_bytes, 50_000
    offsets = list(range(0, size, piece))
    chunks = {}
    for offset in reversed(offsets):
        response, data = fetch(0, offset, piece)
        assert response.chunk_crc32c == crc32c.crc32c(data)
        chunks[offset] = data
    whole = b"".join(chunks[o] for o in offsets)
    assert (len(whole), crc32c.crc32c(whole)) == (size, store.crc32c)

    check = tcpb.CheckTabletCopySessionActiveRequestPB
    assert d.call(address, CHECK_TABLET_COPY_SESSION_ACTIVE, check(session_id=sid, keepalive=True)).session_is_active
    assert not d.call(address, CHECK_TABLET_COPY_SESSION_ACTIVE, check(session_id=b"garbage")).session_is_active
    d.call(address, END_TABLET_COPY_SESSION, tcpb.EndTabletCopySessionRequestPB(session_id=sid, is_success=True))
    with pytest.raises(errors.NotFound, match="is not active on this server"):
        d.call(address, END_TABLET_COPY_SESSION, tcpb.EndTabletCopySessionRequestPB(session_id=sid))
    with pytest.raises(errors.NotFound):
        fetch(0, 0)

    # StartTabletCopy: validated in full before anything starts.
    source = servers.addresses[leader]
    good = tcpb.StartTabletCopyRequestPB(
        dest_uuid=me,
        tablet_id=TABLET,
        copy_peer_uuid=servers.uuids[leader],
        copy_peer_addr=common_pb2.HostPortPB(host=source.host, port=source.port),
        caller_uuid=servers.uuids[leader],
        caller_term=1,
    )
    changes: list[tuple[str, object, str]] = [
        ("dest_uuid", "someone-else", "is for server 'someone-else'"),
        ("tablet_id", "no/slashes", "tablet id 'no/slashes'"),
        ("copy_peer_uuid", "", "copy_peer_uuid"),
        ("caller_term", -3, "caller_term must be >= 0"),
    ]
    for field, value, problem in changes:
        bad = tcpb.StartTabletCopyRequestPB()
        bad.CopyFrom(good)
        setattr(bad, field, value)
        with pytest.raises(errors.InvalidArgument, match=problem):
            d.call(servers.addresses[2], START_TABLET_COPY, bad)
    assert status(cluster, 2).tablet_copies_started == 0
    # A tablet the source does not have: accepted (the check is the source's), then it fails and leaves nothing.
    missing = tcpb.StartTabletCopyRequestPB()
    missing.CopyFrom(good)
    missing.tablet_id = "nowhere"
    d.call(servers.addresses[2], START_TABLET_COPY, missing)
    wait_for(
        lambda: status(cluster, 2).tablet_copies_failed or None,
        what="the copy of a missing tablet to fail",
        timeout_s=30,
    )
    assert not (servers.dirs[2] / "tablets" / "nowhere").exists()
    # And the real thing, to a server that lacks the tablet: a RUNNING replica that Raft ignores.
    d.call(servers.addresses[2], START_TABLET_COPY, good)
    wait_for(
        lambda: True if ids_on(cluster, 2) == list(range(500)) else None, what="the copy to server 2", timeout_s=60
    )
    stale = tcpb.StartTabletCopyRequestPB()
    stale.CopyFrom(good)
    stale.caller_term = 0
    stale.replace_live_replica = True
    with pytest.raises(errors.IllegalState, match="a newer leader exists"):
        d.call(servers.addresses[2], START_TABLET_COPY, stale)
    with pytest.raises(errors.AlreadyPresent, match="already has a live replica"):
        d.call(servers.addresses[2], START_TABLET_COPY, good)


# -- the copy source: a replica in the destination's location --------------------------------------


def test_a_follower_is_copied_from_an_up_to_date_replica_in_its_own_location(tmp_path: Path) -> None:
    """Locations /a (1 server) and /b (2): the leader is moved to /a, a /b follower is left
    behind; its copy comes from the other /b replica, and counts as bytes within its location."""
    options = MiniClusterOptions(
        num_masters=1,
        raft_tick_interval_ms=25,
        raft_heartbeat_interval_ms=150,
        heartbeat_interval_ms=200,
        tserver_flags=tuple(COPY_FLAGS),
    )
    with (
        MiniCluster(tmp_path, options, locations={"/a": 1, "/b": 2}) as mc,
        nyala.connect(mc.master_addresses_flag, timeout_s=60) as client,
    ):
        table = client.create_table("located", schema([("id", "int64"), ("s", "string")], primary_key="id"))
        tablet_id = table.tablets()[0].tablet_id
        by_uuid = {s.uuid: s for s in mc.tservers}
        leader_server = mc.tservers_in("/a")[0]
        messenger_loop = LoopThread()
        messenger = messenger_loop.run(_make_messenger())
        try:

            def call(server: ClusterServer, method: Any, request: Any) -> Any:
                return messenger_loop.run(messenger.call(server.address, method, request, timeout=10))

            def leader_uuid() -> str | None:
                for server in mc.tservers:
                    try:
                        states = call(
                            server, GET_CONSENSUS_STATE, cpb.GetConsensusStateRequestPB(tablet_ids=[tablet_id])
                        )
                    except errors.NyalaError:
                        continue
                    state = states.tablets[0]
                    if state.role == common_pb2.LEADER and state.leader_uuid == server.uuid:
                        return server.uuid
                return None

            def leader_in_a() -> bool | None:
                current = leader_uuid()
                if current == leader_server.uuid:
                    return True
                if current is not None:
                    request = cpb.LeaderStepDownRequestPB(tablet_id=tablet_id, new_leader_uuid=leader_server.uuid)
                    with contextlib.suppress(errors.NyalaError):
                        call(by_uuid[current], LEADER_STEP_DOWN, request)
                return None

            # Between checks, a transfer asked for has time to happen before it is asked again.
            wait_for(leader_in_a, what="the leader to move to /a", timeout_s=60, interval_s=0.3)
            dest, peer = mc.tservers_in("/b")
            table.upsert([{"id": i, "s": "x" * 50} for i in range(200)])
            dest.process.stop()
            for start in range(200, 6200, 20):
                table.upsert([{"id": i, "s": "y" * 50} for i in range(start, start + 20)])
            mc.restart(dest)

            def copied() -> bool | None:
                try:
                    done = call(dest, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
                except errors.NyalaError:
                    return None
                return True if done.tablet_copies_completed else None

            wait_for(copied, what="the /b follower's tablet copy", timeout_s=90)
            assert leader_uuid() == leader_server.uuid  # the source choice was the leader's in /a
            done = call(dest, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
            assert done.location == "/b"
            assert done.tablet_copy_bytes_within_location > 0
            assert done.tablet_copy_bytes_across_locations == 0
            served = {
                s.location: call(s, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB())
                for s in mc.tservers
                if s is not dest
            }
            assert served["/b"].tablet_copy_bytes_served == done.tablet_copy_bytes_within_location
            assert served["/a"].tablet_copy_bytes_served == 0

            def caught_up() -> bool | None:
                listed = call(dest, LIST_TABLETS, tpb.ListTabletsRequestPB())
                return True if [t.num_rows for t in listed.tablets if t.tablet_id == tablet_id] == [6200] else None

            wait_for(caught_up, what="the copied replica to hold every row", timeout_s=60)
            assert peer.uuid != dest.uuid
        finally:
            messenger_loop.run(messenger.close())
            messenger_loop.close()
