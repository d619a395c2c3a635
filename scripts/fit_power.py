#!/usr/bin/env python3
"""Fit the GPU power model (harness/gpu/power.py) on measured (clock, power, SMs, kernel) rows.

Rows: harness/data/measured/h100_power.csv (132 and 66 SMs, steady state) and
raw/h100_power_run1.csv (its 100- and 33-SM rows). A GEMM loads every SM only when its power
reached the limit or its clock the maximum with >= 90 % of the limit; the other GEMM rows
(short kernels idling between launches, small grids on a partition) are reported, not fitted.
Every third shape (by name) is held out: the fit never sees it; its error is reported apart.

    pip install -e .[calibrate]   # scipy
    .venv/bin/python scripts/fit_power.py            # prints the fit and the errors
    .venv/bin/python scripts/fit_power.py --write    # also rewrites the POWER block of harness/params/gpu.py
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.gpu import power  # noqa: E402

MEASURED = ROOT / "harness" / "data" / "measured"
F_MAX, LIMIT = 1980.0, 700.0


def load() -> pd.DataFrame:
    a = pd.read_csv(MEASURED / "h100_power.csv")
    b = pd.read_csv(MEASURED / "raw" / "h100_power_run1.csv")
    df = pd.concat([a, b[b.num_sms.isin([100, 33])]], ignore_index=True).dropna(subset=["measured_us"])
    df["load"] = np.where(df.kind == "gemm", "tensor", "memory")
    capped = df.power_w >= 0.98 * df.power_limit_w
    df["full_load"] = (df.kind != "gemm") | capped | ((df.sm_clock_mhz >= F_MAX) & (df.power_w >= 0.9 * LIMIT)) \
        | (df.num_sms <= 33)
    names = sorted(df.name.unique())
    held = {n for i, n in enumerate(names) if i % 3 == 0}
    df["held_out"] = df.name.isin(held)
    return df


def params_of(x) -> dict:
    static, tensor, memory, v0 = x
    return dict(power_static_w=static, power_tensor_w_per_sm=tensor, power_memory_w=memory,
                power_voltage_floor=v0, max_clock_mhz=F_MAX, power_limit_w=LIMIT)


def residuals(x, df: pd.DataFrame) -> np.ndarray:
    p = params_of(x)
    r = []
    for _, row in df.iterrows():
        n, f = int(row.num_sms), float(row.sm_clock_mhz)
        # clock rows: the settled clock; rows below the limit: also their power at that clock
        r.append((power.settled_clock_mhz(n, row.load, p, step_mhz=0) - f) / f)
        if row.power_w < 0.98 * LIMIT:
            r.append((power.board_power_w(f, n, row.load, p) - row.power_w) / LIMIT)
    return np.array(r)


def report(df: pd.DataFrame, p: dict) -> pd.DataFrame:
    df = df.copy()
    df["pred_clock_mhz"] = [power.settled_clock_mhz(int(n), k, p) for n, k in zip(df.num_sms, df.load)]
    df["clock_err_pct"] = 100 * (df.pred_clock_mhz - df.sm_clock_mhz) / df.sm_clock_mhz
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    df = load()
    train = df[df.full_load & ~df.held_out]
    fit = least_squares(residuals, x0=[100.0, 12.0, 300.0, 0.1], args=(train,),
                        bounds=([0, 0, 0, 0], [700, 50, 700, 1]))
    p = params_of(fit.x)
    print("fit:", {k: round(v, 4) for k, v in p.items()})
    rep = report(df, p)
    for label, sel in (("fitted rows", rep.full_load & ~rep.held_out), ("held-out shapes", rep.full_load & rep.held_out),
                       ("partial-load GEMMs (not fitted)", ~rep.full_load)):
        s = rep[sel]
        print(f"\n{label}: {len(s)} rows; |clock error| mean {s.clock_err_pct.abs().mean():.1f} %, "
              f"max {s.clock_err_pct.abs().max():.1f} %")
        print(s.groupby(["kind", "num_sms"]).agg(rows=("name", "size"), measured_mhz=("sm_clock_mhz", "median"),
                                                  predicted_mhz=("pred_clock_mhz", "median"),
                                                  mean_abs_err_pct=("clock_err_pct", lambda e: round(e.abs().mean(), 1)))
              .to_string())
    if args.write:
        path = ROOT / "harness" / "params" / "gpu.py"
        text = path.read_text()
        for key in ("power_static_w", "power_tensor_w_per_sm", "power_memory_w", "power_voltage_floor"):
            text, n = re.subn(rf"(    {key}: float = )[-0-9.e]+", rf"\g<1>{p[key]:.4g}", text)
            assert n == 1, key
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
