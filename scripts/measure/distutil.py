"""Process-per-GPU launching and timing helpers for measure_nccl.py / measure_overlap.py.

The multicast-off switches (common.SAFE_ENV) are set in os.environ by the importing script
before torch.distributed is imported; spawned workers inherit them and check them again.
"""
from __future__ import annotations

import os
import socket
import sys
import time

from common import SAFE_ENV, enforce_no_multicast, median


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def spawn(worker, nprocs: int, args):
    """Run worker(rank, nprocs, args) in nprocs processes (torch.multiprocessing, spawn)."""
    import torch.multiprocessing as mp
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(_entry, args=(worker, nprocs, args), nprocs=nprocs, join=True)


def _entry(rank, worker, nprocs, args):
    enforce_no_multicast()
    for k, v in SAFE_ENV.items():
        assert os.environ.get(k) == v, (k, os.environ.get(k))
    worker(rank, nprocs, args)


def init(rank: int, nprocs: int, cuda: bool):
    import torch
    import torch.distributed as dist
    if cuda:
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank, world_size=nprocs,
                                device_id=torch.device(f"cuda:{rank}"))
    else:
        dist.init_process_group("gloo", rank=rank, world_size=nprocs)
    return dist


SLEEP_HZ = 2.0e9  # cycles per second assumed for torch.cuda._sleep (H100/H200 boost ~1.98 GHz)


def time_iters(fn, warmup: int, iters: int, cuda: bool, host_ahead: bool = True, before_timed=None):
    """Per-iteration times in microseconds (CUDA events on the current stream, or host clock).

    host_ahead: before the timed loop, queue a GPU sleep long enough (1.5x the measured host
    enqueue time of all timed iterations, at most 0.25 s) for the host to queue every timed
    iteration before the GPU reaches the first one. The events then time GPU execution of
    back-to-back iterations, without host launch overhead (PyTorch's per-collective host cost
    is tens of microseconds, comparable to small collectives). host_ahead=False times
    iterations as the host issues them (launch overhead included when the GPU is idle).
    before_timed(sleep_s): called once the GPU is idle, just before the timed loop is queued.
    """
    import torch
    for _ in range(warmup):
        fn()
    if not cuda:
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
        return ts
    torch.cuda.synchronize()
    sleep_s = 0.0
    if host_ahead:
        t0 = time.perf_counter()
        for _ in range(2):  # host enqueue cost per iteration (untimed calls)
            fn()
        h = (time.perf_counter() - t0) / 2
        torch.cuda.synchronize()
        sleep_s = min(0.25, 1.5 * iters * h + 1e-3)
    if before_timed is not None:
        before_timed(sleep_s)
    st = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    if sleep_s > 0:
        torch.cuda._sleep(int(sleep_s * SLEEP_HZ))
    for i in range(iters):
        st[i].record()
        fn()
        en[i].record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e3 for a, b in zip(st, en)]


def max_over_ranks(values, dist, cuda: bool):
    """Element-wise MAX over ranks of a list of floats (float64 tensor, MAX all-reduce)."""
    import torch
    t = torch.tensor(values, dtype=torch.float64, device="cuda" if cuda else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def rank_median_max(ts, dist, cuda):
    return max_over_ranks([median(ts)], dist, cuda)[0]


def log0(rank, *a):
    if rank == 0:
        print(*a, flush=True)
        sys.stdout.flush()
