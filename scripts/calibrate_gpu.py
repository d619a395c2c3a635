#!/usr/bin/env python3
"""Fit the GPU engine's few timing parameters once, for all GEMM and layernorm shapes together.

Fitted (harness/params/gpu.py, between the CALIBRATED markers):
  tc_efficiency     fraction of the tensor-core peak an mma reaches inside a K loop
  l2_bw_gbps        L2 bandwidth shared by the SMs (the limit of full-chip GEMMs)
  tb_overhead_ns    fixed cost per thread block (dispatch, prologue, epilogue)
  kernel_launch_ns  launch to first block
  alu_efficiency    fraction of the SMs' ALU issue rate an instruction stream reaches (ALU work is
                    counted from SASS; in-order issue stalls are what makes the layernorm as slow
                    as measured). HBM's latency and bandwidth ceiling are measured, not fitted (harness/gpu/hbm_curve.py)
against the measured cuBLAS GEMMs and PyTorch layernorms (--fit-kinds) in
harness/data/measured/h100_kernels.csv at the SM counts
given by --fit-sms (default 132 and 66: the full GPU and the paper's half, an exact driver-made
partition), each GEMM replaying its recorded cuBLAS plan at the clock the power model predicts
for its SM count and kind (validate_kernels.simulate_rows; the row's measured clock is not an
input). The objective is the mean absolute percentage error plus a penalty on errors above
20 %; Nelder-Mead over the box below. Writes harness/data/calibration/h100.json (values, command,
error summary) and, with --write, rewrites the defaults in harness/params/gpu.py.

Usage: python scripts/calibrate_gpu.py --write [--maxiter 80]   (needs: pip install -e .[calibrate])
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.experiments.validate_kernels import load_input, simulate_rows  # noqa: E402
from harness.params.gpu import CALIBRATION_FILE, GpuParams  # noqa: E402

FIT = {  # name: (low, high)
    "tc_efficiency": (0.6, 1.0),
    "l2_bw_gbps": (3000.0, 12000.0),
    "tb_overhead_ns": (0.0, 4000.0),
    "kernel_launch_ns": (0.0, 8000.0),
    "alu_efficiency": (0.3, 1.0),
}
FMT = {"tc_efficiency": "{:.4f}", "l2_bw_gbps": "{:.1f}", "tb_overhead_ns": "{:.1f}",
       "kernel_launch_ns": "{:.1f}", "alu_efficiency": "{:.4f}"}


def params_from(x: np.ndarray, free: list[str]) -> dict:
    p = asdict(GpuParams())
    for name, v in zip(free, x):
        lo, hi = FIT[name]
        p[name] = float(min(hi, max(lo, v)))
    return p


def summary(df: pd.DataFrame) -> dict:
    out = {}
    df = df[df["err_pct"].notna()]  # rows whose measurement failed
    for sms, g in df.groupby("num_sms"):
        e = g["err_pct"].abs()
        out[int(sms)] = {"rows": int(len(g)), "mape_pct": round(float(e.mean()), 2), "max_abs_err_pct": round(float(e.max()), 2),
                         "worse_than_25pct": int((e > 25).sum())}
    e = df["err_pct"].abs()
    out["all"] = {"rows": int(len(df)), "mape_pct": round(float(e.mean()), 2), "max_abs_err_pct": round(float(e.max()), 2)}
    return out


def rewrite_defaults(values: dict) -> None:
    path = ROOT / "harness" / "params" / "gpu.py"
    text = path.read_text()
    for name, v in values.items():
        text, n = re.subn(rf"(\n    {name}: float = )[-0-9.e+]+", rf"\g<1>{FMT[name].format(v)}", text)
        if n != 1:
            raise SystemExit(f"could not rewrite {name} in {path}")
    path.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=None, help="measured CSV (default harness/data/measured/h100_kernels.csv)")
    ap.add_argument("--fit-sms", default="132,66")
    ap.add_argument("--fit-kinds", default="gemm,layernorm", help="kinds of measured kernels in the fit")
    ap.add_argument("--maxiter", type=int, default=80)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--only", default=None,
                    help="fit only these parameters (comma-separated names of the list above); the rest keep "
                         "their defaults (after a parameter is replaced or added)")
    ap.add_argument("--write", action="store_true", help="rewrite the defaults in harness/params/gpu.py")
    args = ap.parse_args()
    free = list(FIT) if args.only is None else args.only.split(",")
    unknown = set(free) - set(FIT)
    if unknown:
        raise SystemExit(f"--only: unknown {sorted(unknown)}; allowed: {', '.join(FIT)}")
    df = load_input(args.input)
    kinds = args.fit_kinds.split(",")
    unknown = set(kinds) - {"gemm", "layernorm", "attention"}
    if unknown:
        raise SystemExit(f"--fit-kinds: unknown {sorted(unknown)}; allowed: gemm, layernorm, attention")
    fitted_kinds = df[df["kind"].isin(kinds)]
    fit_sms = [int(s) for s in args.fit_sms.split(",")]
    fit_rows = fitted_kinds[fitted_kinds["num_sms"].isin(fit_sms)
                            & pd.to_numeric(fitted_kinds["measured_us"], errors="coerce").notna()]
    evals = []

    def objective(x):
        out = simulate_rows(fit_rows, params_from(x, free), jobs=args.jobs)
        e = out["err_pct"].abs()
        val = float(e.mean() + 0.5 * np.clip(e - 20.0, 0, None).mean())
        evals.append(val)
        print(f"eval {len(evals):3d}: obj {val:7.3f} mape {e.mean():6.2f} max {e.max():6.2f} "
              + " ".join(f"{k}={v:.4g}" for k, v in zip(free, x)), flush=True)
        return val

    base = GpuParams()
    x0 = np.array([getattr(base, k) for k in free])
    t0 = time.time()
    res = minimize(objective, x0, method="Nelder-Mead",
                   options={"maxfev": args.maxiter, "xatol": 1e-3, "fatol": 0.01, "initial_simplex": None})
    best = params_from(res.x, free)
    fitted = {k: best[k] for k in free}
    full = simulate_rows(fitted_kinds, best, jobs=args.jobs)
    record = {
        "command": "python scripts/calibrate_gpu.py " + " ".join(sys.argv[1:]),
        "measured": str(args.input or "harness/data/measured/h100_kernels.csv"),
        "fit_num_sms": fit_sms,
        "fit_kinds": kinds,
        "fitted": fitted,
        "kept": {k: best[k] for k in FIT if k not in free},
        "evaluations": len(evals),
        "objective": round(float(res.fun), 4),
        "wall_s": round(time.time() - t0, 1),
        **{f"{k}_error_by_num_sms": summary(full[full["kind"] == k]) for k in kinds},
    }
    CALIBRATION_FILE.parent.mkdir(parents=True, exist_ok=True)
    CALIBRATION_FILE.write_text(json.dumps(record, indent=2) + "\n")
    full.to_csv(CALIBRATION_FILE.with_name("h100_gemm_fit.csv"), index=False)
    print(json.dumps(record, indent=2))
    if args.write:
        rewrite_defaults(fitted)
        print("rewrote the CALIBRATED defaults in harness/params/gpu.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
