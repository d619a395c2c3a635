#!/usr/bin/env python3
"""How much the time one CTA takes per slice varies, with 24 CTAs copying at once.

NCCL's ring channels (one CTA each) start together and would stay in lockstep if every CTA
moved every slice in the same time; whatever spreads slice times apart lets the channels drift
apart. This measures that spread for the receive-only primitives' work: 24 CTAs (24 ring
channels) of 512 threads (NCCL's Simple protocol) each copy (or bf16 reduce-copy) `--slices`
consecutive 1 MiB slices of their own region, with the Simple protocol's access pattern (16 B
per thread, `--unroll` loads in flight: 4 by default, NCCL's COLL_UNROLL is 8 on sm_80 and later);
thread 0 of each CTA stamps %globaltimer after every slice's
__syncthreads. Sources come from HBM (regions larger than 4x the L2).

Ops (loads / stores per 16 B): copy 1/1 (recv's copy-out, or a send), copy2 1/2 (copySend,
recvCopySend: output and next rank), reduce_bf16 2/1 (recvReduceCopy, recvReduceSend),
reduce2_bf16 2/2 (recvReduceCopySend); the second store goes to local memory here, to the
next GPU in NCCL.

CSV (one row per CTA and slice): op,rep,cta,slice,slice_ns,gpu
  slice_ns  globaltimer difference between the end of this slice and the end of the previous
            one (slice 0: from the CTA's own start stamp)
Summary printed: per op, the coefficient of variation of slice_ns over all CTAs and slices
(slice >= 1), within a CTA (mean over CTAs) and of the CTAs' mean slice times.

Usage (device, one GPU): python3 scripts/measure/measure_cta_jitter.py --out $OUT/h200_cta_jitter.csv
Summary of measured CSVs (anywhere): python3 scripts/measure/measure_cta_jitter.py --summarize A.csv [B.csv ...]
  --out S.csv  -> op,threads,slice_bytes,slices,mean_us,per_cta_GBps,cv_all,cv_within_cta,cv_cta_means,source
  (threads, slice bytes and unroll are taken from the file name's _t<threads>, _<K>k and _u<unroll>
  parts; default 512, 1 MiB, 4)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, compile_sass, enforce_no_multicast, loads_in_flight  # noqa: E402

KERNELS = r"""
#include <cuda_bf16.h>
#ifndef UNROLL
#define UNROLL 4
#endif
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ __forceinline__ uint4 add_bf16x8(uint4 x, uint4 y) {
  __nv_bfloat162* a = reinterpret_cast<__nv_bfloat162*>(&x);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = __hadd2(a[k], b[k]);
  return x;
}
// NSRC = 1: dst = a; 2: dst = a + b (bf16); NDST = 2 also stores to dst2 (a primitive that
// both writes its output and sends). Each CTA walks its own region slice by slice.
template <int NSRC, int NDST>
__device__ void slices(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ dst,
                       uint4* __restrict__ dst2, long long slice16, int nslices, unsigned long long* stamps) {
  const long long region = slice16 * nslices;
  const uint4* x = a + blockIdx.x * region;
  const uint4* y = b + blockIdx.x * region;
  uint4* d = dst + blockIdx.x * region;
  uint4* d2 = dst2 + blockIdx.x * region;
  unsigned long long* st = stamps + blockIdx.x * (nslices + 1);
  __syncthreads();
  if (threadIdx.x == 0) st[0] = gtimer();
  for (int s = 0; s < nslices; ++s) {
    const long long off = s * slice16;
    for (long long base = threadIdx.x; base < slice16; base += (long long)blockDim.x * UNROLL) {
      uint4 v[UNROLL], w[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < slice16) { v[u] = x[off + i]; if (NSRC == 2) w[u] = y[off + i]; }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < slice16) {
          const uint4 r = NSRC == 2 ? add_bf16x8(v[u], w[u]) : v[u];
          d[off + i] = r;
          if (NDST == 2) d2[off + i] = r;
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) st[s + 1] = gtimer();
  }
}
#define KERNEL(name, S, D)                                                                          \
  extern "C" __global__ void name(const uint4* a, const uint4* b, uint4* d, uint4* d2, long long n, int k, \
                                  unsigned long long* st) { slices<S, D>(a, b, d, d2, n, k, st); }
KERNEL(copy_slices, 1, 1)
KERNEL(copy2_slices, 1, 2)
KERNEL(reduce_slices, 2, 1)
KERNEL(reduce2_slices, 2, 2)
"""


def cv(xs: list[float]) -> float:
    return statistics.pstdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0


def summarize(paths: list[str], out_path: str) -> None:
    """One row per (file, op): mean slice time and its spread, slice 0 and warm-up excluded."""
    import csv
    import re

    out = CsvOut(out_path, ["op", "threads", "slice_bytes", "unroll", "slices", "mean_us", "per_cta_GBps", "cv_all",
                            "cv_within_cta", "cv_cta_means", "source"])
    for path in paths:
        name = os.path.basename(path)
        t = re.search(r"_t(\d+)", name)
        k = re.search(r"_(\d+)k", name)
        u = re.search(r"_u(\d+)", name)
        threads, slice_bytes = int(t.group(1)) if t else 512, int(k.group(1)) * 1024 if k else 1 << 20
        by_op: dict[str, dict[tuple[int, int], list[int]]] = {}
        with open(path) as f:
            for r in csv.DictReader(f):
                if int(r["slice"]) >= 1:
                    by_op.setdefault(r["op"], {}).setdefault((int(r["rep"]), int(r["cta"])), []).append(int(r["slice_ns"]))
        for op, ctas in by_op.items():
            every = [x for v in ctas.values() for x in v]
            mean_ns = statistics.fmean(every)
            out.row(op=op, threads=threads, slice_bytes=slice_bytes, unroll=int(u.group(1)) if u else 4,
                    slices=len(next(iter(ctas.values()))) + 1,
                    mean_us=round(mean_ns / 1e3, 3), per_cta_GBps=round(slice_bytes / mean_ns, 2),
                    cv_all=round(cv(every), 4), cv_within_cta=round(statistics.fmean(cv(v) for v in ctas.values()), 4),
                    cv_cta_means=round(cv([statistics.fmean(v) for v in ctas.values()]), 4), source=name)
    out.close()


def sass_report(unrolls: list[int]) -> None:
    """Per unroll and op: the loads before the loop's first 16 B store, their distinct registers
    (every load in flight: unroll, or 2 x unroll for the reduces) and local-memory spills."""
    for unroll in unrolls:
        sass = compile_sass(KERNELS, unroll)
        for fn in ("copy_slices", "copy2_slices", "reduce_slices", "reduce2_slices"):
            _, before, spills = loads_in_flight(sass, fn)
            print(f"sass {fn} unroll {unroll}: {len(before)} loads before the first 16 B store, "
                  f"{len(set(before))} distinct registers, {spills} local stores (spills)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sass", metavar="UNROLLS", help="only print the kernels' SASS summary at these unrolls (e.g. 8,16,32)")
    ap.add_argument("--out")
    ap.add_argument("--summarize", nargs="+", metavar="CSV", help="summarise measured CSVs into --out")
    ap.add_argument("--ctas", type=int, default=24)
    ap.add_argument("--threads", type=int, default=512)
    ap.add_argument("--slice-bytes", type=int, default=1 << 20)
    ap.add_argument("--slices", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--unroll", type=int, default=4, help="16 B loads in flight per thread per round")
    args = ap.parse_args()
    if args.sass:
        return sass_report([int(u) for u in args.sass.split(",")])
    if not args.out:
        ap.error("--out is required")
    if args.summarize:
        return summarize(args.summarize, args.out)
    enforce_no_multicast()
    import cupy as cp

    mod = cp.RawModule(code=KERNELS, options=("-std=c++17", f"-DUNROLL={args.unroll}"))
    kern = {op: mod.get_function(f"{op.split('_')[0]}_slices") for op in ("copy", "copy2", "reduce_bf16", "reduce2_bf16")}
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    region = args.slice_bytes * args.slices
    a = cp.ones(region * args.ctas // 2, dtype=cp.uint16)
    b = cp.ones(region * args.ctas // 2, dtype=cp.uint16)
    d = cp.empty(region * args.ctas // 2, dtype=cp.uint16)
    d2 = cp.empty(region * args.ctas // 2, dtype=cp.uint16)
    stamps = cp.zeros(args.ctas * (args.slices + 1), dtype=cp.uint64)
    out = CsvOut(args.out, ["op", "rep", "cta", "slice", "slice_ns", "gpu"])
    for op, k in kern.items():
        every, within, means = [], [], []
        for rep in range(args.reps + 1):  # rep 0: warm-up (module load, clocks)
            k((args.ctas,), (args.threads,), (a, b, d, d2, cp.int64(args.slice_bytes // 16), cp.int32(args.slices), stamps))
            cp.cuda.runtime.deviceSynchronize()
            st = stamps.get().reshape(args.ctas, args.slices + 1).astype("int64")
            if rep == 0:
                continue
            for c in range(args.ctas):
                dts = [int(st[c, s + 1] - st[c, s]) for s in range(args.slices)]
                for s, dt in enumerate(dts):
                    out.row(op=op, rep=rep, cta=c, slice=s, slice_ns=dt, gpu=gpu)
                every += dts[1:]
                within.append(cv(dts[1:]))
                means.append(statistics.fmean(dts[1:]))
        print(f"{op:12s} slice {args.slice_bytes >> 10} KiB x {args.ctas} CTAs x {args.threads} threads x {args.unroll}: "
              f"mean {statistics.fmean(every) / 1e3:8.2f} us ({args.slice_bytes / statistics.fmean(every):.2f} GB/s per CTA), "
              f"CV all {cv(every):.3f}, within a CTA {statistics.fmean(within):.3f}, of CTA means {cv(means):.3f}",
              flush=True)
    out.close()


if __name__ == "__main__":
    main()
