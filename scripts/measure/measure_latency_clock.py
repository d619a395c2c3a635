#!/usr/bin/env python3
"""Does an SM's load latency follow its clock? L2 and HBM pointer chases while the SM clock moves.

One thread on an SM of its own chases pointers (`ld.global.cg`, one 128 B line per hop, each
hop waiting for the previous one) for about 300 ms, in segments of `--seg-hops` hops; each
segment records its wall time (globaltimer) and its SM cycles (clock64), so its ns per hop and
the SM clock it ran at. Meanwhile `bg_ctas` CTAs on the other SMs run a power load that touches
no memory: `mma` issues tensor-core `mma.sync` on registers, `mma_smem` also reloads its
operands from shared memory (`ldmatrix`). The power controller lowers the clock over the run
(burst, then sustained), so every run gives latency against clock with the memory system idle.

If a hop's latency is a number of SM cycles, ns per hop x MHz stays constant as the clock
falls; if it is wall time (a clock domain of its own), ns per hop stays constant.

Chases (as scripts/measure/measure_loaded_latency.py):
  hbm  each hop a line never touched before: 64 random lines of one 2 MiB page, then the next
       page, over a 1 GiB buffer (one pass, > 20x the L2)
  l2   random lines of a 4 MiB buffer read once before timing (L2 hits), wrapping

CSV: chase,bg_kind,bg_ctas,run,seg,t_ms,ns_per_hop,sm_clock_mhz,cycles_per_hop,gpu
  t_ms  the segment's start after the chase's first segment

Usage (device, one GPU): python3 scripts/measure/measure_latency_clock.py --out $OUT/h100_latency_clock.csv
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, cuda_functions, enforce_no_multicast  # noqa: E402
from measure_loaded_latency import CHASE, LINE, build_chain  # noqa: E402

KERNELS = CHASE + r"""
// Tensor-core work on registers (SMEM: operands reloaded from shared memory each step) until
// *done, or 3 s. No global memory traffic but the flag.
template <bool SMEM>
__device__ void mma_load(volatile int* started, volatile int* done, float* sink) {
  extern __shared__ char smem[];
  __shared__ int stop;
  if (threadIdx.x == 0) { stop = 0; atomicAdd((int*)started, 1); }
  for (int i = threadIdx.x; i < 16384; i += blockDim.x) ((unsigned*)smem)[i] = 0x3c003c00u ^ i;
  __syncthreads();
  unsigned a0 = 0x3f803f80u ^ threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, b0 = a0 ^ 5, b1 = a0 ^ 9;
  float acc[8][4] = {};
  const unsigned long long w0 = gtimer();
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem) + (threadIdx.x & 31) * 16 + (threadIdx.x >> 5) * 512;
  for (long long it = 0; !stop; ++it) {
#pragma unroll 4
    for (int r = 0; r < 64; ++r) {
      if (SMEM) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(sbase + (r & 7) * 4096));
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    if ((it & 63) == 63) {
      __syncthreads();
      if (threadIdx.x == 0 && (*done || gtimer() - w0 > 3000000000ull)) stop = 1;
      __syncthreads();
    }
  }
  float s = 0;
  for (int j = 0; j < 8; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (s == 1.2345f) sink[blockIdx.x] = s;  // keeps the work
}
extern "C" __global__ void bg_mma(volatile int* started, volatile int* done, float* sink) {
  mma_load<false>(started, done, sink); }
extern "C" __global__ void bg_mma_smem(volatile int* started, volatile int* done, float* sink) {
  mma_load<true>(started, done, sink); }
"""

SMEM = 120 * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bg-ctas", default="0,32,66,131")
    ap.add_argument("--bg-kinds", default="mma,mma_smem")
    ap.add_argument("--run-ms", type=float, default=300.0, help="about how long one chase runs")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--cool-s", type=float, default=2.0, help="idle time before each run")
    args = ap.parse_args()
    enforce_no_multicast()
    import cupy as cp
    import numpy as np

    fns, gpu, sms = cuda_functions(cp, KERNELS, ("chase", "bg_mma", "bg_mma_smem"), SMEM)
    rng = np.random.default_rng(1)
    # Segments of about 1 ms at the idle latencies (344 ns from HBM, 139 from L2).
    plan = {"hbm": (3000, int(args.run_ms / 1.03)), "l2": (7000, int(args.run_ms / 0.98))}
    hbm_hops = plan["hbm"][0] * plan["hbm"][1]
    chains = {"hbm": build_chain(cp, np, 1 << 30, 64, rng, hbm_hops),
              "l2": build_chain(cp, np, 4 << 20, 2048, rng, (4 << 20) // LINE)}
    scratch = cp.empty(256 << 20, dtype=cp.uint8)  # written before every HBM chase: evicts its lines
    flags = cp.zeros(2, dtype=cp.int32)
    sink = cp.zeros(sms, dtype=cp.float32)
    s_chase, s_bg = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    csv = CsvOut(args.out, ["chase", "bg_kind", "bg_ctas", "run", "seg", "t_ms", "ns_per_hop", "sm_clock_mhz",
                            "cycles_per_hop", "gpu"])
    started, done = flags[0:1], flags[1:2]
    fit_rows = {"l2": [], "hbm": []}  # (MHz, ns per hop) of every segment
    for chase in ("l2", "hbm"):
        buf, first = chains[chase]
        seg_hops, segs = plan[chase]
        out = cp.zeros(4 * segs + 1, dtype=cp.uint64)
        if chase == "l2":  # one untimed pass puts the lines in L2
            fns["chase"]((1,), (32,), (cp.uint64(first), cp.int64((4 << 20) // LINE), cp.int32(1), cp.int32(0),
                                       started, done, out), shared_mem=SMEM)
            cp.cuda.Device().synchronize()
        for kind in args.bg_kinds.split(","):
            for nbg in [int(x) for x in args.bg_ctas.split(",")]:
                if nbg > sms - 1 or (nbg == 0 and kind != args.bg_kinds.split(",")[0]):
                    continue
                for run in range(args.runs):
                    flags.fill(0)
                    if chase == "hbm":
                        scratch.fill(run + 1)
                    cp.cuda.Device().synchronize()
                    time.sleep(args.cool_s)
                    with s_chase:
                        fns["chase"]((1,), (32,), (cp.uint64(first), cp.int64(seg_hops), cp.int32(segs),
                                                   cp.int32(nbg), started, done, out), shared_mem=SMEM)
                    if nbg:
                        with s_bg:
                            fns["bg_" + kind]((nbg,), (256,), (started, done, sink), shared_mem=SMEM)
                    cp.cuda.Device().synchronize()
                    o = out.get()
                    lo, hi = buf.data.ptr, buf.data.ptr + buf.nbytes
                    if not lo <= int(o[4 * segs]) < hi:
                        sys.exit(f"chase {chase}: ended outside its buffer at {int(o[4 * segs]):#x}")
                    seg = o[:4 * segs].reshape(-1, 4).astype(np.int64)
                    t_start = int(seg[0, 0])
                    mhz_all = []
                    for s, (t0, t1, c0, c1) in enumerate(seg):
                        ns = (t1 - t0) / seg_hops
                        mhz = (c1 - c0) / max(1, t1 - t0) * 1e3
                        mhz_all.append(mhz)
                        csv.row(chase=chase, bg_kind=kind if nbg else "none", bg_ctas=nbg, run=run, seg=s,
                                t_ms=round((t0 - t_start) / 1e6, 3), ns_per_hop=round(ns, 2),
                                sm_clock_mhz=round(mhz, 1), cycles_per_hop=round((c1 - c0) / seg_hops, 1), gpu=gpu)
                    ns_all = (seg[:, 1] - seg[:, 0]) / seg_hops
                    fit_rows[chase] += list(zip(mhz_all, ns_all))
                    cyc_all = (seg[:, 3] - seg[:, 2]) / seg_hops
                    print(f"{chase:3s} {kind if nbg else 'none':8s} {nbg:3d} CTAs run {run}: clock "
                          f"{min(mhz_all):.0f}-{max(mhz_all):.0f} MHz, ns/hop {ns_all.min():.1f}-{ns_all.max():.1f} "
                          f"(median {statistics.median(ns_all):.1f}), cycles/hop {cyc_all.min():.1f}-{cyc_all.max():.1f}",
                          flush=True)
    csv.close()
    # ns per hop = fixed + cycles / clock: the part of the latency that follows the SM clock.
    for chase, pts in fit_rows.items():
        f = np.array([m for m, _ in pts])
        ns = np.array([n for _, n in pts])
        cycles, fixed = np.polyfit(1e3 / f, ns, 1)
        resid = ns - (fixed + cycles * 1e3 / f)
        print(f"{chase}: ns/hop = {fixed:.1f} ns + {cycles:.1f} cycles / clock over {len(pts)} segments at "
              f"{f.min():.0f}-{f.max():.0f} MHz (residual std {resid.std():.2f} ns); at 1980 MHz "
              f"{100 * cycles / 1.98 / (fixed + cycles / 1.98):.0f} % of the latency follows the clock")


if __name__ == "__main__":
    main()
