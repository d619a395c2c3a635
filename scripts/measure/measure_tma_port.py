#!/usr/bin/env python3
"""One SM's port to L2 as the tensor memory accelerator (TMA) uses it: bulk loads, bulk stores.

measure_sm_port.py found an H100 SM storing 64 GB/s (32 B per clock) from registers and loading
up to 229 GB/s (116 B per clock), the two directions one resource. cuBLAS's GEMMs move their
tiles with the TMA instead: `cp.async.bulk` loads from global into shared memory (completing on
an mbarrier) and bulk stores from shared memory (completing per bulk group). This measures
whether the TMA's transfers see the same two rates, on a driver-API green context of `--sms`
SMs (no co-scheduling), `k` CTAs of one warp per SM, one thread of each issuing, as a GEMM's
producer warp does, `stages` chunks of `--chunk-kib` KiB in flight:

  * `tma_load`: bulk loads into a ring of `stages` shared-memory buffers, each waited for on its
    mbarrier before its buffer is refilled;
  * `tma_store`: bulk stores from the ring, `cp.async.bulk.wait_group.read stages-1` before a
    buffer is reused (the bytes have left shared memory), `wait_group 0` at the end (written);
  * `tma_copy`: each chunk loaded, then stored from the same buffer, which is refilled once its
    store has read it: both directions, as a GEMM's mainloop beside its epilogue.

Sources rotate over 1 GiB (>> the 50 MB L2), so loads come from HBM. Each CTA stamps %smid and
%globaltimer at its start and end; time = last CTA end - first CTA start, median of `--reps`.

CSV: sms,kind,stages,chunk_bytes,ctas_per_sm,ctas,bytes_per_cta,us,gbps_per_sm,gbps_per_cta,
     distinct_sms,max_ctas_on_an_sm,reps,gpu   (GB/s: bytes loaded for tma_load and tma_copy,
     stored for tma_store)

Usage (device, one GPU): python3 scripts/measure/measure_tma_port.py --out $OUT/h100_tma_port.csv
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast, median, per_sm, stamped_spans  # noqa: E402

enforce_no_multicast()

import torch  # noqa: E402

from measure_kernels import DriverGreenContext  # noqa: E402

POOL_BYTES = 1 << 30
SMEM_PER_SM = 200 << 10  # what one SM's CTAs may take together (of 228 KiB)
COLUMNS = ["sms", "kind", "stages", "chunk_bytes", "ctas_per_sm", "ctas", "bytes_per_cta", "us", "gbps_per_sm",
           "gbps_per_cta", "distinct_sms", "max_ctas_on_an_sm", "reps", "gpu"]

KERNELS = r"""
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(unsigned long long* b) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(b)) : "memory"); }
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* b) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(b)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory"); }
__device__ __forceinline__ void bar_wait(unsigned long long* b, unsigned phase) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               " @!p bra W;\n}" :: "r"(sa(b)), "r"(phase) : "memory"); }
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"(sa(src)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// KIND 0 load, 1 store, 2 copy; S stages of `chunk` bytes; CTA c walks its own n bytes.
template <int KIND, int S>
__device__ void walk(const char* a, char* d, long long n, unsigned chunk, unsigned long long* st) {
  extern __shared__ __align__(128) char ring[];
  __shared__ __align__(8) unsigned long long bars[S];
  if (threadIdx.x != 0) return;
  st[3 * blockIdx.x] = smid(); st[3 * blockIdx.x + 1] = gtimer();
  const long long o = (long long)blockIdx.x * n, chunks = n / chunk;
  for (int s = 0; s < S; ++s) bar_init(&bars[s]);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  if (KIND == 1) {
    for (long long i = 0; i < chunks; ++i) {
      if (i >= S) wait_read<S - 1>();
      bulk_store(d + o + i * chunk, ring + (i % S) * chunk, chunk);
    }
    wait_all();
  } else {
    for (long long i = 0; i < S && i < chunks; ++i) bulk_load(ring + i * chunk, a + o + i * chunk, chunk, &bars[i]);
    for (long long i = 0; i < chunks; ++i) {
      const int s = (int)(i % S);
      bar_wait(&bars[s], (unsigned)((i / S) & 1));
      if (KIND == 2) {
        bulk_store(d + o + i * chunk, ring + s * chunk, chunk);
        wait_read<0>();  // the buffer has been read out before it is refilled
      }
      if (i + S < chunks) bulk_load(ring + s * chunk, a + o + (i + S) * chunk, chunk, &bars[s]);
    }
    if (KIND == 2) wait_all();
  }
  st[3 * blockIdx.x + 2] = gtimer();
}
#define K(NAME, KIND, S) extern "C" __global__ void NAME(const char* a, char* d, long long n, unsigned chunk, \
    unsigned long long* st) { walk<KIND, S>(a, d, n, chunk, st); }
K(tma_load_1, 0, 1) K(tma_load_2, 0, 2) K(tma_load_4, 0, 4) K(tma_load_8, 0, 8)
K(tma_store_1, 1, 1) K(tma_store_2, 1, 2) K(tma_store_4, 1, 4) K(tma_store_8, 1, 8)
K(tma_copy_1, 2, 1) K(tma_copy_2, 2, 2) K(tma_copy_4, 2, 4) K(tma_copy_8, 2, 8)
"""


def log(*a):
    print(*a, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", type=int, default=4, help="SMs of the green context")
    ap.add_argument("--mib-per-cta", type=int, default=4)
    ap.add_argument("--chunk-kib", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--stages", default="1,2,4,8")
    ap.add_argument("--ctas-per-sm", default="1,2,4")
    ap.add_argument("--kinds", default="tma_load,tma_store,tma_copy")
    args = ap.parse_args()
    import cupy as cp

    gpu = torch.cuda.get_device_name()
    log(f"{gpu}, torch {torch.__version__}, cupy {cp.__version__}")
    out = CsvOut(args.out, COLUMNS)
    bpc, chunk = args.mib_per_cta << 20, args.chunk_kib << 10
    g = DriverGreenContext(args.sms, torch.cuda.current_device())
    g.set_context()
    try:
        mod = cp.RawModule(code="// green\n" + KERNELS, options=("-std=c++17",))
        pool = cp.empty(POOL_BYTES // 8, dtype=cp.uint64)
        pool[:] = 0x3F803F803F803F80
        stream = torch.cuda.current_stream()
        for kind in args.kinds.split(","):
            for stages in (int(x) for x in args.stages.split(",")):
                fn = mod.get_function(f"{kind}_{stages}")
                smem = stages * chunk
                fn.max_dynamic_shared_size_bytes = smem
                for k in (int(x) for x in args.ctas_per_sm.split(",")):
                    if k * smem > SMEM_PER_SM:
                        continue
                    ctas = g.sm_count * k
                    dst = cp.empty(ctas * bpc // 8, dtype=cp.uint64)
                    stamps = cp.zeros(3 * ctas, dtype=cp.uint64)
                    window = ctas * bpc
                    nwin = max(2, POOL_BYTES // window - 1)
                    with cp.cuda.ExternalStream(stream.cuda_stream):
                        def launch(r):
                            src = pool[(r % nwin) * window // 8:]
                            fn((ctas,), (32,), (src, dst, cp.int64(bpc), cp.uint32(chunk), stamps), shared_mem=smem)

                        spans, s = stamped_spans(launch, stamps, args.reps, cp.cuda.get_current_stream().synchronize)
                    distinct, most = per_sm(s)
                    us = median(spans)
                    gbps_cta = bpc / (us * 1e3)
                    out.row(sms=g.sm_count, kind=kind, stages=stages, chunk_bytes=chunk, ctas_per_sm=k, ctas=ctas,
                            bytes_per_cta=bpc, us=round(us, 2), gbps_per_sm=round(gbps_cta * most, 2),
                            gbps_per_cta=round(gbps_cta, 2), distinct_sms=distinct, max_ctas_on_an_sm=most,
                            reps=args.reps, gpu=gpu)
                    log(f"{kind:9s} stages {stages} k {k}: {us:8.1f} us, {gbps_cta:6.1f} GB/s per CTA, "
                        f"{gbps_cta * most:6.1f} per SM ({distinct} SMs, max {most} per SM)")
                    del dst, stamps
        del pool
        cp.get_default_memory_pool().free_all_blocks()
    finally:
        g.pop_context()
    out.close()


if __name__ == "__main__":
    main()
