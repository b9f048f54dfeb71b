"""Automatic registration of ``nyala_python``, the Python data source under a name of its own.

With Nyala's columnar jar on the classpath, ``nyala`` names the JVM source, which writes
through this one; without the jar both names reach the Python source.
"""

from __future__ import annotations

from nyala.spark.source import NyalaPythonDataSource as DefaultSource

__all__ = ["DefaultSource"]
