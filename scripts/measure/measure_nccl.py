#!/usr/bin/env python3
"""Measure NCCL collectives (all_reduce, all_gather, reduce_scatter) through torch.distributed.

One process per GPU (torch.multiprocessing spawn), bf16, NCCL_ALGO forced (default Ring; the
value actually in the environment is recorded in the log and the `algo` column). NVLink
multicast stays OFF: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1 are set before torch.distributed is imported, and the script refuses to
run if any of them is set to another value. No symmetric memory, no multimem.

Sizes: --min-bytes .. --max-bytes doubling (default 1 MiB .. 16 GiB).

Conventions -- exactly nccl-tests' (all_reduce_perf / all_gather_perf / reduce_scatter_perf):
  n      = number of ranks (GPUs)
  bytes  = the "size" column of nccl-tests:
             all_reduce:     the buffer's bytes (count * 2 for bf16), in place
             all_gather:     total OUTPUT bytes = per-rank send bytes * n   (out of place)
             reduce_scatter: total INPUT bytes  = per-rank recv bytes * n   (out of place)
  time   = per rank: CUDA events around each of `iters` back-to-back calls on the current
           stream (after `warmup` untimed calls; a GPU sleep is queued first so the host has
           queued all timed calls before the GPU reaches them -- GPU time without PyTorch's
           host launch overhead; --no-host-ahead disables that); the median per rank; then
           the MAX over ranks (an all_reduce(MAX) of the per-rank medians). nccl-tests averages a timed loop
           instead; that loop average (also max over ranks) is printed in the log as `loop_us`.
  algbw  = bytes / time                                    [GB/s, 1 GB = 1e9 bytes]
  busbw  = algbw * 2*(n-1)/n   for all_reduce
           algbw * (n-1)/n     for all_gather and reduce_scatter

Correctness is checked once per op at the start (sum/gather of rank-dependent values).

CSV (--out): name,op,bytes,gpus,algo,measured_us,algbw_GBps,busbw_GBps,gpu,nccl_version

--occupy-sms K: before each timed loop, K blocks that fill an SM each (1024 threads, 227 KiB of
shared memory) are started on a side stream and spin (nanosleep) until the loop is over, so
NCCL's CTAs cannot run on those SMs; the SMs they took are logged. --leave-sms RANGES: the same
with one block per SM, except that blocks landing on the listed SMs exit at once, so NCCL's
CTAs run exactly there. CUDA puts a small grid's
first blocks on both SMs of a few TPCs (docs/MEASUREMENTS.md call 16); occupying those SMs
shows how NCCL performs when its channels cannot land there.

Usage (device):  python3 scripts/measure/measure_nccl.py --gpus 4 --out $OUT/h200x4_nccl.csv
Usage (CPU logic check, gloo): python3 scripts/measure/measure_nccl.py --gpus 2 --cpu-smoke --out /tmp/n.csv
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast, median  # noqa: E402

enforce_no_multicast()

import torch  # noqa: E402

import distutil  # noqa: E402
from occupy import Occupier, parse_sms  # noqa: E402

COLUMNS = ["name", "op", "bytes", "gpus", "algo", "measured_us", "algbw_GBps", "busbw_GBps",
           "gpu", "nccl_version"]
OPS = ("all_reduce", "all_gather", "reduce_scatter")


def parse_bytes(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def bus_factor(op: str, n: int) -> float:
    return 2.0 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def iters_for(nbytes: int, args):
    if nbytes <= 64 << 20:
        return args.warmup, args.iters_small
    if nbytes <= 1 << 30:
        return args.warmup, args.iters_mid
    return args.warmup_big, args.iters_big


def make_op(op, nbytes, n, dev, dist):
    """Buffers + closure for one collective of nccl-tests 'size' nbytes."""
    elt = 2  # bf16
    count = nbytes // elt
    count -= count % n
    if op == "all_reduce":
        # tiny positive values: repeated in-place sums stay finite in bf16 for >100 calls
        buf = torch.rand(count, device=dev, dtype=torch.float32).mul_(1e-30).to(torch.bfloat16)
        return (lambda: dist.all_reduce(buf)), [buf]
    if op == "all_gather":
        out = torch.empty(count, device=dev, dtype=torch.bfloat16)
        inp = torch.rand(count // n, device=dev, dtype=torch.float32).to(torch.bfloat16)
        return (lambda: dist.all_gather_into_tensor(out, inp)), [out, inp]
    if op == "reduce_scatter":
        inp = torch.rand(count, device=dev, dtype=torch.float32).to(torch.bfloat16)
        out = torch.empty(count // n, device=dev, dtype=torch.bfloat16)
        return (lambda: dist.reduce_scatter_tensor(out, inp)), [out, inp]
    raise ValueError(op)


def check_ops(rank, n, dev, dist):
    """Small exact checks (integers in bf16 are exact below 256)."""
    c = 1024 * n
    x = torch.full((c,), float(rank + 1), device=dev, dtype=torch.bfloat16)
    dist.all_reduce(x)
    assert torch.all(x == n * (n + 1) / 2), "all_reduce check failed"
    inp = torch.full((c // n,), float(rank + 1), device=dev, dtype=torch.bfloat16)
    out = torch.full((c,), float("nan"), device=dev, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(out, inp)
    exp = torch.arange(1, n + 1, device=dev, dtype=torch.bfloat16).repeat_interleave(c // n)
    assert torch.equal(out, exp), "all_gather check failed"
    inp = torch.arange(c, device=dev, dtype=torch.float32).remainder(7).add(rank).to(torch.bfloat16)
    out = torch.full((c // n,), float("nan"), device=dev, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, inp)
    full = torch.arange(c, device=dev, dtype=torch.float32).remainder(7) * n + n * (n - 1) / 2
    exp = full[rank * (c // n):(rank + 1) * (c // n)].to(torch.bfloat16)
    assert torch.equal(out, exp), "reduce_scatter check failed"


def worker(rank, n, args):
    cuda = not args.cpu_smoke
    dist = distutil.init(rank, n, cuda)
    dev = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        gpu = torch.cuda.get_device_name(rank)
        v = torch.cuda.nccl.version()
        nccl_version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    else:
        gpu, nccl_version = "cpu-smoke", "gloo"
    algo = os.environ.get("NCCL_ALGO", "default").lower()
    log = lambda *a: distutil.log0(rank, *a)  # noqa: E731
    log(f"timing: host_ahead={not args.no_host_ahead}")
    log(f"world={n} gpu={gpu} nccl={nccl_version} torch={torch.__version__}")
    log("env: " + " ".join(f"{k}={os.environ.get(k)}" for k in
                           ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                            "NVSHMEM_DISABLE_NVLS", "NCCL_P2P_LEVEL", "NCCL_DEBUG")))
    if cuda and rank == 0:
        acc = [[int(i == j or torch.cuda.can_device_access_peer(i, j)) for j in range(n)] for i in range(n)]
        log(f"peer access matrix: {acc}")
    try:
        check_ops(rank, n, dev, dist)
        log("correctness checks passed (all_reduce, all_gather, reduce_scatter)")
    except (RuntimeError, NotImplementedError) as e:
        if cuda:
            raise
        log(f"cpu-smoke: correctness checks not run on gloo: {str(e)[:100]}")

    leave = parse_sms(args.leave_sms) if args.leave_sms else []
    occ = Occupier(rank, args.occupy_sms, leave) if cuda and (args.occupy_sms or leave) else None
    out = CsvOut(args.out, COLUMNS) if rank == 0 else None
    sizes = []
    b = args.min_bytes
    while b <= args.max_bytes:
        sizes.append(b)
        b *= 2
    ops = [o for o in args.ops.split(",") if o]
    log(f"{'op':15s} {'bytes':>12s} {'iters':>5s} {'time_us':>12s} {'loop_us':>12s} {'algbw':>8s} {'busbw':>8s}")
    for op in ops:
        for nbytes in sizes:
            warm, iters = iters_for(nbytes, args)
            need = nbytes * (1 + 1 / n) + (256 << 20)
            if cuda:  # agree on the smallest free memory over ranks before allocating
                free_min = -distutil.max_over_ranks([-float(torch.cuda.mem_get_info()[0])], dist, cuda)[0]
                if need > 0.92 * free_min:
                    log(f"{op} {nbytes}: needs {need/2**30:.1f} GiB, min free {free_min/2**30:.1f} GiB; "
                        f"skipping this and larger sizes")
                    break
            fn, keep = make_op(op, nbytes, n, dev, dist)
            hook = (lambda sleep_s: occ.start(sleep_s + 0.3)) if occ else None
            profiling = args.kernel_times and cuda  # the kernels' own GPU time, from CUPTI (torch.profiler)
            with (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) if profiling
                  else contextlib.nullcontext()) as prof:
                ts = distutil.time_iters(fn, warm, iters, cuda, host_ahead=not args.no_host_ahead, before_timed=hook)
            if profiling:
                log(f"kernels {op} {nbytes}: " + "; ".join(
                    f"{e.key[:40]} n={e.count} mean_us={getattr(e, 'device_time_total', getattr(e, 'cuda_time_total', 0)) / e.count:.2f}"
                    for e in prof.key_averages() if "nccl" in e.key.lower() and e.count))
            if occ and nbytes == sizes[0]:
                taken = occ.sms()
                log(f"occupier blocks on {len(taken)} SMs: {taken if len(taken) <= 32 else '...'}; "
                    f"free: {sorted(set(range(max(taken) + 1)) - set(taken)) if leave else '-'}")
            loop = sum(ts) / len(ts)
            us, loop_us = distutil.max_over_ranks([median(ts), loop], dist, cuda)
            del fn, keep
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            algbw = nbytes / (us * 1e-6) / 1e9
            busbw = algbw * bus_factor(op, n)
            log(f"{op:15s} {nbytes:12d} {iters:5d} {us:12.2f} {loop_us:12.2f} {algbw:8.2f} {busbw:8.2f}")
            if out is not None:
                out.row(name=f"{op}.{nbytes}", op=op, bytes=nbytes, gpus=n, algo=algo,
                        measured_us=f"{us:.3f}", algbw_GBps=f"{algbw:.3f}", busbw_GBps=f"{busbw:.3f}",
                        gpu=gpu, nccl_version=nccl_version)
    if out is not None:
        out.close()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--min-bytes", type=parse_bytes, default=parse_bytes("1M"))
    ap.add_argument("--max-bytes", type=parse_bytes, default=parse_bytes("16G"))
    ap.add_argument("--algo", default="Ring", help="NCCL_ALGO to force ('' leaves NCCL's choice)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--warmup-big", type=int, default=2)
    ap.add_argument("--iters-small", type=int, default=50, help="<= 64 MiB")
    ap.add_argument("--iters-mid", type=int, default=20, help="<= 1 GiB")
    ap.add_argument("--iters-big", type=int, default=10, help="> 1 GiB")
    ap.add_argument("--no-host-ahead", action="store_true",
                    help="time iterations as the host issues them (no GPU sleep queued first; "
                         "host launch overhead then counts when the GPU is idle)")
    ap.add_argument("--occupy-sms", type=int, default=0, metavar="K",
                    help="keep K SMs busy during each timed loop (see the docstring)")
    ap.add_argument("--leave-sms", default="", metavar="RANGES",
                    help="occupy every SM except these (e.g. 0-46/2 = even SMs 0..46) during each "
                         "timed loop, so that NCCL's CTAs run exactly there")
    ap.add_argument("--kernel-times", action="store_true",
                    help="also log the NCCL kernels' mean GPU time per size (torch.profiler / CUPTI; "
                         "warm-up calls included)")
    ap.add_argument("--cpu-smoke", action="store_true")
    args = ap.parse_args()
    if args.algo:
        if os.environ.get("NCCL_ALGO", args.algo) != args.algo:
            sys.exit(f"NCCL_ALGO={os.environ['NCCL_ALGO']} conflicts with --algo {args.algo}")
        os.environ["NCCL_ALGO"] = args.algo
    if not args.cpu_smoke:
        if not torch.cuda.is_available() or torch.cuda.device_count() < args.gpus:
            sys.exit(f"need {args.gpus} GPUs, found {torch.cuda.device_count()}")
    distutil.spawn(worker, args.gpus, args)


if __name__ == "__main__":
    main()
