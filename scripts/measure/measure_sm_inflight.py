#!/usr/bin/env python3
"""What one SM's streaming loads deliver: CTAs per SM, the shared-memory carveout, and a kernel
that ran on the SM before.

The concurrent measurement (measure_concurrent.py) found streaming kernels that start on SMs a
cuBLAS GEMM has just left running 2-3x slower than alone, even one CTA per SM. A GPU's loads in
flight are staged in the SM's L1, whose size is what the shared-memory carveout leaves (H100:
256 KB per SM less the carveout), and the GEMM's CTAs take 213 KB of shared memory. This isolates
the three candidates on a few SMs, far from HBM's limit:

  * CTAs per SM: `--sms` SMs (a driver-API green context, no SM co-scheduling: exactly that many
    SMs), `k` streaming CTAs per SM (grid = sms x k; the registers fit 2 reduce / 4 copy CTAs);
  * the carveout: each streaming CTA asks for `smem_kb` KB of dynamic shared memory it never uses,
    so the SM's L1 gets 256 KB less the carveout that k x smem_kb needs;
  * the SM's previous kernel (`before`): none (an idle gap), or a filler CTA per SM holding 227 KB
    of shared memory for ~20 us, launched just before on the same stream (the streaming kernel
    starts on SMs the filler's CTAs have just left, as after a GEMM);
  * on the whole GPU (the primary context): the streaming kernel after a cuBLAS GEMM
    (llama_7b.fc2.fwd) or a filler on the same stream, against after an idle gap;
  * launched on a second stream while another kernel holds every SM (as `gemm_first` of
    measure_concurrent.py): the GEMM, or a filler that frees the SMs one after another over ~66 us
    (227 KB of shared memory per SM; the same in 2-CTA clusters; or 2 x 1024 threads and no shared
    memory) or all at once; per-CTA times grouped by how many streaming CTAs shared the SM, and
    when the streaming CTAs started against the filler's ends;
  * the carveout each kernel asks for (cudaFuncAttributePreferredSharedMemoryCarveout: none, 0 =
    the most L1, 100 = the most shared memory), with the GEMM or a filler as the occupant.

The streaming kernel is measure_concurrent.py's (512 threads, 16 B per access, 4 accesses per
thread per round: `copy` loads and stores one vector at a time as nvcc interleaves it, `reduce`
issues its 8 loads first); each CTA stamps %smid and %globaltimer at its start and end. Time: last
CTA end - first CTA start, median over repetitions. GB/s per SM: output bytes of the SM's CTAs
over that time.

CSV: sms,kind,ctas_per_sm,ctas,smem_kb,before,bytes_per_cta,us,gbps_per_sm,gbps_per_cta,
     max_ctas_on_an_sm,distinct_sms,reps,gpu,notes
  before: none | filler | gemm (ran just before, same stream) | concurrent_<occupant> (rows of
  per-CTA times: ctas_per_sm = streaming CTAs on that CTA's SM; notes say how many CTAs and the
  carveout preferences)

Usage (device, one GPU): python3 scripts/measure/measure_sm_inflight.py --out $OUT/h100_sm_inflight.csv
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

from measure_concurrent import KERNELS as STREAM_KERNELS, THREADS  # noqa: E402
from measure_kernels import DriverGreenContext  # noqa: E402

FILLER_SMEM = 227 * 1024  # the most one block may ask for on sm_90
FILLER_CYCLES = 40_000    # ~20 us at 1.98 GHz
POOL_BYTES = 1 << 30      # sources rotate over 1 GiB, >> the 50 MB L2
COLUMNS = ["sms", "kind", "ctas_per_sm", "ctas", "smem_kb", "before", "bytes_per_cta", "us", "gbps_per_sm",
           "gbps_per_cta", "max_ctas_on_an_sm", "distinct_sms", "reps", "gpu", "notes"]

# measure_concurrent.py's streaming kernels (stream_copy, stream_reduce; its helpers smid() and
# gtimer()) and the fillers.
KERNELS = STREAM_KERNELS + r"""
// Holds its SM for `cycles` + `per_sm` x its SM id (SMs freed one after another; the CTAs of one
// SM end together) and whatever dynamic shared memory it was launched with; stamps its end.
__device__ void hold(long long cycles, long long per_sm, int smem_ints, unsigned long long* sink) {
  extern __shared__ int s[];
  if (threadIdx.x < smem_ints) s[threadIdx.x] = threadIdx.x;
  const long long n = cycles + per_sm * smid();
  long long t0 = clock64();
  while (clock64() - t0 < n) {}
  __syncthreads();
  if (threadIdx.x == 0) sink[blockIdx.x] = (smem_ints > 0 && s[0] < 0) ? 0 : gtimer();
}
extern "C" __global__ void filler(long long cycles, long long per_sm, int smem_ints, unsigned long long* sink) {
  hold(cycles, per_sm, smem_ints, sink); }
// The same in 2-CTA clusters (the cuBLAS GEMMs here run in 2-CTA clusters).
extern "C" __global__ void __cluster_dims__(2, 1, 1) filler_cluster(long long cycles, long long per_sm, int smem_ints,
                                                                    unsigned long long* sink) {
  hold(cycles, per_sm, smem_ints, sink); }
"""


def log(*a):
    print(*a, flush=True)


class Kernels:
    """The module loaded in the context current at construction (green or primary)."""

    def __init__(self, cp, tag: str):
        self.cp = cp
        code = f"// {tag}: a source of its own, so the module loads in the current context\n" + KERNELS
        kernel = lambda name: cp.RawKernel(code, name, options=("-std=c++17",))
        self.fn = {k: kernel("stream_" + k) for k in ("copy", "reduce")}
        self.filler = kernel("filler")
        self.filler_cluster = kernel("filler_cluster")
        for f in (self.filler, self.filler_cluster, *self.fn.values()):
            f.max_dynamic_shared_size_bytes = FILLER_SMEM
        self.sink = cp.zeros(1024, dtype=cp.uint64)  # the fillers' CTAs' end times (globaltimer)


def one_case(cp, ker: Kernels, stream, pool, kind, ctas, smem_kb, before, bytes_per_cta, reps, sms, gemm=None):
    """Median span (us) of `reps` launches and the placement of the last one; `before` runs
    on the same stream right ahead of each launch (a filler CTA on each of `sms` SMs, or `gemm`)."""
    n16 = bytes_per_cta // 16
    out = cp.empty(ctas * n16 * 2, dtype=cp.uint64)
    stamps = cp.zeros(3 * ctas, dtype=cp.uint64)
    window = ctas * bytes_per_cta
    nwin = max(2, POOL_BYTES // window - 1)
    spans = []
    with cp.cuda.ExternalStream(stream.cuda_stream):
        for r in range(reps + 1):  # the first is a warm-up
            cp.cuda.get_current_stream().synchronize()
            time.sleep(2e-4)
            a = pool[(r % nwin) * window // 8:]
            b = pool[((r + 1) % nwin) * window // 8:]
            if before == "filler":
                ker.filler((sms,), (384,), (cp.int64(FILLER_CYCLES), cp.int64(0), cp.int32(384), ker.sink),
                           shared_mem=FILLER_SMEM)
            elif before == "gemm":
                with torch.cuda.stream(stream):
                    gemm()
            ker.fn[kind]((ctas,), (THREADS,), (a, b, out, cp.int64(n16), stamps), shared_mem=smem_kb * 1024)
            cp.cuda.get_current_stream().synchronize()
            s = stamps.get().reshape(-1, 3).astype("int64")
            if r:
                spans.append((s[:, 2].max() - s[:, 1].min()) / 1e3)
    sms = s[:, 0].tolist()
    per_sm = max(sms.count(x) for x in set(sms))
    return median(spans), per_sm, len(set(sms))


def concurrent_case(cp, ker: Kernels, pool, kind, ctas, occupant, bytes_per_cta, reps, full, gemm, stagger=1000):
    """The streaming kernel launched on a second stream while `occupant` holds every SM: a
    filler of 227 KB of shared memory per SM (`filler_smem`), one of 2 x 1024 threads and no
    shared memory per SM (`filler_threads`; both free the SMs one after another over ~66 us), or
    the GEMM. Its CTAs start on the SMs as they free. Returns {CTAs on the SM: [per-CTA us]} and
    when the streaming CTAs started against the filler's ends (medians)."""
    n16 = bytes_per_cta // 16
    out = cp.empty(ctas * n16 * 2, dtype=cp.uint64)
    stamps = cp.zeros(3 * ctas, dtype=cp.uint64)
    window = ctas * bytes_per_cta
    nwin = max(2, POOL_BYTES // window - 1)
    s_occ, s_str = torch.cuda.Stream(), torch.cuda.Stream()
    groups: dict[int, list[float]] = {}
    lags: list[tuple[float, float, float]] = []
    for r in range(reps + 1):
        torch.cuda.synchronize()
        time.sleep(2e-4)
        with cp.cuda.ExternalStream(s_occ.cuda_stream):
            if occupant == "filler_smem":
                ker.filler((full,), (384,), (cp.int64(FILLER_CYCLES), cp.int64(stagger), cp.int32(384), ker.sink), shared_mem=FILLER_SMEM)
            elif occupant == "filler_cluster":
                ker.filler_cluster((full,), (384,), (cp.int64(FILLER_CYCLES), cp.int64(stagger), cp.int32(384), ker.sink),
                                   shared_mem=FILLER_SMEM)
            elif occupant == "filler_threads":
                ker.filler((2 * full,), (1024,), (cp.int64(FILLER_CYCLES), cp.int64(stagger), cp.int32(0), ker.sink), shared_mem=0)
            else:
                with torch.cuda.stream(s_occ):
                    gemm()
        a = pool[(r % nwin) * window // 8:]
        b = pool[((r + 1) % nwin) * window // 8:]
        with cp.cuda.ExternalStream(s_str.cuda_stream):
            ker.fn[kind]((ctas,), (THREADS,), (a, b, out, cp.int64(n16), stamps))
        torch.cuda.synchronize()
        st = stamps.get().reshape(-1, 3).astype("int64")
        if r and occupant != "gemm":  # when the streaming CTAs started against the filler's ends
            nf = 2 * full if occupant == "filler_threads" else full
            ends, starts = ker.sink[:nf].get().astype("int64"), st[:, 1]
            lags.append(((starts.min() - ends.min()) / 1e3, (starts.max() - ends.max()) / 1e3,
                         (ends.max() - ends.min()) / 1e3))
        if r:
            sms = st[:, 0].tolist()
            for sm, t0, t1 in st:
                groups.setdefault(sms.count(sm), []).append((t1 - t0) / 1e3)
    lag = ("" if not lags else "first streaming CTA start - first filler end %.1f us, last start - last end "
           "%.1f us, filler ends spread %.1f us" % tuple(median([x[i] for x in lags]) for i in range(3)))
    return groups, lag


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", type=int, default=4, help="SMs of the green context")
    ap.add_argument("--mib-per-cta", type=int, default=8, help="output MiB per streaming CTA")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    import cupy as cp

    gpu = torch.cuda.get_device_name()
    full = torch.cuda.get_device_properties(0).multi_processor_count
    log(f"{gpu}, torch {torch.__version__}, cupy {cp.__version__}, SMs {full}")
    out = CsvOut(args.out, COLUMNS)
    bpc = args.mib_per_cta << 20

    def record(sms, kind, k, ctas, smem_kb, before, us, per_sm, distinct, notes=""):
        gbps_cta = bpc / (us * 1e3)
        row = dict(sms=sms, kind=kind, ctas_per_sm=k, ctas=ctas, smem_kb=smem_kb, before=before, bytes_per_cta=bpc,
                   us=round(us, 2), gbps_per_sm=round(gbps_cta * per_sm, 2), gbps_per_cta=round(gbps_cta, 2),
                   max_ctas_on_an_sm=per_sm, distinct_sms=distinct, reps=args.reps, gpu=gpu, notes=notes)
        out.row(**row)
        log(f"sms {sms:3d} {kind:6s} k {k} ctas {ctas:3d} smem {smem_kb:3d} KB before {before:6s}: {us:8.1f} us, "
            f"{row['gbps_per_cta']:6.1f} GB/s per CTA, {row['gbps_per_sm']:6.1f} per SM (max {per_sm} on an SM, "
            f"{distinct} SMs) {notes}")

    # 1. A green context of --sms SMs: CTAs per SM x carveout x previous kernel.
    g = DriverGreenContext(args.sms, torch.cuda.current_device())
    g.set_context()
    try:
        ker = Kernels(cp, "green")
        pool = cp.empty(POOL_BYTES // 8, dtype=cp.uint64)
        pool[:] = 0x3F803F803F803F80  # bf16 1.0: finite sums
        stream = torch.cuda.current_stream()
        for kind, ks in (("reduce", (1, 2)), ("copy", (1, 2, 4))):
            for k in ks:
                ctas = g.sm_count * k
                for total_kb in (0, 96, 200):
                    smem = -(-total_kb // k) if total_kb else 0
                    us, per_sm, distinct = one_case(cp, ker, stream, pool, kind, ctas, smem, "none", bpc, args.reps, g.sm_count)
                    record(g.sm_count, kind, k, ctas, smem, "none", us, per_sm, distinct)
                us, per_sm, distinct = one_case(cp, ker, stream, pool, kind, ctas, 0, "filler", bpc, args.reps, g.sm_count)
                record(g.sm_count, kind, k, ctas, 0, "filler", us, per_sm, distinct)
        del pool
        cp.get_default_memory_pool().free_all_blocks()
    finally:
        g.pop_context()

    # 2. The whole GPU: after a cuBLAS GEMM (llama_7b.fc2.fwd, 213 KB of shared memory per CTA).
    ker = Kernels(cp, "primary")
    pool = cp.empty(POOL_BYTES // 8, dtype=cp.uint64)
    pool[:] = 0x3F803F803F803F80
    a = torch.randn(9216, 1408, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 1408, device="cuda", dtype=torch.bfloat16).t()
    c = torch.empty(9216, 4096, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    for kind in ("reduce", "copy"):
        for ctas in (8, 32):
            for before in ("none", "gemm", "filler"):
                us, per_sm, distinct = one_case(cp, ker, stream, pool, kind, ctas, 0, before, bpc, args.reps, full,
                                                gemm=lambda: torch.matmul(a, b, out=c))
                record(full, kind, 1, ctas, 0, before, us, per_sm, distinct)

    # 3. Launched while another kernel holds every SM (as `gemm_first` in measure_concurrent.py):
    #    per-CTA time by the number of streaming CTAs that shared its SM.
    for kind in ("reduce", "copy"):
        for ctas in (8, 32):
            for occupant in ("filler_smem", "filler_threads", "gemm"):
                groups, lag = concurrent_case(cp, ker, pool, kind, ctas, occupant, bpc, args.reps, full,
                                         gemm=lambda: torch.matmul(a, b, out=c))
                for k, times in sorted(groups.items()):
                    record(full, kind, k, ctas, 0, "concurrent_" + occupant, median(times), k, "",
                           notes=f"per-CTA time, median of {len(times)} CTAs; {lag}")

    # 4. Which part of the occupant does it: the carveout each kernel asks for (-1: none).
    for kind in ("reduce",):
        for occupant, occ_pref, str_pref in (("gemm", -1, 0), ("gemm", -1, 100), ("filler_smem", 100, -1),
                                             ("filler_smem", 100, 0),
                                             ("filler_cluster", -1, -1), ("filler_cluster", -1, 0)):
            ker.filler.preferred_shared_memory_carveout = occ_pref
            ker.fn[kind].preferred_shared_memory_carveout = str_pref
            groups, lag = concurrent_case(cp, ker, pool, kind, 32, occupant, bpc, args.reps, full,
                                     gemm=lambda: torch.matmul(a, b, out=c))
            for k, times in sorted(groups.items()):
                record(full, kind, k, 32, 0, f"concurrent_{occupant}", median(times), k, "",
                       notes=f"per-CTA time, median of {len(times)} CTAs; carveout preference "
                             f"occupant {occ_pref} stream {str_pref}; {lag}")
        ker.filler.preferred_shared_memory_carveout = -1
        ker.fn[kind].preferred_shared_memory_carveout = -1

    # 5. The fillers again, every SM freed at once (as a GEMM's last wave leaves them).
    for occupant in ("filler_smem", "filler_cluster", "filler_threads"):
        groups, lag = concurrent_case(cp, ker, pool, "reduce", 32, occupant, bpc, args.reps, full, gemm=None, stagger=0)
        for k, times in sorted(groups.items()):
            record(full, "reduce", k, 32, 0, f"concurrent_{occupant}", median(times), k, "",
                   notes=f"per-CTA time, median of {len(times)} CTAs; SMs freed at once; {lag}")
    out.close()


if __name__ == "__main__":
    main()
