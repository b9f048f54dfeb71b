"""A local SparkSession set up for Nyala: the demo, the benchmark and the tests share it.

``local[2]`` with the UI and console progress off, UTC as the session time zone (Nyala
timestamps are UTC), everything bound to loopback like a local cluster, Python workers
running this interpreter (so they import this Nyala), Spark's Python filter pushdown switch on,
Arrow batches of up to 100,000 rows for Python data source writers (Spark's default is
10,000; its 64 MiB cap per batch still bounds wide rows), and Nyala's columnar reader jar on
the classpath when it is built (``make jar``; ``columnar=False`` leaves it off), so that
``format("nyala")`` reads through the JVM source and writes through the Python one.

The switch on is safe for Nyala reads: they push nothing unless a read opts in with
``nyala.pushdown`` (docs/spark.md says what that risks), and the switch only lets such an
opt-in take effect.  Other Python data sources that push filters are exposed to PySpark's
reuse of pushed filters (docs/spark.md); pass ``pushdown=False`` if the session reads them.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from .helpers import python_worker_env
from .jar import columnar_jar

__all__ = [
    "ARROW_BATCH_CONF",
    "ARROW_BATCH_ROWS",
    "PUSHDOWN_CONF",
    "TASK_FAILURE_LOGGERS",
    "local_session",
    "quiet_task_failure_logs",
]

#: Spark's switch for filter pushdown into Python data sources (off by default in Spark).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
#: Rows per Arrow batch that Spark hands a Python data source's writer.
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
#: Each batch costs the JVM, the Python worker and the session a fixed price: 100,000-row
#: batches ingested 2M rows at 0.437 and 0.463 M rows/s against 0.365 and 0.402 with
#: Spark's 10,000 (alternated runs when this landed, 35c5868; docs/spark.md).
ARROW_BATCH_ROWS = 100_000
#: The Spark loggers that log a failed task again, each with the Python traceback and a Java
#: stack trace, before the failure reaches the caller as the action's exception: a re-run
#: insert of two partitions logged its message four times in 143 lines.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.util.Utils",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.sql.execution.datasources.v2.AppendDataExec",
)


def local_session(
    app_name: str,
    *,
    shuffle_partitions: int = 2,
    pushdown: bool = True,
    log_level: str = "ERROR",
    columnar: bool = True,
) -> SparkSession:
    """A local[2] SparkSession on loopback for ``app_name``; stop it when done.

    With ``columnar`` (the default) and the jar built, reads of ``format("nyala")`` use the
    columnar JVM reader; otherwise they use the Python data source.
    """
    python_worker_env()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    jar = columnar_jar() if columnar else None
    if jar is not None:
        builder = builder.config("spark.jars", str(jar))
    spark = (
        builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config(PUSHDOWN_CONF, "true" if pushdown else "false")
        .config(ARROW_BATCH_CONF, str(ARROW_BATCH_ROWS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(log_level)
    quiet_task_failure_logs(spark)
    return spark


def quiet_task_failure_logs(spark: SparkSession) -> None:
    """Log only fatal messages from :data:`TASK_FAILURE_LOGGERS` in this JVM.

    A failed job still raises its first task's error (for a Nyala write: the count, the keys
    and the remedy) from the action that ran it; only the copies Spark logs on the way, with
    their Java stack traces, are dropped.  In local mode the executors are this JVM, so this
    covers them; a cluster's executors keep their own logging configuration.
    """
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return
    fatal = jvm.org.apache.logging.log4j.Level.FATAL
    for name in TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, fatal)
