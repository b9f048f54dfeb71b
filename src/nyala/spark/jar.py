"""The columnar reader's jar: where it lives in the package, and building it with the JDK.

The Java sources are in ``nyala/spark/java`` (package ``nyala.spark.columnar``); the jar is
built into ``nyala/spark/jars/nyala-spark-columnar.jar`` with the JDK's ``javac`` and
``jar`` against the jars PySpark ships (Spark, Arrow's Java vectors, Jackson): no Maven, no
downloads.  ``python -m nyala.spark.jar`` builds it when it is missing or older than a source
(the Makefile's ``jar`` target runs it); :func:`columnar_jar` answers the built jar or None,
and :func:`nyala.spark.local_session` puts it on the session's classpath.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["JAR_PATH", "JAVA_SOURCES", "build_jar", "columnar_jar", "jar_is_stale", "pyspark_jars_dir"]

_HERE = Path(__file__).resolve().parent
JAVA_SOURCES = _HERE / "java"
JAR_PATH = _HERE / "jars" / "nyala-spark-columnar.jar"


def columnar_jar() -> Path | None:
    """The built jar, or None when it has not been built (reads then use the Python source)."""
    return JAR_PATH if JAR_PATH.is_file() else None


def _sources() -> list[Path]:
    return sorted(p for p in JAVA_SOURCES.rglob("*") if p.is_file())


def jar_is_stale() -> bool:
    """Whether the jar is missing or older than one of its sources."""
    if not JAR_PATH.is_file():
        return True
    built = JAR_PATH.stat().st_mtime
    return any(p.stat().st_mtime > built for p in _sources())


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def build_jar(*, force: bool = False) -> Path:
    """Compile the sources with ``javac --release 17`` and package them; returns the jar."""
    if not force and not jar_is_stale():
        return JAR_PATH
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        raise RuntimeError("building Nyala's columnar Spark reader needs a JDK 17 (javac and jar on PATH)")
    classpath = str(pyspark_jars_dir() / "*")
    java_files = [str(p) for p in _sources() if p.suffix == ".java"]
    JAR_PATH.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nyala-jar-") as tmp:
        classes = Path(tmp) / "classes"
        subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(classes), *java_files], check=True
        )
        shutil.copytree(JAVA_SOURCES / "META-INF", classes / "META-INF")
        staged = Path(tmp) / JAR_PATH.name
        subprocess.run([jar, "--create", "--file", str(staged), "-C", str(classes), "."], check=True)
        os.replace(staged, JAR_PATH)  # readers never see a half-written jar
    return JAR_PATH


if __name__ == "__main__":
    print(build_jar(force="--force" in sys.argv[1:]))
