"""Read the run labels of an aorta dataset back with pyarrow, DuckDB, polars and Spark, each
decoding the Hive partition directories (`run=<percent-encoded label>`) its own way, and
print one JSON document: per reader, the sorted distinct `run` values of `gpu_activities`.
tests/it/notebooks.rs compares each with the labels the dataset was written with.

usage: python check_labels.py DATASET
"""

import json
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.dataset as pads


def with_pyarrow(table: Path):
    d = pads.dataset(table, format="parquet", partitioning="hive")
    return d.to_table(columns=["run"]).column("run").to_pylist()


def with_duckdb(table: Path):
    q = f"select distinct run from read_parquet('{table}/**/*.parquet', hive_partitioning = true)"
    return [r[0] for r in duckdb.sql(q).fetchall()]


def with_polars(table: Path):
    lf = pl.scan_parquet(f"{table}/**/*.parquet", hive_partitioning=True)
    return lf.select("run").unique().collect()["run"].to_list()


def with_spark(table: Path):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.option("basePath", str(table)).parquet(str(table))
    runs = [r[0] for r in df.select("run").distinct().collect()]
    spark.stop()
    return runs


def main():
    table = Path(sys.argv[1]) / "gpu_activities"
    readers = {
        "pyarrow": with_pyarrow,
        "duckdb": with_duckdb,
        "polars": with_polars,
        "spark": with_spark,
    }
    print(json.dumps({name: sorted(set(read(table))) for name, read in readers.items()}))


if __name__ == "__main__":
    main()
