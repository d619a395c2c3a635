"""FuseLib (Punniyamurthy et al., SC'24): GEMM + AllReduce fused, the work-groups that computed a
tile communicate it at once while others keep computing; no NVLS (spec 2.3 and A19).

Modelled as the two phases of FuseLib's persistent kernel, on two streams so that no launch gap
separates them:
  compute   the row-parallel GEMM; each tile's block writes its partial tile into slot g of the
            staging buffer on the tile's owner (owner of rows r: r // (T/N); zero-copy remote
            stores) and adds 1 to that tile's flag on the owner;
  reduce    blocks of the same kernel's communication phase, block b dispatched once compute tile
            b x tiles / blocks is done and behind every waiting compute tile (the compute stream
            has priority), as persistent CTAs turn to communication after their last tile so
            that communication never holds an SM a tile needs: block (bx, by) on GPU g waits until all N
            partials of its owned tile (bx, by // N) have landed, sums its 1/N slice of the tile's
            rows and writes the sum to every GPU (remote stores: a direct AllGather).
A one-block barrier after the reduce phase orders the next op after every GPU's stores. Per-GPU
traffic equals a ring AllReduce: 2 (N-1)/N D each way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.gpu.isa_text import isa
from harness.kernels import flags as flag_ops
from harness.kernels.builder import affine
from harness.kernels.gemm import Signal, Sink, plan
from harness.schemes import SchemeParams, register
from harness.schemes.lowering import Lowering
from harness.workload.graph import Collective, Gemm
from harness.workload.models import ELEM_BYTES as ELEM


MAX_REGS = 8  # tile registers per block (proto/isa.proto)


@dataclass
class FuseLibParams(SchemeParams):
    reduce_threads: int = 256
    """Threads of a communication-phase block."""

    def check(self) -> None:
        self.require("reduce_threads", 32 <= self.reduce_threads <= 1024 and self.reduce_threads % 32 == 0,
                     "whole warps, 32-1024")


def _slice_rows(lw: Lowering, op: Gemm, owner_rows: int):
    c = plan(op.M, op.N, op.K, lw.t.num_sms, owner_rows)
    G = lw.t.gpus
    if c.tm % G:
        raise ConfigError("system.gpus", f"scheme '{lw.scheme}' has each of the {G} GPUs reduce 1/{G} of the rows "
                          f"of every {c.tm}-row tile of '{op.name}'; allowed: a GPU count that divides {c.tm}")
    lw.require_whole_tiles(owner_rows, c.tm, f"each owner's rows of '{op.name}'")
    return c, c.tm // G


def lower_fused(graph, target, params, scheme: str, reduce_phase, sink_kind: str):
    """Lower a TP graph; each (row-parallel GEMM -> AllReduce) becomes a compute phase with a
    per-tile signal to the owner and a reduce phase `reduce_phase(p, lw, op, ar, ...)`."""
    lw = Lowering(graph, target, scheme)
    G = target.gpus
    comm = lw.b.stream("comm", priority=-1)
    pending: tuple[int, ...] = ()
    ops = graph.ops
    i = 0
    while i < len(ops):
        op = ops[i]
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if isinstance(op, Gemm) and op.out_partial and isinstance(nxt, Collective) and nxt.kind == "all_reduce":
            owner_rows = op.M // G
            c, rows = _slice_rows(lw, op, owner_rows)
            gx, tpo = math.ceil(op.N / c.tn), owner_rows // c.tm
            flags = lw.b.flags(f"{op.name}.tile_flags", gx * tpo)
            ldc = op.N * ELEM
            if sink_kind == "st_remote":
                partial = lw.tensor(f"{op.name}.staging", G * owner_rows * ldc)
            else:
                partial = lw.out_of(op)
            result = lw.tensor(nxt.name, op.M * ldc, multicast=True)
            gemm = lw.gemm(op, sink=Sink(sink_kind, owner_rows), signal=Signal(flags, "owner", owner_local=True),
                           out=partial, config=c, after=pending)
            ki, p = lw.b.kernel(f"{nxt.name}.reduce", gx, tpo * G, threads=params.reduce_threads, regs=32,
                                loads_via_l1=True)
            wait = affine(0, bx=8)
            wait.quotient.add(block_y=1, divisor=G, scale=8 * gx)
            p.ins(isa.FLAG_WAIT, buffer=flags, addr=wait, value=G)  # every GPU's partial, own included
            # a tile's columns: N when it is less than one tile; the last of several clipped to N
            clip = {"row_bytes_in_bounds": affine(op.N * ELEM, bx=-c.tn * ELEM)} if gx > 1 and op.N % c.tn else {}
            reduce_phase(p, lw, partial=partial, result=result, rows=rows, tn=min(c.tn, op.N), ldc=ldc,
                         owner_rows=owner_rows, clip=clip)
            # communication block b starts once compute tile b * tiles / blocks is done, so that
            # its blocks only ever take SMs the compute phase no longer needs (whichever stream
            # the host launched first), as a persistent CTA turns to communication after its tiles
            tiles, blocks = gx * math.ceil(op.M / c.tm), gx * tpo * G
            red = lw.launch(nxt, ki, comm, after=pending,
                            deps=({"producer": gemm, "scale_num": tiles, "scale_den": blocks, "lo": 0, "hi": 0},))
            bi, bp = lw.b.kernel(f"{nxt.name}.done", 1, 1, threads=32)
            flag_ops.barrier(bp, lw.b.flags(f"{nxt.name}.done_flags", 1), affine(0), G)
            pending = (lw.launch(nxt, bi, comm, after=(red,)),)
            i += 2
            continue
        if isinstance(op, Collective):
            raise ValueError(f"{scheme}: collective '{op.name}' does not follow a row-parallel GEMM")
        lw.plain(op, after=pending)
        pending = ()
        i += 1
    return lw.finish()


def _reduce_by_stores(p, lw, *, partial, result, rows, tn, ldc, owner_rows, clip):
    """Sum the N staged partials of this block's rows, write the sum to every GPU."""
    G = lw.t.gpus
    row0 = affine(0, g=owner_rows * ldc, by=rows * ldc, bx=tn * ELEM)  # rows g*T/N + by*rows
    if G > MAX_REGS:
        raise ConfigError("system.gpus", f"scheme 'fuselib' has the owner sum the {G} GPUs' partials in its "
                          f"{MAX_REGS} tile registers; allowed: at most {MAX_REGS} GPUs")
    for k in range(G):  # slot k: GPU k's partial of this GPU's shard, into register k + 1
        p.ins(isa.LD, buffer=partial, addr=affine(k * owner_rows * ldc, by=rows * ldc, bx=tn * ELEM), rows=rows,
              row_bytes=tn * ELEM, row_stride=ldc, is_async=True, reg=k + 1, **clip)
    p.ins(isa.WAIT, count=0)
    for k in range(1, G):
        p.ins(isa.ALU, elements=rows * tn, flops_per_element=1.0, reg=1, src_reg=k + 1)
    p.ins(isa.ST, buffer=result, addr=row0, rows=rows, row_bytes=tn * ELEM, row_stride=ldc, is_async=True, reg=1,
          **clip)
    for i in range(1, G):
        p.ins(isa.ST_REMOTE, buffer=result, addr=row0, peer=affine(i, g=1, mod=G), rows=rows, row_bytes=tn * ELEM,
              row_stride=ldc, is_async=True, reg=1, **clip)
    p.ins(isa.WAIT, count=0)


@register("fuselib", partition="tp", params=FuseLibParams,
          summary="FuseLib fused GEMM+AllReduce: per-tile remote stores to the owner, owner sums, direct AllGather")
def lower(graph, target, params: FuseLibParams):
    return lower_fused(graph, target, params, "fuselib", _reduce_by_stores, "st_remote")
