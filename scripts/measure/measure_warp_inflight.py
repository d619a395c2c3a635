#!/usr/bin/env python3
"""Whether a warp's loads in flight are capped: copy and reduce rounds by depth, from HBM and from L2.

A copy warp moves at most about 7 GB/s however deep its rounds (docs/MEASUREMENTS.md, calls
39-41). If a warp can keep only so many loads in flight, its rate is that many bytes per load
latency, so a round should take about the latency however deep it is, and less from L2 than
from HBM by the same factor; if the warp has a rate of its own (returning loads, issuing stores),
a round grows with its bytes at the same slope from either source.

Each of `--ctas` CTAs (one per SM) of `--threads` threads walks its own `--mib-per-cta` MiB in
rounds of `unroll` 16 B loads per thread and source, then their stores: `copy` one source, one
store (each stored vector xor-ed with the round's mirror one, so that the round's first store
needs its last load and every load is issued first); `copy2` the same with a second store (NCCL's
copySend); `reduce` two sources added as bf16, one store. `--sass` prints per kind and unroll the
loads before the first 16 B store and the distinct registers they write (2 x unroll for reduce,
unroll for the copies: every load in flight). `pool`: `hbm` rotates the sources over 1 GiB,
`l2` reads the same `ctas x mib-per-cta` bytes every repetition (after a warm-up pass), which
stay in the 50 MB L2.

CSV: kind,pool,ctas,threads,unroll,bytes_per_cta,us,gbps_per_cta,gbps_per_warp,gpu
  us: median over `--reps` of (last CTA end - first CTA start), %globaltimer; bytes: one
  destination's (each source's) bytes. A launch the registers do not allow is skipped.

Usage (device, one GPU): python3 scripts/measure/measure_warp_inflight.py --sass --out $OUT/h100_warp_inflight.csv
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, compile_sass, enforce_no_multicast, loads_in_flight, median  # noqa: E402

HBM_POOL_BYTES = 1 << 30
KERNELS = r"""
#include <cuda_bf16.h>
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ uint4 add_bf16x8(uint4 x, uint4 y) {
  __nv_bfloat162* a = reinterpret_cast<__nv_bfloat162*>(&x);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = __hadd2(a[k], b[k]);
  return x;
}
__device__ __forceinline__ uint4 xor4(uint4 x, uint4 y) { return make_uint4(x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w); }
// NSRC 1: d = a (each 16 B xor-ed with the round's mirror vector, so that the round's first store
// needs its last load: every load is issued before any store); 2: d = a + b (bf16). NDST 2 also
// stores to d + n16 * gridDim.x. CTA c walks [c*n16, (c+1)*n16); st[2c] = start, st[2c+1] = end.
template <int NSRC, int NDST>
__device__ void walk(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ d,
                     long long n16, unsigned long long* st) {
  __syncthreads();
  if (threadIdx.x == 0) st[2 * blockIdx.x] = gtimer();
  const long long o = (long long)blockIdx.x * n16;
  for (long long base = threadIdx.x; base < n16; base += (long long)blockDim.x * UNROLL) {
    uint4 v[UNROLL], w[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      long long i = base + (long long)u * blockDim.x;
      if (i < n16) { v[u] = a[o + i]; if (NSRC == 2) w[u] = b[o + i]; }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      long long i = base + (long long)u * blockDim.x;
      if (i < n16) {
        const uint4 r = NSRC == 2 ? add_bf16x8(v[u], w[u]) : xor4(v[u], v[UNROLL - 1 - u]);
        d[o + i] = r;
        if (NDST == 2) d[n16 * gridDim.x + o + i] = r;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) st[2 * blockIdx.x + 1] = gtimer();
}
extern "C" __global__ void copy(const uint4* a, const uint4* b, uint4* d, long long n, unsigned long long* st) {
  walk<1, 1>(a, b, d, n, st); }
extern "C" __global__ void copy2(const uint4* a, const uint4* b, uint4* d, long long n, unsigned long long* st) {
  walk<1, 2>(a, b, d, n, st); }
extern "C" __global__ void reduce(const uint4* a, const uint4* b, uint4* d, long long n, unsigned long long* st) {
  walk<2, 1>(a, b, d, n, st); }
"""
KINDS = ("copy", "copy2", "reduce")


def sass_report(unrolls: list[int]) -> None:
    """Per kind and unroll: the loop's loads before its first 16 B store, and their distinct registers."""
    for unroll in unrolls:
        sass = compile_sass(KERNELS, unroll)
        for kind in KINDS:
            _, before, _ = loads_in_flight(sass, kind)
            print(f"sass {kind} unroll {unroll}: {len(before)} loads before the first 16 B store, "
                  f"{len(set(before))} distinct registers", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ctas", type=int, default=4)
    ap.add_argument("--threads", default="32,64,128,256")
    ap.add_argument("--unrolls", default="1,2,4,8,16")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--pools", default="hbm,l2")
    ap.add_argument("--mib-per-cta", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sass", action="store_true")
    args = ap.parse_args()
    enforce_no_multicast()
    import cupy as cp

    unrolls = [int(u) for u in args.unrolls.split(",")]
    if args.sass:
        sass_report(unrolls)
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    out = CsvOut(args.out, ["kind", "pool", "ctas", "threads", "unroll", "bytes_per_cta", "us", "gbps_per_cta",
                            "gbps_per_warp", "gpu"])
    bpc = args.mib_per_cta << 20
    window = args.ctas * bpc
    a_pool = cp.full(HBM_POOL_BYTES // 4, 0x3F803F80, dtype=cp.uint32)
    b_pool = cp.full(HBM_POOL_BYTES // 4, 0x3F803F80, dtype=cp.uint32)
    dst = cp.empty(2 * window // 4, dtype=cp.uint32)  # copy2's second destination after the first
    stamps = cp.zeros(2 * args.ctas, dtype=cp.uint64)
    nwin = max(2, HBM_POOL_BYTES // window - 1)
    for unroll in unrolls:
        mod = cp.RawModule(code=KERNELS, options=("-std=c++17", f"-DUNROLL={unroll}"))
        for kind in args.kinds.split(","):
            fn = mod.get_function(kind)
            for pool_kind in args.pools.split(","):
                for threads in (int(t) for t in args.threads.split(",")):
                    spans = []
                    try:
                        fn((args.ctas,), (threads,), (a_pool, b_pool, dst, cp.int64(bpc // 16), stamps))
                    except cp.cuda.driver.CUDADriverError as e:  # registers: a deep round at many threads
                        print(f"{kind:6s} threads {threads:4d} unroll {unroll:2d}: not launched ({e})", flush=True)
                        continue
                    for r in range(args.reps + 1):  # the first is a warm-up (and fills L2 for `l2`)
                        off = (r % nwin) * window // 4 if pool_kind == "hbm" else 0
                        fn((args.ctas,), (threads,), (a_pool[off:], b_pool[off:], dst, cp.int64(bpc // 16), stamps))
                        cp.cuda.runtime.deviceSynchronize()
                        s = stamps.get().reshape(-1, 2).astype("int64")
                        if r:
                            spans.append((s[:, 1].max() - s[:, 0].min()) / 1e3)
                    us = median(spans)
                    gbps = bpc / (us * 1e3)
                    warps = max(1, threads // 32)
                    out.row(kind=kind, pool=pool_kind, ctas=args.ctas, threads=threads, unroll=unroll, bytes_per_cta=bpc,
                            us=round(us, 2), gbps_per_cta=round(gbps, 2), gbps_per_warp=round(gbps / warps, 2), gpu=gpu)
                    print(f"{kind:6s} {pool_kind:3s} threads {threads:4d} unroll {unroll:2d}: {us:8.1f} us, "
                          f"{gbps:6.1f} GB/s per CTA, {gbps / warps:5.2f} per warp", flush=True)
    out.close()


if __name__ == "__main__":
    main()
