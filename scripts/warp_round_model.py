#!/usr/bin/env python3
"""A CTA's warps as a closed queueing network, against the measured rows of call 42.

docs/MEASUREMENTS.md, "A warp's loads" (harness/data/measured/h100_warp_inflight.csv: copy,
copy2 and reduce rounds of 1-16 warps per CTA, 1-16 loads per thread, from HBM and from L2, 4
SMs of an H100 at 1980 MHz). Each warp cycles through its round: a latency and its loads'
return at its own rate (a delay no other warp waits on), and its loads' and stores' bytes
through the SM's port (one queue all the CTA's warps share, a load byte costing 1/`port_load`
and a stored one 1/`port_store`). Mean-value analysis of that network gives the CTA's rounds
per microsecond for W warps.

What is fitted, and on which rows (never on the rows of 2-8 warps it is checked against):
  * per source, the latency and the warp's load rate: least squares on the 1-warp rows,
    round = latency + loaded / load rate + loaded / port_load + stored / port_store;
  * the port: `port_load` and `port_store` from the three kinds' largest per-CTA rates (16
    warps, HBM), where the port is full: rate x (loaded / port_load + stored / port_store) = 1.

Checked further, with `--check-log`, on measure_cta_jitter.py's rows of call 40 (another
kernel: 1 MiB slices, a CTA barrier per slice; copy, copy2, reduce and reduce2, whose two loads
and two stores per 16 B no fitted row has), from HBM.

  .venv/bin/python scripts/warp_round_model.py [--csv FILE] [--check-log LOG]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "harness" / "data" / "measured" / "h100_warp_inflight.csv"
CALL40_LOG = ROOT / "harness" / "data" / "measured" / "raw" / "cta_slices" / "unroll" / "h100_call40_log.txt"
CALL40_OPS = {"copy": (1, 1), "copy2": (1, 2), "reduce_bf16": (2, 1), "reduce2_bf16": (2, 2)}  # loads, stores
SOURCES = {"copy": 1, "copy2": 1, "reduce": 2}  # loads per 16 B of output
DESTS = {"copy": 1, "copy2": 2, "reduce": 1}    # stores per 16 B of output
US_PER_KIB_AT_1_GBPS = 1.024


def rows(path: Path) -> pd.DataFrame:
    """The measured rows whose loads were all in flight (the SASS check of call 42)."""
    r = pd.read_csv(path)
    r = r[r.kind.isin(list(SOURCES))].copy()
    r["warps"] = r.threads // 32
    r["loaded_kib"] = r.kind.map(SOURCES) * r.unroll * 0.5  # per warp round: 32 threads x 16 B
    r["stored_kib"] = r.kind.map(DESTS) * r.unroll * 0.5
    r["round_us"] = r.unroll * 0.512 / r.gbps_per_warp
    not_in_flight = ((r.kind == "copy") & r.unroll.isin([1, 16])) | ((r.kind == "copy2") & (r.unroll == 1))
    return r[~not_in_flight]


def fit_port(r: pd.DataFrame) -> tuple[float, float]:
    """(port_load, port_store) GB/s from the full-port rows (the largest HBM rate of each kind)."""
    full = r[r.pool == "hbm"].sort_values("gbps_per_cta").groupby("kind").tail(1)
    # rate x (loads_per_B / port_load + stores_per_B / port_store) = 1, in 1/port_load and 1/port_store
    a = np.c_[full.gbps_per_cta * full.kind.map(SOURCES), full.gbps_per_cta * full.kind.map(DESTS)]
    inv, *_ = np.linalg.lstsq(a, np.ones(len(full)), rcond=None)
    return 1.0 / inv[0], 1.0 / inv[1]


def fit_warp(r: pd.DataFrame, port_load: float, port_store: float) -> dict[str, tuple[float, float]]:
    """Per source: (latency us, warp load rate GB/s) from the 1-warp rows, whose round is the
    delay plus the warp's own time at the port (no other warp there)."""
    out = {}
    for pool, d in r[r.warps == 1].groupby("pool"):
        y = d.round_us - (d.loaded_kib / port_load + d.stored_kib / port_store) * US_PER_KIB_AT_1_GBPS
        a = np.c_[np.ones(len(d)), d.loaded_kib * US_PER_KIB_AT_1_GBPS]
        (lat, inv_rate), *_ = np.linalg.lstsq(a, y, rcond=None)
        out[pool] = (lat, 1.0 / inv_rate)
    return out


def mva_rounds_per_us(warps: int, delay_us: float, port_us: float) -> float:
    """Mean-value analysis: `warps` customers, a delay of `delay_us` and one queue of `port_us`."""
    queue = 0.0
    x = 0.0
    for n in range(1, warps + 1):
        residence = port_us * (1.0 + queue)
        x = n / (delay_us + residence)
        queue = x * residence
    return x


def model_gbps(warps: int, unroll: int, loads: int, stores: int, lat: float, rate: float, port_load: float,
               port_store: float) -> float:
    """GB/s per CTA (one destination) of `warps` warps moving rounds of `unroll` 16 B per thread."""
    loaded, stored = loads * unroll * 0.5, stores * unroll * 0.5  # KiB per warp round
    delay = lat + loaded * US_PER_KIB_AT_1_GBPS / rate
    port = (loaded / port_load + stored / port_store) * US_PER_KIB_AT_1_GBPS
    return mva_rounds_per_us(warps, delay, port) * unroll * 0.512


def check_call40(log: Path, lat: float, rate: float, port_load: float, port_store: float) -> None:
    """The model beside call 40's rows (4 CTAs, `c4 tT uU op ... (X GB/s per CTA)` lines)."""
    out = []
    for line in log.read_text().splitlines():
        g = re.match(r"c4 t(\d+) u(\d+) (\S+)\s.*\(([\d.]+) GB/s per CTA\)", line)
        if not g or g[3] not in CALL40_OPS:
            continue
        threads, unroll, op, measured = int(g[1]), int(g[2]), g[3], float(g[4])
        model = model_gbps(threads // 32, unroll, *CALL40_OPS[op], lat, rate, port_load, port_store)
        out.append({"op": op, "warps": threads // 32, "unroll": unroll, "measured": measured,
                    "model": round(model, 1), "error_pct": round((model / measured - 1) * 100, 1)})
    d = pd.DataFrame(out)
    print(f"\ncall 40 (measure_cta_jitter.py, 4 CTAs, HBM), GB/s per CTA:")
    print(d.to_string(index=False))
    for label, sel in (("every row", d.unroll > 0), ("without the 32-deep rows", d.unroll < 32)):
        e = d[sel].error_pct.abs()
        print(f"{label}: mean |error| {e.mean():.2f} %, within 10 %: {int((e < 10).sum())} of {len(e)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", type=Path, default=MEASURED)
    ap.add_argument("--check-log", type=Path, help=f"also check call 40's rows (e.g. {CALL40_LOG.relative_to(ROOT)})")
    a = ap.parse_args()
    if not a.csv.exists():
        print(f"warp_round_model: --csv {a.csv}: no such file", file=sys.stderr)
        return 2
    r = rows(a.csv)
    port_load, port_store = fit_port(r)
    warp = fit_warp(r, port_load, port_store)
    print(f"port: loads {port_load:.1f} GB/s, stores {port_store:.1f} GB/s (the three full-port rows)")
    for pool, (lat, rate) in warp.items():
        print(f"{pool}: latency {lat:.3f} us, a warp's loads return at {rate:.1f} GB/s (the 1-warp rows)")
    r["model_gbps_per_cta"] = [
        model_gbps(int(x.warps), int(x.unroll), SOURCES[x.kind], DESTS[x.kind], *warp[x.pool], port_load, port_store)
        for _, x in r.iterrows()]
    r["error_pct"] = (r.model_gbps_per_cta / r.gbps_per_cta - 1) * 100
    table = r.pivot_table(index=["kind", "pool", "unroll"], columns="warps", values="error_pct")
    print("\nmodel / measured - 1, % (per CTA), by warps:")
    print(table.round(1).to_string())
    for label, sel in (("1 warp (the fit's rows)", r.warps == 1), ("2-8 warps (not fitted)", r.warps.between(2, 8)),
                       ("16 warps", r.warps == 16)):
        d = r[sel]
        print(f"{label}: mean |error| {d.error_pct.abs().mean():.2f} %, within 10 %: "
              f"{int((d.error_pct.abs() < 10).sum())} of {len(d)}")
    if a.check_log:
        if not a.check_log.exists():
            print(f"warp_round_model: --check-log {a.check_log}: no such file", file=sys.stderr)
            return 2
        check_call40(a.check_log, *warp["hbm"], port_load, port_store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
