"""The PySpark data source ``nyala``: Nyala tables as Spark DataFrames, Arrow both ways.

Use (``pip install nyala[spark]``; see docs/spark.md)::

    df = spark.read.format("nyala").option("nyala.master", masters).option("nyala.table", "t").load()
    df.write.format("nyala").option("nyala.master", masters).option("nyala.table", "t").mode("append").save()

How it works (PySpark 4.3's Python Data Source API):

- Registration: ``register(spark)``, or nothing at all: the top-level module ``pyspark_nyala``
  exposes :class:`NyalaDataSource` as ``DefaultSource``, and PySpark registers every
  importable ``pyspark_*`` module's DefaultSource when a session starts.  Python workers must
  run an interpreter that can import Nyala: ``PYSPARK_PYTHON`` set to the one Nyala is
  installed in (:func:`python_worker_env` does that).
- Options (:mod:`.options`) are kudu-spark's with a ``nyala.`` prefix and are checked on the
  driver before any task runs; a wrong one is refused with its name.
- The schema comes from the table (:mod:`.typemap` maps Nyala types onto Spark's).
- Reading (:mod:`.reader`): with ``nyala.pushdown`` opted in, Spark's pushed filters become
  Nyala predicates (:mod:`.filters`; off by default, as PySpark reuses a relation's pushed
  filters for its later queries);
  the table's scan tokens for them, already pruned to the tablets that can match, become the
  Spark partitions, one per tablet or several per tablet with ``nyala.splitSizeBytes``
  (:mod:`.splits`); each task scans its token and hands Spark Arrow batches in exactly the
  Arrow schema Spark expects.
- Writing (:mod:`.writer`): each task writes its Arrow batches through one background-flush
  session with ``nyala.operation``; any row error fails the task with the count, up to five
  keys and the remedy (an ``_ignore`` operation or upsert).
  Rows are durable when acknowledged, so commit publishes nothing and abort undoes nothing;
  ``overwrite`` is refused.
- Each Python worker process keeps one client per master set (:mod:`._clients`).
- The columnar read path (:mod:`.jar`, :mod:`.columnar_planner`, Java sources in ``java/``):
  with its jar on the classpath ``nyala`` names a JVM DataSource V2 source that reads
  tablets' Arrow IPC scan results straight into Spark column batches, planned per query by a
  Python planner process on the driver; its writes go to the Python source, which is also
  registered as ``nyala_python`` (``pyspark_nyala_python``) for reads that want it.
- :mod:`.helpers`: ``create_table`` from a Spark schema (``not_null`` for columns Spark marks
  nullable) and ``insert_rows`` & co, as kudu-spark's KuduContext offers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .helpers import (
        create_table,
        delete_rows,
        insert_rows,
        jvm_source_loaded,
        python_worker_env,
        register,
        update_rows,
        upsert_rows,
        write_rows,
    )
    from .jar import build_jar, columnar_jar
    from .options import DEFAULT_MASTER, OPERATIONS, OPTION_HELP, NyalaOptions, TlsSettings, parse_options
    from .reader import NyalaReader
    from .session import (
        ARROW_BATCH_CONF,
        ARROW_BATCH_ROWS,
        PUSHDOWN_CONF,
        TASK_FAILURE_LOGGERS,
        local_session,
        quiet_task_failure_logs,
    )
    from .source import NyalaDataSource
    from .typemap import nyala_type, spark_schema, spark_type
    from .writer import NyalaCommitMessage, NyalaWriter, RowErrorsInTask

# The names load their module on first use: each of the Python processes Spark starts for a
# first write imports this package, and the source lookup and the commit need little of it.
_MODULE_OF: dict[str, str] = {
    "create_table": "helpers",
    "delete_rows": "helpers",
    "insert_rows": "helpers",
    "python_worker_env": "helpers",
    "register": "helpers",
    "update_rows": "helpers",
    "upsert_rows": "helpers",
    "write_rows": "helpers",
    "build_jar": "jar",
    "columnar_jar": "jar",
    "jvm_source_loaded": "helpers",
    "DEFAULT_MASTER": "options",
    "OPERATIONS": "options",
    "OPTION_HELP": "options",
    "NyalaOptions": "options",
    "TlsSettings": "options",
    "parse_options": "options",
    "NyalaReader": "reader",
    "ARROW_BATCH_CONF": "session",
    "ARROW_BATCH_ROWS": "session",
    "PUSHDOWN_CONF": "session",
    "TASK_FAILURE_LOGGERS": "session",
    "local_session": "session",
    "quiet_task_failure_logs": "session",
    "NyalaDataSource": "source",
    "nyala_type": "typemap",
    "spark_schema": "typemap",
    "spark_type": "typemap",
    "NyalaCommitMessage": "writer",
    "NyalaWriter": "writer",
    "RowErrorsInTask": "writer",
}

__all__ = [
    "ARROW_BATCH_CONF",
    "ARROW_BATCH_ROWS",
    "DEFAULT_MASTER",
    "OPERATIONS",
    "OPTION_HELP",
    "PUSHDOWN_CONF",
    "TASK_FAILURE_LOGGERS",
    "NyalaCommitMessage",
    "NyalaDataSource",
    "NyalaOptions",
    "NyalaReader",
    "NyalaWriter",
    "RowErrorsInTask",
    "TlsSettings",
    "build_jar",
    "columnar_jar",
    "create_table",
    "delete_rows",
    "insert_rows",
    "jvm_source_loaded",
    "local_session",
    "nyala_type",
    "parse_options",
    "python_worker_env",
    "quiet_task_failure_logs",
    "register",
    "spark_schema",
    "spark_type",
    "update_rows",
    "upsert_rows",
    "write_rows",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'nyala.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value
