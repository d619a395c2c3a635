"""Markdown tables of the kernel validation for docs/VALIDATION.md ("GPU kernels").

Reads the validate_kernels output (default harness/data/calibration/h100_validation.csv, which
`cais-sim experiment=validate_kernels out_dir=DIR` writes as DIR/results.csv) and prints the
summary per kind and SM count, then the per-shape GEMM table at two SM counts.

    python scripts/kernel_tables.py [--input CSV] [--sms 132,66]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "harness" / "data" / "calibration" / "h100_validation.csv"


def summary(df: pd.DataFrame) -> str:
    rows = ["| kind | SMs | rows | mean abs err % | max abs err % | rows > 25 % |", "|---|---|---|---|---|---|"]
    ok = df[df["err_pct"].notna()]
    for (kind, sms), g in ok.groupby(["kind", "num_sms"]):
        e = g["err_pct"].abs()
        rows.append(f"| {kind} | {sms} | {len(g)} | {e.mean():.1f} | {e.max():.1f} | {int((e > 25).sum())} |")
    return "\n".join(rows)


def shapes(df: pd.DataFrame, a: int, b: int) -> str:
    g = df[df["kind"] == "gemm"]
    A, B = g[g["num_sms"] == a].set_index("name"), g[g["num_sms"] == b].set_index("name")
    rows = [f"| shape | M | N | K | {a}: meas | sim | err % | {b}: meas | sim | err % | plan at {a} |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cells(t: pd.DataFrame, name: str) -> str:
        if name not in t.index or pd.isna(t.at[name, "err_pct"]):
            return "failed | - | -"
        r = t.loc[name]
        return f"{r['measured_us']:.1f} | {r['sim_us']:.1f} | {r['err_pct']:+.1f}"

    for name in A.index:
        r = A.loc[name]
        rows.append(f"| {name} | {r['M']} | {r['N']} | {r['K']} | {cells(A, name)} | {cells(B, name)} | {r['sim_config']} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(DEFAULT))
    ap.add_argument("--sms", default="132,66", help="the two SM counts of the per-shape table")
    args = ap.parse_args()
    df = pd.read_csv(args.input)
    df["measured_us"] = pd.to_numeric(df["measured_us"], errors="coerce")
    a, b = (int(s) for s in args.sms.split(","))
    print(summary(df))
    print()
    print(shapes(df, a, b))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
