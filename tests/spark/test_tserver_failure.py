"""A tablet server killed in the middle of a Spark read, on both read paths.

An ordered (fault-tolerant) scan still counts every row; an unordered one fails and says why.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from nyala.client import Client, schema
from nyala.spark import ARROW_BATCH_CONF, ARROW_BATCH_ROWS
from nyala.testing.minicluster import MiniCluster

pytestmark = pytest.mark.timeout(240)

ROWS = 80_000


@pytest.mark.parametrize("fault_tolerant", [True, False], ids=["ordered", "unordered"])
def test_fault_tolerant_scan_survives_a_killed_leader(
    spark: SparkSession,
    cluster: MiniCluster,
    client: Client,
    master: str,
    tmp_path: Path,
    read_format: str,
    fault_tolerant: bool,
) -> None:
    # Unordered, the same read must fail and say why: that shows the leader died mid-scan.
    name = f"ft_{read_format}_{fault_tolerant}".lower()
    table = client.create_table(name, schema([("id", "int64"), ("pad", "string")], primary_key="id"), num_replicas=3)
    ids = pa.array(range(ROWS), pa.int64())
    assert table.insert(pa.table({"id": ids, "pad": pa.array([f"{i:0100d}" for i in range(ROWS)])})) == []
    leader = table.tablets()[0].leader
    assert leader is not None
    victim = next(s for s in cluster.tservers if str(s.address) == leader.address)
    pid, marker = victim.process.pid, str(tmp_path / "killed")
    assert pid is not None

    def kill_on_first_batch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Runs in a Python worker downstream of the scan, so the scan is still streaming the
        # tablet (batches of 16 KiB, about 10 MB in all) when the leader it reads from dies:
        # without faultTolerantScan the read fails here, after about 27k rows.
        for batch in batches:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                os.kill(pid, signal.SIGKILL)
            except FileExistsError:
                pass
            yield pa.RecordBatch.from_pydict({"n": [batch.num_rows]})

    df = (
        spark.read.format(read_format)
        .option("nyala.master", master)
        .option("nyala.table", name)
        .option("nyala.faultTolerantScan", str(fault_tolerant).lower())
        .option("nyala.batchSize", "16384")
        .load()
    )
    # Spark's own 10,000-row batches into mapInArrow: the session's 100,000 would hand the
    # worker its first batch only after the whole tablet was read, with nothing left to fail.
    spark.conf.set(ARROW_BATCH_CONF, "10000")
    try:
        counting = df.mapInArrow(kill_on_first_batch, "n long").groupBy().sum("n")
        if fault_tolerant:
            assert counting.collect()[0][0] == ROWS
        else:
            # On the columnar path Spark reports the Python worker downstream first, the scan's
            # error as its cause (a Py4JJavaError, not a PySparkException).
            with pytest.raises((PySparkException, Py4JJavaError), match="cannot resume"):
                counting.collect()
        assert os.path.exists(marker)
        assert not cluster.running(victim)
    finally:
        spark.conf.set(ARROW_BATCH_CONF, str(ARROW_BATCH_ROWS))
        cluster.restart(victim)
    client.delete_table(name)
