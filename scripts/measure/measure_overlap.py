#!/usr/bin/env python3
"""GEMM followed by an all-reduce of its output: serial vs. chunked overlap on two streams.

Shapes: the CAIS paper's row-parallel GEMMs at TP=8 (attention out-projection and FC2 of
mega_gpt_4b, mega_gpt_8b, llama_7b, llama_7b_full): Y[M,N] = X[M,K] . W^T with W stored [N,K]
(Megatron layout), M = seq*batch tokens, then all_reduce(Y) (bf16, sum) over --gpus ranks.
The per-GPU GEMM shape is the TP=8 one whatever --gpus is (on 4 GPUs the all-reduce spans 4
ranks, not 8).

Per shape, per rank (CUDA events on the current stream, `--warmup` untimed then the median of
`--iters` timed iterations, with a GPU sleep queued first so that the host has queued all timed
iterations before the GPU starts them: GPU time without host launch overhead, see
distutil.time_iters; --no-host-ahead disables it; the CSV holds the MAX over ranks of each
per-rank median):
  gemm_us       the GEMM alone
  allreduce_us  all_reduce of the [M,N] output alone
  serial_us     GEMM then all_reduce, one after the other
  overlap_us    M split into `chunks` row blocks; on a side compute stream GEMM chunk i is
                issued, then all_reduce(chunk i) with async_op=True (NCCL's stream waits for
                chunk i only), so GEMM chunk i+1 runs while chunk i is reduced. NCCL kernels
                and the GEMM share the SMs, as they would in a real overlapped layer.
One CSV row per (shape, chunks).

NVLink multicast stays OFF (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1, enforced before torch.distributed is imported). NCCL_ALGO defaults to
Ring (as in measure_nccl.py); --algo '' leaves NCCL's choice.

CSV: name,M,N,K,gpus,gemm_us,allreduce_us,serial_us,overlap_us,chunks
Usage (device): python3 scripts/measure/measure_overlap.py --gpus 4 --out $OUT/h200x4_gemm_allreduce.csv
Usage (CPU logic check): python3 scripts/measure/measure_overlap.py --gpus 2 --cpu-smoke --out /tmp/o.csv
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast, median, row_parallel_shapes  # noqa: E402

enforce_no_multicast()

import torch  # noqa: E402

import distutil  # noqa: E402

COLUMNS = ["name", "M", "N", "K", "gpus", "gemm_us", "allreduce_us", "serial_us", "overlap_us", "chunks"]


def worker(rank, n, args):
    cuda = not args.cpu_smoke
    dist = distutil.init(rank, n, cuda)
    dev = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    dtype = torch.bfloat16
    log = lambda *a: distutil.log0(rank, *a)  # noqa: E731
    log(f"timing: host_ahead={not args.no_host_ahead}")
    log(f"overlap: world={n} torch={torch.__version__} NCCL_ALGO={os.environ.get('NCCL_ALGO')} "
        f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
    scale = 1 if cuda else 64
    shapes = [(nm, max(8, M // scale), max(8, N // scale), max(8, K // scale))
              for nm, M, N, K in row_parallel_shapes()]
    chunk_list = [int(c) for c in args.chunks.split(",")]
    out = CsvOut(args.out, COLUMNS) if rank == 0 else None
    comp = torch.cuda.Stream(device=dev) if cuda else None
    torch.manual_seed(1234 + rank)

    for name, M, N, K in shapes:
        x = torch.randn(M, K, device=dev, dtype=dtype)
        w = torch.randn(N, K, device=dev, dtype=dtype) * (K ** -0.5)
        wt = w.t()
        y = torch.empty(M, N, device=dev, dtype=dtype)

        def gemm():
            torch.matmul(x, wt, out=y)

        def allreduce():
            dist.all_reduce(y)

        def serial():
            torch.matmul(x, wt, out=y)
            dist.all_reduce(y)

        def make_overlap(c):
            bounds = [(i * M // c, (i + 1) * M // c) for i in range(c)]
            if not cuda:
                def ov_cpu():
                    for a, b in bounds:
                        torch.matmul(x[a:b], wt, out=y[a:b])
                        dist.all_reduce(y[a:b])
                return ov_cpu

            def ov():
                cur = torch.cuda.current_stream()
                comp.wait_stream(cur)
                works = []
                with torch.cuda.stream(comp):
                    for a, b in bounds:
                        torch.matmul(x[a:b], wt, out=y[a:b])
                        works.append(dist.all_reduce(y[a:b], async_op=True))
                for wk in works:
                    wk.wait()          # current stream waits for the NCCL stream
                cur.wait_stream(comp)
            return ov

        # correctness of the overlapped path against the serial one (same inputs)
        serial()
        ref = y.clone()
        y.fill_(float("nan"))
        make_overlap(max(chunk_list))()
        if cuda:
            torch.cuda.synchronize()
        err = float((y.float() - ref.float()).norm() / ref.float().norm())
        if not err < 1e-2:
            raise RuntimeError(f"{name}: overlapped result differs from serial: rel err {err}")

        w_, it, ha = args.warmup, args.iters, not args.no_host_ahead
        g = distutil.time_iters(gemm, w_, it, cuda, ha)
        a = distutil.time_iters(allreduce, w_, it, cuda, ha)
        s = distutil.time_iters(serial, w_, it, cuda, ha)
        ovs = [distutil.time_iters(make_overlap(c), w_, it, cuda, ha) for c in chunk_list]
        vals = distutil.max_over_ranks([median(g), median(a), median(s)] + [median(o) for o in ovs],
                                       dist, cuda)
        gm, am, sm, ovm = vals[0], vals[1], vals[2], vals[3:]
        for c, o in zip(chunk_list, ovm):
            log(f"{name:28s} M={M:6d} N={N:6d} K={K:6d} gemm {gm:9.1f} ar {am:9.1f} serial {sm:9.1f} "
                f"overlap[{c}] {o:9.1f} us  (saves {100 * (1 - o / sm):5.1f}%)  chk {err:.1e}")
            if out is not None:
                out.row(name=name, M=M, N=N, K=K, gpus=n, gemm_us=f"{gm:.3f}", allreduce_us=f"{am:.3f}",
                        serial_us=f"{sm:.3f}", overlap_us=f"{o:.3f}", chunks=c)
        del x, w, wt, y, ref
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if out is not None:
        out.close()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunks", default="2,4,8")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--algo", default="Ring")
    ap.add_argument("--no-host-ahead", action="store_true",
                    help="time iterations as the host issues them (no GPU sleep queued first; "
                         "host launch overhead then counts when the GPU is idle)")
    ap.add_argument("--cpu-smoke", action="store_true")
    args = ap.parse_args()
    if args.algo:
        if os.environ.get("NCCL_ALGO", args.algo) != args.algo:
            sys.exit(f"NCCL_ALGO={os.environ['NCCL_ALGO']} conflicts with --algo {args.algo}")
        os.environ["NCCL_ALGO"] = args.algo
    if not args.cpu_smoke and (not torch.cuda.is_available() or torch.cuda.device_count() < args.gpus):
        sys.exit(f"need {args.gpus} GPUs, found {torch.cuda.device_count()}")
    distutil.spawn(worker, args.gpus, args)


if __name__ == "__main__":
    main()
