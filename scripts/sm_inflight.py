"""One SM's streaming loads on the Hopper engine, beside the measured H100 rows of call 31.

The rows are measure_sm_inflight.py's green-context cases (docs/MEASUREMENTS.md "One SM's
streaming loads"): the streaming kernel of harness/gpu/stream_kernel.py (measure_concurrent.py's,
as compiled) with 1, 2 or 4 CTAs on each of 4 SMs, 8 MiB per CTA, and per CTA the unused shared
memory that sets the SM's configuration (so its L1: docs/CONTRACTS.md "L1 staging"). The engine
runs the same grid on a GPU of 4 SMs (the defaults, an H100, at 1980 MHz, the clock these short
kernels ran at); nothing is fitted to these rows (harness/data/measured/h100_sm_inflight.csv).

  .venv/bin/python scripts/sm_inflight.py [OVERRIDE ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import REPO_ROOT  # noqa: E402
from harness.gpu import kernels, standalone, stream_kernel  # noqa: E402
from harness.params.gpu import GpuParams  # noqa: E402

MEASURED = REPO_ROOT / "harness" / "data" / "measured" / "h100_sm_inflight.csv"
SMS = 4


def workload(kind: str, ctas: int, bytes_per_cta: int, smem_kb: int):
    wl = kernels.new_workload(f"stream_{kind}{ctas}_smem{smem_kb}")
    stream_kernel.add_stream_kernel(wl, kind, ctas, ctas * bytes_per_cta, stream=0)
    wl.kernels[0].smem_bytes = smem_kb * 1024
    return wl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("overrides", nargs="*", help="gpu.KEY=VALUE")
    a = ap.parse_args()
    over = {"clock_mhz": 1980.0, "num_sms": SMS, "launch_skew_ns": 0.0, "clock_spread_frac": 0.0}
    for kv in a.overrides:
        k, _, v = kv.partition("=")
        over[k.removeprefix("gpu.")] = float(v)
    gpu = GpuParams(**{k: v for k, v in over.items() if k in ("l1_smem_per_sm_kb",)})
    rows = pd.read_csv(MEASURED)
    rows = rows[(rows["sms"] == SMS) & (rows["before"] == "none")]
    print("kind    CTAs/SM  smem KB/CTA  L1 KB  measured GB/s per SM  engine  error")
    for _, r in rows.iterrows():
        k, ctas, smem = int(r["ctas_per_sm"]), int(r["ctas"]), int(r["smem_kb"])
        wl = workload(r["kind"], ctas, int(r["bytes_per_cta"]), smem)
        st = standalone.run(wl, over)
        us = standalone.kernel_time_us(st)
        moved = wl.buffers[-1].bytes  # the output: whole chunks of the kernel's rounds
        engine = moved / SMS / us / 1e3
        l1 = gpu.l1_smem_per_sm_kb - min(c for c in gpu.smem_configs_kb if c >= k * smem)  # what l1_staging.h takes
        print(f"{r['kind']:6s}  {k:7d}  {smem:11d}  {l1:5.0f}  {r['gbps_per_sm']:20.1f}  {engine:6.1f}  "
              f"{100 * (engine / r['gbps_per_sm'] - 1):+.1f} %")


if __name__ == "__main__":
    main()
