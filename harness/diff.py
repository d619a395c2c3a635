"""cais-diff RESULTS.csv REFERENCE.csv [--rtol X] [--atol Y] [--key COL ...]

Compares two result CSVs row by row (matched on the key columns: by default every non-numeric
column present in both) and every shared numeric column within tolerance. Exit status 0 when
they agree, 1 when they differ (each difference printed), 2 on bad input.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd


def compare(res: pd.DataFrame, ref: pd.DataFrame, rtol: float, atol: float, keys: list[str] | None) -> list[str]:
    shared = [c for c in ref.columns if c in res.columns]
    if keys is None:
        keys = [c for c in shared if not pd.api.types.is_numeric_dtype(ref[c])]
    numeric = [c for c in shared if c not in keys and pd.api.types.is_numeric_dtype(ref[c])
               and pd.api.types.is_numeric_dtype(res[c])]
    problems = []
    missing_cols = [c for c in ref.columns if c not in res.columns]
    if missing_cols:
        problems.append(f"columns missing from results: {missing_cols}")
    if keys:
        merged = ref.merge(res, on=keys, how="left", suffixes=("_ref", "_res"), indicator=True)
        for _, row in merged[merged["_merge"] == "left_only"].iterrows():
            problems.append(f"row missing from results: {dict((k, row[k]) for k in keys)}")
        merged = merged[merged["_merge"] == "both"]
    else:
        if len(res) != len(ref):
            problems.append(f"row count {len(res)} != reference {len(ref)}")
        merged = ref.add_suffix("_ref").join(res.add_suffix("_res"), how="inner")
    for _, row in merged.iterrows():
        for c in numeric:
            a, b = row[f"{c}_res"], row[f"{c}_ref"]
            if (isinstance(a, float) and math.isnan(a)) and (isinstance(b, float) and math.isnan(b)):
                continue
            if not abs(a - b) <= atol + rtol * abs(b):
                where = ", ".join(f"{k}={row[k]}" for k in keys) if keys else f"row {row.name}"
                problems.append(f"{where}: {c} = {a} vs reference {b} (rtol {rtol})")
    return problems


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cais-diff", description="Compare a results CSV with a reference CSV.")
    ap.add_argument("results")
    ap.add_argument("reference")
    ap.add_argument("--rtol", type=float, default=0.0)
    ap.add_argument("--atol", type=float, default=0.0)
    ap.add_argument("--key", action="append", help="key column (repeatable); default: non-numeric columns")
    args = ap.parse_args(argv)
    frames = []
    for p in (args.results, args.reference):
        path = Path(p)
        if not path.is_file():
            print(f"cais-diff: error: {p}: no such file", file=sys.stderr)
            sys.exit(2)
        try:
            frames.append(pd.read_csv(path))
        except Exception as exc:
            print(f"cais-diff: error: {p}: not a readable CSV ({exc})", file=sys.stderr)
            sys.exit(2)
    problems = compare(frames[0], frames[1], args.rtol, args.atol, args.key)
    for p in problems:
        print(p)
    print(f"cais-diff: {'OK' if not problems else f'{len(problems)} difference(s)'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
