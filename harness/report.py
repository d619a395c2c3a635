"""cais-report DIR... : the results of several runs as one table (and as CSV with --csv FILE)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def collect(dirs: list[str]) -> pd.DataFrame:
    frames = []
    for d in dirs:
        for path in sorted(Path(d).rglob("results.csv")):
            df = pd.read_csv(path)
            df.insert(0, "run", str(path.parent))
            frames.append(df)
    if not frames:
        raise FileNotFoundError(f"no results.csv under {', '.join(dirs)}")
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cais-report", description=__doc__)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--csv", help="also write the combined table here")
    args = ap.parse_args(argv)
    try:
        df = collect(args.dirs)
    except FileNotFoundError as exc:
        print(f"cais-report: error: {exc}", file=sys.stderr)
        sys.exit(2)
    with pd.option_context("display.max_columns", 40, "display.width", 200):
        print(df.to_string(index=False))
    if args.csv:
        from harness.results import write_csv_atomic

        write_csv_atomic(Path(args.csv), df)


if __name__ == "__main__":
    main()
