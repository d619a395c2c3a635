#!/usr/bin/env python3
"""Summary of scripts/measure/measure_drift_sources.py's raw CSVs: one row per figure the GPU
engine's drift parameters come from (harness/params/gpu.py, docs/DRIFT.md).

Usage: python3 scripts/measure/summarize_drift_sources.py RAW_DIR [--out SUMMARY.csv]
Figures (name,value,unit,what):
  timer_step_ns               smallest non-zero step of %globaltimer (its resolution)
  launch_jitter_{std,p50,p90,p99,max}_ns  launch-to-start latency minus its minimum, over launches
                              (detrended: the GPU timer and the host clock run at rates a few ppm apart)
  block_cv_<variant>          coefficient of variation of per-block durations (clock64 cycles)
                              within one launch, blocks of the first wave (started before any block
                              ended) excluded, mean over reps
  order_inversions_<variant>  fraction of block pairs (i < j, both after the first wave) that
                              start in the other order (j first) by more than the timer step
  order_overtaken_<variant>   fraction of later-wave blocks that a block of higher blockIdx started
                              before, by more than the timer step
  order_displacement_max_<variant>  the largest blockIdx distance of such an overtaking (blocks)
  gemm_cv                     coefficient of variation of back-to-back bf16 GEMM times
  sm_clock_{p50,min,max}_mhz  NVML SM clock under that load (samples after the first second)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def summarize(raw: Path) -> pd.DataFrame:
    rows = []

    def add(name, value, unit, what):
        rows.append({"name": name, "value": round(float(value), 4), "unit": unit, "what": what})

    timer = pd.read_csv(raw / "timer.csv")["ns"].to_numpy(np.int64)
    steps = np.diff(timer)
    step = int(steps[steps > 0].min())
    add("timer_step_ns", step, "ns", "smallest non-zero %globaltimer step")
    la = pd.read_csv(raw / "launch.csv")
    lat = (la["gpu_ns"] - la["host_ns"]).to_numpy(float)
    host = (la["host_ns"] - la["host_ns"].iloc[0]).to_numpy(float)
    fit = np.polyfit(host, lat, 1)  # the two clocks run at slightly different rates: detrend
    add("host_gpu_clock_drift_ppm", fit[0] * 1e6, "ppm", "rate difference of %globaltimer and CLOCK_REALTIME (removed)")
    lat = lat - np.polyval(fit, host)
    lat = lat - lat.min()
    add("launch_jitter_std_ns", lat.std(), "ns", "std of launch-to-start latency (idle GPU, 2000 launches)")
    for q in (50, 90, 99):
        add(f"launch_jitter_p{q}_ns", np.percentile(lat, q), "ns", f"p{q} of launch-to-start latency minus its minimum")
    add("launch_jitter_max_ns", lat.max(), "ns", "max of launch-to-start latency minus its minimum")
    for f in sorted(raw.glob("blocks_*.csv")):
        v = f.stem.split("_", 1)[1]
        b = pd.read_csv(f)
        cvs, inv, over, disp = [], [], [], []
        for _, r in b.groupby("rep"):
            r = r.sort_values("block")
            later = r[r["t0_ns"] >= r["t1_ns"].min()]  # after the first wave: started once a block had ended
            d = later["cycles"].to_numpy(float)
            cvs.append(d.std() / d.mean())
            t0 = later["t0_ns"].to_numpy(np.int64)
            n = len(t0)
            # pairs (i < j by blockIdx) with j starting earlier by more than one timer step
            idx = np.random.default_rng(0).integers(0, n, size=(200000, 2))
            i, j = idx.min(axis=1), idx.max(axis=1)
            keep = i < j
            inv.append(np.mean(t0[j[keep]] + step < t0[i[keep]]))
            t_all = r["t0_ns"].to_numpy(np.int64)
            # earliest start among blocks of higher blockIdx (suffix minimum), and how far ahead
            suffix_min = np.minimum.accumulate(t_all[::-1])[::-1]
            ids = np.nonzero((t_all >= r["t1_ns"].min()))[0]
            ids = ids[ids < len(t_all) - 1]
            over_ids = ids[suffix_min[ids + 1] + step < t_all[ids]]
            over.append(len(over_ids) / len(ids))
            for i in over_ids:
                disp.append(int(np.nonzero(t_all[i + 1:] + step < t_all[i])[0].max()) + 1)
        add(f"block_cv_{v}", np.mean(cvs), "", f"per-block duration CV, tiled GEMM, {v} occupancy")
        add(f"order_inversions_{v}", np.mean(inv), "", "fraction of later-wave block pairs starting out of blockIdx order")
        add(f"order_overtaken_{v}", np.mean(over), "", "fraction of later-wave blocks started after a higher blockIdx")
        add(f"order_displacement_max_{v}", max(disp, default=0), "blocks", "largest blockIdx distance of an overtaking")
        add(f"blocks_per_sm_{v}", len(b) / b["rep"].nunique() / b["smid"].nunique(), "blocks", "blocks per SM over the launch")
    g = pd.read_csv(raw / "gemm.csv")["ns"].to_numpy(float)[20:]
    add("gemm_cv", g.std() / g.mean(), "", "CV of back-to-back 8192^3 bf16 GEMM times")
    add("gemm_p50_us", np.median(g) / 1e3, "us", "median 8192^3 bf16 GEMM time")
    c = pd.read_csv(raw / "clocks.csv")
    c = c[c["t_us"] > 1e6]
    add("sm_clock_cv", c["sm_mhz"].std() / c["sm_mhz"].mean(), "", "CV of the NVML SM clock under back-to-back GEMMs")
    for name, fn in (("p50", np.median), ("min", np.min), ("max", np.max)):
        add(f"sm_clock_{name}_mhz", fn(c["sm_mhz"]), "MHz", f"{name} NVML SM clock under back-to-back GEMMs")
    add("power_p50_w", np.median(c["power_w"]), "W", "median board power under back-to-back GEMMs")
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    df = summarize(a.raw)
    print(df.to_string(index=False))
    if a.out:
        df.to_csv(a.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
