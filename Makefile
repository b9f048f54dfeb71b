# Nyala's two commands: `make demo` and `make test`.  Each creates .venv when missing and
# installs what it needs into it; nothing is installed outside the project.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check
PROTO_FILES := $(wildcard proto/nyala/*.proto)
# The columnar Spark reader: Java sources compiled with the JDK against PySpark's jars.
JAR := src/nyala/spark/jars/nyala-spark-columnar.jar
JAVA_SOURCES := $(shell find src/nyala/spark/java -type f)

.PHONY: test lint typecheck unit demo proto bench clean jar

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# A stamp per extras set, so a changed pyproject.toml reinstalls.
# The tests include the Spark tier, so the test environment has PySpark (Java 17 runs it).
$(VENV)/.stamp-test: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[test,spark]'
	@touch $@

$(VENV)/.stamp-bench: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[test,spark,bench]'
	@touch $@

$(VENV)/.stamp-proto: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[proto]'
	@touch $@

# Rebuilt when a Java source (or the PySpark install) changes; javac and jar come from the JDK.
$(JAR): $(JAVA_SOURCES) $(VENV)/.stamp-test
	PYTHONPATH=src $(PY) -m nyala.spark.jar --force

jar: $(JAR)

# Two workers: most tests wait on real processes (elections, heartbeats, failure timeouts) and
# leave a core idle, so two test files at a time finish sooner on two cores.  Each file runs on one worker, in
# file order (--dist loadfile), so module-scoped clusters start once.  TEST_WORKERS=0
# runs everything in this one process.
TEST_WORKERS ?= 2

test: lint typecheck jar
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check src tests bench demo
	$(VENV)/bin/ruff format --check src tests bench demo

typecheck: $(VENV)/.stamp-test
	$(VENV)/bin/mypy

unit: $(VENV)/.stamp-test
	$(VENV)/bin/pytest -q tests/unit

demo: $(VENV)/.stamp-test jar
	$(PY) demo/pipeline.py --dir ./nyala-data

# Generated modules are committed; run this after editing proto/nyala/*.proto.
proto: $(VENV)/.stamp-proto
	$(PY) -m grpc_tools.protoc -Inyala/proto=proto/nyala --python_out=src --pyi_out=src $(PROTO_FILES)

bench: $(VENV)/.stamp-bench jar
	$(PY) bench/rpc_bench.py
	$(PY) bench/wal_bench.py
	$(PY) bench/storage_bench.py
	$(PY) bench/placement_bench.py
	$(PY) bench/rebalance_bench.py --real
	$(PY) bench/cluster_write_bench.py
	$(PY) bench/cluster_scan_bench.py
	$(PY) bench/failover_bench.py
	$(PY) bench/step_down_bench.py
	$(PY) bench/tablet_copy_bench.py
	$(PY) bench/recovery_bench.py
	$(PY) bench/spark_bench.py
	$(PY) bench/metrics_overhead_bench.py
	$(PY) bench/web_pages_bench.py
	$(PY) bench/master_scale_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache nyala-data $(JAR)
