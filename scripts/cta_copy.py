"""One CTA's local copy rate on the Hopper engine, beside the measured H100 rows.

The kernel is measure_cta_jitter.py's `copy` (docs/MEASUREMENTS.md "Per-slice CTA rates"): each
of 16 CTAs walks 32 slices of 1 MiB of its own region in rounds of threads x unroll x 16 B
(16 B vectors, `unroll` loads in flight per thread): the round's loads, a wait for them, then
its stores (posted to L2) while the next round loads. That is how a copy warp group of the
NVLS kernels moves data (harness/kernels/nvls.py: NCCL's COLL_UNROLL = 8, so 8 warps move 32
KiB rounds). GPU: the defaults (H100) at 1980 MHz, the clock the measuring GPU ran these small
kernels at; nothing is fitted to the measured rows
(harness/data/measured/h100_cta_slice_rates_c16_unroll.csv, the op's rows, 4 and 8 deep; --op
copy2 / reduce_bf16 / reduce2_bf16: one load and two stores, two loads and one store, two and two
per 16 B, as the ring's primitives move data).

  .venv/bin/python scripts/cta_copy.py [--op copy|copy2|reduce_bf16|reduce2_bf16] [--threads 256,512,640]
                                       [--unroll 4,8] [OVERRIDE ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import REPO_ROOT  # noqa: E402
from harness.gpu import standalone  # noqa: E402
from harness.gpu.isa_text import isa  # noqa: E402
from harness.kernels.builder import WorkloadBuilder, affine  # noqa: E402

MEASURED = REPO_ROOT / "harness" / "data" / "measured" / "h100_cta_slice_rates_c16_unroll.csv"
CTAS, SLICES, SLICE = 16, 32, 1 << 20


# measure_cta_jitter.py's ops: (loads, stores) per 16 B moved (NCCL's recv / copySend /
# recvReduceCopy / recvReduceCopySend; the second store local here, as there)
OPS = {"copy": (1, 1), "copy2": (1, 2), "reduce_bf16": (2, 1), "reduce2_bf16": (2, 2)}


def workload(threads: int, unroll: int, op: str = "copy"):
    """16 CTAs, each moving 32 slices of (about) 1 MiB in rounds of threads x unroll x 16 B."""
    loads, stores = OPS[op]
    rnd = threads * unroll * 16
    rounds = SLICE // rnd  # 640 threads: 25 rounds of 40 KiB, 1000 KiB per slice
    b = WorkloadBuilder("cta_copy", 1, 132)
    srcs = [b.buffer(f"src{i}", CTAS * SLICES * SLICE) for i in range(loads)]
    dsts = [b.buffer(f"dst{i}", CTAS * SLICES * SLICE) for i in range(stores)]
    ki, p = b.kernel(op, CTAS, threads=threads, regs=32, loads_via_l1=True)
    addr = affine(0, bx=SLICES * SLICE, loops=(SLICE, rnd))
    p.loop(SLICES)
    p.loop(rounds)
    for src in srcs:
        p.ins(isa.LD, buffer=src, addr=addr, rows=1, row_bytes=rnd, is_async=True)
    p.ins(isa.WAIT, scope=isa.LOCAL)
    for dst in dsts:
        p.ins(isa.ST, buffer=dst, addr=addr, rows=1, row_bytes=rnd, is_async=True)
    p.end()
    p.end()
    b.launch(ki, b.stream("main"))
    return b.wl, SLICES * rounds * rnd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="256,512,640")
    ap.add_argument("--unroll", default="4,8")
    ap.add_argument("--op", default="copy", choices=sorted(OPS))
    ap.add_argument("overrides", nargs="*", help="gpu.KEY=VALUE")
    a = ap.parse_args()
    over = {"clock_mhz": 1980.0}
    for kv in a.overrides:
        k, _, v = kv.partition("=")
        over[k] = float(v)
    measured = pd.read_csv(MEASURED)
    measured = measured[measured["op"] == a.op].set_index(["threads", "unroll"])["per_cta_GBps"]
    print("threads  unroll  round KiB  engine GB/s per CTA  measured  error")
    for u in (int(x) for x in a.unroll.split(",")):
        for t in (int(x) for x in a.threads.split(",")):
            wl, nbytes = workload(t, u, a.op)
            us = standalone.kernel_time_us(standalone.run(wl, over))
            gbps = nbytes / us / 1e3
            m = measured.get((t, u))
            err = f"{100 * (gbps / m - 1):+.1f} %" if m else "-"
            print(f"{t:7d}  {u:6d}  {t * u * 16 / 1024:9.0f}  {gbps:19.1f}  {m if m else '-':>8}  {err}")


if __name__ == "__main__":
    main()
