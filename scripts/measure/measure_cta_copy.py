#!/usr/bin/env python3
"""Local copy and reduce-copy rate of one CTA, as an NCCL channel's receive-only primitives do them.

NCCL's ring runs one CTA per channel. Its receive-only primitives move a slice through local HBM
without sending: `recv` copies the received slice from the NCCL buffer to the user buffer
(all_gather / all_reduce copy-out), `recvReduceCopy` adds the received slice to the local input
and writes the output (reduce_scatter's last step). This measures how fast one CTA does that,
with NCCL's Simple-protocol access pattern (16 B vector loads and stores per thread, 4 loads in
flight per thread, the CTA striding over its slice), alone and with 24 CTAs at once (24 ring
channels, each on its own slice), sources rotated over more than 4x the L2 so that reads come
from HBM.

CSV: op,threads,ctas,bytes_per_cta,median_us,per_cta_GBps,gpu
  op            copy (dst = src) or reduce_bf16 (dst = a + b, bf16)
  per_cta_GBps  bytes_per_cta / median_us: the slice bytes one CTA finishes per second

Usage (device, one GPU): python3 scripts/measure/measure_cta_copy.py --out $OUT/h200_cta_copy.csv
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast  # noqa: E402

KERNELS = r"""
#include <cuda_bf16.h>
#define UNROLL 4
extern "C" __global__ void copy_k(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n16) {
  const uint4* s = src + blockIdx.x * n16;
  uint4* d = dst + blockIdx.x * n16;
  for (long long base = threadIdx.x; base < n16; base += (long long)blockDim.x * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) { long long i = base + (long long)u * blockDim.x; if (i < n16) v[u] = s[i]; }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) { long long i = base + (long long)u * blockDim.x; if (i < n16) d[i] = v[u]; }
  }
}
__device__ __forceinline__ uint4 add_bf16x8(uint4 x, uint4 y) {
  __nv_bfloat162* a = reinterpret_cast<__nv_bfloat162*>(&x);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = __hadd2(a[k], b[k]);
  return x;
}
extern "C" __global__ void reduce_k(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                    uint4* __restrict__ dst, long long n16) {
  const uint4* x = a + blockIdx.x * n16;
  const uint4* y = b + blockIdx.x * n16;
  uint4* d = dst + blockIdx.x * n16;
  for (long long base = threadIdx.x; base < n16; base += (long long)blockDim.x * UNROLL) {
    uint4 v[UNROLL], w[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      long long i = base + (long long)u * blockDim.x;
      if (i < n16) { v[u] = x[i]; w[u] = y[i]; }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) { long long i = base + (long long)u * blockDim.x; if (i < n16) d[i] = add_bf16x8(v[u], w[u]); }
  }
}
"""

L2_BYTES = 50 * 2**20  # H100 / H200


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", default="256,512,640")
    ap.add_argument("--ctas", default="1,24")
    ap.add_argument("--bytes-per-cta", default="1M,4M")
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    enforce_no_multicast()
    import cupy as cp

    mod = cp.RawModule(code=KERNELS, options=("-std=c++17",))
    kern = {"copy": mod.get_function("copy_k"), "reduce_bf16": mod.get_function("reduce_k")}
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    parse = lambda s: int(s[:-1]) * 2**20 if s.endswith("M") else int(s)
    out = CsvOut(args.out, ["op", "threads", "ctas", "bytes_per_cta", "median_us", "per_cta_GBps", "gpu"])
    for bpc in [parse(x) for x in args.bytes_per_cta.split(",")]:
        for ctas in [int(x) for x in args.ctas.split(",")]:
            block = bpc * ctas
            rot = max(2, -(-4 * L2_BYTES // block))  # rotations: > 4x L2 of distinct sources
            srcs = [cp.ones(block * rot // 2, dtype=cp.uint16) for _ in range(2)]  # bf16 1.0 bits irrelevant
            dst = cp.empty(block // 2, dtype=cp.uint16)
            n16 = bpc // 16
            for op, k in kern.items():
                for threads in [int(x) for x in args.threads.split(",")]:
                    times = []
                    for it in range(args.iters + 3):
                        r = it % rot
                        a = srcs[0][r * block // 2:(r + 1) * block // 2]
                        b = srcs[1][r * block // 2:(r + 1) * block // 2]
                        argv = (a, dst, cp.int64(n16)) if op == "copy" else (a, b, dst, cp.int64(n16))
                        s, e = cp.cuda.Event(), cp.cuda.Event()
                        s.record()
                        k((ctas,), (threads,), argv)
                        e.record()
                        e.synchronize()
                        if it >= 3:  # warm-up: module load, clocks
                            times.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
                    med = statistics.median(times)
                    out.row(op=op, threads=threads, ctas=ctas, bytes_per_cta=bpc, median_us=round(med, 3),
                            per_cta_GBps=round(bpc / (med * 1e3), 2), gpu=gpu)
                    print(f"{op:12s} threads {threads:4d} ctas {ctas:3d} {bpc >> 20} MiB/CTA: {med:9.2f} us, "
                          f"{bpc / (med * 1e3):7.2f} GB/s per CTA", flush=True)
            del srcs, dst
    out.close()


if __name__ == "__main__":
    main()
