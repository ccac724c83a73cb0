"""Checks that two aorta datasets hold the same values, table by table.

    .venv/bin/python bench/same_dataset.py BASE_DIR NEW_DIR

For every table (top-level directory): the same number of rows, the same rows once both
sides are sorted by all columns (row order inside a file is not promised, docs/SCHEMA.md),
and the same Parquet schema (physical and logical types) file by file. Encoding, page and
compression choices may differ; values may not. Exit status 1 on any difference.
Used for every change in docs/PERFORMANCE.md (third sitting).
"""
import glob
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def tables(root):
    out = {}
    for f in sorted(glob.glob(os.path.join(root, "**", "*.parquet"), recursive=True)):
        out.setdefault(os.path.relpath(f, root).split(os.sep)[0], []).append(f)
    return out


def plain(t):
    """View types (polars writes `string_view`) as their plain types: pyarrow cannot sort them."""
    fields = []
    for f in t.schema:
        if f.type == pa.string_view():
            f = f.with_type(pa.string())
        elif f.type == pa.binary_view():
            f = f.with_type(pa.binary())
        fields.append(f)
    return t.cast(pa.schema(fields))


def canonical(t):
    t = plain(t).combine_chunks()
    keys = [(c, "ascending") for c in t.column_names]
    return t.take(pc.sort_indices(t, sort_keys=keys))


def same_table(name, fa, fb):
    a = pa.concat_tables([pq.read_table(f) for f in fa])
    b = pa.concat_tables([pq.read_table(f) for f in fb])
    if a.schema != b.schema:
        print(f"{name}: Arrow schemas differ\n{a.schema}\n{b.schema}")
        return False
    if a.num_rows != b.num_rows:
        print(f"{name}: {a.num_rows} rows against {b.num_rows}")
        return False
    eq = canonical(a).equals(canonical(b))
    print(f"{name}: {a.num_rows} rows, {'equal' if eq else 'DIFFERENT'}")
    for x, y in zip(fa, fb):
        if not pq.ParquetFile(x).schema.equals(pq.ParquetFile(y).schema):
            print(f"{name}: Parquet schemas differ: {x} {y}")
            eq = False
    return eq


def main(base, new):
    ta, tb = tables(base), tables(new)
    ok = set(ta) == set(tb)
    if not ok:
        print("tables differ:", sorted(ta), sorted(tb))
    for name in sorted(set(ta) & set(tb)):
        ok &= same_table(name, ta[name], tb[name])
    print("ALL EQUAL" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
