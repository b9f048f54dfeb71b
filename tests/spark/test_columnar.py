"""The columnar read path's own parts: its planner, its wire messages, its plan, and writes with its jar loaded."""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from nyala.client import Client, Partitioning
from nyala.proto import tserver_pb2 as tpb
from nyala.spark import create_table
from nyala.spark.columnar_planner import handle, to_filter
from nyala.spark.helpers import jvm_source_loaded

from .shared_session import SharedSpark

pytestmark = pytest.mark.timeout(240)

UTC = datetime.UTC


@pytest.fixture(scope="module")
def events(shared_spark: SharedSpark, client: Client, master: str) -> Iterator[str]:
    spark = shared_spark.session()
    df = spark.createDataFrame(
        [(i, f"h{i % 4}", datetime.datetime(2024, 1, 1, tzinfo=UTC) + datetime.timedelta(hours=i)) for i in range(400)],
        "id long, host string, ts timestamp",
    )
    create_table("events", df.schema, ["host", "id"], Partitioning().add_hash_partitions("host", 4), master=master)
    # Through format("nyala") with the jar loaded: the JVM source hands the write to nyala_python.
    df.write.format("nyala").option("nyala.master", master).option("nyala.table", "events").mode("append").save()
    yield "events"
    client.delete_table("events")


def plan(master: str, filters: list[dict[str, object]], columns: list[str], **options: str) -> dict[str, Any]:
    request = {
        "op": "plan",
        "options": {"nyala.master": master, "nyala.table": "events", **options},
        "schema": json.dumps({"type": "struct", "fields": []}),  # no user schema to check
        "columns": columns,
        "filters": filters,
    }
    return handle(json.dumps(request))


def test_writes_through_the_jvm_name_reach_the_python_writer(
    spark: SparkSession, client: Client, master: str, events: str
) -> None:
    assert jvm_source_loaded(spark)
    assert client.open_table(events).count() == 400
    # The mode rules of the Python writer hold through the JVM name too.
    writer = spark.range(1).selectExpr("id", "'h9' AS host", "current_timestamp() AS ts").write.format("nyala")
    with pytest.raises(Exception, match=r"mode\('append'\)"):
        writer.option("nyala.master", master).option("nyala.table", events).mode("overwrite").save()
    assert client.open_table(events).count() == 400


def test_the_plan_is_a_columnar_batch_scan_with_the_pushed_filters(
    spark: SparkSession, master: str, events: str
) -> None:
    df = spark.read.format("nyala").option("nyala.master", master).option("nyala.table", events).load()
    query = df.filter("host = 'h1' AND id < 50 AND id % 3 = 0").select("id")
    plan_text = query._jdf.queryExecution().executedPlan().toString()
    assert "ColumnarToRow" in plan_text
    assert "NyalaScan(events, pushed=[EqualTo(host,h1), LessThan(id,50)" in plan_text
    assert sorted(r.id for r in query.collect()) == [i for i in range(1, 50, 4) if i % 3 == 0]
    assert query.rdd.getNumPartitions() == 1  # host = 'h1' reads one hash bucket


def test_the_planner_turns_typed_literals_into_what_pyspark_hands_a_python_source() -> None:
    micros = 1_704_067_200_000_001  # 2024-01-01T00:00:00.000001Z
    ts = to_filter({"kind": "GreaterThan", "attribute": "ts", "value": {"t": "timestamp", "v": micros}})
    assert ts.value == datetime.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC)  # type: ignore[attr-defined]
    day = to_filter({"kind": "EqualTo", "attribute": "d", "value": {"t": "date", "v": 19723}})
    assert day.value == datetime.date(2024, 1, 1)  # type: ignore[attr-defined]
    among = to_filter({"kind": "In", "attribute": "host", "values": [{"t": "str", "v": "a"}, {"t": "int", "v": 3}]})
    assert among.value == ("a", 3)  # type: ignore[attr-defined]


def test_the_planner_answers_partitions_with_ready_scan_requests(master: str, events: str) -> None:
    whole = plan(master, [], ["id", "ts"])
    assert "error" not in whole, whole
    assert len(whole["partitions"]) == 4
    assert len(whole["servers"]) == 3  # every live tablet server, for leader hints to new replicas
    assert whole["leader_only"] is True
    assert whole["ordered"] is False
    pushed = plan(
        master,
        [
            {"kind": "EqualTo", "attribute": "host", "value": {"t": "str", "v": "h2"}},
            {"kind": "Other", "text": "Or(...)"},
            {"kind": "EqualTo", "attribute": "host", "value": {"t": "other", "v": "java.lang.Object"}},
        ],
        [],
        **{"nyala.faultTolerantScan": "true", "nyala.scanLocality": "closest_replica"},
    )
    partitions = pushed["partitions"]
    assert isinstance(partitions, list)
    assert len(partitions) == 1
    assert pushed["ordered"] is True
    assert pushed["leader_only"] is False
    (partition,) = partitions
    assert len(partition["replicas"]) == 3
    assert sum(role == "LEADER" for _, _, role in partition["replicas"]) == 1
    request = tpb.ScanRequestPB.FromString(base64.b64decode(partition["request"]))
    new_scan = request.new_scan_request
    assert new_scan.tablet_id == partition["tablet"]
    assert list(new_scan.projected_columns) == ["host"]  # count(): the first key column only
    assert json.loads(new_scan.predicates)[0]["column"] == "host"
    assert new_scan.order_by_primary_key
    assert not new_scan.leader_only
    # The same filter with pushdown turned off: no predicate, every tablet.
    off = plan(
        master,
        [{"kind": "EqualTo", "attribute": "host", "value": {"t": "str", "v": "h2"}}],
        [],
        **{"nyala.pushdown": "false"},
    )
    assert len(off["partitions"]) == 4


def test_the_planner_refuses_bad_requests_by_name(master: str, events: str) -> None:
    assert handle("not json")["kind"] == "JSONDecodeError"
    assert "not a planner request" in str(handle(json.dumps({"op": "drop"}))["error"])
    assert "needs an 'options' object" in str(handle(json.dumps({"op": "schema"}))["error"])
    bad = handle(json.dumps({"op": "schema", "options": {"nyala.master": master, "nyala.tabel": "events"}}))
    assert bad["kind"] == "InvalidArgument"
    assert "unknown option 'nyala.tabel'" in str(bad["error"])
    unknown = plan(master, [], ["no_such_column"])
    assert "no_such_column" in str(unknown.get("error")), unknown


def test_resumed_and_continued_requests_decode_as_the_server_reads_them(spark: SparkSession) -> None:
    # The JVM reader's hand-encoded messages (ScanMessages), decoded by the server's protobuf classes.
    opening = tpb.ScanRequestPB(
        new_scan_request=tpb.NewScanRequestPB(
            tablet_id="t1", projected_columns=["a", "b"], order_by_primary_key=True, schema_version=3
        ),
        batch_size_bytes=4096,
    ).SerializeToString()
    messages = spark.sparkContext._jvm.nyala.spark.columnar.ScanMessages  # type: ignore[union-attr]
    resumed = tpb.ScanRequestPB.FromString(bytes(messages.resumeRequest(opening, b"\x00key\xff")))
    assert resumed.new_scan_request.last_primary_key == b"\x00key\xff"
    assert resumed.new_scan_request.tablet_id == "t1"
    assert list(resumed.new_scan_request.projected_columns) == ["a", "b"]
    assert resumed.new_scan_request.schema_version == 3
    assert resumed.batch_size_bytes == 4096
    continued = tpb.ScanRequestPB.FromString(bytes(messages.continueRequest(b"sc-1", 300, 1 << 20, False)))
    assert (continued.scanner_id, continued.call_seq_id, continued.batch_size_bytes) == (b"sc-1", 300, 1 << 20)
    assert not continued.close_scanner
    assert not continued.HasField("new_scan_request")
    closing = tpb.ScanRequestPB.FromString(bytes(messages.continueRequest(b"sc-1", 7, 0, True)))
    assert closing.close_scanner
    assert closing.call_seq_id == 7
