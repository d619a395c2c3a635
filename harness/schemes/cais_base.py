"""CAIS-Base (spec 2.1): the compute-aware ISA and the switch's merge unit, without TB
coordination and without the graph-level optimizer.

The layer is lowered to plain kernels, one stream, kernel-level dependencies, and the CAIS
compiler (harness.compiler) turns their GPU-invariant remote accesses into .cais ones:
- GEMM-RS: the producer GEMM's tiles go to the owner of their rows as plain remote atomic adds
  (Sink red_remote; the owner's own tile is a local add into the zero-initialised shard); the
  compiler rewrites them to red.cais, which the merge unit merges (N-1 contributions per line).
  The owner counts what lands per tile row (red arrival counters): a small wait kernel ends when
  its shard is complete, and LN runs on the shard after it.
- AG-GEMM: a cross-GPU barrier (every owner's LN shard is written), then the consumer GEMM loads
  A's rows from their owners with plain remote loads (Source remote), rewritten to ld.cais.
- A re-gather for a weight-gradient GEMM (training): the barrier, then a pull gather kernel (one
  block per 128-row block, a remote load from the owner and a local store), its loads rewritten
  to ld.cais too.
scheme.compile=false keeps the source form (plain remote loads and reductions, unmerged): the
baseline of the traffic claim (N-1 = 7x the remote-load bytes at 8 GPUs).
A shard that is not whole 128-row tiles ends in an edge tile (harness.kernels.gemm): the GEMMs
clip it, the re-gather clips its last block per owner, and the arrival wait of that tile row
expects its fewer bytes (flag.wait wait_for).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from harness.compiler import Coordination, compile_cais
from harness.gpu.isa_text import isa
from harness.kernels.builder import affine
from harness.kernels.flags import barrier
from harness.kernels.gemm import Sink, Source, plan, rows_in_bounds
from harness.schemes.cais_dataflow import BLOCK_ROWS, block_count
from harness.schemes import SchemeParams, register
from harness.schemes.lowering import Lowering
from harness.workload.graph import Collective, Gemm
from harness.workload.models import ELEM_BYTES as ELEM

GATHER_ROWS = 128  # rows one block of the re-gather kernel moves
R_ROWS = 1         # tile register of the gathered rows


@dataclass
class CaisBaseParams(SchemeParams):
    compile: bool = True
    """Run the CAIS compiler pass on the lowered kernels (false: plain remote loads and
    reductions, nothing merged; the traffic claim's baseline)."""
    pre_launch_sync: bool = False
    """Pre-launch TB-group synchronisation on the compiled kernels (CAIS-Base has none; for
    ablations and tests; needs net.features group_sync)."""
    pre_access_sync: bool = False
    """Pre-access synchronisation (a CAIS_SYNC before the first .cais access; CAIS-Base has
    none; for ablations and tests; needs net.features group_sync)."""


class CaisBaseLowering(Lowering):
    def __init__(self, graph, target, scheme: str):
        super().__init__(graph, target, scheme)
        self._barriers = 0

    def barrier(self, op_name: str) -> int:
        """A one-block kernel in which every GPU waits for all the others (one flag per use)."""
        flags = self.b.flags(f"{op_name}.barrier{self._barriers}", 1)
        self._barriers += 1
        ki, p = self.b.kernel(f"{op_name}.barrier", 1, 1, threads=32, regs=32)
        barrier(p, flags, affine(0), self.t.gpus)
        return self.launch(op_name, ki)

    def gemm_rs(self, op: Gemm, rs: Collective) -> int:
        """The producer GEMM reducing its tiles into their owners' shards, then the owner's wait
        for every peer's contribution to each tile row of its shard."""
        G, ldc = self.t.gpus, op.N * ELEM
        shard_rows = op.M // G
        c = plan(op.M, op.N, op.K, self.t.num_sms, shard_rows if shard_rows % BLOCK_ROWS == 0 else BLOCK_ROWS)
        out = self.out_of(rs)
        if shard_rows % c.tm and c.tm != BLOCK_ROWS:
            raise ValueError(f"{op.name}: an edge tile of {c.tm} rows (cais_base counts arrivals per {BLOCK_ROWS}-row tile)")
        regions = math.ceil(shard_rows / c.tm)
        arrived = self.b.flags(f"{rs.name}.arrived", regions)
        buf = self.b.wl.buffers[out]
        buf.arrival_region_bytes, buf.arrival_flag_buffer = c.tm * ldc, arrived
        self.gemm(op, sink=Sink("red_remote", shard_rows), out=out, config=c)
        ki, p = self.b.kernel(f"{rs.name}.arrivals", regions, 1, threads=32, regs=32)
        per_row = op.N * ELEM  # bytes one peer's tiles put into a row of a tile row (edge tiles clipped)
        if shard_rows % c.tm:  # the edge tile's row expects its in-bounds rows
            p.ins(isa.FLAG_WAIT, buffer=arrived, addr=affine(0, bx=8), **block_count(shard_rows, (G - 1) * per_row, "bx"))
        else:
            p.ins(isa.FLAG_WAIT, buffer=arrived, addr=affine(0, bx=8), value=(G - 1) * c.tm * per_row)
        return self.launch(rs, ki)

    def ag_gemm(self, ag: Collective, op: Gemm) -> int:
        shard = self.shard_of(ag)
        self.tensors[ag.name] = shard
        self.expect(ag.name, None)  # the GEMM's tiles load the owners' rows: no buffer holds the gathered tensor
        self.barrier(ag.name)
        rows = op.M // self.t.gpus  # a shard that is not whole tiles: 128-row tiles, the last one an edge tile
        c = plan(op.M, op.N, op.K, self.t.num_sms, BLOCK_ROWS) if rows % BLOCK_ROWS else None
        return self.gemm(op, source=Source("remote", rows), a=shard, config=c)

    def regather(self, ag: Collective) -> int:
        """Pull every 128-row block of the tensor from its owner into a full local copy."""
        G, ldh = self.t.gpus, ag.cols * ELEM
        shard_rows = ag.rows // G
        per_owner = math.ceil(shard_rows / GATHER_ROWS)  # the last one partial when GATHER_ROWS does not divide
        shard = self.shard_of(ag)
        full = self.tensor(ag.name, ag.bytes)
        self.barrier(ag.name)
        ki, p = self.b.kernel(f"{ag.name}.gather", G * per_owner, 1, threads=128, regs=32)
        block = GATHER_ROWS * ldh
        owner = affine(0)
        owner.quotient.add(block_x=1, divisor=per_owner, scale=1)
        src = affine(0, bx=block)  # block bx's place in its owner's shard
        src.quotient.add(block_x=1, divisor=per_owner, scale=-per_owner * block)
        in_rows = rows_in_bounds(GATHER_ROWS, shard_rows, axis="bx")
        if in_rows is None:  # whole blocks: one contiguous run each
            p.ins(isa.LD_REMOTE, buffer=shard, addr=src, peer=owner, rows=1, row_bytes=block, reg=R_ROWS)
            p.ins(isa.ST, buffer=full, addr=affine(0, bx=block), rows=1, row_bytes=block, reg=R_ROWS)
        else:  # row by row, so that the owner's partial last block is clipped to its rows
            dst = affine(0, bx=block)
            dst.quotient.add(block_x=1, divisor=per_owner, scale=(shard_rows - per_owner * GATHER_ROWS) * ldh)
            p.ins(isa.LD_REMOTE, buffer=shard, addr=src, peer=owner, rows=GATHER_ROWS, row_bytes=ldh, row_stride=ldh,
                  reg=R_ROWS, rows_in_bounds=in_rows)
            p.ins(isa.ST, buffer=full, addr=dst, rows=GATHER_ROWS, row_bytes=ldh, row_stride=ldh, reg=R_ROWS,
                  rows_in_bounds=in_rows)
        return self.launch(ag, ki)


@register("cais_base", partition="sp", params=CaisBaseParams,
          summary="CAIS-Base: red.cais / ld.cais from the CAIS compiler, merged in the switch; kernel-serial, "
                  "no TB coordination")
def lower(graph, target, params: CaisBaseParams):
    lw = CaisBaseLowering(graph, target, "cais_base")
    ops, i = graph.ops, 0
    while i < len(ops):
        op = ops[i]
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if isinstance(op, Gemm) and op.out_partial and isinstance(nxt, Collective) and nxt.kind == "reduce_scatter":
            lw.gemm_rs(op, nxt)
            i += 2
        elif isinstance(op, Collective) and op.kind == "all_gather":
            if isinstance(nxt, Gemm) and nxt.a_gathered and nxt.deps == (op.name,):
                lw.ag_gemm(op, nxt)
                i += 2
            else:
                lw.regather(op)
                i += 1
        elif isinstance(op, Collective):
            raise ValueError(f"cais_base: collective '{op.name}' ({op.kind}) has no CAIS-Base lowering")
        else:
            lw.plain(op)
            i += 1
    if params.compile:
        compile_cais(lw.b, coordination=Coordination(params.pre_launch_sync, params.pre_access_sync))
    return lw.finish()
