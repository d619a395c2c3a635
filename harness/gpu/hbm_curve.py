"""HBM's loaded-latency curve from the pointer-chase measurement (gpu.hbm_load_* keys).

`scripts/measure/measure_loaded_latency.py` times one SM's pointer chase (one 128 B line per hop)
idle, from L2 and from HBM, and from HBM while other SMs stream reads (`read`) or reads and
writes (`copy`) at rising rates (harness/data/measured/h100_loaded_latency.csv). From it:

- gpu.hbm_latency_ns: the idle HBM chase minus the idle L2 chase (what a miss adds to a hit);
- gpu.hbm_efficiency: the most bytes per second the copy background moved (reads and writes, the
  traffic the engine's one HBM server stands for) over gpu.hbm_bw_gbps;
- gpu.hbm_load_util / _read_ns / _copy_ns: the extra latency over idle against the background's
  HBM utilisation (its bytes per second over gpu.hbm_bw_gbps), on a fixed grid of utilisations.
  Per kind, points past the highest utilisation reached are queueing at saturation, which the
  HBM bandwidth server models, so the curve holds its last value there; small negative extras
  at low load are noise and the curve is made non-decreasing.

`python -m harness.gpu.hbm_curve` prints the keys; tests check harness/params/gpu.py against it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

MEASURED = Path(__file__).resolve().parents[1] / "data" / "measured" / "h100_loaded_latency.csv"
H200 = MEASURED.with_name("h200_loaded_latency.csv")  # conf/system/hgx_h200_8gpu.yaml
GRID = tuple(round(0.05 * i, 2) for i in range(20))  # 0 .. 0.95


def _points(rows: pd.DataFrame, idle_ns: float, peak_gbps: float) -> tuple[np.ndarray, np.ndarray]:
    """(utilisation, extra ns) of one background kind, idle first, in order of rising load."""
    util, extra = [0.0], [0.0]
    for _, r in rows.sort_values("bg_ctas").iterrows():
        u = r.bg_GBps / peak_gbps
        if u <= util[-1]:
            break  # saturated: more CTAs, no more bytes (the bandwidth server's queue)
        util.append(u)
        extra.append(max(extra[-1], r.ns_per_hop - idle_ns))
    return np.array(util), np.array(extra)


def derive(path: Path = MEASURED, peak_gbps: float = 3350.0) -> dict[str, object]:
    """The gpu.* values the measurement gives (rounded as harness/params/gpu.py holds them)."""
    d = pd.read_csv(path)
    med = d.groupby(["chase", "bg_kind", "bg_ctas"], as_index=False)[["ns_per_hop", "bg_GBps"]].median()
    l2_idle = float(med.query("chase == 'l2' and bg_ctas == 0").ns_per_hop.iloc[0])
    idle = float(med.query("chase == 'hbm' and bg_ctas == 0").ns_per_hop.iloc[0])
    copy_max = float(med.query("chase == 'hbm' and bg_kind == 'copy'").bg_GBps.max())
    out: dict[str, object] = {"hbm_latency_ns": round(idle - l2_idle, 1), "hbm_efficiency": round(copy_max / peak_gbps, 3),
                              "hbm_load_util": list(GRID)}
    for kind in ("read", "copy"):
        u, x = _points(med.query("chase == 'hbm' and bg_kind == @kind"), idle, peak_gbps)
        out[f"hbm_load_{kind}_ns"] = [round(float(v), 1) for v in np.interp(GRID, u, x)]
    return out


if __name__ == "__main__":
    for k, v in derive().items():
        print(f"gpu.{k} = {v}")
