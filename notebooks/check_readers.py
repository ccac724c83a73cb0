"""Read an aorta dataset with pandas (pyarrow), DuckDB and polars, no options, and print
one JSON document: per library, per (run, rank), the GPU activity count and the first start
and last end in ns. tests/it/notebooks.rs compares each with `aorta overlap --by rank --json`.

usage: python check_readers.py DATASET
"""

import json
import sys
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl


def rows(records):
    out = [
        {
            "run": str(r["run"]),
            "rank": int(r["rank"]),
            "activity_count": int(r["n"]),
            "window_start_ns": int(r["start"]),
            "window_end_ns": int(r["end"]),
        }
        for r in records
    ]
    return sorted(out, key=lambda r: (r["run"], r["rank"]))


def with_pandas(table: Path):
    df = pd.read_parquet(table)
    g = df.groupby(["run", "rank"], observed=True).agg(
        n=("start_ns", "size"), start=("start_ns", "min"), end=("end_ns", "max")
    )
    return rows(g.reset_index().to_dict("records"))


def with_duckdb(table: Path):
    q = f"""select run, rank, count(*) as n, min(start_ns) as start, max(end_ns) as "end"
            from '{table}/**/*.parquet' group by run, rank"""
    rel = duckdb.sql(q)
    return rows(dict(zip(rel.columns, t)) for t in rel.fetchall())


def with_polars(table: Path):
    df = (
        pl.scan_parquet(table)
        .group_by("run", "rank")
        .agg(n=pl.len(), start=pl.col("start_ns").min(), end=pl.col("end_ns").max())
        .collect()
    )
    return rows(df.to_dicts())


def main():
    table = Path(sys.argv[1]) / "gpu_activities"
    print(
        json.dumps(
            {
                "pandas": with_pandas(table),
                "duckdb": with_duckdb(table),
                "polars": with_polars(table),
            }
        )
    )


if __name__ == "__main__":
    main()
