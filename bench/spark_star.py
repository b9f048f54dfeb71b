"""The Spark benchmark's small-query figures: a task's fixed cost and star-schema joins.

Run by ``bench/spark_bench.py`` in its session and cluster (``--only task,star,large-star``):

1. **Task fixed cost**: ``collect()`` of a table of 6 rows in 3 hash tablets -- nearly all of
   the time is what Spark and the source spend before the first row -- on the columnar path,
   the Python source, the Python source with ``nyala.combineSizeBytes`` 0 (one task per
   tablet, as before small tablets were combined) and Parquet.
2. **Star schema, five small tables** (under 10,000 rows each): a fact table ``sales`` of
   9,000 rows in 4 tablets joined with four dimensions of 150 to 2,500 rows in 2 tablets each,
   grouped and ordered; temporary views registered again before each query, as a pipeline
   does.  Target: at most 1.5 times Parquet's time.  The answers of every source are compared
   first (exact: the amounts are decimals).
3. **Star schema, one large table**: the ``metrics`` table (``--rows`` rows) joined with three
   small dimensions (hosts, racks, hours of the day), on both Nyala paths and on Parquet.

Every case warms up off the clock; the cases are alternated round by round (a load spike does
not favour one) and the medians of ``--short-repeat`` rounds are printed beside Parquet's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from bench._cluster import Figure, median
from nyala.client import Partitioning
from nyala.spark import create_table

#: name -> (Spark SQL generating the rows, hash tablets); the key is the first column.
SMALL_STAR = {
    "sales": (
        "SELECT id, id % 400 AS product, (id * 7) % 150 AS store, id % 730 AS day, (id * 13) % 2500 AS customer, "
        "(id % 997) * 0.25 AS amount FROM range(9000)",
        4,
    ),
    "product": ("SELECT id AS product, format_string('cat-%02d', id % 12) AS category FROM range(400)", 2),
    "store": ("SELECT id AS store, format_string('region-%d', id % 6) AS region FROM range(150)", 2),
    "day": ("SELECT id AS day, CAST((id DIV 31) % 12 AS INT) AS month FROM range(730)", 2),
    "customer": ("SELECT id AS customer, format_string('seg-%d', id % 5) AS segment FROM range(2500)", 2),
}
SMALL_STAR_QUERY = """
SELECT category, region, month, count(*) AS n, sum(amount) AS total
FROM sales JOIN product USING (product) JOIN store USING (store) JOIN day USING (day)
     JOIN customer USING (customer)
WHERE segment <> 'seg-2'
GROUP BY category, region, month ORDER BY category, region, month
"""

#: The dimensions of the large star: metrics.host is 'host-000' .. 'host-099'.
LARGE_DIMENSIONS = {
    "dim_host": (
        "SELECT format_string('host-%03d', id) AS host, CAST(id % 10 AS INT) AS rack, "
        "format_string('os-%d', id % 3) AS os FROM range(100)",
        2,
    ),
    "dim_rack": ("SELECT CAST(id AS INT) AS rack, format_string('dc-%d', id % 2) AS dc FROM range(10)", 2),
    "dim_hour": ("SELECT CAST(id AS INT) AS hour, IF(id < 8, 'night', 'day') AS shift FROM range(24)", 2),
}
LARGE_STAR_QUERY = """
SELECT dc, os, shift, count(*) AS n, sum(metric) AS total
FROM metrics JOIN dim_host USING (host) JOIN dim_rack USING (rack)
     JOIN dim_hour ON hour(metrics.ts) = dim_hour.hour
GROUP BY dc, os, shift ORDER BY dc, os, shift
"""

TINY = ("SELECT id, format_string('n-%d', id) AS name FROM range(6)", 3)

#: Case -> how its temporary views read a table: a Nyala format and extra options, or Parquet.
CASES: dict[str, tuple[str, dict[str, str]]] = {
    "columnar": ("nyala", {}),
    "python": ("nyala_python", {}),
    "python, combine off": ("nyala_python", {"nyala.combineSizeBytes": "0"}),
    "parquet": ("parquet", {}),
}


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


class StarBench:
    def __init__(self, spark: SparkSession, master: str, root: Path, repeat: int) -> None:
        self.spark, self.master, self.root, self.repeat = spark, master, root, repeat

    def load(self, tables: dict[str, tuple[str, int]]) -> None:
        """Each table into Nyala (RF 3) and into Parquet."""
        for name, (sql, buckets) in tables.items():
            df = self.spark.sql(sql)
            key = df.columns[0]
            partitioning = Partitioning().add_hash_partitions(key, buckets)
            create_table(name, df.schema, [key], partitioning, master=self.master, num_replicas=3)
            writer = df.write.format("nyala").option("nyala.master", self.master).option("nyala.table", name)
            writer.mode("append").save()
            df.write.mode("overwrite").parquet(self.parquet(name))

    def parquet(self, name: str) -> str:
        return str(self.root / f"{name}.parquet")

    def read(self, case: str, name: str) -> DataFrame:
        fmt, options = CASES[case]
        if fmt == "parquet":
            return self.spark.read.parquet(self.parquet(name))
        reader = self.spark.read.format(fmt).option("nyala.master", self.master).option("nyala.table", name)
        return reader.options(**options).load()

    def query(self, case: str, tables: list[str], sql: str) -> list[tuple[object, ...]]:
        for name in tables:  # registered again per query, as a pipeline does
            self.read(case, name).createOrReplaceTempView(name)
        return [tuple(row) for row in self.spark.sql(sql).collect()]

    def collecting(self, case: str, name: str) -> Callable[[], object]:
        return lambda: self.read(case, name).collect()

    def querying(self, case: str, tables: list[str], sql: str) -> Callable[[], object]:
        return lambda: self.query(case, tables, sql)

    def alternate(self, actions: dict[str, Callable[[], object]]) -> dict[str, float]:
        """Median seconds of each action, warmed up once, alternated round by round."""
        for action in actions.values():
            action()
        times: dict[str, list[float]] = {name: [] for name in actions}
        for _ in range(self.repeat):
            for name, action in actions.items():
                times[name].append(timed(action))
        return {name: median(values) for name, values in times.items()}

    def task_cost(self) -> list[Figure]:
        self.load({"tiny": TINY})
        expected = sorted(tuple(r) for r in self.read("parquet", "tiny").collect())
        for case in CASES:
            assert sorted(tuple(r) for r in self.read(case, "tiny").collect()) == expected, case
        seconds = self.alternate({case: self.collecting(case, "tiny") for case in CASES})
        parquet = seconds["parquet"]
        return [
            Figure("tiny table collect(), columnar path, s", seconds["columnar"], parquet, "", 3),
            Figure("  Python source, s", seconds["python"], parquet, "", 3),
            Figure("  Python source, combineSizeBytes 0 (a task per tablet), s", seconds["python, combine off"],
                   parquet, "", 3),
        ]  # fmt: skip

    def small_star(self) -> list[Figure]:
        self.load(SMALL_STAR)
        tables = list(SMALL_STAR)
        answers = {case: self.query(case, tables, SMALL_STAR_QUERY) for case in CASES}
        assert answers["parquet"], "the star query selects nothing"
        for case, answer in answers.items():
            assert answer == answers["parquet"], f"{case} answers the star query differently from Parquet"
        seconds = self.alternate({case: self.querying(case, tables, SMALL_STAR_QUERY) for case in CASES})
        parquet = seconds["parquet"]
        return [
            Figure("star query, 5 tables < 10,000 rows, columnar path, s", seconds["columnar"], parquet, "<= 1.5", 3),
            Figure("  Python source, s", seconds["python"], parquet, "<= 1.5", 3),
            Figure("  Python source, combineSizeBytes 0, s", seconds["python, combine off"], parquet, "", 3),
        ]

    def large_star(self) -> list[Figure]:
        """Needs the ``metrics`` table in Nyala and at ``metrics.parquet`` already."""
        self.load(LARGE_DIMENSIONS)
        tables = ["metrics", *LARGE_DIMENSIONS]
        cases = ["columnar", "python", "parquet"]
        answers = {case: self.query(case, tables, LARGE_STAR_QUERY) for case in cases}
        for case in cases:
            assert answers[case] == answers["parquet"], f"{case} answers the large star query differently"
        seconds = self.alternate({case: self.querying(case, tables, LARGE_STAR_QUERY) for case in cases})
        parquet = seconds["parquet"]
        return [
            Figure("star query, metrics + 3 small dimensions, columnar path, s", seconds["columnar"], parquet, "", 3),
            Figure("  Python source, s", seconds["python"], parquet, "", 3),
        ]
