#!/usr/bin/env python3
"""Where a simulated collective's time goes, from a validate_collectives run with validate.stats=true.

    cais-sim experiment=validate_collectives validate.input=ROWS.csv validate.stats=true out_dir=DIR
    python scripts/collective_breakdown.py DIR [--window-us 10 50] [--toward 1]

Per row: bus bandwidth, run time, the mean per-channel time in fences and waits (collective model
statistics), how busy the GPUs' NVLink egress ports were, and each switch plane's rate toward
one GPU (--toward, default 1) in a time window (from the link series; a plane below its line rate while the others run
at theirs points at switch arbitration rather than at the GPUs).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf


def breakdown(row_dir: Path, gpus: int, channels: int, window_us: tuple[float, float],
              toward: int = 1) -> dict[str, float]:
    stats = pd.read_csv(row_dir / "stats.csv").set_index("name")["value"]
    series = pd.read_csv(row_dir / "series.csv")
    finish = max(stats[f"gpu{g}.collective.finish_time"] for g in range(gpus))
    ports = sorted({n.split(".")[1] for n in stats.index if n.startswith("gpu0.port") and n.endswith(".tx.busy_ps")})
    out = {"finish_us": finish / 1e6}
    for key in ("fence_ps", "wait_data_ps", "wait_slot_ps"):  # summed over channels in the stats
        total = sum(stats[f"gpu{g}.collective.{key}"] for g in range(gpus)) / gpus
        out[f"{key[:-3]}_us_per_channel"] = total / channels / 1e6
    busy = [stats[f"gpu{g}.{p}.tx.busy_ps"] for g in range(gpus) for p in ports]
    out["egress_busy"] = sum(busy) / len(busy) / finish
    lo, hi = window_us
    for sw in range(len(ports)):
        name = f"sw{sw}.port{toward}.tx.wire_bytes"
        s = series[series["name"] == name]
        sel = s[(s["start_ns"] >= lo * 1e3) & (s["start_ns"] < hi * 1e3)]
        if len(sel):
            out[f"sw{sw}_to_gpu{toward}_GBps"] = float(sel["value"].sum() / (len(sel) * sel["bin_ns"].iloc[0]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--window-us", type=float, nargs=2, default=(10.0, 50.0))
    ap.add_argument("--toward", type=int, default=1, help="GPU whose incoming plane rates to show")
    args = ap.parse_args()
    for f in ("results.csv", "config.yaml"):
        if not (args.out_dir / f).is_file():
            raise SystemExit(f"{args.out_dir / f} not found: give the out_dir of a validate_collectives run")
    res = pd.read_csv(args.out_dir / "results.csv")
    cfg = OmegaConf.load(args.out_dir / "config.yaml")
    for _, r in res.iterrows():
        row_dir = args.out_dir / "rows" / str(r["name"])
        if not (row_dir / "stats.csv").is_file():
            raise SystemExit(f"{row_dir}/stats.csv not found: run with validate.stats=true")
        channels = int(cfg.collective.nvls_channels if r["algo"] == "nvls" else cfg.collective.channels)
        if not 0 <= args.toward < int(r["gpus"]):
            raise SystemExit(f"--toward {args.toward}: row {r['name']} has GPUs 0..{int(r['gpus']) - 1}")
        b = breakdown(row_dir, int(r["gpus"]), channels, tuple(args.window_us), args.toward)
        print(f"{r['name']}: busbw {r['busbw_GBps']:.1f} GB/s, {b.pop('finish_us'):.1f} us")
        print("  " + ", ".join(f"{k} {v:.3f}" if k == "egress_busy" else f"{k} {v:.1f}" for k, v in b.items()))


if __name__ == "__main__":
    main()
