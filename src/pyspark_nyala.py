"""Automatic registration of the ``nyala`` Spark data source.

PySpark registers the ``DefaultSource`` of every importable top-level module whose name starts
with ``pyspark_``, so with Nyala installed ``spark.read.format("nyala")`` works without calling
``nyala.spark.register(spark)``.
"""

from __future__ import annotations

from nyala.spark.source import NyalaDataSource as DefaultSource

__all__ = ["DefaultSource"]
