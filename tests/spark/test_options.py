"""Option parsing, filter translation and the type mapping, without a Spark session or cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNull, Not, StringEndsWith, StringStartsWith
from pyspark.sql.types import ArrayType, DecimalType, IntegerType, StringType, StructField, StructType, TimestampNTZType

from nyala.client import RowError, schema
from nyala.errors import AlreadyPresent, InvalidArgument, NotFound, TimedOut
from nyala.schema import ColumnType, OpType
from nyala.spark import nyala_type, parse_options
from nyala.spark.filters import next_prefix, push
from nyala.spark.typemap import nyala_columns
from nyala.spark.writer import describe_row_errors

TABLE = schema([("host", "string"), ("n", "int32"), ("on", "bool")], primary_key="host")


def test_options_parse_with_defaults_and_kudu_spellings() -> None:
    parsed = parse_options({"nyala.table": "t", "nyala.operation": "Insert-Ignore", "NYALA.BATCHSIZE": "100"})
    assert (parsed.table, parsed.operation, parsed.batch_size_bytes) == ("t", OpType.INSERT_IGNORE, 100)
    assert parsed.leader_only
    assert not parsed.pushdown  # opt-in: see test_reads.py's reuse tests
    assert parse_options({"nyala.table": "t", "nyala.pushdown": "TRUE"}).pushdown
    assert not parsed.fault_tolerant_scan
    assert parse_options({"path": "from_load"}).table == "from_load"
    assert parse_options({"nyala.table": "t", "provider": "nyala", "option.nyala.table": "t"}).table == "t"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option 'nyala.table' is required"),
        ({"nyala.table": "t", "nyala.scanLocality": "nearest"}, "must be leader_only or closest_replica"),
        ({"nyala.table": "t", "nyala.batchSize": "big"}, "'nyala.batchSize' must be a positive integer"),
        ({"nyala.table": "t", "nyala.master": " "}, "'nyala.master' is empty"),
        ({"nyala.table": "t", "kudu.table": "t"}, "did you mean 'nyala.table'"),
        ({"nyala.table": "t", "nyala.ignoreNull": "true"}, "'nyala.ignoreNull' is not supported"),
    ],
)
def test_bad_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_options(options)


def test_only_exact_filters_are_pushed() -> None:
    pushable = [EqualTo(("n",), 3), In(("host",), ("a", "b")), IsNull(("n",)), StringStartsWith(("host",), "ab")]
    kept = [
        Not(EqualTo(("n",), 3)),
        StringEndsWith(("host",), "z"),
        GreaterThan(("on",), True),  # booleans only compare with = and !=
        EqualTo(("n",), "three"),  # a literal that does not fit the column
        EqualTo(("missing",), 1),
        In(("n",), (1, None)),
        EqualTo(("host", "nested"), "x"),
    ]
    predicates, rejected = push(pushable + kept, TABLE)
    assert rejected == kept
    assert [str(p) for p in predicates] == [
        "n = 3", "host IN ['a', 'b']", "n IS NULL", "host >= 'ab'", "host < 'ac'",
    ]  # fmt: skip


def test_next_prefix() -> None:
    assert next_prefix("abc") == "abd"
    assert next_prefix("a\U0010ffff") == "b"
    assert next_prefix("\U0010ffff") is None
    assert next_prefix("x\ud7ff") == "x\ue000"


def test_spark_types_without_a_nyala_type_are_named() -> None:
    assert nyala_type(DecimalType(20, 3), "d") == ColumnType.parse("decimal(20, 3)")
    assert str(nyala_type(IntegerType(), "i")) == "int32"
    with pytest.raises(InvalidArgument, match="column 'tags': Spark type array<int> has no Nyala type"):
        nyala_type(ArrayType(IntegerType()), "tags")
    with pytest.raises(InvalidArgument, match="cast it to TIMESTAMP"):
        nyala_type(TimestampNTZType(), "local")


def test_not_null_columns_from_a_schema_spark_marks_nullable() -> None:
    # Spark marks every column read from Parquet nullable.
    parquet_like = StructType([StructField(n, StringType(), True) for n in ("host", "metric", "note")])
    nullable = {c.name: c.nullable for c in nyala_columns(parquet_like, ["host"], ["metric"])}
    assert nullable == {"host": False, "metric": False, "note": True}
    with pytest.raises(InvalidArgument, match=r"not_null names columns \['metrik'\]"):
        nyala_columns(parquet_like, ["host"], ["metrik"])


def test_row_errors_name_keys_counts_and_the_remedy_never_values() -> None:
    def refused(i: int, error: Exception) -> RowError:
        return RowError(OpType.INSERT, {"id": i, "secret": f"payload-{i}"}, error)  # type: ignore[arg-type]

    errors = [refused(i, AlreadyPresent(f"key (id={i}) already present")) for i in range(7)]
    errors.append(refused(99, TimedOut("write to tablet t1 timed out")))
    message = describe_row_errors(errors, 2, parse_options({"nyala.table": "t", "nyala.operation": "insert"}), ["id"])
    assert message.startswith("failed to write 10 rows to Nyala table 't' with operation insert: ")
    assert "7 AlreadyPresent (keys (id=0), (id=1), (id=2), (id=3), (id=4) and 2 more): " in message
    assert "insert_ignore" in message
    assert "upsert" in message
    assert "1 TimedOut (keys (id=99)): first: write to tablet t1 timed out" in message
    assert "2 more not kept" in message
    assert "payload" not in message  # no column besides the key
    missing = [RowError(OpType.DELETE, {"id": 1}, NotFound("key (id=1) not found"))]
    deleting = parse_options({"nyala.table": "t", "nyala.operation": "delete"})
    assert "delete_ignore" in describe_row_errors(missing, 0, deleting, ["id"])


@pytest.mark.timeout(120)
def test_the_processes_of_a_first_write_import_little() -> None:
    # Each of the Python processes of a first Spark write imports part of Nyala: the source
    # lookup only the source class, the commit the writer class, tasks and planning the
    # client; none imports pandas (it doubled the import).
    code = (
        "import sys, pyspark_nyala, nyala.spark; before = set(sys.modules); "
        "import nyala.spark.writer; "
        "sys.exit(any(m in before for m in ('nyala.client', 'nyala.schema')) "
        "or 'nyala.client' in sys.modules or 'pandas' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=100).returncode == 0
    full = "import sys, nyala.spark as s; s.NyalaDataSource; s.create_table; sys.exit('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", full], check=False, timeout=100).returncode == 0


def test_tls_options_turn_tls_on_and_check_their_files(tmp_path: Path) -> None:
    from tests.integration.tls_kit import make_pki

    pki = make_pki(tmp_path, ["127.0.0.1"])
    assert parse_options({"nyala.table": "t"}).tls is None
    tls = parse_options({"nyala.table": "t", "nyala.tlscafile": str(pki.ca), "nyala.tlsCheckHostname": "false"}).tls
    assert tls is not None
    assert (tls.ca_file, tls.cert_file, tls.check_hostname) == (str(pki.ca), None, False)
    both = {"nyala.tlsCertFile": str(pki.client_cert), "nyala.tlsKeyFile": str(pki.client_key)}
    tls = parse_options({"nyala.table": "t", **both}).tls
    assert tls is not None
    assert tls.ssl_context().check_hostname
    system_cas = parse_options({"nyala.table": "t", "nyala.tls": "true"}).tls
    assert system_cas is not None
    assert system_cas.ca_file is None
    with pytest.raises(InvalidArgument, match="the TLS options do not load"):
        parse_options({"nyala.table": "t", "nyala.tlsCaFile": str(pki.client_key)})  # a key is no CA
    with pytest.raises(InvalidArgument, match=r"TLS is on with nyala\.tls"):
        parse_options({"nyala.table": "t", "nyala.encryptionPolicy": "required"})
