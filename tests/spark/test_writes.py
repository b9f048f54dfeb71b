"""Every write operation through Spark, row errors failing the task with a sample, and refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from nyala.client import Client, Partitioning
from nyala.spark import (
    ARROW_BATCH_CONF,
    ARROW_BATCH_ROWS,
    TASK_FAILURE_LOGGERS,
    create_table,
    delete_rows,
    insert_rows,
    update_rows,
    upsert_rows,
    write_rows,
)

pytestmark = pytest.mark.timeout(240)

SCHEMA = StructType(
    [StructField("id", LongType(), False), StructField("name", StringType()), StructField("n", IntegerType())]
)


@pytest.fixture(scope="module")
def table(client: Client, master: str) -> Iterator[str]:
    create_table("ops", SCHEMA, ["id"], Partitioning().add_hash_partitions("id", 2), master=master)
    yield "ops"
    client.delete_table("ops")


def frame(spark: SparkSession, ids: range, name: str, n: int | None = None) -> DataFrame:
    return spark.createDataFrame([(i, f"{name}{i}", n) for i in ids], SCHEMA).repartition(2)


def contents(client: Client, table: str) -> dict[int, tuple[str, int | None]]:
    rows = client.open_table(table).to_arrow().to_pylist()
    return {r["id"]: (r["name"], r["n"]) for r in rows}


def test_every_operation(spark: SparkSession, client: Client, master: str, table: str) -> None:
    insert_rows(frame(spark, range(100), "a"), table, master=master)
    assert contents(client, table) == {i: (f"a{i}", None) for i in range(100)}

    # The message of a re-run insert: count, keys (never the other columns) and the remedy.
    rerun = r"failed to write \d+ rows .* operation insert: \d+ AlreadyPresent \(keys \(id=9\d\).*insert_ignore"
    with pytest.raises(PySparkException, match=rerun) as refused:
        insert_rows(frame(spark, range(90, 100), "dup"), table, master=master)
    assert "dup9" not in str(refused.value)
    insert_rows(frame(spark, range(90, 110), "b"), table, master=master, ignore_duplicates=True)
    assert contents(client, table)[95] == ("a95", None)
    assert contents(client, table)[105] == ("b105", None)

    upsert_rows(frame(spark, range(100, 120), "c", 7), table, master=master)  # the default operation
    assert contents(client, table)[105] == ("c105", 7)
    assert contents(client, table)[119] == ("c119", 7)

    update_rows(frame(spark, range(10), "d", 1), table, master=master)
    with pytest.raises(
        PySparkException, match=r"failed to write \d+ rows .* operation update: \d+ NotFound .*update_ignore"
    ):
        update_rows(frame(spark, range(200, 205), "e"), table, master=master)
    update_rows(frame(spark, range(8, 12), "f", 2), table, master=master, ignore_missing=True)
    update_rows(frame(spark, range(300, 302), "f", 2), table, master=master, ignore_missing=True)

    delete_rows(frame(spark, range(50, 60), "x"), table, master=master)
    with pytest.raises(PySparkException, match=r"failed to write \d+ rows .* operation delete"):
        delete_rows(frame(spark, range(400, 403), "x"), table, master=master)
    delete_rows(frame(spark, range(58, 62), "x"), table, master=master, ignore_missing=True)

    got = contents(client, table)
    assert set(got) == set(range(50)) | set(range(62, 120))
    assert got[0] == ("d0", 1)
    assert got[9] == ("f9", 2)
    assert got[11] == ("f11", 2)
    assert got[12] == ("a12", None)


def test_upsert_is_the_default_and_dataframe_writes_a_subset_of_columns(
    spark: SparkSession, client: Client, master: str, table: str
) -> None:
    df = spark.createDataFrame([(1000, "only-name")], "id bigint, name string")
    df.write.format("nyala").option("nyala.master", master).option("nyala.table", table).mode("append").save()
    df.write.format("nyala").option("nyala.master", master).option("nyala.table", table).mode("append").save()
    assert contents(client, table)[1000] == ("only-name", None)
    write_rows(spark.createDataFrame([(1000, 5)], "id bigint, n int"), table, "update", master=master)
    assert contents(client, table)[1000] == ("only-name", 5)


def test_overwrite_is_refused(spark: SparkSession, master: str, table: str, client: Client) -> None:
    before = contents(client, table)
    writer = frame(spark, range(5000, 5010), "o").write.format("nyala").mode("overwrite")
    with pytest.raises(
        PySparkException, match=r"write to Nyala with \.mode\('append'\).*not support mode\('overwrite'\)"
    ):
        writer.option("nyala.master", master).option("nyala.table", table).save()
    # Without .mode(...) Spark refuses the write itself; its message names Append.
    unmoded = frame(spark, range(5000, 5010), "o").write.format("nyala")
    with pytest.raises(PySparkException, match=r"(?i)append"):
        unmoded.option("nyala.master", master).option("nyala.table", table).save()
    assert contents(client, table) == before


def test_schema_mismatches_are_refused_before_writing(
    spark: SparkSession, master: str, table: str, client: Client
) -> None:
    before = contents(client, table)
    cases = {
        "id bigint, name string, extra int": "DataFrame column 'extra' is not in Nyala table 'ops'",
        "id bigint, n bigint": "column 'n' is bigint \\(int64\\) but column 'n' of Nyala table 'ops' is int32",
        "name string": "lacks key columns \\['id'\\]",
    }
    for ddl, message in cases.items():
        columns = [part.split()[0] for part in ddl.split(", ")]
        values = {"id": 7000, "name": "x", "extra": 1, "n": 1}
        df = spark.createDataFrame([tuple(values[c] for c in columns)], ddl)
        with pytest.raises(PySparkException, match=message):
            write_rows(df, table, "upsert", master=master)
    assert contents(client, table) == before


def test_the_local_session_hands_writers_large_arrow_batches(spark: SparkSession) -> None:
    # Spark's default of 10,000 rows a batch made every batch's fixed price a large part of
    # ingest (docs/spark.md).
    assert spark.conf.get(ARROW_BATCH_CONF) == str(ARROW_BATCH_ROWS) == "100000"


def test_create_table_from_parquet_with_not_null_columns(
    spark: SparkSession, client: Client, master: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "people")
    frame(spark, range(3), "p", 1).write.parquet(path)
    parquet = spark.read.parquet(path)
    assert all(f.nullable for f in parquet.schema.fields)  # Spark's view of every Parquet column
    create_table("from_parquet", parquet.schema, ["id"], master=master, num_replicas=1, not_null=["name"])
    try:
        nullable = {c.name: c.nullable for c in client.open_table("from_parquet").schema.columns}
        assert nullable == {"id": False, "name": False, "n": True}
        insert_rows(parquet, "from_parquet", master=master)
        assert contents(client, "from_parquet") == {i: (f"p{i}", 1) for i in range(3)}
    finally:
        client.delete_table("from_parquet")


def test_the_local_session_logs_no_copies_of_a_task_failure(spark: SparkSession) -> None:
    # A failed write reaches the caller as the action's exception; the executor's and the
    # scheduler's copies of it (each with a Java stack trace) are not logged.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for name in TASK_FAILURE_LOGGERS:
        assert str(jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel()) == "FATAL", name
