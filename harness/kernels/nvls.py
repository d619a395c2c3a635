"""NVLS collectives as tile-ISA kernels, following NCCL's NVLS algorithm on one NVSwitch node.

The tensor lives in a multicast object (every GPU holds a copy at the same offset, bytes D).
Rank r owns the slice [r D/N, (r+1) D/N); `channels` CTAs (NCCL's NVLS channels, 16 by default,
spec A15) split the slice and walk it in chunks:
  all_reduce      multimem.ld_reduce of the chunk (the switch reads every member's copy and
                  returns the sum), then multimem.st of the sum (the switch writes every member);
  reduce_scatter  multimem.ld_reduce of the chunk, stored to the rank's local shard;
  all_gather      the rank's shard loaded locally and multimem.st to every member.
Cross-rank flags order them as NCCL's do: channel c of every rank meets channel c of the others
before reading peers' data (reductions) and after its stores (so a consumer kernel that starts
after this one finds every member's data in place).
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.gpu.isa_text import isa
from harness.kernels.builder import WorkloadBuilder, affine
from harness.kernels.flags import barrier

KINDS = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass(frozen=True)
class NvlsConfig:
    channels: int = 16
    chunk_bytes: int = 32768   # one ld_reduce / st instruction (NCCL's NVLS chunk is of this order)
    threads: int = 512


def split(total: int, channels: int, chunk: int) -> tuple[int, int, int]:
    """(bytes per channel, chunk bytes, chunks per channel) for a slice of `total` bytes."""
    if total % channels:
        raise ValueError(f"NVLS slice of {total} B does not split over {channels} channels")
    per = total // channels
    c = min(chunk, per)
    while per % c:
        c //= 2
    return per, c, per // c


def collective(b: WorkloadBuilder, name: str, kind: str, nbytes: int, *, mc: int, shard: int = -1,
               cfg: NvlsConfig = NvlsConfig(), chunks: int = 1, wait=None) -> int:
    """Add an NVLS `kind` kernel over a multicast buffer `mc` of nbytes per GPU; `shard` is the
    local [D/N] buffer a reduce_scatter writes / an all_gather reads. Returns the kernel index.

    chunks > 1 walks the tensor as consecutive chunks, each reduced like a whole tensor (rank r
    takes the r-th 1/N of every chunk; CoCoNet-NVLS's chunked overlap); `wait(p)` emits what a
    channel waits for before each chunk (e.g. the producer GEMM's tiles of it)."""
    if kind not in KINDS:
        raise ValueError(f"unknown NVLS collective '{kind}'")
    G, C = b.gpus, cfg.channels
    if nbytes % (G * chunks):
        raise ValueError(f"{name}: {nbytes} B does not split into {chunks} chunks over {G} GPUs")
    chunk_total = nbytes // chunks
    slice_bytes = chunk_total // G
    per, chunk, n = split(slice_bytes, C, cfg.chunk_bytes)
    flags = b.flags(f"{name}.flags", (chunks + 1) * C)
    ki, p = b.kernel(name, C, 1, threads=cfg.threads, regs=64)
    p.loop(chunks)
    if wait is not None:
        wait(p)
    if kind != "all_gather":  # every member's input of this chunk is in place
        barrier(p, flags, affine(0, bx=8, loops=(8 * C,)), G)
    mc_addr = affine(0, g=slice_bytes, bx=per, loops=(chunk_total, chunk))
    local_addr = affine(0, bx=per, loops=(slice_bytes, chunk))
    p.loop(n)
    # the chunk travels through tile register 1 (values in functional runs); a channel waits for
    # its chunk's data only (WAIT scope=LOCAL), so its posted stores of one chunk stay in flight
    # while it reads the next, as NCCL's reduce warps stream a loop
    if kind == "all_reduce":
        p.ins(isa.MM_LD_REDUCE, buffer=mc, addr=mc_addr, rows=1, row_bytes=chunk, reg=1, is_async=True)
        p.ins(isa.WAIT, scope=isa.LOCAL)
        p.ins(isa.MM_ST, buffer=mc, addr=mc_addr, rows=1, row_bytes=chunk, is_async=True, reg=1)
    elif kind == "reduce_scatter":
        p.ins(isa.MM_LD_REDUCE, buffer=mc, addr=mc_addr, rows=1, row_bytes=chunk, reg=1, is_async=True)
        p.ins(isa.WAIT, scope=isa.LOCAL)
        p.ins(isa.ST, buffer=shard, addr=local_addr, rows=1, row_bytes=chunk, is_async=True, reg=1)
    else:
        p.ins(isa.LD, buffer=shard, addr=local_addr, rows=1, row_bytes=chunk, reg=1, is_async=True)
        p.ins(isa.WAIT, scope=isa.LOCAL)
        p.ins(isa.MM_ST, buffer=mc, addr=mc_addr, rows=1, row_bytes=chunk, is_async=True, reg=1)
    p.end()
    p.end()
    p.ins(isa.WAIT, count=0)
    if kind != "reduce_scatter":  # every member's copy is complete
        barrier(p, flags, affine(8 * C * chunks, bx=8), G)
    return ki
