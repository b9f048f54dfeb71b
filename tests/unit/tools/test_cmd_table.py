"""``nyala table ...`` against fake servers: create, list, describe, scan, count, delete, errors."""

from __future__ import annotations

import datetime
import json

import pytest
from click.testing import CliRunner

from nyala.errors import InvalidArgument
from nyala.schema import ColumnSchema
from nyala.tools.cli import main
from nyala.tools.cmd_table import parse_predicate, parse_range_bound, parse_value, split_list
from tests.unit.client.fakes import FakeCluster
from tests.unit.client.helpers import kv_schema
from tests.unit.tools.conftest import Invoke

CREATE = ["-c", "id:int64", "-c", "name:string", "-c", "v:double", "-k", "id", "--hash", "id:3"]


def test_create_list_describe_delete(cluster: FakeCluster, nyala: Invoke) -> None:
    created = nyala("table", "create", "t", *CREATE, "--num-replicas", "3")
    assert created.exit_code == 0, created.output
    assert "created table t with 3 tablets" in created.output
    listed = nyala("table", "list", "--format", "json", "--columns", "name,num_tablets,num_replicas")
    assert json.loads(listed.stdout) == [{"name": "t", "num_tablets": 3, "num_replicas": 3}]
    assert "t" in nyala("table", "list").stdout
    described = json.loads(nyala("table", "describe", "t", "--format", "json").stdout)
    assert [c["name"] for c in described["columns"]] == ["id", "name", "v"]
    assert described["columns"][0]["key"] is True
    assert described["partitioning"] == "HASH (id) PARTITIONS 3 SEED 0"
    assert len(described["tablets"]) == 3
    text = nyala("table", "describe", "t", "--tablets")
    assert text.exit_code == 0
    assert "3 tablets" in text.stdout
    assert nyala("table", "delete", "t").exit_code == 0
    assert cluster.tables == {}


def test_create_with_range_partitions_and_typed_bounds(cluster: FakeCluster, nyala: Invoke) -> None:
    result = nyala(
        "table", "create", "m",
        "-c", "host:string", "-c", "day:date", "-c", "price:decimal(10,2):not-null:default=0",
        "-k", "host,day", "--hash", "host:2:9", "--range-columns", "day",
        "--range", "2024-01-01", "2025-01-01", "--range", "2025-01-01", "",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    table = cluster.table("m")
    assert len(table.tablets) == 4
    assert table.schema.column("price").default is not None
    assert table.partitioner.partition_schema.hash_dimensions[0].seed == 9
    assert table.partitioner.decode_range_key(table.partitioner.ranges[0].lower) == (datetime.date(2024, 1, 1),)


def _fill(cluster: FakeCluster, nyala: Invoke) -> None:
    assert nyala("table", "create", "t", *CREATE).exit_code == 0
    from nyala.client import connect

    with connect(cluster.master_addresses) as client:
        client.open_table("t").insert([{"id": i, "name": f"n{i}", "v": i / 2} for i in range(50)])


def test_scan_and_count_with_predicates(cluster: FakeCluster, nyala: Invoke) -> None:
    _fill(cluster, nyala)
    scanned = nyala("table", "scan", "t", "--columns", "id,name", "-w", "id >= 10", "-w", "id < 13", "--format", "json")
    assert scanned.exit_code == 0, scanned.output
    rows = sorted((json.loads(line) for line in scanned.stdout.splitlines()), key=lambda r: r["id"])
    assert rows == [{"id": 10, "name": "n10"}, {"id": 11, "name": "n11"}, {"id": 12, "name": "n12"}]
    table_view = nyala("table", "scan", "t", "-w", "id in [1,2]", "--ordered")
    assert table_view.exit_code == 0
    assert "2 rows" in table_view.stdout
    assert nyala("table", "scan", "t", "--limit", "5", "--format", "json").stdout.count("\n") == 5
    assert nyala("table", "count", "t").stdout.strip() == "50"
    counted = nyala("table", "count", "t", "-w", "name is not null", "-w", "v > 20", "--format", "json")
    assert json.loads(counted.stdout) == {"table": "t", "rows": 9}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["table", "count", "nope"], "not found: table 'nope'"),
        (["table", "scan", "t", "-w", "zzz = 1"], "unknown column 'zzz'"),
        (["table", "scan", "t", "-w", "id ~ 1"], "cannot read predicate"),
        (["table", "scan", "t", "-w", "id = abc"], "not a valid int64"),
        (["table", "create", "u", "-c", "id", "-k", "id"], "expected NAME:TYPE"),
        (["table", "create", "u", "-c", "id:int65", "-k", "id"], "unknown type 'int65'"),
        (["table", "create", "u", "-c", "id:int64", "-k", "id", "--hash", "id:x"], "COLUMNS:BUCKETS"),
        (["table", "create", "u", "-c", "id:int64", "-k", "id", "--range", "1", "2"], "--range needs --range-columns"),
        (["table", "create", "t", *CREATE], "already present"),
    ],
)
def test_bad_input_is_one_clear_line(cluster: FakeCluster, nyala: Invoke, args: list[str], message: str) -> None:
    assert nyala("table", "create", "t", *CREATE).exit_code == 0
    result = nyala(*args)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreachable_masters_fail_fast_and_clearly() -> None:
    result = CliRunner().invoke(main, ["table", "list", "127.0.0.1:1", "--timeout-s", "0.3"])
    assert result.exit_code == 1
    assert "no leader master found among 127.0.0.1:1" in result.output
    bad = CliRunner().invoke(main, ["table", "list", "127.0.0.1:x"])
    assert bad.exit_code == 1
    assert "port 'x' is not a number" in bad.output


def test_values_and_predicates_follow_the_column_types() -> None:
    schema = kv_schema()
    assert parse_value(ColumnSchema.of("d", "date"), "2024-02-29") == datetime.date(2024, 2, 29)
    stamp = parse_value(ColumnSchema.of("t", "timestamp"), "2024-01-01T10:00:00")
    assert stamp == datetime.datetime(2024, 1, 1, 10, tzinfo=datetime.UTC)
    assert str(parse_value(ColumnSchema.of("p", "decimal(5,2)"), "1.25")) == "1.25"
    assert parse_value(ColumnSchema.of("s", "string"), "42") == "42"
    assert parse_predicate(schema, "name = 'x'").value == "x"
    assert parse_predicate(schema, 'name = "x"').value == "x"
    assert parse_predicate(schema, "id in 1, 2,3").values == (1, 2, 3)
    assert parse_predicate(schema, "v IS NULL").op.value == "is null"
    with pytest.raises(InvalidArgument, match="takes no value"):
        parse_predicate(schema, "v is null 3")
    with pytest.raises(InvalidArgument, match="needs a value"):
        parse_predicate(schema, "id >=")


def test_sql_string_literals_are_read_without_their_quotes() -> None:
    schema = kv_schema()
    text = ColumnSchema.of("s", "string")
    assert parse_predicate(schema, "name = 's3'").value == "s3"
    assert parse_value(text, "'it''s'") == "it's"
    assert parse_value(text, "''") == ""
    assert parse_value(text, "'5'") == "5"
    assert parse_value(text, "'\"q\"'") == '"q"'  # inside single quotes, double quotes are text
    assert parse_value(text, " 'a, b' ") == "a, b"
    assert parse_value(ColumnSchema.of("b", "binary"), "'x'") == b"x"
    # Quoted dates, timestamps and numbers are read against the column type, as SQL does.
    assert parse_value(ColumnSchema.of("d", "date"), "'2024-02-29'") == datetime.date(2024, 2, 29)
    stamp = parse_value(ColumnSchema.of("t", "timestamp"), "'2024-01-01 10:00:00+02:00'")
    assert stamp == datetime.datetime(2024, 1, 1, 8, tzinfo=datetime.UTC)
    assert parse_value(ColumnSchema.of("i", "int64"), "'7'") == 7
    assert str(parse_value(ColumnSchema.of("p", "decimal(5,2)"), "'1.25'")) == "1.25"
    assert parse_predicate(schema, "name != 'a''b'").value == "a'b"


@pytest.mark.parametrize("text", ["'s3", "'it's'", "'a''", "'a' 'b'"])
def test_a_broken_sql_literal_is_refused_showing_the_accepted_form(text: str) -> None:
    with pytest.raises(InvalidArgument, match="write a quoted string as 'text', with '' for a quote inside"):
        parse_value(ColumnSchema.of("s", "string"), text)


def test_in_lists_split_at_commas_outside_quotes() -> None:
    schema = kv_schema()
    assert parse_predicate(schema, "name in ['a', 'b,c', 'it''s']").values == ("a", "b,c", "it's")
    assert parse_predicate(schema, "name IN ('x', \"y, z\")").values == ("x", "y, z")
    assert parse_predicate(schema, 'name in ["q\\"x", "w"]').values == ('q"x', "w")
    assert parse_predicate(schema, "id in (1, 2)").values == (1, 2)
    assert split_list("[]") == []
    assert split_list("a, , b,") == ["a", "b"]
    with pytest.raises(InvalidArgument, match="'-quoted string is not closed"):
        parse_predicate(schema, "name in ['a', 'b]")


def test_range_bounds_of_the_alter_verbs() -> None:
    schema = kv_schema()
    assert parse_range_bound(schema, ("id",), "[5]") == [5]
    assert parse_range_bound(schema, ("id",), "5") == [5]  # one range column: brackets optional
    assert parse_range_bound(schema, ("id",), "[]") is None
    assert parse_range_bound(schema, ("id", "name"), '[5, "a,b"]') == [5, "a,b"]
    assert parse_range_bound(schema, ("id", "name"), "[5, 'x']") == [5, "x"]
    with pytest.raises(InvalidArgument, match="has 1 values; the range columns are \\['id', 'name'\\]"):
        parse_range_bound(schema, ("id", "name"), "[5]")
    with pytest.raises(InvalidArgument, match="write a list of one value per range column"):
        parse_range_bound(schema, ("id", "name"), "5")
    with pytest.raises(InvalidArgument, match="no closing"):
        parse_range_bound(schema, ("id",), "[5")
    with pytest.raises(InvalidArgument, match="not a valid int64"):
        parse_range_bound(schema, ("id",), "[x]")


RANGED = ["-c", "id:int64", "-c", "name:string", "-c", "v:double", "-k", "id", "--range-columns", "id"]


def test_alter_verbs(cluster: FakeCluster, nyala: Invoke) -> None:
    assert nyala("table", "create", "r", *RANGED, "--range", "0", "10").exit_code == 0
    added = nyala("table", "add-range-partition", "r", "[10]", "[20]")
    assert added.exit_code == 0, added.output
    assert "added range partition [(10), (20)) to table r" in added.output
    inclusive = nyala(
        "table", "add_range_partition", "r", "[19]", "[29]",  # Kudu's spelling, Kudu's bound types
        "--lower_bound_type", "EXCLUSIVE_BOUND", "--upper-bound-type", "inclusive_bound",
    )  # fmt: skip
    assert inclusive.exit_code == 0, inclusive.output
    assert "[(20), (30))" in inclusive.output
    table = cluster.table("r")
    assert table.partitioner.ranges[-1] == table.partitioner.bounds([20], [30])
    dropped = nyala("table", "drop-range-partition", "r", "[0]", "[10]")
    assert dropped.exit_code == 0, dropped.output
    assert "dropped range partition [(0), (10)) of table r" in dropped.output
    assert len(cluster.table("r").partitioner.ranges) == 2
    assert nyala("table", "rename-column", "r", "name", "label").exit_code == 0
    assert nyala("table", "delete-column", "r", "v").exit_code == 0
    assert cluster.table("r").schema.names == ["id", "label"]
    renamed = nyala("table", "rename_table", "r", "r2")
    assert renamed.exit_code == 0, renamed.output
    assert "renamed table r to r2" in renamed.output
    assert [t.name for t in cluster.tables.values()] == ["r2"]


def test_kudu_spellings_are_hidden_from_the_help() -> None:
    listed = [line.split()[0] for line in CliRunner().invoke(main, ["table", "--help"]).output.splitlines()[6:] if line]
    assert "rename-table" in listed
    assert not [name for name in listed if "_" in name]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["table", "add-range-partition", "nope", "[1]", "[2]"], "not found: table 'nope'"),
        (["table", "add-range-partition", "t", "[1]", "[2]"], "table 't' has no range partition columns"),
        (["table", "add-range-partition", "r", "[1", "[2]"], "no closing ']'"),
        (["table", "add-range-partition", "r", "[x]", "[]"], "not a valid int64"),
        (["table", "add-range-partition", "r", "[5]", "[1]"], "is not below upper bound"),
        (["table", "add-range-partition", "r", "[1]", "[2]", "--lower-bound-type", "OPEN"], "Invalid value"),
    ],
)
def test_alter_verbs_refuse_bad_input(cluster: FakeCluster, nyala: Invoke, args: list[str], message: str) -> None:
    assert nyala("table", "create", "t", *CREATE).exit_code == 0
    assert nyala("table", "create", "r", *RANGED, "--range", "0", "10").exit_code == 0
    before = cluster.table("r").partitioner.ranges
    result = nyala(*args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert cluster.table("r").partitioner.ranges == before
