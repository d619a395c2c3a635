#!/usr/bin/env python3
"""The SM clock during a burst of GEMMs from an idle GPU, GEMM by GEMM, from the SMs' own counters.

    python3 scripts/measure/measure_burst_clock.py --out DIR/burst_clock.csv [--shapes a,b] \
        [--idle-ms 0.2,100,2000] [--gemms 60] [--trials 3] [--long-gemms 400]

Why: validate_concurrent runs its rows at the maximum boost clock (docs/VALIDATION.md, "GEMM
beside a streaming kernel"), because NVML read 1860-1980 MHz around those bursts; yet the
engine's GEMMs come out 12-14 % faster than measured there, while at the settled clocks of
h100_kernels.csv they agree within a few percent. NVML samples the clock every few ms and cannot
say what the clock was during one 150 us GEMM. The SMs can: between consecutive GEMMs on one
stream a stamp kernel of one CTA per SM (132 CTAs, each with most of an SM's shared memory, so
no two share an SM) records every CTA's %smid, clock64 and %globaltimer. For an SM seen in two
consecutive stamps, its clock64 delta over the globaltimer delta is that SM's mean clock over
the GEMM between them (plus the stamp kernels' own microseconds). A trial: the GPU left idle for
`idle_ms` (host sleep; nothing queued), a 0.2 ms GPU spin so that the host queues every launch
before the burst starts, stamp, then GEMM, stamp, GEMM, stamp, ... (CUDA events around each
GEMM), then NVML's clock.

Output, one row per GEMM: gpu, name, M, N, K, idle_ms, trial, gemm_index, t_us (the GEMM's start
after the first stamp, globaltimer), gemm_us (events), clock_mhz (median over SMs), clock_min_mhz,
clock_max_mhz, sms (SMs seen in both stamps), nvml_before_mhz, nvml_after_mhz.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast, median  # noqa: E402

enforce_no_multicast()
warnings.filterwarnings("ignore", category=DeprecationWarning)

import torch  # noqa: E402

# (name, M, N, K, layout): as measure_concurrent.py (the rows of h100_concurrent.csv)
SHAPES = [
    ("llama_7b.fc2.fwd", 9216, 4096, 1408, "NT"),
    ("llama_7b.fc1.fwd", 9216, 1408, 4096, "NT"),
    ("mega_gpt_4b.fc2.fwd", 16384, 2048, 1024, "NT"),
    ("extra.sq2048", 2048, 2048, 2048, "NN"),
]
STAMP_SMEM = 200 * 1024  # > half an SM's 228 KB: one stamp CTA per SM
HEAD_CYCLES = 400_000  # ~0.2 ms GPU spin before the burst: the host queues the whole trial
COLUMNS = ["gpu", "name", "M", "N", "K", "idle_ms", "trial", "gemm_index", "t_us", "gemm_us", "clock_mhz",
           "clock_min_mhz", "clock_max_mhz", "sms", "nvml_before_mhz", "nvml_after_mhz", "torch_version"]

STAMP = r"""
extern "C" __global__ void stamp(unsigned long long* out) {
  extern __shared__ unsigned char hold[];  // only reserved: one CTA per SM
  if (threadIdx.x == 0) {
    unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    unsigned long long t, c;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    c = clock64();
    hold[0] = 0;
    out[3 * blockIdx.x] = s; out[3 * blockIdx.x + 1] = c; out[3 * blockIdx.x + 2] = t;
  }
}
"""


def log(*a):
    print(*a, flush=True)


def gemm_fn(M, N, K, layout):
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if layout == "NT" else \
        torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b, out=c)


def nvml_clock():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
    except Exception as e:  # noqa: BLE001 - NVML is optional
        log(f"no NVML clock ({type(e).__name__}: {e})")
        return lambda: ""


def per_sm(buf) -> dict[int, tuple[int, int]]:
    """{smid: (clock64, globaltimer)} of one stamp's host copy (rows smid, clock, time)."""
    return {int(r[0]): (int(r[1]), int(r[2])) for r in buf.reshape(-1, 3)}


class NvmlSampler:
    """NVML's SM clock every `period_s` on a host thread, as (host time, MHz)."""

    def __init__(self, clock, period_s: float = 1e-3):
        self.clock, self.period_s, self.samples = clock, period_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.clock()))
            time.sleep(self.period_s)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()


def trial(cp, kern, sms, gemm, gemms, idle_ms, clock, nvml_log=None):
    """One burst; per GEMM (t_us, gemm_us, median / min / max clock MHz, SMs seen). With
    `nvml_log` (a list) NVML is also sampled every ms during the burst and (t_us, MHz) appended,
    t_us on the stamps' time axis, aligned by the burst's end (the host's synchronize returning
    when the last stamp ran)."""
    stream = torch.cuda.current_stream()
    cstream = cp.cuda.ExternalStream(stream.cuda_stream)
    bufs = [cp.zeros(3 * sms, dtype=cp.uint64) for _ in range(gemms + 1)]
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(gemms)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(gemms)]
    torch.cuda.synchronize()
    time.sleep(idle_ms / 1e3)
    before = clock()
    sampler = NvmlSampler(clock) if nvml_log is not None else None
    if sampler:
        sampler.start()
    torch.cuda._sleep(HEAD_CYCLES)
    with cstream:
        kern((sms,), (32,), (bufs[0],), shared_mem=STAMP_SMEM)
    for i in range(gemms):
        starts[i].record(stream)
        gemm()
        ends[i].record(stream)
        with cstream:
            kern((sms,), (32,), (bufs[i + 1],), shared_mem=STAMP_SMEM)
    torch.cuda.synchronize()
    host_end = time.monotonic()
    if sampler:
        sampler.stop()
    after = clock()
    stamps = [per_sm(cp.asnumpy(b)) for b in bufs]
    t0 = median([t for _, t in stamps[0].values()])
    if sampler:
        gpu_end_us = (median([t for _, t in stamps[-1].values()]) - t0) / 1e3
        nvml_log.extend((round(gpu_end_us - (host_end - h) * 1e6, 1), mhz) for h, mhz in sampler.samples)
    rows = []
    for i in range(gemms):
        a, b = stamps[i], stamps[i + 1]
        mhz = [(b[s][0] - a[s][0]) / (b[s][1] - a[s][1]) * 1e3 for s in a if s in b and b[s][1] > a[s][1]]
        t = (median([t for _, t in a.values()]) - t0) / 1e3
        rows.append((round(t, 2), round(starts[i].elapsed_time(ends[i]) * 1e3, 3), round(median(mhz), 1),
                     round(min(mhz), 1), round(max(mhz), 1), len(mhz)))
    return rows, before, after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="", help="comma-separated names (default: all)")
    ap.add_argument("--idle-ms", default="0.2,100,2000")
    ap.add_argument("--gemms", type=int, default=60)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--long-gemms", type=int, default=400, help="one more burst of the first shape, 2 s idle")
    ap.add_argument("--nvml-out", help="also sample NVML's clock every ms during the long burst: CSV t_us,nvml_mhz")
    args = ap.parse_args()
    import cupy as cp
    kern = cp.RawKernel(STAMP, "stamp")
    kern.max_dynamic_shared_size_bytes = STAMP_SMEM
    props = torch.cuda.get_device_properties(0)
    sms, gpu = props.multi_processor_count, torch.cuda.get_device_name()
    clock = nvml_clock()
    log(f"{gpu}, {sms} SMs, torch {torch.__version__}, cupy {cp.__version__}, NVML clock now {clock()} MHz")
    want = set(args.shapes.split(",")) if args.shapes else None
    idles = [float(x) for x in args.idle_ms.split(",")]
    out = CsvOut(args.out, COLUMNS)
    runs = [(s, i, args.gemms, t) for s in SHAPES if not want or s[0] in want for i in idles for t in range(args.trials)]
    if args.long_gemms:
        first = next(s for s in SHAPES if not want or s[0] in want)
        runs.append((first, 2000.0, args.long_gemms, 0))
    for (name, M, N, K, layout), idle, gemms, t in runs:
        gemm = gemm_fn(M, N, K, layout)
        for _ in range(3):  # cuBLAS handle and plan, module load
            gemm()
        long_burst = args.long_gemms and gemms == args.long_gemms and idle == 2000.0 and args.nvml_out
        nvml_log = [] if long_burst else None
        rows, before, after = trial(cp, kern, sms, gemm, gemms, idle, clock, nvml_log)
        if nvml_log is not None:
            nv = CsvOut(args.nvml_out, ["name", "t_us", "nvml_mhz"])
            for t_us, mhz in nvml_log:
                nv.row(name=name, t_us=t_us, nvml_mhz=mhz)
            nv.close()
        if any(r[5] < sms for r in rows):
            log(f"  warning: a stamp missed SMs ({min(r[5] for r in rows)} of {sms})")
        for k, r in enumerate(rows):
            out.row(**dict(gpu=gpu, name=name, M=M, N=N, K=K, idle_ms=idle, trial=t, gemm_index=k, t_us=r[0],
                         gemm_us=r[1], clock_mhz=r[2], clock_min_mhz=r[3], clock_max_mhz=r[4], sms=r[5],
                         nvml_before_mhz=before, nvml_after_mhz=after, torch_version=torch.__version__))
        c = [r[2] for r in rows]
        g = [r[1] for r in rows]
        log(f"{name:22s} idle {idle:7.1f} ms trial {t} x{gemms}: clock first {c[0]:.0f} / 2nd {c[1]:.0f} / "
            f"median {median(c):.0f} / last {c[-1]:.0f} MHz; gemm first {g[0]:.1f} median {median(g):.1f} us; "
            f"NVML {before} -> {after}")
    out.close()


if __name__ == "__main__":
    main()
