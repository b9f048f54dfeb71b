"""A local SparkSession set up for Nyala: the demo, the benchmark and the tests share it.

``local[2]`` with the UI and console progress off, UTC as the session time zone (Nyala
timestamps are UTC), everything bound to loopback like a local cluster, Python workers
running this interpreter (so they import this Nyala), and Spark's Python filter pushdown on,
so the data source's ``pushFilters`` is used (mind the reuse pitfall in docs/spark.md).
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from .helpers import python_worker_env

__all__ = ["PUSHDOWN_CONF", "local_session"]

#: Spark's switch for filter pushdown into Python data sources (off by default in Spark).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def local_session(
    app_name: str, *, shuffle_partitions: int = 2, pushdown: bool = True, log_level: str = "ERROR"
) -> SparkSession:
    """A local[2] SparkSession on loopback for ``app_name``; stop it when done."""
    python_worker_env()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config(PUSHDOWN_CONF, "true" if pushdown else "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(log_level)
    return spark
