#!/usr/bin/env python3
"""HBM and L2 load latency of one SM, idle and while other SMs stream (a loaded-latency curve).

One thread on an SM of its own chases pointers (`ld.global.cg`, one 128 B line per hop, every
hop waiting for the previous one) while `bg_ctas` CTAs on the other SMs stream from HBM as an
NCCL channel does (512 threads, 4 x 16 B loads in flight per thread; `read`: loads only,
`copy`: the same loads and a store of each). The background runs from before the chase starts
until it ends, so its bytes over its time are the HBM traffic the chase saw.

Chases:
  hbm  each hop a line never touched before in a 512 MiB buffer (>> 50 MiB L2): 64 random lines
       of one 2 MiB page, then the next page (a TLB miss per 64 hops, not per hop)
  l2   random lines of a 4 MiB buffer read once before timing (L2 hits; over both L2 halves)

Every kernel takes 120 KB of shared memory, so no two share an SM: the chase's SM carries no
background traffic. The chase waits for every background CTA to start (with a 1 s timeout).

CSV: chase,bg_kind,bg_ctas,rep,hops,ns_per_hop,sm_clock_mhz,bg_bytes,bg_us,bg_GBps,gpu
  ns_per_hop  the chase's time per hop (globaltimer): its load-to-use latency
  bg_GBps     HBM bytes the background moved per second while it ran (reads + writes)

Usage (device, one GPU): python3 scripts/measure/measure_loaded_latency.py --out $OUT/h100_loaded_latency.csv
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, cuda_functions, enforce_no_multicast  # noqa: E402

# The chase, shared with measure_latency_clock.py: `segs` segments of `seg_hops` hops, each timed
# (this script runs one segment: out = {t0, t1, clk0, clk1, final pointer}).
CHASE = r"""
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// out[4s..4s+3] = {t0, t1, clk0, clk1} of segment s; out[4 * segs] = the final pointer.
extern "C" __global__ void chase(const unsigned long long* start, long long seg_hops, int segs, int nbg,
                                 volatile int* started, volatile int* done, unsigned long long* out) {
  extern __shared__ char smem[];
  if (threadIdx.x != 0) return;
  unsigned long long w0 = gtimer();
  while (*started < nbg && gtimer() - w0 < 1000000000ull) {}
  const unsigned long long* p = start;
  for (int s = 0; s < segs; ++s) {
    unsigned long long t0 = gtimer(), c0 = clock64();
    for (long long h = 0; h < seg_hops; ++h) p = (const unsigned long long*)__ldcg(p);
    unsigned long long t1 = gtimer(), c1 = clock64();
    out[4 * s] = t0; out[4 * s + 1] = t1; out[4 * s + 2] = c0; out[4 * s + 3] = c1;
  }
  *done = 1;
  __threadfence_system();
  out[4 * segs] = (unsigned long long)p;
  smem[0] = 0;
}

"""

KERNELS = CHASE + r"""
// CTA c streams its share of src (and dst when COPY) over and over until *done.
// stats[3c..3c+2] = {bytes, t_start, t_end}
template <bool COPY>
__device__ void stream(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n16,
                       volatile int* started, volatile int* done, unsigned long long* stats) {
  extern __shared__ char smem[];
  __shared__ int stop;
  const uint4* s = src + blockIdx.x * n16;
  uint4* d = dst + blockIdx.x * n16;
  if (threadIdx.x == 0) { stop = 0; stats[3 * blockIdx.x + 1] = gtimer(); atomicAdd((int*)started, 1); }
  __syncthreads();
  unsigned long long bytes = 0, w0 = gtimer();  // bytes: the CTA's, counted by every thread alike
  uint4 acc = make_uint4(0, 0, 0, 0);
  const long long step = (long long)blockDim.x * 4;
  while (!stop) {
    for (long long base = threadIdx.x; base + 3 * blockDim.x < n16; base += step) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = s[base + u * blockDim.x];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (COPY) d[base + u * blockDim.x] = v[u];
        else { acc.x ^= v[u].x; acc.y ^= v[u].y; acc.z ^= v[u].z; acc.w ^= v[u].w; }
      }
      bytes += step * 16;
      if (((base / step) & 15) == 15) {
        __syncthreads();
        if (threadIdx.x == 0 && (*done || gtimer() - w0 > 2000000000ull)) stop = 1;
        __syncthreads();
        if (stop) break;
      }
    }
  }
  if (threadIdx.x == 0) { stats[3 * blockIdx.x] = bytes; stats[3 * blockIdx.x + 2] = gtimer(); }
  if (!COPY && (acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) d[0] = acc;  // keeps the loads
  smem[threadIdx.x] = 0;
}
extern "C" __global__ void bg_read(const uint4* src, uint4* dst, long long n16, volatile int* started,
                                   volatile int* done, unsigned long long* stats) {
  stream<false>(src, dst, n16, started, done, stats); }
extern "C" __global__ void bg_copy(const uint4* src, uint4* dst, long long n16, volatile int* started,
                                   volatile int* done, unsigned long long* stats) {
  stream<true>(src, dst, n16, started, done, stats); }
"""

SMEM = 120 * 1024
LINE = 128
PAGE = 2 << 20


def build_chain(cp, np, nbytes: int, lines_per_page: int, rng, hops: int):
    """A buffer whose visited lines each hold the address of the next; returns (buffer, first)."""
    buf = cp.zeros(nbytes // 8, dtype=cp.uint64)
    base = buf.data.ptr
    per_page = PAGE // LINE
    pages = nbytes // PAGE
    order = []
    page = 0
    used = {}
    while len(order) < hops:
        pick = used.setdefault(page, rng.permutation(per_page))
        k = (len(order) // (lines_per_page * pages)) * lines_per_page
        order.extend(page * per_page + int(x) for x in pick[k:k + lines_per_page])
        page = (page + 1) % pages
    order = np.array(order[:hops], dtype=np.int64)
    nxt = np.roll(order, -1)
    host = np.zeros(nbytes // 8, dtype=np.uint64)
    host[order * (LINE // 8)] = (base + nxt * LINE).astype(np.uint64)
    buf.set(host)
    return buf, base + int(order[0]) * LINE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bg-ctas", default="0,1,2,4,8,16,24,32,48,64,96,131")
    ap.add_argument("--bg-kinds", default="read,copy")
    ap.add_argument("--hops", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    enforce_no_multicast()
    import cupy as cp
    import numpy as np

    fns, gpu, sms = cuda_functions(cp, KERNELS, ("chase", "bg_read", "bg_copy"), SMEM)
    rng = np.random.default_rng(1)
    chains = {"hbm": build_chain(cp, np, 512 << 20, 64, rng, args.hops),
              "l2": build_chain(cp, np, 4 << 20, 2048, rng, min(args.hops, (4 << 20) // LINE))}
    bg_bytes = 1 << 30
    src = cp.ones(bg_bytes // 2, dtype=cp.uint16)
    dst = cp.empty(bg_bytes // 2, dtype=cp.uint16)
    scratch = cp.empty(256 << 20, dtype=cp.uint8)  # written before every HBM chase: evicts its lines
    flags = cp.zeros(2, dtype=cp.int32)
    out = cp.zeros(5, dtype=cp.uint64)
    stats = cp.zeros(3 * sms, dtype=cp.uint64)
    s_chase, s_bg = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    csv = CsvOut(args.out, ["chase", "bg_kind", "bg_ctas", "rep", "hops", "ns_per_hop", "sm_clock_mhz",
                            "bg_bytes", "bg_us", "bg_GBps", "gpu"])
    started, done = flags[0:1], flags[1:2]
    summary = []
    for chase in ("l2", "hbm"):
        buf, first = chains[chase]
        hops = args.hops if chase == "hbm" else min(args.hops, (4 << 20) // LINE)
        if chase == "l2":  # one untimed pass puts the lines in L2
            fns["chase"]((1,), (32,), (cp.uint64(first), cp.int64(hops), cp.int32(1), cp.int32(0), started, done, out),
                         shared_mem=SMEM)
            cp.cuda.Device().synchronize()
        for kind in args.bg_kinds.split(","):
            for nbg in [int(x) for x in args.bg_ctas.split(",")]:
                if nbg > sms - 1 or (nbg == 0 and kind != args.bg_kinds.split(",")[0]) or (chase == "l2" and nbg):
                    continue
                lat = []
                for rep in range(args.reps):
                    flags.fill(0)
                    stats.fill(0)
                    if chase == "hbm":
                        scratch.fill(rep + 1)
                    cp.cuda.Device().synchronize()
                    with s_chase:
                        fns["chase"]((1,), (32,), (cp.uint64(first), cp.int64(hops), cp.int32(1), cp.int32(nbg), started, done,
                                                   out), shared_mem=SMEM)
                    if nbg:
                        n16 = bg_bytes // 16 // nbg // 2048 * 2048
                        with s_bg:
                            fns["bg_" + kind]((nbg,), (512,), (src, dst, cp.int64(n16), started, done, stats),
                                              shared_mem=SMEM)
                    cp.cuda.Device().synchronize()
                    o = out.get()
                    if int(o[4]) != first:  # the chain is a cycle of `hops` lines: back at the start
                        sys.exit(f"chase {chase}: ended at {int(o[4]):#x}, not at the start {first:#x}")
                    ns = (int(o[1]) - int(o[0])) / hops
                    mhz = (int(o[3]) - int(o[2])) / max(1, int(o[1]) - int(o[0])) * 1e3
                    st = stats.get().reshape(-1, 3)[:nbg]
                    moved = int(st[:, 0].sum()) * (2 if kind == "copy" else 1)
                    span = (int(st[:, 2].max()) - int(st[:, 1].min())) / 1e3 if nbg else 0.0
                    gbps = moved / (span * 1e3) if span else 0.0
                    lat.append(ns)
                    csv.row(chase=chase, bg_kind=kind if nbg else "none", bg_ctas=nbg, rep=rep, hops=hops,
                            ns_per_hop=round(ns, 2), sm_clock_mhz=round(mhz), bg_bytes=moved, bg_us=round(span, 1),
                            bg_GBps=round(gbps, 1), gpu=gpu)
                summary.append(f"{chase:3s} {kind if nbg else 'none':4s} {nbg:3d} CTAs: {statistics.median(lat):7.1f} ns"
                               f"/hop, background {gbps:7.1f} GB/s, {mhz:.0f} MHz")
                print(summary[-1], flush=True)
    csv.close()
    print("\n".join(summary))


if __name__ == "__main__":
    main()
