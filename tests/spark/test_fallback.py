"""Without the columnar jar, ``format("nyala")`` falls back to the Python source, reads and writes.

The tier's shared session has the jar on its classpath, and a JVM's classpath is fixed when it
starts, so the fallback runs in a session of its own: one subprocess (``without_jar.py``) with
its own JVM, in its own process group so that its JVM and Spark's Python workers are stopped
with it even when it hangs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from nyala.client import Client, Partitioning
from nyala.spark import create_table

pytestmark = pytest.mark.timeout(240)

SCRIPT = Path(__file__).with_name("without_jar.py")


@pytest.fixture
def table(client: Client, master: str) -> Iterator[str]:
    schema = StructType([StructField("id", LongType(), False), StructField("v", StringType())])
    create_table("fallback", schema, ["id"], Partitioning().add_hash_partitions("id", 2), master=master)
    yield "fallback"
    client.delete_table("fallback")


def run_without_jar(master: str, table: str) -> dict[str, object]:
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), master, table],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = process.communicate(timeout=200)
    finally:
        with contextlib.suppress(ProcessLookupError):  # every process of the group is gone already
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == 0, output
    results = [line.removeprefix("RESULT ") for line in output.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 1, output
    answer: dict[str, object] = json.loads(results[0])
    return answer


def test_without_the_jar_nyala_reads_and_writes_through_the_python_source(
    client: Client, master: str, table: str
) -> None:
    seen = run_without_jar(master, table)
    rows = [[i, f"v{i}"] for i in range(20)]
    assert seen["jvm_source_loaded"] is False
    # The scan is the Python data source's, not the JVM one.
    plan = str(seen["plan"])
    assert "BatchScan nyala[id" in plan, plan
    assert "(Python)" in plan, plan
    assert "NyalaScan" not in plan, plan
    assert "ColumnarToRow" not in plan, plan
    assert seen["all"] == rows
    assert seen["filtered"] == list(range(15, 20))
    assert seen["python"] == rows
    # The write through format("nyala") reached the table.
    assert client.open_table(table).count() == 20
