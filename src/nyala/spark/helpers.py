"""kudu-spark's KuduContext conveniences: create a table from a Spark schema, write a DataFrame."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from nyala.client import Partitioning, schema

from ._clients import client_for
from .options import DEFAULT_MASTER, TlsSettings
from .source import NyalaDataSource, NyalaPythonDataSource
from .typemap import nyala_columns

__all__ = [
    "create_table",
    "delete_rows",
    "insert_rows",
    "python_worker_env",
    "register",
    "update_rows",
    "upsert_rows",
    "write_rows",
]


def register(spark: SparkSession) -> None:
    """Register ``nyala`` and ``nyala_python`` with ``spark`` (also found automatically, see below).

    ``pyspark_nyala`` and ``pyspark_nyala_python`` register them by themselves.  With the
    columnar jar on the classpath, ``nyala`` is the JVM source's name and Spark refuses to
    register a Python source under it: then only ``nyala_python`` is registered.
    """
    spark.dataSource.register(NyalaPythonDataSource)
    if not jvm_source_loaded(spark):
        spark.dataSource.register(NyalaDataSource)


def jvm_source_loaded(spark: SparkSession) -> bool:
    """Whether ``format("nyala")`` reaches the columnar JVM source in this session."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("nyala.spark.columnar.NyalaColumnarSource", False, loader)
    except Exception:
        return False
    return True


def python_worker_env() -> None:
    """Make Spark start its Python workers with this interpreter (whose environment has Nyala).

    Call before the SparkSession is created; an explicit PYSPARK_PYTHON is left alone.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def create_table(
    name: str,
    spark_schema: StructType,
    key_columns: Sequence[str],
    partitioning: Partitioning | None = None,
    *,
    master: str = DEFAULT_MASTER,
    num_replicas: int = 3,
    not_null: Sequence[str] = (),
    tls: TlsSettings | None = None,
) -> None:
    """Create Nyala table ``name`` with the columns of ``spark_schema`` and ``key_columns`` as its key.

    Spark types map to Nyala types as in :mod:`nyala.spark.typemap` (InvalidArgument names a
    column that has none); key columns move to the front and become non-null, and so do the
    columns named in ``not_null`` (Spark marks every column read from Parquet nullable, so the
    schema of such a DataFrame cannot say NOT NULL itself).  ``partitioning`` is a
    :class:`nyala.client.Partitioning` (hash levels and ranges); None means one tablet.  ``tls``
    reaches a cluster whose RPC is TLS (the ``nyala.tls*`` options of reads and writes).
    """
    keys = list(key_columns)
    table_schema = schema(nyala_columns(spark_schema, keys, not_null), primary_key=keys)
    client = client_for(master, tls=tls)
    client.create_table(name, table_schema, partitioning, num_replicas=num_replicas)


def write_rows(df: DataFrame, table: str, operation: str, *, master: str = DEFAULT_MASTER, **options: str) -> None:
    """Apply ``operation`` (insert, upsert, update, delete or an ``_ignore`` one) to every row of ``df``.

    Extra ``options`` are data source options without the prefix, e.g. ``writeBufferBytes="1048576"``.
    """
    writer = df.write.format("nyala").mode("append")
    writer = writer.option("nyala.table", table).option("nyala.master", master).option("nyala.operation", operation)
    for key, value in options.items():
        writer = writer.option(f"nyala.{key}", value)
    writer.save()


def insert_rows(
    df: DataFrame, table: str, *, master: str = DEFAULT_MASTER, ignore_duplicates: bool = False, **options: str
) -> None:
    """Insert every row; a duplicate key fails the task unless ``ignore_duplicates`` (INSERT_IGNORE).

    ``options`` here and in the helpers below are extra options as in :func:`write_rows`.
    """
    write_rows(df, table, "insert_ignore" if ignore_duplicates else "insert", master=master, **options)


def upsert_rows(df: DataFrame, table: str, *, master: str = DEFAULT_MASTER, **options: str) -> None:
    """Insert rows whose key is new and update the given columns of the others."""
    write_rows(df, table, "upsert", master=master, **options)


def update_rows(
    df: DataFrame, table: str, *, master: str = DEFAULT_MASTER, ignore_missing: bool = False, **options: str
) -> None:
    """Update the given columns; a missing key fails the task unless ``ignore_missing`` (UPDATE_IGNORE)."""
    write_rows(df, table, "update_ignore" if ignore_missing else "update", master=master, **options)


def delete_rows(
    df: DataFrame, table: str, *, master: str = DEFAULT_MASTER, ignore_missing: bool = False, **options: str
) -> None:
    """Delete the rows with the keys of ``df`` (other columns are ignored); see ``ignore_missing``."""
    write_rows(df, table, "delete_ignore" if ignore_missing else "delete", master=master, **options)
