"""One local[2] SparkSession and one MiniCluster for the whole Spark tier.

Spark starts its Python workers with this interpreter (PYSPARK_PYTHON), whose environment
has Nyala installed; the ``nyala`` format is found through ``pyspark_nyala`` without
registration.  Filter pushdown is on unless a test turns it off.

Every read test runs on both read paths (the ``read_format`` fixture): ``nyala``, which
reaches the columnar JVM source because the session has its jar (built here when missing or
stale, as ``make jar`` does), and ``nyala_python``, the Python data source.

The session is shared but a failure is not: a test cut short in the middle of a call into the
JVM (a timeout) leaves the next test a working session (see ``shared_session.py``).  Tests
take ``spark``, checked before each test; a module-scoped fixture takes ``shared_spark`` and
calls ``session()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark tier needs pip install 'nyala[spark]'")

from pyspark.sql import SparkSession

import nyala
from nyala.client import Client
from nyala.spark import PUSHDOWN_CONF
from nyala.spark.helpers import jvm_source_loaded
from nyala.spark.jar import build_jar
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from tests.spark.shared_session import SharedSpark

PUSHDOWN = PUSHDOWN_CONF
#: Read path -> the format that reaches it in a session with the columnar jar.
READ_FORMATS = {"columnar": "nyala", "python": "nyala_python"}


@pytest.fixture(scope="session")
def shared_spark() -> Iterator[SharedSpark]:
    build_jar()  # before the session starts: local_session puts the jar on its classpath
    # Failing tasks are expected in these tests; their stack traces are noise.
    shared = SharedSpark("nyala-spark-tests", log_level="FATAL")
    try:
        yield shared
    finally:
        shared.stop()


@pytest.fixture
def spark(shared_spark: SharedSpark) -> Iterator[SparkSession]:
    """The shared session, answering (a new one if the JVM stopped answering)."""
    yield shared_spark.session()
    shared_spark.after_test()


@pytest.fixture(params=sorted(READ_FORMATS))
def read_path(request: pytest.FixtureRequest, spark: SparkSession) -> str:
    """``columnar`` or ``python``: the read path a test runs on (see :func:`read_format`)."""
    if request.param == "columnar":
        assert jvm_source_loaded(spark), "the shared session lacks the columnar jar"
    return str(request.param)


@pytest.fixture
def read_format(read_path: str) -> str:
    """The format name that reads through ``read_path`` in the shared session."""
    return READ_FORMATS[read_path]


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
