#!/usr/bin/env python3
"""What one warp's round costs: stores alone, and a copy, with the depth the compiler gives it.

A copy warp group moves at most about 7 GB/s per warp however deep its rounds (docs/MEASUREMENTS.md,
calls 39-40). Here each of `--ctas` CTAs (one per SM) of `--threads` threads (down to one warp)
walks its own `--mib-per-cta` MiB, sources rotating over 1 GiB (HBM), in rounds of `unroll` 16 B
accesses per thread:

  * `store`: `unroll` stores of a register (what one warp's stores alone reach);
  * `copy`: `unroll` loads, then their `unroll` stores, written as measure_cta_jitter.py's copy
    but without its bounds checks, which ptxas compiles to at most 4 loads in flight (call 41).

`--sass` compiles the copy with nvcc and prints, per unroll, the loop's loads and how many
distinct registers they write: `unroll` distinct registers would mean all in flight.

CSV: kind,ctas,threads,unroll,bytes_per_cta,us,gbps_per_cta,gbps_per_warp,gpu
  us: median over `--reps` of (last CTA end - first CTA start), %globaltimer

Usage (device, one GPU): python3 scripts/measure/measure_warp_round.py --sass --out $OUT/h100_warp_round.csv
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, compile_sass, enforce_no_multicast, loads_in_flight, median  # noqa: E402

POOL_BYTES = 1 << 30
KINDS = ("store", "copy")
KERNELS = r"""
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
// KIND 1 store, 2 copy; CTA c walks [c*n16, (c+1)*n16); st[2c] = start, st[2c+1] = end.
template <int KIND>
__device__ void walk(const uint4* __restrict__ a, uint4* __restrict__ d, long long n16, unsigned long long* st) {
  __syncthreads();
  if (threadIdx.x == 0) st[2 * blockIdx.x] = gtimer();
  const long long o = (long long)blockIdx.x * n16;
  const uint4 r = make_uint4(threadIdx.x, 1, 2, 3);
  for (long long base = threadIdx.x; base < n16; base += (long long)blockDim.x * UNROLL) {
    uint4 v[UNROLL];
    if (KIND == 2) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = a[o + base + (long long)u * blockDim.x];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) d[o + base + (long long)u * blockDim.x] = KIND == 1 ? r : v[u];
  }
  __syncthreads();
  if (threadIdx.x == 0) st[2 * blockIdx.x + 1] = gtimer();
}
extern "C" __global__ void store(const uint4* a, uint4* d, long long n, unsigned long long* st) { walk<1>(a, d, n, st); }
extern "C" __global__ void copy(const uint4* a, uint4* d, long long n, unsigned long long* st) { walk<2>(a, d, n, st); }
"""


def sass_report(unrolls: list[int]) -> None:
    """Per unroll: the copy loop's loads and the distinct registers they write."""
    for unroll in unrolls:
        dests, before, _ = loads_in_flight(compile_sass(KERNELS, unroll), "copy")
        print(f"sass copy unroll {unroll}: {len(dests)} loads, {len(set(dests))} distinct registers, "
              f"{len(before)} before the first 16 B store", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ctas", type=int, default=4)
    ap.add_argument("--threads", default="32,64,128,256")
    ap.add_argument("--unrolls", default="1,2,4,8,16")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--mib-per-cta", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sass", action="store_true")
    args = ap.parse_args()
    enforce_no_multicast()
    import cupy as cp

    unrolls = [int(u) for u in args.unrolls.split(",")]
    if args.sass:
        sass_report(unrolls)
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    out = CsvOut(args.out, ["kind", "ctas", "threads", "unroll", "bytes_per_cta", "us", "gbps_per_cta", "gbps_per_warp",
                            "gpu"])
    pool = cp.full(POOL_BYTES // 4, 0x3F803F80, dtype=cp.uint32)
    bpc = args.mib_per_cta << 20
    dst = cp.empty(args.ctas * bpc // 4, dtype=cp.uint32)
    stamps = cp.zeros(2 * args.ctas, dtype=cp.uint64)
    window = args.ctas * bpc
    nwin = max(2, POOL_BYTES // window - 1)
    for unroll in unrolls:
        mod = cp.RawModule(code=KERNELS, options=("-std=c++17", f"-DUNROLL={unroll}"))
        for kind in args.kinds.split(","):
            fn = mod.get_function(kind)
            for threads in (int(t) for t in args.threads.split(",")):
                spans = []
                for r in range(args.reps + 1):  # the first is a warm-up
                    src = pool[(r % nwin) * window // 4:]
                    fn((args.ctas,), (threads,), (src, dst, cp.int64(bpc // 16), stamps))
                    cp.cuda.runtime.deviceSynchronize()
                    s = stamps.get().reshape(-1, 2).astype("int64")
                    if r:
                        spans.append((s[:, 1].max() - s[:, 0].min()) / 1e3)
                us = median(spans)
                gbps = bpc / (us * 1e3)
                warps = max(1, threads // 32)
                out.row(kind=kind, ctas=args.ctas, threads=threads, unroll=unroll, bytes_per_cta=bpc, us=round(us, 2),
                        gbps_per_cta=round(gbps, 2), gbps_per_warp=round(gbps / warps, 2), gpu=gpu)
                print(f"{kind:5s} threads {threads:4d} unroll {unroll:2d}: {us:8.1f} us, {gbps:6.1f} GB/s per CTA, "
                      f"{gbps / warps:5.2f} per warp", flush=True)
    out.close()


if __name__ == "__main__":
    main()
