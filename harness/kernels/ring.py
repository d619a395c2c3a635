"""NCCL's ring (Simple protocol) as tile-ISA kernels: `channels` CTAs, each owning a contiguous
region of the tensor; a region's N parts travel around the ring g -> g+1.

AllReduce of a region (parts of P bytes, part i at offset i P):
  reduce-scatter, steps s = 0 .. N-2: send part (g - s) mod N to the next GPU (a remote store
  into its receive slot s, then a flag); wait for the previous GPU's part (g - s - 1) mod N,
  add it to the local part (load both, add, store);
  all-gather, steps s = 0 .. N-2: send part (g + 1 - s) mod N (reduced) straight into the next
  GPU's tensor, flag; wait for part (g - s) mod N from the previous GPU.
After N - 1 reduce-scatter steps GPU g holds the sum of part (g + 1) mod N. ReduceScatter and
AllGather are the two halves. Receive slots are distinct per (region, step), so no slot is
reused within a collective; the data moved per GPU is NCCL's: (N-1)/N of the tensor per half.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.gpu.isa_text import isa
from harness.kernels.builder import Program, WorkloadBuilder, affine, rotated

KINDS = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass(frozen=True)
class RingConfig:
    channels: int = 16
    threads: int = 512


def part_addr(base, part_bytes: int, gpus: int, shift: int):
    """base + ((g + shift) mod gpus) * part_bytes."""
    return rotated(base, part_bytes, gpus, shift)


def ring_steps(p: Program, kind: str, *, data: int, recv: int, flags: int, region, part_bytes: int, gpus: int,
               recv_base, flag_base) -> None:
    """The ring steps over one region at `region` (an affine offset of part 0 in `data`).
    recv_base / flag_base: offsets of this region's receive slots and flags (affine)."""
    nxt = affine(1, g=1, mod=gpus)
    steps = []
    if kind in ("all_reduce", "reduce_scatter"):
        steps += [("rs", s) for s in range(gpus - 1)]
    if kind in ("all_reduce", "all_gather"):
        steps += [("ag", s) for s in range(gpus - 1)]
    for i, (phase, s) in enumerate(steps):
        slot = affine(recv_base.base + i * part_bytes, bx=recv_base.block_x, loops=tuple(recv_base.loop))
        flag = affine(flag_base.base + 8 * i, bx=flag_base.block_x, loops=tuple(flag_base.loop))
        if phase == "rs":
            send = part_addr(region, part_bytes, gpus, -s)
            p.ins(isa.LD, buffer=data, addr=send, rows=1, row_bytes=part_bytes)
            p.ins(isa.ST_REMOTE, buffer=recv, addr=slot, peer=nxt, rows=1, row_bytes=part_bytes)
            p.ins(isa.FLAG_SIGNAL, buffer=flags, addr=flag, value=1, scope=isa.REMOTE, peer=nxt)
            p.ins(isa.FLAG_WAIT, buffer=flags, addr=flag, value=1)
            mine = part_addr(region, part_bytes, gpus, -s - 1)
            p.ins(isa.LD, buffer=recv, addr=slot, rows=1, row_bytes=part_bytes, is_async=True)
            p.ins(isa.LD, buffer=data, addr=mine, rows=1, row_bytes=part_bytes, is_async=True)
            p.ins(isa.WAIT, count=0)
            p.ins(isa.ALU, elements=part_bytes // 2, flops_per_element=1.0)
            p.ins(isa.ST, buffer=data, addr=mine, rows=1, row_bytes=part_bytes)
        else:
            send = part_addr(region, part_bytes, gpus, 1 - s)
            p.ins(isa.LD, buffer=data, addr=send, rows=1, row_bytes=part_bytes)
            p.ins(isa.ST_REMOTE, buffer=data, addr=send, peer=nxt, rows=1, row_bytes=part_bytes)
            p.ins(isa.FLAG_SIGNAL, buffer=flags, addr=flag, value=1, scope=isa.REMOTE, peer=nxt)
            p.ins(isa.FLAG_WAIT, buffer=flags, addr=flag, value=1)


def steps_of(kind: str, gpus: int) -> int:
    return (2 if kind == "all_reduce" else 1) * (gpus - 1)


def collective(b: WorkloadBuilder, name: str, kind: str, nbytes: int, *, data: int,
               cfg: RingConfig = RingConfig(), chunks: int = 1, wait=None) -> int:
    """A ring `kind` over `data` (nbytes per GPU, every GPU's full-size buffer; a reduce_scatter
    leaves GPU g's reduced part (g + 1) mod N in place, an all_gather sends part (g + 1) mod N).
    chunks > 1 splits the tensor into consecutive chunks walked in order (CoCoNet's chunked
    overlap); `wait(p, chunk_loop_affine_offset)` emits what a channel waits for before a chunk."""
    if kind not in KINDS:
        raise ValueError(f"unknown ring collective '{kind}'")
    G, C = b.gpus, cfg.channels
    if nbytes % (chunks * C * G):
        raise ValueError(f"{name}: {nbytes} B does not split into {chunks} chunks x {C} channels x {G} parts")
    chunk = nbytes // chunks
    region_bytes = chunk // C
    part = region_bytes // G
    n = steps_of(kind, G)
    recv = b.buffer(f"{name}.recv", chunks * C * n * part)
    flags = b.flags(f"{name}.flags", chunks * C * n)
    ki, p = b.kernel(name, C, 1, threads=cfg.threads, regs=64)
    p.loop(chunks)
    if wait is not None:
        wait(p)
    ring_steps(p, kind, data=data, recv=recv, flags=flags, region=affine(0, bx=region_bytes, loops=(chunk,)),
               part_bytes=part, gpus=G, recv_base=affine(0, bx=n * part, loops=(C * n * part,)),
               flag_base=affine(0, bx=8 * n, loops=(8 * C * n,)))
    p.end()
    return ki
