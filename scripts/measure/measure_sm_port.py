#!/usr/bin/env python3
"""One SM's port to L2, one direction at a time: loads alone, stores alone, and both.

measure_sm_inflight.py found an H100 SM moving copies (a load, then its store, per thread) at
49 GB/s with four CTAs, while a reduce (two loads per store) reaches 115-118 GB/s of loads and
stores together with one CTA or two. The engine's SM port (docs/VALIDATION.md, "One SM's port")
is one server of 64 B per clock for both directions. This separates the directions on a
driver-API green context of `--sms` SMs (exactly that many, no co-scheduling), `k` CTAs of
`--threads` threads (512 by default) per SM, each CTA walking its own contiguous range of 16 B
vectors:

  * `load`: `unroll` loads per thread in flight per round, folded into a register (one 16 B
    store per thread at the end, so nothing is dead code): the read direction and its latency;
  * `store`: `unroll` stores of a register per thread per round: the write direction;
  * `copy`: `unroll` loads, then their `unroll` stores (a compiler barrier keeps the loads ahead
    of the stores; the next round's loads issue behind them): both directions, as NCCL's copy
    rounds;
  * `mix` (with `--mix`): CTAs of `load` and of `store` side by side, CTA c a loader when
    floor(c / sms) is even (CTAs are placed one per SM before a second goes on any, so each SM
    gets both kinds from 2 CTAs per SM on): whether loads' requests and stores share a path.

Sources rotate over 1 GiB (>> the 50 MB L2), so loads come from HBM. Each CTA stamps %smid and
%globaltimer at its start and end; time = last CTA end - first CTA start, median of `--reps`.

CSV: sms,kind,unroll,ctas_per_sm,ctas,bytes_per_cta,us,gbps_per_sm,gbps_per_cta,distinct_sms,
     max_ctas_on_an_sm,reps,gpu,...,threads   (GB/s: bytes loaded for load and copy, stored for store, both
     kinds' bytes for mix), and for mix the loaders' and storers' own rates (load_gbps_per_sm,
     store_gbps_per_sm: each kind's bytes over its own CTAs' span)

Usage (device, one GPU): python3 scripts/measure/measure_sm_port.py --out $OUT/h100_sm_port.csv
  [--threads 128,256,512 --unrolls 1,2,4,8,16 --ctas-per-sm 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast, median  # noqa: E402

enforce_no_multicast()

import torch  # noqa: E402

from measure_kernels import DriverGreenContext  # noqa: E402

POOL_BYTES = 1 << 30
COLUMNS = ["sms", "kind", "unroll", "ctas_per_sm", "ctas", "bytes_per_cta", "us", "gbps_per_sm", "gbps_per_cta",
           "distinct_sms", "max_ctas_on_an_sm", "reps", "gpu", "load_gbps_per_sm", "store_gbps_per_sm", "note", "threads"]

KERNELS = r"""
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
// KIND 0 load, 1 store, 2 copy. CTA c walks [c*n16, (c+1)*n16) of 16 B vectors in rounds of
// blockDim.x x U; stamps[c] = {smid, start, end}.
template <int KIND, int U>
__device__ void walk(const uint4* __restrict__ a, uint4* __restrict__ d, long long n16, unsigned long long* st) {
  if (threadIdx.x == 0) { st[3 * blockIdx.x] = smid(); st[3 * blockIdx.x + 1] = gtimer(); }
  const long long o = (long long)blockIdx.x * n16;
  uint4 acc = make_uint4(threadIdx.x, 0, 0, 0);
  for (long long base = threadIdx.x; base < n16; base += (long long)blockDim.x * U) {
    uint4 v[U];
    if (KIND != 1) {
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = a[o + base + (long long)u * blockDim.x];
    }
    // keeps the round's loads ahead of its stores (nvcc otherwise interleaves load, store, load,
    // store, as it did measure_concurrent.py's copy, leaving one load in flight per thread)
    asm volatile("" ::: "memory");
    if (KIND == 0) {
#pragma unroll
      for (int u = 0; u < U; ++u) { acc.x ^= v[u].x; acc.y ^= v[u].y; acc.z ^= v[u].z; acc.w ^= v[u].w; }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) d[o + base + (long long)u * blockDim.x] = KIND == 1 ? acc : v[u];
    }
  }
  if (KIND == 0) d[o + threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) st[3 * blockIdx.x + 2] = gtimer();
}
#define K(NAME, KIND, U) extern "C" __global__ void NAME(const uint4* a, uint4* d, long long n16, \
    unsigned long long* st) { walk<KIND, U>(a, d, n16, st); }
K(load_1, 0, 1) K(load_2, 0, 2) K(load_4, 0, 4) K(load_8, 0, 8)
K(store_1, 1, 1) K(store_2, 1, 2) K(store_4, 1, 4) K(store_8, 1, 8)
K(copy_1, 2, 1) K(copy_2, 2, 2) K(copy_4, 2, 4) K(copy_8, 2, 8)
K(load_16, 0, 16) K(store_16, 1, 16) K(copy_16, 2, 16)
// Loaders and storers side by side: CTA c loads when (c / sms) is even, else stores.
template <int U>
__device__ void mix(const uint4* a, uint4* d, long long n16, unsigned long long* st, int sms) {
  if ((blockIdx.x / sms) % 2 == 0) walk<0, U>(a, d, n16, st); else walk<1, U>(a, d, n16, st);
}
#define M(NAME, U) extern "C" __global__ void NAME(const uint4* a, uint4* d, long long n16, \
    unsigned long long* st, int sms) { mix<U>(a, d, n16, st, sms); }
M(mix_4, 4) M(mix_8, 8)
"""


def log(*a):
    print(*a, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", type=int, default=4, help="SMs of the green context")
    ap.add_argument("--mib-per-cta", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--unrolls", default="1,2,4,8")
    ap.add_argument("--ctas-per-sm", default="1,2,4")
    ap.add_argument("--kinds", default="load,store,copy", help="of load, store, copy, mix")
    ap.add_argument("--threads", default="512", help="threads per CTA, comma-separated")
    args = ap.parse_args()
    import cupy as cp

    gpu = torch.cuda.get_device_name()
    log(f"{gpu}, torch {torch.__version__}, cupy {cp.__version__}")
    out = CsvOut(args.out, COLUMNS)
    bpc = args.mib_per_cta << 20
    n16 = bpc // 16
    g = DriverGreenContext(args.sms, torch.cuda.current_device())
    g.set_context()
    try:
        mod = cp.RawModule(code="// green\n" + KERNELS, options=("-std=c++17",))
        pool = cp.empty(POOL_BYTES // 8, dtype=cp.uint64)
        pool[:] = 0x3F803F803F803F80
        stream = torch.cuda.current_stream()
        for kind, threads in ((k, int(t)) for t in args.threads.split(",") for k in args.kinds.split(",")):
            for unroll in (int(x) for x in args.unrolls.split(",")):
                if kind == "mix" and unroll not in (4, 8):
                    continue
                fn = mod.get_function(f"{kind}_{unroll}")
                for k in (int(x) for x in args.ctas_per_sm.split(",")):
                    ctas = g.sm_count * k
                    dst = cp.empty(ctas * n16 * 2, dtype=cp.uint64)
                    stamps = cp.zeros(3 * ctas, dtype=cp.uint64)
                    window = ctas * bpc
                    nwin = max(2, POOL_BYTES // window - 1)
                    spans, kind_spans = [], []
                    with cp.cuda.ExternalStream(stream.cuda_stream):
                        for r in range(args.reps + 1):  # the first is a warm-up
                            cp.cuda.get_current_stream().synchronize()
                            time.sleep(2e-4)
                            src = pool[(r % nwin) * window // 8:]
                            extra = (cp.int32(g.sm_count),) if kind == "mix" else ()
                            fn((ctas,), (threads,), (src, dst, cp.int64(n16), stamps) + extra)
                            cp.cuda.get_current_stream().synchronize()
                            s = stamps.get().reshape(-1, 3).astype("int64")
                            if r:
                                spans.append((s[:, 2].max() - s[:, 1].min()) / 1e3)
                                if kind == "mix":  # each kind's own span: loaders are CTAs with (c / sms) even
                                    role = (cp.arange(ctas).get() // g.sm_count) % 2
                                    kind_spans.append([(s[role == x, 2].max() - s[role == x, 1].min()) / 1e3
                                                       for x in (0, 1)])
                    sms = s[:, 0].tolist()
                    per_sm = max(sms.count(x) for x in set(sms))
                    us = median(spans)
                    gbps_cta = bpc / (us * 1e3)
                    by_kind = dict(load_gbps_per_sm="", store_gbps_per_sm="")
                    if kind == "mix" and k >= 2:  # per SM: its loaders' (storers') bytes over their span
                        for x, name in ((0, "load_gbps_per_sm"), (1, "store_gbps_per_sm")):
                            span = median([ks[x] for ks in kind_spans])
                            by_kind[name] = round(bpc * (k // 2) / (span * 1e3), 2)
                        roles = (cp.arange(ctas).get() // g.sm_count) % 2
                        even = all(sum(1 for c in range(ctas) if sms[c] == sm and roles[c] == 0) == k // 2
                                   for sm in set(sms))
                        by_kind["note"] = "each SM half loaders" if even else "SMs not split evenly"
                    out.row(sms=g.sm_count, kind=kind, unroll=unroll, ctas_per_sm=k, ctas=ctas, bytes_per_cta=bpc,
                            us=round(us, 2), gbps_per_sm=round(gbps_cta * per_sm, 2), gbps_per_cta=round(gbps_cta, 2),
                            distinct_sms=len(set(sms)), max_ctas_on_an_sm=per_sm, reps=args.reps, gpu=gpu,
                            **{c: by_kind.get(c, "") for c in ("load_gbps_per_sm", "store_gbps_per_sm", "note")},
                            threads=threads)
                    log(f"{kind:5s} threads {threads} unroll {unroll} k {k}: {us:8.1f} us, {gbps_cta:6.1f} GB/s per CTA, "
                        f"{gbps_cta * per_sm:6.1f} per SM ({len(set(sms))} SMs, max {per_sm} per SM) {by_kind}")
                    del dst, stamps
        del pool
        cp.get_default_memory_pool().free_all_blocks()
    finally:
        g.pop_context()
    out.close()


if __name__ == "__main__":
    main()
