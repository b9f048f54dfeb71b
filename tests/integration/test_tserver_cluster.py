"""Three real tablet-server processes driven directly: a stand-in master answers heartbeats,
the test creates tablets with a 3-voter config and writes and scans over RPC."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from nyala import errors
from nyala.common.hostport import HostPort
from nyala.proto import common_pb2, rpc_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.schema import (
    ColumnSchema,
    OpType,
    Partitioner,
    PartitionSchema,
    Predicate,
    Schema,
    decode_key,
    encode_key,
    encode_row_operations,
    make_row_operations,
)
from nyala.services import (
    ALTER_SCHEMA,
    CREATE_TABLET,
    DELETE_TABLET,
    GET_TABLET_SERVER_STATUS,
    LEADER_STEP_DOWN,
    LIST_TABLETS,
    SCAN,
    WRITE,
)
from nyala.testing.wait import wait_for

from .tserver_kit import SCHEMA, Cluster, Heartbeat, create_request, insert_ops

pytestmark = pytest.mark.timeout(180)

# Regular heartbeats come every 30 s, so within this module every heartbeat a tablet server
# sends is one it was triggered to send (first contact, a new tablet, a role or schema change).
HEARTBEAT_INTERVAL_S = 30.0
FLAGS = [
    "--heartbeat-interval-ms", str(int(HEARTBEAT_INTERVAL_S * 1000)),
    "--raft-tick-interval-ms", "25",
    "--raft-heartbeat-interval-ms", "150",
    "--scanner-ttl-ms", "2000",
    # These tests delete replicas of live tablets and create them again under the same id: a
    # leader copying a deleted replica back would race them.
    "--no-enable-tablet-copy",
]  # fmt: skip
MAIN = "main-tablet"
KEY_TYPES = [SCHEMA.column("id").type]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster.start(tmp_path_factory.mktemp("tservers"), 3, FLAGS)
    try:
        c.wait_registered()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def main_tablet(cluster: Cluster) -> str:
    """A tablet created WITHOUT peer addresses: replicas find each other only through the
    addresses the heartbeater learned from the master."""
    uuids = cluster.servers.uuids
    for i, uuid in enumerate(uuids):
        cluster.driver.call(cluster.servers.addresses[i], CREATE_TABLET, create_request(uuid, MAIN, uuids))
    cluster.driver.leader(MAIN)
    return MAIN


def peers(cluster: Cluster) -> dict[str, HostPort]:
    return dict(zip(cluster.servers.uuids, cluster.servers.addresses, strict=True))


def create_everywhere(cluster: Cluster, tablet_id: str, **kwargs: object) -> int:
    """Create a 3-voter tablet (with peer addresses); returns its leader's index."""
    uuids = cluster.servers.uuids
    for i, uuid in enumerate(uuids):
        request = create_request(uuid, tablet_id, uuids, peers=peers(cluster), **kwargs)  # type: ignore[arg-type]
        cluster.driver.call(cluster.servers.addresses[i], CREATE_TABLET, request)
    return cluster.driver.leader(tablet_id)


def row_errors(response: tpb.WriteResponsePB) -> list[tuple[int, int]]:
    return [(e.row_index, e.code) for e in response.per_row_errors]


def follower_of(cluster: Cluster, tablet_id: str) -> tuple[int, int]:
    """The leader and a follower that knows it (a majority elects; the third may hear of it later)."""
    leader = cluster.driver.leader(tablet_id)
    follower = (leader + 1) % 3
    uuid = cluster.servers.uuids[leader]
    wait_for(lambda: cluster.driver.consensus(follower, tablet_id).leader_uuid == uuid, what="the leader", timeout_s=10)
    return leader, follower


def key(value: int) -> bytes:
    return encode_key(KEY_TYPES, [value])


def id_range(low: int, high: int) -> dict[str, Any]:
    return {"lower_bound_primary_key": key(low), "exclusive_upper_bound_primary_key": key(high)}


# -- heartbeats and reports --------------------------------------------------------------------


def test_replicas_elect_a_leader_with_addresses_learned_from_the_master(cluster: Cluster, main_tablet: str) -> None:
    leader = cluster.driver.leader(main_tablet)

    # A majority elects and commits; the third replica learns the leader from its next message.
    def all_know_the_leader() -> list[cpb.ConsensusStatePB] | None:
        states = [cluster.driver.consensus(i, main_tablet) for i in range(3)]
        return states if {s.leader_uuid for s in states} == {cluster.servers.uuids[leader]} else None

    states = wait_for(all_know_the_leader, what="every replica to know the leader", timeout_s=10)
    assert sorted(p.permanent_uuid for p in states[0].committed_config.peers) == sorted(cluster.servers.uuids)


def test_reports_are_full_on_first_contact_then_incremental(cluster: Cluster, main_tablet: str) -> None:
    leader = cluster.servers.uuids[cluster.driver.leader(main_tablet)]
    for uuid in cluster.servers.uuids:

        def main_tablet_reported(uuid: str = uuid) -> list[Heartbeat] | None:
            beats = cluster.reports(uuid)  # registration, the full report asked for, then incremental ones
            later = [t.tablet_id for h in beats[2:] for t in h.request.tablet_report.updated_tablets]
            return beats if main_tablet in later else None

        heartbeats = wait_for(main_tablet_reported, what="an incremental report of the main tablet", timeout_s=10)
        first = heartbeats[0].request
        assert first.HasField("registration")
        assert not first.tablet_report.is_incremental
        later = [h.request for h in heartbeats[1:]]
        assert not any(r.HasField("registration") for r in later)
        assert not later[0].tablet_report.is_incremental  # the master asked for a full report
        assert all(r.tablet_report.is_incremental for r in later[1:])
        assert any(t.tablet_id == main_tablet for r in later[1:] for t in r.tablet_report.updated_tablets)

    def leader_reported() -> bool | None:
        report = cluster.latest(leader, main_tablet)
        ok = report is not None and report.consensus_state.role == common_pb2.LEADER
        return True if ok else None

    wait_for(leader_reported, what="the leader's report", timeout_s=10)
    report = cluster.latest(leader, main_tablet)
    assert report is not None
    assert (report.state, report.schema_version) == (tpb.RUNNING, 0)
    assert report.consensus_state.leader_uuid == leader
    assert len(report.consensus_state.committed_config.peers) == 3


def test_a_leader_change_is_reported_at_once(cluster: Cluster, main_tablet: str) -> None:
    old, new = follower_of(cluster, main_tablet)
    new_uuid = cluster.servers.uuids[new]
    asked_at = time.monotonic()
    cluster.driver.call(
        cluster.servers.addresses[old],
        LEADER_STEP_DOWN,
        cpb.LeaderStepDownRequestPB(tablet_id=main_tablet, new_leader_uuid=new_uuid),
    )

    def new_leader_heartbeat() -> int | None:
        for n, heartbeat in enumerate(cluster.reports(new_uuid)):
            if heartbeat.at < asked_at:
                continue
            for tablet in heartbeat.request.tablet_report.updated_tablets:
                if tablet.tablet_id == main_tablet and tablet.consensus_state.role == common_pb2.LEADER:
                    return n
        return None

    n = wait_for(new_leader_heartbeat, what="the new leader's report", timeout_s=15)
    assert cluster.driver.leader(main_tablet) == new
    heartbeats = cluster.reports(new_uuid)
    # A regular heartbeat comes a full interval after the one before; this one did not wait.
    assert heartbeats[n].at - heartbeats[n - 1].at < 0.9 * HEARTBEAT_INTERVAL_S


# -- writes -------------------------------------------------------------------------------------


def test_write_then_scan_with_row_errors_and_op_index(cluster: Cluster, main_tablet: str) -> None:
    d = cluster.driver
    first = d.write(main_tablet, insert_ops(range(100)))
    assert (row_errors(first), first.op_index > 0) == ([], True)
    steps = [
        (insert_ops([99, 100]), [(0, rpc_pb2.ALREADY_PRESENT)]),
        (insert_ops([100, 101], OpType.INSERT_IGNORE), []),
        (insert_ops([500, 1], OpType.UPDATE), [(0, rpc_pb2.NOT_FOUND)]),
        (insert_ops([2, 600], OpType.DELETE), [(1, rpc_pb2.NOT_FOUND)]),
        (insert_ops([600], OpType.DELETE_IGNORE), []),
        (insert_ops([601], OpType.UPDATE_IGNORE), []),
        (insert_ops([3, 602], OpType.UPSERT), []),
    ]
    last_index = first.op_index
    for ops, expected in steps:
        response = d.write(main_tablet, ops)
        assert row_errors(response) == expected
        assert response.op_index > last_index
        last_index = response.op_index
    leader = d.leader(main_tablet)
    expected_ids = [i for i in range(102) if i != 2] + [602]
    assert d.ids(leader, main_tablet, **id_range(0, 1000)) == expected_ids


def test_a_follower_refuses_writes_naming_the_leader(cluster: Cluster, main_tablet: str) -> None:
    leader, follower = follower_of(cluster, main_tablet)
    with pytest.raises(errors.NotTheLeader) as caught:
        cluster.driver.call(
            cluster.servers.addresses[follower], WRITE, tpb.WriteRequestPB(tablet_id=main_tablet), [insert_ops([1])]
        )
    assert caught.value.leader_hint == cluster.servers.uuids[leader]


def test_a_leader_only_scan_is_refused_by_a_follower_and_served_by_the_leader(
    cluster: Cluster, main_tablet: str
) -> None:
    d = cluster.driver
    assert row_errors(d.write(main_tablet, insert_ops([8000, 8001]))) == []
    leader, follower = follower_of(cluster, main_tablet)
    leader_only = tpb.NewScanRequestPB(tablet_id=main_tablet, leader_only=True, **id_range(8000, 8002))
    with pytest.raises(errors.NotTheLeader) as caught:
        d.scan(follower, leader_only)
    assert caught.value.leader_hint == cluster.servers.uuids[leader]
    table, _ = d.scan(leader, leader_only)
    assert sorted(table.column("id").to_pylist()) == [8000, 8001]


def test_a_retried_write_is_applied_once_even_after_a_leader_change(cluster: Cluster, main_tablet: str) -> None:
    d = cluster.driver
    rows = insert_ops([7000, 7001])
    first_id = tpb.RequestIdPB(client_id="retrying-client", seq_no=1, first_incomplete_seq_no=1)
    first = d.write(main_tablet, rows, request_id=first_id)
    assert (row_errors(first), first.op_index > 0) == ([], True)
    # The same write again (a client that lost the answer): answered, not applied again.
    assert d.write(main_tablet, rows, request_id=first_id) == first
    # Another leader, which only applied the entry as a follower, knows the answer too.
    old, new = follower_of(cluster, main_tablet)
    d.call(
        cluster.servers.addresses[old],
        LEADER_STEP_DOWN,
        cpb.LeaderStepDownRequestPB(tablet_id=main_tablet, new_leader_uuid=cluster.servers.uuids[new]),
    )
    wait_for(lambda: d.leader(main_tablet) == new, what="the new leader", timeout_s=15)
    assert d.write(main_tablet, rows, request_id=first_id) == first
    # The same rows as a NEW write are a second insert of existing keys.
    second_id = tpb.RequestIdPB(client_id="retrying-client", seq_no=2, first_incomplete_seq_no=1)
    assert row_errors(d.write(main_tablet, rows, request_id=second_id)) == [
        (0, rpc_pb2.ALREADY_PRESENT),
        (1, rpc_pb2.ALREADY_PRESENT),
    ]
    # Once the client says write 1 completed, the tablet forgets its answer and refuses a retry.
    third_id = tpb.RequestIdPB(client_id="retrying-client", seq_no=3, first_incomplete_seq_no=3)
    d.write(main_tablet, insert_ops([7002]), request_id=third_id)
    with pytest.raises(errors.Aborted, match="no longer kept"):
        d.write(main_tablet, rows, request_id=first_id)
    assert d.ids(d.leader(main_tablet), main_tablet, **id_range(7000, 7100)) == [7000, 7001, 7002]


@pytest.mark.parametrize(
    ("request_id", "message"),
    [
        (tpb.RequestIdPB(client_id="", seq_no=1), "client_id must be 1 to 64 bytes"),
        (tpb.RequestIdPB(client_id="c" * 65, seq_no=1), "client_id must be 1 to 64 bytes"),
        (tpb.RequestIdPB(client_id="c", seq_no=0), "seq_no must be at least 1"),
        (tpb.RequestIdPB(client_id="c", seq_no=2, first_incomplete_seq_no=3), "first_incomplete_seq_no must be"),
    ],
)
def test_malformed_request_ids_are_refused_by_name(
    cluster: Cluster, main_tablet: str, request_id: tpb.RequestIdPB, message: str
) -> None:
    with pytest.raises(errors.InvalidArgument, match=message):
        cluster.driver.write(main_tablet, insert_ops([7500]), request_id=request_id)
    assert cluster.driver.ids(cluster.driver.leader(main_tablet), main_tablet, **id_range(7500, 7501)) == []


def bad_batches() -> list[tuple[list[bytes], str]]:
    def batch(**columns: pa.Array) -> bytes:
        return encode_row_operations(pa.record_batch({"__op": pa.array([1], pa.int8()), **columns}))

    huge = [{"id": 5000 + i, "v": 0.0, "s": "x" * 1000} for i in range(1100)]
    return [
        ([], "exactly one sidecar"),
        ([b"\x00\x01garbage bytes"], "not a valid Arrow IPC stream"),
        ([batch(id=pa.array(["5001"]))], "column 'id' has type string, expected int64"),
        ([batch(id=pa.array([None], pa.int64()))], "column 'id' is not nullable but has nulls"),
        ([batch(id=pa.array([5002], pa.int64()), nope=pa.array([1]))], "unknown column 'nope'"),
        ([make_row_operations(SCHEMA, OpType.INSERT, huge)], "exceeds the limit"),
    ]


@pytest.mark.parametrize(("sidecars", "message"), bad_batches())
def test_bad_writes_are_refused_by_name_and_change_nothing(
    cluster: Cluster, main_tablet: str, sidecars: list[bytes], message: str
) -> None:
    d = cluster.driver
    leader = d.leader(main_tablet)
    address = cluster.servers.addresses[leader]
    before = d.call(address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB()).writes_served
    with pytest.raises(errors.InvalidArgument, match=message):
        d.call(address, WRITE, tpb.WriteRequestPB(tablet_id=main_tablet), sidecars)
    after = d.call(address, GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB()).writes_served
    assert after == before
    assert d.ids(leader, main_tablet, **id_range(5000, 7000)) == []


def test_unknown_tablets_are_not_found(cluster: Cluster) -> None:
    d = cluster.driver
    with pytest.raises(errors.NotFound, match="'no-such-tablet' is not hosted"):
        d.call(cluster.servers.addresses[0], WRITE, tpb.WriteRequestPB(tablet_id="no-such-tablet"), [b"x"])
    with pytest.raises(errors.NotFound):
        d.scan(0, tpb.NewScanRequestPB(tablet_id="no-such-tablet"))


def test_rows_outside_the_tablets_partition_get_row_errors(cluster: Cluster) -> None:
    ranged = PartitionSchema((), ("id",))
    bounds = Partitioner(SCHEMA, ranged).bounds([0], [1000])
    partition = Partitioner(SCHEMA, ranged, [bounds]).partitions[0]
    leader = create_everywhere(cluster, "ranged", partition_schema=ranged, partition=partition)
    response = cluster.driver.write("ranged", insert_ops([10, 1500, 20, -1]))
    assert row_errors(response) == [(1, rpc_pb2.INVALID_ARGUMENT), (3, rpc_pb2.INVALID_ARGUMENT)]
    assert "does not belong to the partition" in response.per_row_errors[0].message
    assert cluster.driver.ids(leader, "ranged") == [10, 20]


# -- scans --------------------------------------------------------------------------------------


def test_scans_project_filter_bound_limit_and_stream_in_batches(cluster: Cluster, main_tablet: str) -> None:
    d = cluster.driver
    written = d.write(main_tablet, insert_ops(range(10_000, 11_000)))
    leader, follower = follower_of(cluster, main_tablet)
    status = cluster.servers.addresses[follower], GET_TABLET_SERVER_STATUS, tpb.GetTabletServerStatusRequestPB()
    scans_before = d.call(*status).scans_served
    # READ_YOUR_WRITES on a follower: it waits until it has applied the write.
    table, responses = d.scan(
        follower,
        tpb.NewScanRequestPB(
            tablet_id=main_tablet,
            read_mode=tpb.READ_YOUR_WRITES,
            min_applied_index=written.op_index,
            order_by_primary_key=True,
            **id_range(10_000, 11_000),
        ),
        batch_size_bytes=4000,
    )
    assert table.column("id").to_pylist() == list(range(10_000, 11_000))
    assert len(responses) > 3
    assert all(r.has_more_results for r in responses[:-1])
    assert not responses[-1].has_more_results
    assert not responses[-1].scanner_id
    seen = 0
    for r in responses:
        seen += r.num_rows
        assert decode_key(KEY_TYPES, r.last_primary_key) == (10_000 + seen - 1,)
    assert d.call(*status).scans_served - scans_before == len(responses)

    predicates = json.dumps([Predicate.compare("v", ">=", 10_500.0).to_dict(SCHEMA)]).encode()
    projected, _ = d.scan(
        leader,
        tpb.NewScanRequestPB(
            tablet_id=main_tablet, projected_columns=["s"], predicates=predicates, limit=3, order_by_primary_key=True
        ),
    )
    assert projected.column_names == ["s"]
    assert projected.column("s").to_pylist() == ["row 10500", "row 10501", "row 10502"]


def test_an_ordered_scan_resumes_on_another_replica_after_the_last_key(cluster: Cluster, main_tablet: str) -> None:
    d = cluster.driver
    written = d.write(main_tablet, insert_ops(range(20_000, 20_500)))
    leader, follower = follower_of(cluster, main_tablet)
    bounds = id_range(20_000, 21_000)
    first, _ = d.call_with_sidecars(
        cluster.servers.addresses[leader],
        SCAN,
        tpb.ScanRequestPB(
            new_scan_request=tpb.NewScanRequestPB(tablet_id=main_tablet, order_by_primary_key=True, **bounds),
            batch_size_bytes=2000,
        ),
    )
    assert first.has_more_results
    cluster.driver.call(
        cluster.servers.addresses[leader], SCAN, tpb.ScanRequestPB(scanner_id=first.scanner_id, close_scanner=True)
    )
    rest = d.ids(
        follower,
        main_tablet,
        last_primary_key=first.last_primary_key,
        read_mode=tpb.READ_YOUR_WRITES,
        min_applied_index=written.op_index,
        **bounds,
    )
    assert rest == list(range(20_000 + first.num_rows, 20_500))


def test_scanners_check_call_order_close_and_expire(cluster: Cluster, main_tablet: str) -> None:
    d = cluster.driver
    d.write(main_tablet, insert_ops(range(30_000, 30_100)))
    leader = d.leader(main_tablet)
    address = cluster.servers.addresses[leader]

    def open_scan() -> tpb.ScanResponsePB:
        new = tpb.NewScanRequestPB(tablet_id=main_tablet, order_by_primary_key=True, **id_range(30_000, 30_100))
        response: tpb.ScanResponsePB = d.call(
            address, SCAN, tpb.ScanRequestPB(new_scan_request=new, batch_size_bytes=200)
        )
        assert response.has_more_results
        return response

    opened = open_scan()
    d.call(address, SCAN, tpb.ScanRequestPB(scanner_id=opened.scanner_id, call_seq_id=1, batch_size_bytes=200))
    with pytest.raises(errors.InvalidArgument, match="call_seq_id 1 repeats"):
        d.call(address, SCAN, tpb.ScanRequestPB(scanner_id=opened.scanner_id, call_seq_id=1))
    closed = d.call(address, SCAN, tpb.ScanRequestPB(scanner_id=opened.scanner_id, close_scanner=True))
    assert not closed.has_more_results
    with pytest.raises(errors.NotFound, match="expired or does not exist"):
        d.call(address, SCAN, tpb.ScanRequestPB(scanner_id=opened.scanner_id, call_seq_id=2))
    idle = open_scan()
    time.sleep(2.5)  # the scanner TTL is 2 s: the behaviour under test is the passing of time
    with pytest.raises(errors.NotFound, match="expired"):
        d.call(address, SCAN, tpb.ScanRequestPB(scanner_id=idle.scanner_id, call_seq_id=1))


# -- tablet lifecycle ---------------------------------------------------------------------------------


def test_create_tablet_is_idempotent_and_validated(cluster: Cluster, main_tablet: str) -> None:
    d = cluster.driver
    uuids = cluster.servers.uuids
    address = cluster.servers.addresses[0]
    d.call(address, CREATE_TABLET, create_request(uuids[0], main_tablet, uuids))
    with pytest.raises(errors.AlreadyPresent, match="Raft members"):
        d.call(address, CREATE_TABLET, create_request(uuids[0], main_tablet, [uuids[0], uuids[1], "f" * 32]))
    wrong = [
        (create_request(uuids[1], "t-wrong-dest", uuids), "reached server"),
        (create_request(uuids[0], "t-not-member", uuids[1:]), "does not include this server"),
        (create_request(uuids[0], "bad id!", uuids), "tablet id"),
    ]
    bad_schema = create_request(uuids[0], "t-bad-schema", uuids)
    bad_schema.schema = b'{"columns": []'
    wrong.append((bad_schema, "schema is not valid JSON"))
    bad_partition = create_request(uuids[0], "t-bad-partition", uuids)
    bad_partition.partition = b'{"hash_buckets": [3], "range_lower": "", "range_upper": ""}'
    wrong.append((bad_partition, "hash buckets"))
    for request, message in wrong:
        with pytest.raises(errors.InvalidArgument, match=message):
            d.call(address, CREATE_TABLET, request)
    listed = d.call(address, LIST_TABLETS, tpb.ListTabletsRequestPB())
    assert not any(t.tablet_id.startswith("t-") for t in listed.tablets)


def test_alter_schema_is_replicated_and_seen_by_every_replica(cluster: Cluster) -> None:
    d = cluster.driver
    create_everywhere(cluster, "altered")
    d.write("altered", insert_ops([1, 2, 3]))
    leader, follower = follower_of(cluster, "altered")
    uuids = cluster.servers.uuids
    v1 = SCHEMA.add_column(ColumnSchema.of("extra", "int32", nullable=False, default=7))
    v2 = v1.rename_column("v", "value")
    v3 = v2.drop_column("s")

    def alter(i: int, schema: Schema, version: int) -> None:
        request = tpb.AlterSchemaRequestPB(
            dest_uuid=uuids[i], tablet_id="altered", schema=schema.to_json(), schema_version=version
        )
        d.call(cluster.servers.addresses[i], ALTER_SCHEMA, request)

    with pytest.raises(errors.NotTheLeader) as caught:
        alter(follower, v1, 1)
    assert caught.value.leader_hint == uuids[leader]
    for version, schema in enumerate([v1, v2, v3], start=1):
        alter(leader, schema, version)
    alter(leader, v3, 3)  # a retried request is a no-op
    with pytest.raises(errors.InvalidArgument, match="schema version 0 but tablet altered is at schema version 3"):
        d.write("altered", insert_ops([4]))
    row = make_row_operations(v3, OpType.INSERT, [{"id": 4, "value": 4.0, "extra": 1}])
    response = d.write("altered", row, schema_version=3)
    assert row_errors(response) == []
    for i in range(3):

        def scanned(i: int = i) -> pa.Table | None:
            try:
                table, _ = d.scan(
                    i, tpb.NewScanRequestPB(tablet_id="altered", order_by_primary_key=True, schema_version=3)
                )
            except errors.ServiceUnavailable:
                return None
            return table if table.num_rows == 4 else None

        table = wait_for(scanned, what=f"replica {i} to apply the schema changes", timeout_s=15)
        assert table.column_names == ["id", "value", "extra"]
        assert table.to_pylist()[0] == {"id": 1, "value": 1.0, "extra": 7}
        report = wait_for(
            lambda i=i: r if (r := cluster.latest(uuids[i], "altered")) and r.schema_version == 3 else None,  # type: ignore[misc]
            what=f"replica {i} to report schema version 3",
            timeout_s=15,
        )
        assert report.schema_version == 3


def test_delete_tablet_leaves_tombstones_and_is_idempotent(cluster: Cluster) -> None:
    d = cluster.driver
    uuids = cluster.servers.uuids
    create_everywhere(cluster, "doomed")
    d.write("doomed", insert_ops([1, 2]))

    def delete(i: int, tablet_id: str = "doomed", dest: str | None = None) -> None:
        request = tpb.DeleteTabletRequestPB(
            dest_uuid=dest or uuids[i], tablet_id=tablet_id, tombstone=True, reason="test"
        )
        d.call(cluster.servers.addresses[i], DELETE_TABLET, request)

    with pytest.raises(errors.InvalidArgument, match="reached server"):
        delete(0, dest=uuids[1])
    with pytest.raises(errors.NotFound):
        delete(0, tablet_id="never-existed")
    for i in range(3):
        delete(i)
        delete(i)
        listed = d.call(cluster.servers.addresses[i], LIST_TABLETS, tpb.ListTabletsRequestPB())
        assert {t.tablet_id: t.state for t in listed.tablets}["doomed"] == tpb.TOMBSTONED
        with pytest.raises(errors.NotFound, match="tombstoned"):
            d.scan(i, tpb.NewScanRequestPB(tablet_id="doomed"))
        report = wait_for(
            lambda i=i: r if (r := cluster.latest(uuids[i], "doomed")) and r.state == tpb.TOMBSTONED else None,  # type: ignore[misc]
            what="a tombstone report",
            timeout_s=15,
        )
        assert report.consensus_state.committed_config.peers
    leader = create_everywhere(cluster, "doomed")  # a tombstone is replaced by a new replica
    assert d.ids(leader, "doomed") == []


def test_list_tablets_counts_rows(cluster: Cluster) -> None:
    d = cluster.driver
    create_everywhere(cluster, "counted")
    written = d.write("counted", insert_ops(range(25)))
    for i in range(3):
        d.ids(i, "counted", read_mode=tpb.READ_YOUR_WRITES, min_applied_index=written.op_index)
        listed = d.call(cluster.servers.addresses[i], LIST_TABLETS, tpb.ListTabletsRequestPB())
        status = {t.tablet_id: t for t in listed.tablets}["counted"]
        assert (status.state, status.num_rows, status.table_id) == (tpb.RUNNING, 25, "table-counted")
        assert status.applied_index >= written.op_index
