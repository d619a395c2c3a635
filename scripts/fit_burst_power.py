#!/usr/bin/env python3
"""Fit the GPU's burst power limit (gpu.power_burst_limit_w) on the SM clocks of GEMM bursts.

A burst of GEMMs from an idle GPU does not run at the maximum boost clock that NVML reports:
the SMs' own cycle counters (scripts/measure/measure_burst_clock.py, harness/data/measured/
h200_burst_clock.csv) read 1600-1780 MHz from the first GEMM on, shape by shape, for about
45 ms, before the clock starts to fall toward the power-limited clock of sustained load. The
power model (harness/gpu/power.py) gives that fast clock as the highest clock whose modelled
board power stays under a second, higher limit. Fitted here: that limit, as the mean board power
the model gives at each 132-CTA shape's measured burst clock (extra.sq2048, 128 CTAs, and the
first GEMM of each burst, whose interval includes the wake from idle, are left out). The fit's
own rows are these clocks on an H200; the H100 rows of experiment=validate_concurrent, another
GPU, are its check (docs/VALIDATION.md).

    .venv/bin/python scripts/fit_burst_power.py          # prints the limit and the fit's errors
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.gpu import power  # noqa: E402
from harness.params.gpu import GpuParams  # noqa: E402

MEASURED = ROOT / "harness" / "data" / "measured" / "h200_burst_clock.csv"
FULL_GRID = 132  # CTAs of the shapes fitted: every SM busy
STEADY_GEMMS = 60  # the short bursts (the long one's tail is the slow controller)


def main() -> int:
    df = pd.read_csv(MEASURED)
    burst = df[(df.gemm_index >= 1) & (df.gemm_index < STEADY_GEMMS)]
    clocks = burst.groupby("name").clock_mhz.median()
    p = dict(vars(GpuParams()))
    fitted = clocks.drop("extra.sq2048")
    watts = {n: power.board_power_w(f, FULL_GRID, "tensor", p) for n, f in fitted.items()}
    limit = sum(watts.values()) / len(watts)
    print(f"burst power limit: {limit:.1f} W (mean of {', '.join(f'{n} {w:.1f}' for n, w in watts.items())})")
    q = dict(p, power_burst_limit_w=limit)
    for n, f in clocks.items():
        sms = FULL_GRID if n != "extra.sq2048" else 128
        model = power.burst_clock_mhz(sms, "tensor", q, step_mhz=0)
        role = "fit" if n in watts else "not fitted"
        print(f"  {n:22s} {sms:3d} SMs: measured {f:7.1f} MHz, model {model:7.1f} ({(model - f) / f:+.1%}, {role})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
