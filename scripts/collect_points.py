#!/usr/bin/env python3
"""Every column of a figure's points in one CSV: the rows under harness/data/results/.

A figure's results.csv keeps the columns its plot needs; each point's own results.csv (layer
time, link utilisation, bytes per packet type, merge-unit statistics) is what docs/RESULTS.md
cites. This concatenates them in point order, the point's number first:

    .venv/bin/python scripts/collect_points.py DIR/fig11 harness/data/results/fig11_paper_scale.csv
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.results import write_csv_atomic  # noqa: E402
from harness.sweep import point_dirs  # noqa: E402


def collect(figure_dir: Path) -> pd.DataFrame:
    frames = []
    for d in point_dirs(figure_dir):
        f = d / "results.csv"
        if f.is_file():
            frames.append(pd.read_csv(f).assign(point=int(d.name)))
    if not frames:
        raise SystemExit(f"collect_points: no point results under {figure_dir}")
    df = pd.concat(frames, ignore_index=True)
    return df[["point", *[c for c in df.columns if c != "point"]]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("figure_dir", type=Path)
    ap.add_argument("out", type=Path)
    a = ap.parse_args()
    df = collect(a.figure_dir)
    write_csv_atomic(a.out, df)
    print(f"{len(df)} points -> {a.out}")


if __name__ == "__main__":
    main()
