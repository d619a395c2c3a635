#!/usr/bin/env python3
"""Raw measurements of the four cross-GPU drift sources on one lent GPU (docs/DRIFT.md).

1. blocks_<variant>.csv: a GEMM-like tiled kernel (fp32 C = A x B, 64x64 tiles, K in steps of
   16 through shared memory, 4096 x 4096 x 2048 -> 4096 blocks, several waves); thread 0 of each
   block records %smid, %globaltimer and clock64 at its start and end. Variants: 'occ1' (dynamic
   shared memory so large that one block fits an SM, like cuBLAS's Hopper GEMMs) and 'natural'
   (as many blocks per SM as fit). Gives the per-block duration spread (block_jitter_frac) and
   the dispatch order against blockIdx (TB scheduling order).
   Columns: rep,block,smid,t0_ns,t1_ns,cycles,host_launch_ns
2. launch.csv: a one-block kernel stamps %globaltimer; the host stamps CLOCK_REALTIME just before
   the launch, after a synchronize and a 200 us idle gap (the GPU is idle, as at a layer start).
   The spread of (gpu - host) is the launch-to-start jitter (the offset of the two clocks
   cancels). Columns: i,host_ns,gpu_ns
3. gemm.csv / clocks.csv: back-to-back bf16 8192^3 torch matmuls for ~6 s (per-GEMM time by CUDA
   events), with NVML's SM clock and power sampled every 10 ms: the clock the power cap settles
   at and its spread. Columns: i,ms / t_s,sm_mhz,power_w
4. timer.csv: consecutive %globaltimer reads of one thread (the timer's resolution). Column: ns

Usage (device, one GPU): python3 scripts/measure/measure_drift_sources.py OUT_DIR [launch|blocks|clocks]
(no part: both; the parts exist so that each fits one device command)
Summary (anywhere): python3 scripts/measure/summarize_drift_sources.py DIR
"""
import os
import sys
import threading
import time

import cupy as cp
import numpy as np

SRC = r"""
__device__ __forceinline__ unsigned long long gt() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
extern "C" __global__ void stamp(unsigned long long* out) { out[0] = gt(); }
extern "C" __global__ void timer(unsigned long long* out, int n) { for (int i = 0; i < n; ++i) out[i] = gt(); }
extern "C" __global__ void tile_gemm(const float* A, const float* B, float* C, int N, int K,
                                     unsigned long long* rec) {
  extern __shared__ float sm[];
  const unsigned long long t0 = gt();
  const long long c0 = clock64();
  float* As = sm; float* Bs = sm + 16 * 64;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int i = 0; i < 4; ++i) { int e = threadIdx.x + i * 256, r = e / 16, c = e % 16;
      As[c * 64 + r] = A[(long)(row0 + r) * K + k0 + c]; }
    for (int i = 0; i < 4; ++i) { int e = threadIdx.x + i * 256, r = e / 64, c = e % 64;
      Bs[r * 64 + c] = B[(long)(k0 + r) * N + col0 + c]; }
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk) {
      float a[4], b[4];
      for (int i = 0; i < 4; ++i) { a[i] = As[kk * 64 + ty * 4 + i]; b[i] = Bs[kk * 64 + tx * 4 + i]; }
      for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) C[(long)(row0 + ty * 4 + i) * N + col0 + tx * 4 + j] = acc[i][j];
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    const long b = blockIdx.y * gridDim.x + blockIdx.x;
    rec[b * 4] = t0; rec[b * 4 + 1] = gt(); rec[b * 4 + 2] = clock64() - c0; rec[b * 4 + 3] = s;
  }
}
"""


def write(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(",".join(str(int(x)) for x in r) + "\n")


def blocks(mod, out, reps=3, M=4096, N=4096, K=2048):
    k = mod.get_function("tile_gemm")
    rng = cp.random.default_rng(1)
    A, B = rng.standard_normal((M, K), dtype=cp.float32), rng.standard_normal((K, N), dtype=cp.float32)
    C = cp.empty((M, N), cp.float32)
    grid = (N // 64, M // 64)
    for variant, smem in (("occ1", 160 * 1024), ("natural", 8 * 1024)):
        k.max_dynamic_shared_size_bytes = smem
        rows = []
        for rep in range(reps + 1):  # rep 0 warms up
            rec = cp.zeros(grid[0] * grid[1] * 4, cp.uint64)
            cp.cuda.Device().synchronize()
            time.sleep(2e-4)
            host = time.time_ns()
            k(grid, (256,), (A, B, C, np.int32(N), np.int32(K), rec), shared_mem=smem)
            cp.cuda.Device().synchronize()
            if rep == 0:
                ref = A[:64] @ B[:, :64]
                err = float(cp.linalg.norm(C[:64, :64] - ref) / cp.linalg.norm(ref))
                assert err < 1e-4, f"tile_gemm wrong: rel err {err}"
                continue
            r = rec.get().reshape(-1, 4)
            rows += [(rep, b, r[b, 3], r[b, 0], r[b, 1], r[b, 2], host) for b in range(len(r))]
        write(f"{out}/blocks_{variant}.csv", "rep,block,smid,t0_ns,t1_ns,cycles,host_launch_ns", rows)


def launches(mod, out, n=2000):
    k = mod.get_function("stamp")
    buf = cp.zeros(n, cp.uint64)
    rows = []
    for i in range(-50, n):  # the first 50 warm up
        cp.cuda.Device().synchronize()
        t_end = time.perf_counter() + 2e-4
        while time.perf_counter() < t_end:
            pass
        host = time.time_ns()
        k((1,), (1,), (buf[max(i, 0):],))
        if i >= 0:
            rows.append((i, host))
    cp.cuda.Device().synchronize()
    g = buf.get()
    write(f"{out}/launch.csv", "i,host_ns,gpu_ns", [(i, h, g[i]) for i, h in rows])
    t = mod.get_function("timer")
    tb = cp.zeros(4096, cp.uint64)
    t((1,), (1,), (tb, np.int32(4096)))
    write(f"{out}/timer.csv", "ns", [(x,) for x in tb.get()])


def clocks(out, seconds=6.0):
    import pynvml
    import torch
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    samples, stop = [], threading.Event()

    def sample():
        t0 = time.time()
        while not stop.is_set():
            samples.append((int((time.time() - t0) * 1e6), pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                            pynvml.nvmlDeviceGetPowerUsage(h) // 1000))
            time.sleep(0.01)

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    th = threading.Thread(target=sample)
    th.start()
    ev, t_end = [], time.time() + seconds
    while time.time() < t_end:
        batch = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(50)]
        for s, e in batch:
            s.record()
            torch.matmul(a, b)
            e.record()
        torch.cuda.synchronize()
        ev += [s.elapsed_time(e) for s, e in batch]
    stop.set()
    th.join()
    write(f"{out}/gemm.csv", "i,ns", [(i, round(ms * 1e6)) for i, ms in enumerate(ev)])
    write(f"{out}/clocks.csv", "t_us,sm_mhz,power_w", samples)


if __name__ == "__main__":
    out, part = sys.argv[1], (sys.argv[2:] or ["all"])[0]
    os.makedirs(out, exist_ok=True)
    if part in ("all", "launch"):
        launches(cp.RawModule(code=SRC, options=("-std=c++17",)), out)
    if part in ("all", "blocks"):
        blocks(cp.RawModule(code=SRC, options=("-std=c++17",)), out)
    if part in ("all", "clocks"):
        clocks(out)
    print("done", os.listdir(out))
