"""A Spark session without the columnar jar, reading and writing a Nyala table: run as a script.

``python tests/spark/without_jar.py MASTER TABLE`` starts its own JVM through
``local_session(..., columnar=False)``, writes rows 0..19 through ``format("nyala")``, reads
them back through ``format("nyala")`` (in full and with a filter) and ``format("nyala_python")``,
and prints one line, ``RESULT`` and a JSON object with what it saw.  ``test_fallback.py`` runs
it: a session's classpath is fixed when its JVM starts, so the tier's shared session (which has
the jar) cannot show the fallback.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import DataFrame

from nyala.spark import local_session
from nyala.spark.helpers import jvm_source_loaded

ROWS = 20


def main(master: str, table: str) -> dict[str, object]:
    spark = local_session("nyala-without-jar", columnar=False, log_level="FATAL")
    try:
        df = spark.createDataFrame([(i, f"v{i}") for i in range(ROWS)], "id long, v string")
        df.write.format("nyala").option("nyala.master", master).option("nyala.table", table).mode("append").save()

        def read(fmt: str) -> DataFrame:
            return spark.read.format(fmt).option("nyala.master", master).option("nyala.table", table).load()

        nyala = read("nyala")
        return {
            "jvm_source_loaded": jvm_source_loaded(spark),
            "plan": nyala.filter("id >= 15")._jdf.queryExecution().executedPlan().toString(),
            "all": sorted(tuple(r) for r in nyala.collect()),
            "filtered": sorted(r.id for r in nyala.filter("id >= 15").collect()),
            "python": sorted(tuple(r) for r in read("nyala_python").collect()),
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print("RESULT", json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
