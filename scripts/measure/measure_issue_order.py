#!/usr/bin/env python3
"""Do co-resident thread blocks of one SM share its memory pipeline in turns, or one after another?

The engine's per-SM issue queue decides in which order the resident blocks' load lines get the
SM's outstanding-request slots: one block's op whole before the next block's (in order, as a
greedy warp scheduler would keep feeding the oldest warp), or round robin between blocks. This
asks the hardware. B blocks of 128 threads are resident on every SM (grid = SMs x B, all
launched at once); each loads its own 64 KiB from HBM (ld.global.cg, 4 independent 16 B loads
in flight per thread, as a tile load is unrolled; at most 32 registers, so 16 blocks fit an SM)
and stamps %globaltimer and %smid at its start and end. If the SM serves its blocks in turns, the blocks of an SM end together; if it serves
them one after another, their ends are spread over the whole kernel, in start order.

Per SM and repetition: spread = (last end - first end) / (last end - first start), and the rank
correlation between the blocks' start and end order. In order predicts spread about (B-1)/B
and correlation 1; round robin predicts spread near 0.

CSV (one row per block): blocks_per_sm,rep,block,smid,start_ns,end_ns
Summary printed: per B, the median spread and correlation over SMs and repetitions, and the
kernel time.

Usage (device, one GPU): python3 scripts/measure/measure_issue_order.py --out $OUT/h100_issue_order.csv
Summary of a measured CSV (anywhere): python3 scripts/measure/measure_issue_order.py --summarize F.csv
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import enforce_no_multicast  # noqa: E402

KERNEL = r"""
#define BATCH 4
__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
// 16 blocks of 128 threads must fit one SM at once: at most 32 registers a thread
extern "C" __global__ void __launch_bounds__(128, 16) tile_loads(const uint4* __restrict__ src, long long per_block16,
                                      unsigned long long* stamps, uint4* sink) {
  unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  if (threadIdx.x == 0) { stamps[blockIdx.x * 3] = smid; stamps[blockIdx.x * 3 + 1] = gtimer(); }
  const uint4* p = src + blockIdx.x * per_block16;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (long long i = threadIdx.x; i < per_block16; i += (long long)blockDim.x * BATCH) {
    uint4 v[BATCH];
#pragma unroll
    for (int k = 0; k < BATCH; ++k) v[k] = __ldcg(p + i + (long long)k * blockDim.x);
#pragma unroll
    for (int k = 0; k < BATCH; ++k) { acc.x ^= v[k].x; acc.y ^= v[k].y; acc.z ^= v[k].z; acc.w ^= v[k].w; }
  }
  if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) sink[blockIdx.x] = acc;  // keeps the loads
  __syncthreads();
  if (threadIdx.x == 0) stamps[blockIdx.x * 3 + 2] = gtimer();
}
"""

THREADS, TILE_BYTES = 128, 64 * 1024


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for pos, i in enumerate(order):
            r[i] = float(pos)
        return r
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else float("nan")


def summarize(rows: list[dict]) -> list[dict]:
    by = {}
    for r in rows:
        by.setdefault((int(r["blocks_per_sm"]), int(r["rep"]), int(r["smid"])), []).append(r)
    per_b: dict[int, dict[str, list[float]]] = {}
    kernel: dict[tuple[int, int], list[float]] = {}
    for (b, rep, _sm), blocks in by.items():
        starts = [float(x["start_ns"]) for x in blocks]
        ends = [float(x["end_ns"]) for x in blocks]
        kernel.setdefault((b, rep), []).extend(starts + ends)
        if len(blocks) < 2:
            continue
        span = max(ends) - min(starts)
        d = per_b.setdefault(b, {"spread": [], "corr": [], "blocks": [], "together": []})
        d["together"].append(1.0 if max(starts) < min(ends) else 0.0)  # all resident at once
        d["spread"].append((max(ends) - min(ends)) / span if span > 0 else 0.0)
        d["corr"].append(spearman(starts, ends))
        d["blocks"].append(len(blocks))
    out = []
    for b in sorted({k[0] for k in kernel}):
        times = [(max(v) - min(v)) / 1e3 for (bb, _), v in kernel.items() if bb == b]
        d = per_b.get(b, {"spread": [], "corr": [], "blocks": [], "together": []})
        corr = [c for c in d["corr"] if c == c]
        out.append({"blocks_per_sm": b, "kernel_us": statistics.median(times),
                    "blocks_per_sm_seen": statistics.median(d["blocks"]) if d["blocks"] else 1,
                    "resident_together": statistics.mean(d["together"]) if d["together"] else 1.0,
                    "spread_median": statistics.median(d["spread"]) if d["spread"] else float("nan"),
                    "in_order_spread": (b - 1) / b,
                    "start_end_rank_corr_median": statistics.median(corr) if corr else float("nan")})
    return out


def print_summary(rows: list[dict]) -> None:
    print("blocks_per_sm  kernel_us  blocks_seen  together  spread(median)  in-order would give  start/end rank corr")
    for s in summarize(rows):
        print(f"{s['blocks_per_sm']:>13}  {s['kernel_us']:9.1f}  {s['blocks_per_sm_seen']:11.0f}  {s['resident_together']:8.2f}  "
              f"{s['spread_median']:14.3f}  {s['in_order_spread']:19.3f}  {s['start_end_rank_corr_median']:19.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV of per-block stamps")
    ap.add_argument("--blocks-per-sm", default="1,2,4,8,16")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--summarize", metavar="CSV")
    args = ap.parse_args()
    if args.summarize:
        with open(args.summarize) as f:
            print_summary(list(csv.DictReader(f)))
        return
    enforce_no_multicast()
    import cupy as cp

    kern = cp.RawModule(code=KERNEL, options=("-std=c++17",)).get_function("tile_loads")
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms, name = int(props["multiProcessorCount"]), props["name"].decode()
    bs = [int(x) for x in args.blocks_per_sm.split(",")]
    per_block16 = TILE_BYTES // 16
    # every block's tile distinct, and twice the L2 between two repetitions: tiles come from HBM
    l2 = int(props["l2CacheSize"])
    region = max(bs) * sms * TILE_BYTES
    copies = max(2, -(-4 * l2 // region) + 1)
    src = cp.random.randint(0, 2**31, size=(copies * region) // 4, dtype=cp.uint32)
    sink = cp.zeros((max(bs) * sms, 4), dtype=cp.uint32)
    rows, turn = [], 0
    for b in bs:
        grid = sms * b
        stamps = cp.zeros(grid * 3, dtype=cp.uint64)
        for rep in range(args.reps + 1):  # the first is a warm-up (module load, clocks)
            base = src[(turn % copies) * (region // 4):]
            turn += 1
            kern((grid,), (THREADS,), (base, cp.int64(per_block16), stamps, sink))
            cp.cuda.runtime.deviceSynchronize()
            if rep == 0:
                continue
            st = stamps.get().reshape(grid, 3)
            for blk in range(grid):
                rows.append({"blocks_per_sm": b, "rep": rep, "block": blk, "smid": int(st[blk, 0]),
                             "start_ns": int(st[blk, 1]), "end_ns": int(st[blk, 2])})
    print(f"{name}, {sms} SMs, {THREADS} threads a block, {TILE_BYTES // 1024} KiB per block")
    print_summary(rows)
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
