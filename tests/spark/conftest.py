"""One local[2] SparkSession and one MiniCluster for the whole Spark tier.

Spark starts its Python workers with this interpreter (PYSPARK_PYTHON), whose environment
has Nyala installed; the ``nyala`` format is found through ``pyspark_nyala`` without
registration.  Filter pushdown is on unless a test turns it off.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark tier needs pip install 'nyala[spark]'")

from pyspark.sql import SparkSession

import nyala
from nyala.client import Client
from nyala.spark import PUSHDOWN_CONF, local_session
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions

PUSHDOWN = PUSHDOWN_CONF


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Failing tasks are expected in these tests; their stack traces are noise.
    session = local_session("nyala-spark-tests", log_level="FATAL")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    options = MiniClusterOptions(num_masters=1, num_tservers=3)
    with MiniCluster(Path(tmp_path_factory.mktemp("spark-cluster")), options) as mc:
        yield mc


@pytest.fixture(scope="session")
def master(cluster: MiniCluster) -> str:
    return cluster.master_addresses_flag


@pytest.fixture(scope="session")
def client(master: str) -> Iterator[Client]:
    with nyala.connect(master, timeout_s=60) as c:
        yield c
