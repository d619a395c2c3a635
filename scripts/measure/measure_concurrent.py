#!/usr/bin/env python3
"""A cuBLAS GEMM and a memory-streaming kernel of a few CTAs on two streams of one GPU.

The SM-driven baselines of the CAIS paper run an NCCL-like communication kernel of 8-32 CTAs
beside a GEMM. This measures how the two contend on one H100: a bf16 GEMM (torch.matmul, the
paper's per-GPU layer shapes plus one small one) on one stream and, on another, a streaming
kernel (`copy`: read one buffer, write another, as NCCL's copy; `reduce`: read two, add bf16,
write one) of `ctas` CTAs x 512 threads, each CTA walking a contiguous range with 16 B vector
accesses, 4 loads in flight per thread (NCCL's Simple-protocol pattern, as measure_cta_copy.py).
Launch order: `stream_first` (the streaming kernel is launched first, then the GEMM) or
`gemm_first`. The streaming kernel's bytes are sized from its measured alone rate so that alone
it takes about 1.25x the GEMM: the two overlap for most of the GEMM when both can run.

Timing: each repetition starts from an idle GPU: synchronize, then both launches are queued
behind a ~0.5 ms spin on the first kernel's stream (the second stream waits for an event recorded
after the spin, then spins ~10 us more), so the second kernel follows the first by about 10 us
(start_gap_us, measured), not by the host's launch overhead; every kernel's start and end come from CUPTI (torch.profiler, concurrent-kernel records),
medians over the repetitions. The streaming kernel also stamps %globaltimer and %smid per CTA
(where its CTAs ran, how late the last one started). Alone times: the same procedure with one
kernel; for the GEMM also CUDA events around back-to-back launches (what h100_kernels.csv
holds). sm_clock_mhz: median NVML SM clock while the pair runs back to back for ~60 ms.
Inputs are random; stream sources rotate over > 4x L2 so their reads come from HBM.

CSV (one row per shape x kind x ctas x order), times in us:
  name,M,N,K,layout,stream_kind,ctas,threads,bytes   bytes = the output buffer's size
  order, gemm_us, stream_us, makespan_us              concurrent, CUPTI, medians
  start_gap_us      second kernel's start - first kernel's start (host launch gap)
  stream_late_us    last stream CTA's start - first's (globaltimer): CTAs that waited for SMs
  gemm_alone_us, gemm_alone_event_us, stream_alone_us, reps, sm_clock_mhz, stream_sms
  gemm_kernel, gemm_grid, gemm_block, gemm_regs, gemm_smem, stream_regs, gpu, torch_version

--reps-out PATH also writes every repetition of every pair (the medians above mix repetitions
whose streaming kernel started beside the GEMM with ones where it started after it): one row per
(shape, kind, ctas, order, rep), times in us, on the GPU's %globaltimer unless named CUPTI:
  gemm_us, stream_us, start_gap_us    CUPTI, as above, of this repetition
  gemm_end_us        a one-thread stamp kernel queued after the GEMM on its stream (its start:
                     the GEMM's end plus the dependent-launch latency), from the first stream CTA's start
  last_cta_start_us, last_cta_end_us   the streaming CTAs, same origin
  stream_sms         the SM of every streaming CTA, in CTA order

Usage (device, one GPU, no --cpu-smoke: the streaming kernel is CUDA C):
  python3 scripts/measure/measure_concurrent.py --out $OUT/h100_concurrent.csv
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast, median  # noqa: E402

enforce_no_multicast()
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*Profiler clears events.*")

import torch  # noqa: E402

# (name, M, N, K, layout): names and layouts as measure_kernels.py, so the recorded cuBLAS plans apply
SHAPES = [
    ("llama_7b.fc2.fwd", 9216, 4096, 1408, "NT"),
    ("llama_7b.fc1.fwd", 9216, 1408, 4096, "NT"),
    ("llama_7b.attn_out.fwd", 9216, 4096, 512, "NT"),
    ("mega_gpt_4b.fc2.fwd", 16384, 2048, 1024, "NT"),
    ("extra.sq2048", 2048, 2048, 2048, "NN"),
]
THREADS = 512
UNROLL = 4
GATE_CYCLES = 1_000_000  # spin before a timed pair: ~0.5 ms, longer than the host's two launches
DELAY_CYCLES = 20_000  # the second kernel's extra spin: ~10 us after the first kernel's start
STAMP_RING = 64  # stamp buffers per streaming kernel: at least --reps
L2_BYTES = 50 << 20
REP_COLUMNS = ["name", "stream_kind", "ctas", "order", "rep", "gemm_us", "stream_us", "start_gap_us", "gemm_end_us",
               "last_cta_start_us", "last_cta_end_us", "n_sms", "stream_sms"]
COLUMNS = ["name", "M", "N", "K", "layout", "stream_kind", "ctas", "threads", "bytes", "order", "gemm_us",
           "stream_us", "makespan_us", "start_gap_us", "stream_late_us", "gemm_alone_us", "gemm_alone_event_us",
           "stream_alone_us", "reps", "sm_clock_mhz", "stream_sms", "gemm_kernel", "gemm_grid", "gemm_block",
           "gemm_regs", "gemm_smem", "stream_regs", "gpu", "torch_version"]

KERNELS = r"""
#include <cuda_bf16.h>
#define UNROLL %d
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %%0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %%0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ uint4 add_bf16x8(uint4 x, uint4 y) {
  __nv_bfloat162* a = reinterpret_cast<__nv_bfloat162*>(&x);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = __hadd2(a[k], b[k]);
  return x;
}
// CTA c walks its contiguous range [c*n16, (c+1)*n16) of 16 B words; stamps[c] = {smid, t0, t1}
template <bool REDUCE>
__device__ void walk(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ d,
                     long long n16, unsigned long long* stamps) {
  if (threadIdx.x == 0) { stamps[3 * blockIdx.x] = smid(); stamps[3 * blockIdx.x + 1] = gtimer(); }
  const long long o = (long long)blockIdx.x * n16;
  for (long long base = threadIdx.x; base < n16; base += (long long)blockDim.x * UNROLL) {
    uint4 v[UNROLL], w[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      long long i = base + (long long)u * blockDim.x;
      if (i < n16) { v[u] = a[o + i]; if (REDUCE) w[u] = b[o + i]; }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      long long i = base + (long long)u * blockDim.x;
      if (i < n16) d[o + i] = REDUCE ? add_bf16x8(v[u], w[u]) : v[u];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) stamps[3 * blockIdx.x + 2] = gtimer();
}
extern "C" __global__ void stream_copy(const uint4* a, const uint4* b, uint4* d, long long n16, unsigned long long* st) {
  walk<false>(a, b, d, n16, st); }
// One thread stamps when it starts: queued after the GEMM on its stream, the GEMM's end.
extern "C" __global__ void stamp_after(unsigned long long* t) { *t = gtimer(); }
extern "C" __global__ void stream_reduce(const uint4* a, const uint4* b, uint4* d, long long n16, unsigned long long* st) {
  walk<true>(a, b, d, n16, st); }
""" % UNROLL


def log(*a):
    print(*a, flush=True)


class StreamKernel:
    """The streaming kernel of one kind with rotating source/destination windows."""

    def __init__(self, cp, mod, kind: str, ctas: int, nbytes: int):
        self.cp, self.kind, self.ctas = cp, kind, ctas
        self.fn = mod.get_function("stream_" + kind)
        per_cta = nbytes // ctas // (16 * THREADS * UNROLL) * (16 * THREADS * UNROLL)
        self.n16, self.bytes = per_cta // 16, per_cta * ctas
        self.rot = max(2, math.ceil(4 * L2_BYTES / self.bytes))  # windows: > 4x L2 of distinct sources
        elems = self.bytes // 2 * self.rot
        self.src = [torch.randn(elems, device="cuda", dtype=torch.bfloat16) for _ in range(2 if kind == "reduce" else 1)]
        self.dst = torch.empty(self.bytes // 2 * 2, device="cuda", dtype=torch.bfloat16)
        # one stamp buffer per launch in a ring, so that a profiled run's repetitions can all be read
        self.stamp_ring = [cp.zeros(3 * ctas, dtype=cp.uint64) for _ in range(STAMP_RING)]
        self.stamps = self.stamp_ring[0]
        self.i = 0

    def prepare(self):
        """Arguments of the next launch (outside the timed launch sequence: host time)."""
        cp, w = self.cp, self.bytes // 2
        r = self.i % self.rot
        self.stamps = self.stamp_ring[self.i % STAMP_RING]
        self.i += 1
        view = lambda t: cp.from_dlpack(t.view(torch.int16))  # pointers only; cupy needs no bf16
        self.args = (view(self.src[0][r * w:(r + 1) * w]),
                     view(self.src[-1][(r + 1) % self.rot * w:((r + 1) % self.rot + 1) * w]),
                     view(self.dst[(r % 2) * w:(r % 2 + 1) * w]), cp.int64(self.n16), self.stamps)

    def launch(self, stream: torch.cuda.Stream):
        with self.cp.cuda.ExternalStream(stream.cuda_stream):
            self.fn((self.ctas,), (THREADS,), self.args)

    def prepare_launch(self, stream: torch.cuda.Stream):
        self.prepare()
        self.launch(stream)

    def check(self):
        """Last launch's output against torch (copy exact; reduce within bf16 rounding)."""
        torch.cuda.synchronize()  # the kernel ran on a non-blocking stream
        w, r = self.bytes // 2, (self.i - 1) % self.rot
        out = self.dst[(r % 2) * w:(r % 2 + 1) * w].float()
        a = self.src[0][r * w:(r + 1) * w].float()
        if self.kind == "copy":
            return float((out - a).abs().max())
        b = self.src[-1][(r + 1) % self.rot * w:((r + 1) % self.rot + 1) * w].float()
        ref = a + b
        return float((out - ref).norm() / ref.norm())

    def spans(self):
        s = self.stamps.get().reshape(-1, 3).astype("int64")
        return sorted(set(int(x) for x in s[:, 0])), (s[:, 1].max() - s[:, 1].min()) / 1e3

    def last_launches(self, n: int):
        """(smid, start ns, end ns) per CTA of each of the last n launches, oldest first."""
        if n > STAMP_RING:
            raise ValueError(f"{n} launches, ring of {STAMP_RING}")
        return [self.stamp_ring[i % STAMP_RING].get().reshape(-1, 3).astype("int64")
                for i in range(self.i - n, self.i)]


def gemm_fns(M, N, K, layout):
    sets = []
    for _ in range(2):
        if layout == "NT":
            a, b = torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        else:
            a, b = torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        sets.append(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))
    return sets


def kernel_events(prof) -> list[dict]:
    """CUDA kernel records (name, ts, dur in us, args) of a finished torch.profiler session."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    evs = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and not is_gate(e)]
    return sorted(evs, key=lambda e: e["ts"])


def group_reps(evs: list[dict], gap_us: float = 100.0) -> list[list[dict]]:
    """Split kernel records into repetitions: a new one starts after an idle gap (reps are
    separated by a host synchronize and a sleep)."""
    groups, end = [], -1e30
    for e in evs:
        if e["ts"] > end + gap_us:
            groups.append([])
        groups[-1].append(e)
        end = max(end, e["ts"] + e["dur"])
    return groups


def is_gate(e) -> bool:
    name = e["name"].lower()
    return "spin" in name or "sleep" in name or "stamp_after" in name


def is_stream(e) -> bool:
    return e["name"].startswith("stream_")


def span(es):
    return min(e["ts"] for e in es), max(e["ts"] + e["dur"] for e in es)


def profiled(reps: int, body) -> list[list[dict]]:
    """Run body() `reps` times from an idle GPU under CUPTI; the kernel records per repetition."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            torch.cuda.synchronize()
            time.sleep(2e-4)
            body()
        torch.cuda.synchronize()
    groups = group_reps(kernel_events(prof))
    if len(groups) != reps:
        log(f"  warning: {len(groups)} kernel groups for {reps} repetitions")
    return groups


def stamp_after(stream: torch.cuda.Stream, slot) -> None:
    """Queue the one-thread stamp kernel on `stream` (it starts when the stream's last kernel ended)."""
    import cupy as cp
    with cp.cuda.ExternalStream(stream.cuda_stream):
        STAMP_FN((1,), (1,), (slot,))


STAMP_FN = None


def write_reps(out, key: dict, groups, launches, gemm_end, first_launch: int) -> None:
    """One row per repetition: CUPTI times and the streaming CTAs' and the GEMM end's globaltimer
    stamps, relative to the first streaming CTA's start."""
    if len(groups) != len(launches):
        log(f"  warning: {len(groups)} kernel groups for {len(launches)} launches; repetitions not written")
        return
    ends = gemm_end.get().astype("int64")
    for rep, (g, st) in enumerate(zip(groups, launches)):
        ge, se = [e for e in g if not is_stream(e)], [e for e in g if is_stream(e)]
        if not ge or not se:
            continue
        (g0, g1), (s0, s1) = span(ge), span(se)
        t0 = int(st[:, 1].min())
        us = lambda ns: round((int(ns) - t0) / 1e3, 3)
        out.row(**key, rep=rep, gemm_us=round(g1 - g0, 3), stream_us=round(s1 - s0, 3),
                start_gap_us=round((g0 - s0) if key["order"] == "stream_first" else (s0 - g0), 3),
                gemm_end_us=us(ends[(first_launch + rep) % STAMP_RING]),
                last_cta_start_us=us(st[:, 1].max()), last_cta_end_us=us(st[:, 2].max()),
                n_sms=len(set(int(x) for x in st[:, 0])), stream_sms=" ".join(str(int(x)) for x in st[:, 0]))


def sm_clock_reader():
    """A function returning the SM clock in MHz (NVML), or None when NVML is unavailable."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
    except Exception as e:  # noqa: BLE001
        log(f"no NVML clock ({type(e).__name__}: {e})")
        return None


SM_CLOCK = None


def clock_under_load(body, us: float, streams, ms: float = 60.0) -> str:
    if SM_CLOCK is None:
        return ""
    torch.cuda._sleep(int(1e8))  # ~50 ms head start: the host queues the loop before the GPU runs it
    head = torch.cuda.Event()
    head.record()
    for st in streams:
        st.wait_event(head)
    for _ in range(min(300, max(4, int(ms * 1e3 / max(us, 1.0))))):
        body()
    done = torch.cuda.Event()
    for st in streams:
        torch.cuda.current_stream().wait_stream(st)
    done.record()
    samples = []
    while not done.query():
        samples.append(SM_CLOCK())
        time.sleep(0.002)
    torch.cuda.synchronize()
    return f"{median(samples):.0f}" if samples else ""


def event_time_us(fns, iters: int = 50) -> float:
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    torch.cuda._sleep(int(1e8))  # ~50 ms: the host queues every timed launch before the GPU gets there
    for i in range(iters):
        st[i].record()
        fns[i % len(fns)]()
        en[i].record()
    torch.cuda.synchronize()
    return median([s.elapsed_time(e) * 1e3 for s, e in zip(st, en)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="", help="comma-separated names (default: all)")
    ap.add_argument("--kinds", default="copy,reduce")
    ap.add_argument("--ctas", default="8,16,32")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--stretch", type=float, default=1.25, help="stream alone time / GEMM alone time")
    ap.add_argument("--reps-out", default="", help="also write every repetition of every pair here")
    args = ap.parse_args()
    if args.reps > STAMP_RING:
        raise SystemExit(f"--reps {args.reps}: at most {STAMP_RING}")
    import cupy as cp
    global SM_CLOCK
    SM_CLOCK = sm_clock_reader()

    mod = cp.RawModule(code=KERNELS, options=("-std=c++17",))
    global STAMP_FN
    STAMP_FN = mod.get_function("stamp_after")
    gpu = torch.cuda.get_device_name()
    log(f"{gpu}, torch {torch.__version__}, cupy {cp.__version__}, SMs {torch.cuda.get_device_properties(0).multi_processor_count}")
    regs = {k: getattr(mod.get_function("stream_" + k), "num_regs", "") for k in ("copy", "reduce")}
    log(f"stream kernel registers per thread: {regs}")
    kinds, ctas_list = args.kinds.split(","), [int(x) for x in args.ctas.split(",")]
    s_gemm, s_stream = torch.cuda.Stream(), torch.cuda.Stream()

    # per-CTA rate of each (kind, ctas) alone, to size the streams
    rate = {}
    for kind in kinds:
        for ctas in ctas_list:
            sk = StreamKernel(cp, mod, kind, ctas, ctas * (8 << 20))
            for _ in range(3):
                sk.prepare_launch(s_stream)
            err = sk.check()
            if err > (0 if kind == "copy" else 1e-2):
                raise SystemExit(f"stream_{kind} output wrong: error {err}")
            groups = profiled(5, lambda: sk.prepare_launch(s_stream))
            us = median([e["dur"] for g in groups for e in g if is_stream(e)])
            rate[kind, ctas] = sk.bytes / ctas / (us * 1e3)  # GB/s per CTA (output bytes)
            log(f"stream_{kind} ctas {ctas}: {sk.bytes >> 20} MiB in {us:.1f} us, {rate[kind, ctas]:.1f} GB/s per CTA "
                f"(output bytes), check {err:.2e}")
            del sk

    out = CsvOut(args.out, COLUMNS)
    reps_out = CsvOut(args.reps_out, REP_COLUMNS) if args.reps_out else None
    gemm_end = cp.zeros(STAMP_RING, dtype=cp.uint64)
    want = set(args.shapes.split(",")) if args.shapes else None
    for name, M, N, K, layout in SHAPES:
        if want and name not in want:
            continue
        fns = gemm_fns(M, N, K, layout)
        gi = [0]

        def gemm(stream):
            with torch.cuda.stream(stream):
                fns[gi[0] % 2]()
            gi[0] += 1

        for _ in range(3):
            gemm(s_gemm)
        ev_us = event_time_us(fns)
        g_alone = profiled(args.reps, lambda: gemm(s_gemm))
        g_alone_us = median([span([e for e in g if not is_stream(e)])[1] - span(g)[0] for g in g_alone])
        gk = [e for e in g_alone[-1] if not is_stream(e)]
        ka = gk[0].get("args", {})
        gemm_info = dict(gemm_kernel="+".join(e["name"][:90] for e in gk), gemm_grid=str(ka.get("grid", "")),
                         gemm_block=str(ka.get("block", "")), gemm_regs=ka.get("registers per thread", ""),
                         gemm_smem=ka.get("shared memory", ""))
        log(f"{name} {M}x{N}x{K}: alone {g_alone_us:.1f} us (CUPTI), {ev_us:.1f} us (events); {gemm_info}")
        for kind in kinds:
            for ctas in ctas_list:
                nbytes = int(args.stretch * g_alone_us * 1e3 * rate[kind, ctas] * ctas)
                sk = StreamKernel(cp, mod, kind, ctas, max(nbytes, ctas * (1 << 20)))
                sk.prepare_launch(s_stream)
                torch.cuda.synchronize()
                s_alone = profiled(args.reps, lambda: sk.prepare_launch(s_stream))
                s_alone_us = median([span(g)[1] - span(g)[0] for g in s_alone])
                for order in ("stream_first", "gemm_first"):
                    def pair(gate: bool = True):
                        """Both launches queued behind a spin on the first kernel's stream; the
                        second stream waits for an event recorded after that spin and then spins
                        DELAY_CYCLES more (~10 us): the first kernel starts first and places its
                        CTAs, whatever the host's launch overhead (start_gap_us records it)."""
                        sk.prepare()
                        first, second = (s_stream, s_gemm) if order == "stream_first" else (s_gemm, s_stream)
                        if gate:
                            with torch.cuda.stream(first):
                                torch.cuda._sleep(GATE_CYCLES)
                            ev = torch.cuda.Event()
                            ev.record(first)
                            second.wait_event(ev)
                            with torch.cuda.stream(second):
                                torch.cuda._sleep(DELAY_CYCLES)
                        slot = gemm_end[(sk.i - 1) % STAMP_RING:(sk.i - 1) % STAMP_RING + 1]
                        if order == "stream_first":
                            sk.launch(s_stream)
                            gemm(s_gemm)
                            stamp_after(s_gemm, slot)
                        else:
                            gemm(s_gemm)
                            stamp_after(s_gemm, slot)
                            sk.launch(s_stream)
                    pair()
                    torch.cuda.synchronize()
                    g_us, s_us, mk_us, gap_us, late_us, sms = [], [], [], [], [], set()
                    groups = profiled(args.reps, pair)
                    for g in groups:
                        ge, se = [e for e in g if not is_stream(e)], [e for e in g if is_stream(e)]
                        if not ge or not se:
                            continue
                        (g0, g1), (s0, s1) = span(ge), span(se)
                        g_us.append(g1 - g0)
                        s_us.append(s1 - s0)
                        mk_us.append(max(g1, s1) - min(g0, s0))
                        gap_us.append((g0 - s0) if order == "stream_first" else (s0 - g0))
                    sm_list, late = sk.spans()  # the last repetition's CTAs
                    if reps_out is not None:
                        write_reps(reps_out, dict(name=name, stream_kind=kind, ctas=ctas, order=order), groups,
                                   sk.last_launches(args.reps), gemm_end, sk.i - args.reps)
                    if not g_us:
                        log(f"  {kind} ctas {ctas} {order}: no repetition had both kernels; skipped")
                        continue
                    clock = clock_under_load(lambda: pair(gate=False), median(mk_us), (s_gemm, s_stream))
                    row = dict(name=name, M=M, N=N, K=K, layout=layout, stream_kind=kind, ctas=ctas, threads=THREADS,
                               bytes=sk.bytes, order=order, gemm_us=round(median(g_us), 3),
                               stream_us=round(median(s_us), 3), makespan_us=round(median(mk_us), 3),
                               start_gap_us=round(median(gap_us), 3), stream_late_us=round(late, 3),
                               gemm_alone_us=round(g_alone_us, 3), gemm_alone_event_us=round(ev_us, 3),
                               stream_alone_us=round(s_alone_us, 3), reps=len(g_us), sm_clock_mhz=clock,
                               stream_sms=" ".join(map(str, sm_list)), stream_regs=regs[kind], gpu=gpu,
                               torch_version=torch.__version__, **gemm_info)
                    out.row(**row)
                    log(f"  {kind:6s} ctas {ctas:2d} {sk.bytes >> 20:5d} MiB {order:12s}: gemm {row['gemm_us']:8.1f} "
                        f"(alone {g_alone_us:7.1f}) stream {row['stream_us']:8.1f} (alone {s_alone_us:7.1f}) "
                        f"makespan {row['makespan_us']:8.1f} gap {row['start_gap_us']:5.1f} late {late:7.1f} "
                        f"clock {clock} sms {sm_list[:8]}{'...' if len(sm_list) > 8 else ''}")
                del sk
                torch.cuda.empty_cache()
        del fns
    out.close()
    if reps_out is not None:
        reps_out.close()


if __name__ == "__main__":
    main()
