"""Every Nyala type through Spark and back, nulls included; the Spark schema of a table."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from nyala.client import Client, Partitioning
from nyala.spark import create_table, insert_rows

from .shared_session import SharedSpark

pytestmark = pytest.mark.timeout(180)

UTC = datetime.UTC

SCHEMA = StructType(
    [
        StructField("id", LongType(), False),
        StructField("b", BooleanType()),
        StructField("i8", ByteType()),
        StructField("i16", ShortType()),
        StructField("i32", IntegerType()),
        StructField("f", FloatType()),
        StructField("d", DoubleType()),
        StructField("dec", DecimalType(18, 4)),
        StructField("wide", DecimalType(38, 10)),
        StructField("s", StringType()),
        StructField("bin", BinaryType()),
        StructField("day", DateType()),
        StructField("ts", TimestampType()),
    ]
)


def row(i: int) -> tuple[Any, ...]:
    if i % 5 == 4:  # every non-key column null
        return (i, *([None] * (len(SCHEMA.fields) - 1)))
    return (
        i,
        i % 2 == 0,
        (i % 256) - 128,
        -(i * 7) % 30000,
        i * 100_003 - 2**31 + 1,
        float(i) + 0.5,
        i / 3,
        decimal.Decimal((i - 100) * 12345).scaleb(-4),
        _wide(i),
        f"text-{i}-ünïcødé",
        bytes([i % 256, 0, 255]),
        datetime.date(1969, 12, 31) + datetime.timedelta(days=i),
        datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC) + datetime.timedelta(seconds=i * 37),
    )


def _wide(i: int) -> decimal.Decimal:
    """decimal(38, 10) values on both sides of what a 64-bit unscaled value holds, both signs."""
    edges = {2: 2**63 - 1, 6: -(2**63), 8: 2**63, 12: -(2**63) - 1}
    if i in edges:
        return decimal.Decimal(edges[i]).scaleb(-10)
    if i % 2:
        return decimal.Decimal(f"{'-' if i % 3 else ''}1234567890123456789012345678.{i:010d}")
    return decimal.Decimal(f"-{i}.5")


ROWS = [row(i) for i in range(200)]


@pytest.fixture(scope="module")
def types_table(shared_spark: SharedSpark, master: str) -> str:
    """Written once through the Python writer, read by each test on each read path."""
    spark = shared_spark.session()
    create_table("types", SCHEMA, ["id"], Partitioning().add_hash_partitions("id", 3), master=master)
    insert_rows(spark.createDataFrame(ROWS, SCHEMA), "types", master=master)
    return "types"


def test_every_type_round_trips_with_nulls(
    spark: SparkSession, client: Client, master: str, types_table: str, read_format: str
) -> None:
    rows = ROWS
    df = spark.read.format(read_format).option("nyala.master", master).option("nyala.table", "types").load()
    assert df.schema == SCHEMA
    got = sorted((tuple(r) for r in df.collect()), key=lambda r: r[0])
    expected = [tuple(_as_spark_returns(v) for v in r) for r in rows]
    assert got == expected
    assert client.open_table("types").count() == 200


def _as_spark_returns(value: Any) -> Any:
    # Spark hands timestamps back as naive datetimes in the session time zone (UTC here).
    if isinstance(value, datetime.datetime):
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, bytes):
        return bytearray(value)
    return value


def test_key_columns_are_not_null_in_spark(
    spark: SparkSession, master: str, types_table: str, read_format: str
) -> None:
    df = spark.read.format(read_format).option("nyala.master", master).option("nyala.table", "types").load()
    assert [f.nullable for f in df.schema.fields[:2]] == [False, True]
