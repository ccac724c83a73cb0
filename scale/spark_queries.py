"""The job's cross-rank questions on Spark, from the Parquet dataset alone.

    python scale/spark_queries.py DATASET [--json] [--master local[2]]

Reads `DATASET/gpu_activities` (hive-partitioned by run and rank; a local path or any URL
Spark reads, such as s3a://) and runs the portable part of scale/queries.duckdb.sql, the same
SQL DuckDB runs, in Spark SQL: per-rank comm and compute time (`rank_totals`), per collective
instance the arrivals, skew, last rank and caused delay (`instance_skew`), each rank's clock
offset (`clock_offsets`) and the straggler ranking (`stragglers`). Prints the stragglers as a
table, or with --json every view as one JSON document (times in integer ns, equal to
aorta's). Definitions: docs/METRICS.md; what differs from `aorta collectives`: docs/SCALE.md.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VIEWS = {
    "rank_totals": "run, rank",
    "instance_skew": "run, process_group, seq",
    "clock_offsets": "run, rank",
    "stragglers": "run, straggler_rank",
}


def portable_statements(path=os.path.join(HERE, "queries.duckdb.sql")):
    """The statements after the `-- PORTABLE` line, comments dropped."""
    text = open(path, encoding="utf-8").read()
    text = text[text.index("-- PORTABLE"):]
    lines = [l for l in text.splitlines() if not l.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--json", action="store_true", help="every view as one JSON document")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    a = ap.parse_args(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master(a.master)
        .appName("aorta-queries")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        # A run label that looks like a number stays a string.
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        base = a.dataset.rstrip("/")
        df = spark.read.option("basePath", base).parquet(base + "/gpu_activities")
        df = df.withColumn("rank", F.col("rank").cast("bigint"))
        df.createOrReplaceTempView("gpu_activities")
        for stmt in portable_statements():
            spark.sql(stmt)
        out = {}
        for view, order in VIEWS.items():
            rows = spark.sql(f"SELECT * FROM {view} ORDER BY {order}").collect()
            out[view] = [r.asDict() for r in rows]
    finally:
        spark.stop()
    if a.json:
        print(json.dumps(out, sort_keys=True))
    else:
        print(f"{'run':<32} {'rank':>6} {'straggler':>9} {'times last':>10} {'caused ms':>12}")
        for r in out["stragglers"]:
            print(f"{r['run']:<32} {r['rank']:>6} {r['straggler_rank']:>9} {r['times_last']:>10} {r['caused_ns'] / 1e6:>12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
