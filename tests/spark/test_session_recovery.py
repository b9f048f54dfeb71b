"""A Spark test that times out, or whose JVM dies, leaves the next test a working session.

The tier's own fixtures run a small pytest session of their own in a subprocess: a test
warms the shared session up, one times out inside a Spark job (pytest-timeout's SIGALRM lands
in the middle of a Py4J call), the next must pass on the same session; then one kills the
JVM and the next must pass on a new session.  Before the guard in ``shared_session.py``,
the test after the timeout hung in PySpark's own clean-up of the interrupted call and every
later call read the answer meant for the one before.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]

INNER = """
import os, signal, time

import pytest


def test_1_warms_the_session_up(spark):
    assert spark.range(4).count() == 4


@pytest.mark.timeout(10)
def test_2_times_out_inside_a_spark_job(spark):
    spark.sparkContext.parallelize([1], 1).map(lambda _: time.sleep(600)).count()


def test_3_the_next_test_has_a_working_session(spark, shared_spark):
    assert spark.range(10).count() == 10
    assert [r.x for r in spark.createDataFrame([(1,), (2,)], "x int").collect()] == [1, 2]
    assert shared_spark.sessions_started == 1  # the same session, repaired


def test_4_the_jvm_dies(spark):
    jvm = spark.sparkContext._gateway.proc
    os.kill(jvm.pid, signal.SIGKILL)
    assert jvm.wait(30) == -signal.SIGKILL


def test_5_a_new_session_replaces_the_dead_one(spark, shared_spark):
    assert spark.range(3).count() == 3
    assert shared_spark.sessions_started == 2
"""


def test_one_timed_out_or_crashed_spark_test_does_not_fail_the_next(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    command = [
        sys.executable, "-m", "pytest", "-p", "tests.spark.conftest", "-p", "no:cacheprovider",
        "-q", "-rA", "--rootdir", str(tmp_path), "-c", os.devnull, "-o", "timeout=150",
        str(tmp_path / "test_inner.py"),
    ]  # fmt: skip
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    # Its own session: the JVM and Spark's Python workers are stopped with it, by its group id.
    inner = subprocess.Popen(
        command, cwd=tmp_path, env={**os.environ, "PYTHONPATH": path}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        output, _ = inner.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):  # every process of the group is gone already
            os.killpg(inner.pid, signal.SIGKILL)
        inner.wait()
    assert "1 failed, 4 passed" in output, output
    failed = re.findall(r"^FAILED (\S+) - (.*)$", output, re.MULTILINE)
    assert [(name, reason.startswith("Failed: Timeout")) for name, reason in failed] == [
        ("test_inner.py::test_2_times_out_inside_a_spark_job", True)
    ], output
