"""cais-diff RESULTS.csv REFERENCE.csv [--rtol X] [--atol Y] [--keys COL ...]

Compares two result CSVs row by row, matched on the key columns (default: every non-numeric
column present in both), and every shared numeric column within |a - b| <= atol + rtol |b|.
Wall-clock columns (``wall_s``, ``*_wall_s``) are never compared: they differ between any two
runs. Prints a table of the differences (the row's keys, column, result, reference, relative
difference); a row only one file has, or a key repeated in the results, is a difference too.
Exit status 0 when they agree, 1 when they differ, 2 on bad input.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from harness.results import is_timing_column


def _numeric(df: pd.DataFrame, c: str) -> bool:
    return pd.api.types.is_numeric_dtype(df[c])


def _default_keys(ref: pd.DataFrame, shared: list[str]) -> list[str]:
    """The non-numeric columns, then, while they leave reference rows alike, the integer columns
    in file order (a sweep's axes: table_kb, gpus, bytes)."""
    keys = [c for c in shared if not _numeric(ref, c)]
    for c in shared:
        if not keys or not ref.duplicated(keys).any():
            break
        if c not in keys and pd.api.types.is_integer_dtype(ref[c]):
            keys.append(c)
    return keys


def differences(res: pd.DataFrame, ref: pd.DataFrame, rtol: float, atol: float,
                keys: list[str] | None) -> tuple[pd.DataFrame, list[str]]:
    """(a table of the values outside tolerance, problems of shape: missing rows or columns)."""
    shared = [c for c in ref.columns if c in res.columns and not is_timing_column(str(c))]
    if keys is None:
        keys = _default_keys(ref, shared)
    bad_keys = [k for k in keys if k not in ref.columns or k not in res.columns]
    if bad_keys:
        raise ValueError(f"key column(s) {bad_keys} not in both files")
    if keys and ref.duplicated(keys).any():
        raise ValueError(f"reference rows are not unique by {keys}: name the columns that tell them apart")
    values = [c for c in shared if c not in keys and _numeric(ref, c) and _numeric(res, c)]
    problems = [f"column missing from results: {c}" for c in ref.columns
                if c not in res.columns and not is_timing_column(str(c))]
    if keys:
        for _, r in res[res.duplicated(keys)].drop_duplicates(keys).iterrows():
            problems.append("row repeated in results: " + ", ".join(f"{k}={r[k]}" for k in keys))
        merged = ref.merge(res, on=keys, how="outer", suffixes=("_ref", "_res"), indicator=True)
        for _, r in merged[merged["_merge"] == "left_only"].iterrows():
            problems.append("row missing from results: " + ", ".join(f"{k}={r[k]}" for k in keys))
        for _, r in merged[merged["_merge"] == "right_only"].iterrows():
            problems.append("row not in the reference: " + ", ".join(f"{k}={r[k]}" for k in keys))
        merged = merged[merged["_merge"] == "both"]
    else:
        if len(res) != len(ref):
            problems.append(f"row count {len(res)} != reference {len(ref)}")
        merged = ref.add_suffix("_ref").join(res.add_suffix("_res"), how="inner")
    rows = []
    for idx, r in merged.iterrows():
        for c in values:
            a, b = r[f"{c}_res"], r[f"{c}_ref"]
            if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
                continue
            if not abs(a - b) <= atol + rtol * abs(b):
                where = {k: r[k] for k in keys} if keys else {"row": idx}
                rows.append({**where, "column": c, "result": a, "reference": b,
                             "rel_diff": (a - b) / abs(b) if b else float("inf")})
    return pd.DataFrame(rows), problems


def compare(res: pd.DataFrame, ref: pd.DataFrame, rtol: float, atol: float, keys: list[str] | None) -> list[str]:
    """Every difference as one line (empty: the results agree with the reference)."""
    table, problems = differences(res, ref, rtol, atol, keys)
    lines = list(problems)
    for _, r in table.iterrows():
        where = ", ".join(f"{k}={r[k]}" for k in table.columns[:-4])
        lines.append(f"{where}: {r['column']} = {r['result']} vs reference {r['reference']} (rtol {rtol})")
    return lines


def tolerance(text: str) -> float:
    """A tolerance: a finite number >= 0 (a negative one would call equal values different)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cais-diff", description="Compare a results CSV with a reference CSV.")
    ap.add_argument("results")
    ap.add_argument("reference")
    ap.add_argument("--rtol", type=tolerance, default=0.0, help="relative tolerance (default 0: exact)")
    ap.add_argument("--atol", type=tolerance, default=0.0, help="absolute tolerance (default 0)")
    ap.add_argument("--keys", nargs="+", help="columns that identify a row (default: the non-numeric ones)")
    ap.add_argument("--key", action="append", help="one key column (repeatable; same as --keys)")
    args = ap.parse_args(argv)
    keys = (args.keys or []) + (args.key or []) or None
    frames = []
    for p in (args.results, args.reference):
        path = Path(p)
        if not path.is_file():
            print(f"cais-diff: error: {p}: no such file", file=sys.stderr)
            sys.exit(2)
        try:
            frames.append(pd.read_csv(path))
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one line
            print(f"cais-diff: error: {p}: not a readable CSV ({exc})", file=sys.stderr)
            sys.exit(2)
    try:
        table, problems = differences(frames[0], frames[1], args.rtol, args.atol, keys)
    except ValueError as exc:
        print(f"cais-diff: error: --keys: {exc}", file=sys.stderr)
        sys.exit(2)
    for p in problems:
        print(p)
    if not table.empty:
        with pd.option_context("display.max_columns", 30, "display.width", 200, "display.max_rows", 500):
            print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    n = len(problems) + len(table)
    print(f"cais-diff: {'OK' if not n else f'{n} difference(s)'} (rtol {args.rtol}, atol {args.atol})")
    sys.exit(1 if n else 0)


if __name__ == "__main__":
    main()
