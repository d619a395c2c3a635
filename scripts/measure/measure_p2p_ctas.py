#!/usr/bin/env python3
"""NVLink write bandwidth from N CTAs storing to a peer GPU, without NCCL's protocol.

NCCL's ring scales almost linearly up to 8 channels and falls to 60-73 % of linear at 24 on
2 x H200 (docs/MEASUREMENTS.md call 13) although the links are not full. This separates the
hardware from the protocol: N CTAs of 480 threads each copy their own region of local memory to
the peer GPU's memory with NCCL's Simple access pattern (16 B per thread, 4 loads in flight),
one direction (GPU 0 -> 1) or both at once, and, as a second mode, with NCCL's per-slice
synchronisation (after every 1 MiB slice: __syncthreads, one thread __threadfence_system and an
8 B flag store to the peer), without the receiver's side.

CSV: mode,direction,ctas,bytes_per_cta,median_us,total_GBps,gpu
  total_GBps  bytes stored to the peer per second, summed over CTAs (and over both GPUs for
              direction=both)

Usage (device, 2 GPUs, one process): python3 scripts/measure/measure_p2p_ctas.py --out $OUT/h200x2_p2p_ctas.csv
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast  # noqa: E402

KERNELS = r"""
#define UNROLL 4
// Each CTA copies `slices` slices of slice16 x 16 B from src to dst (dst on the peer GPU).
// FLAG = 1: after each slice, fence (system scope) and store a flag to the peer, as NCCL's post.
template <int FLAG>
__device__ void put(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long* flags,
                    long long slice16, int slices) {
  const long long region = slice16 * slices;
  const uint4* s = src + blockIdx.x * region;
  uint4* d = dst + blockIdx.x * region;
  for (int k = 0; k < slices; ++k) {
    const long long off = k * slice16;
    for (long long base = threadIdx.x; base < slice16; base += (long long)blockDim.x * UNROLL) {
      uint4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) { long long i = base + (long long)u * blockDim.x; if (i < slice16) v[u] = s[off + i]; }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) { long long i = base + (long long)u * blockDim.x; if (i < slice16) d[off + i] = v[u]; }
    }
    if (FLAG) {
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence_system();
        *(volatile unsigned long long*)(flags + blockIdx.x) = k + 1;
      }
    }
  }
}
extern "C" __global__ void put_raw(const uint4* s, uint4* d, unsigned long long* f, long long n, int k) { put<0>(s, d, f, n, k); }
extern "C" __global__ void put_flag(const uint4* s, uint4* d, unsigned long long* f, long long n, int k) { put<1>(s, d, f, n, k); }
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ctas", default="1,2,4,8,12,16,20,24,32,48,66,132")
    ap.add_argument("--threads", type=int, default=480)
    ap.add_argument("--bytes-per-cta", type=int, default=32 << 20)
    ap.add_argument("--slice-bytes", type=int, default=1 << 20)
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    enforce_no_multicast()
    import cupy as cp

    if cp.cuda.runtime.getDeviceCount() < 2:
        sys.exit("need 2 GPUs")
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    maxc = max(int(x) for x in args.ctas.split(","))
    n_half = args.bytes_per_cta * maxc // 2
    mods, bufs = [], []
    for dev in (0, 1):
        with cp.cuda.Device(dev):
            cp.cuda.runtime.deviceEnablePeerAccess(1 - dev)
            mods.append(cp.RawModule(code=KERNELS, options=("-std=c++17",)))
            bufs.append({"src": cp.ones(n_half, dtype=cp.uint16), "dst": cp.zeros(n_half, dtype=cp.uint16),
                         "flags": cp.zeros(maxc, dtype=cp.uint64)})
    out = CsvOut(args.out, ["mode", "direction", "ctas", "bytes_per_cta", "median_us", "total_GBps", "gpu"])
    slice16, slices = args.slice_bytes // 16, args.bytes_per_cta // args.slice_bytes
    for mode in ("raw", "flag"):
        for direction in ("one", "both"):
            for ctas in [int(x) for x in args.ctas.split(",")]:
                senders = (0,) if direction == "one" else (0, 1)
                times = []
                for it in range(args.iters + 1):
                    ev = []
                    for dev in senders:  # GPU dev stores into GPU 1-dev
                        with cp.cuda.Device(dev):
                            k = mods[dev].get_function(f"put_{mode}")
                            s, e = cp.cuda.Event(), cp.cuda.Event()
                            s.record()
                            k((ctas,), (args.threads,), (bufs[dev]["src"], bufs[1 - dev]["dst"], bufs[1 - dev]["flags"],
                                                         cp.int64(slice16), cp.int32(slices)))
                            e.record()
                            ev.append((dev, s, e))
                    for dev, s, e in ev:
                        with cp.cuda.Device(dev):
                            e.synchronize()
                    if it:  # iteration 0: module load, clocks
                        times.append(max(cp.cuda.get_elapsed_time(s, e) for _, s, e in ev) * 1e3)
                med = statistics.median(times)
                total = len(senders) * ctas * args.bytes_per_cta / (med * 1e3)
                out.row(mode=mode, direction=direction, ctas=ctas, bytes_per_cta=args.bytes_per_cta,
                        median_us=round(med, 2), total_GBps=round(total, 1), gpu=gpu)
                print(f"{mode:4s} {direction:4s} ctas {ctas:3d}: {med:9.1f} us, {total:7.1f} GB/s "
                      f"({total / len(senders) / ctas:6.2f} per CTA)", flush=True)
    out.close()


if __name__ == "__main__":
    main()
