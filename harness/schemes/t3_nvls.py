"""T3-NVLS: T3 with NVIDIA's DMA-based NVLS design (spec 2.3 and A18; CAIS paper IV-A).

GEMM-RS: the producer GEMM stores its partials locally with a tracker per tile row; when a tile
row is done, the GPU's trigger issues it as push reductions toward the row's owner, which the
switch aggregates in its reduction table (the merge unit's hardware and capacity, without any
thread-block coordination) and writes once to the owner; the owner's own partial is added
locally. The owner counts the contributions that land per row block (red.cais arrival counters)
and LayerNorm starts when its whole shard is in. AG-GEMM: the LN shard is multicast through the
switch (DMA multimem.st), row block by row block, each followed by a flag to every peer; the
consumer runs as N row-chunk GEMMs as in T3, chunk i waiting for shard g - i's blocks. No SMs
move data (one-warp trigger blocks beside the GEMM).
"""
from __future__ import annotations

import math

from harness.gpu.isa_text import isa
from harness.kernels.builder import affine, rotated
from harness.kernels.flags import signal_peers
from harness.kernels.gemm import Signal, plan
from harness.schemes import SchemeParams, register
from harness.schemes.t3 import TILE_ROWS, T3Lowering, lower_t3
from harness.workload.graph import Collective, Gemm
from harness.workload.models import ELEM_BYTES as ELEM

R_ROWS = 1  # tile register of a row block on its way out


class T3NvlsLowering(T3Lowering):
    def gemm_rs(self, op: Gemm, rs: Collective, after: tuple[int, ...]) -> tuple[int, int]:
        G, ldc = self.t.gpus, op.N * ELEM
        shard_rows = op.M // G
        R = self._rows(op.name, shard_rows)
        block = TILE_ROWS * ldc
        partial = self.tensor(op.name, op.M * ldc)
        out = self.out_of(rs)  # the owner's reduced shard, zero before the reductions land
        arrivals = self.b.flags(f"{rs.name}.arrived", R)
        buf = self.b.wl.buffers[out]
        buf.arrival_region_bytes, buf.arrival_flag_buffer = block, arrivals
        c = plan(op.M, op.N, op.K, self.t.num_sms, TILE_ROWS)  # tiles within a tracker's row block
        gx = math.ceil(op.N / c.tn)
        trackers = self.b.flags(f"{op.name}.tracker", G * R)
        self.gemm(op, self.main, out=partial, config=c, signal=Signal(trackers, "local", rows_per_flag=TILE_ROWS),
                  after=after)
        ki, p = self.b.kernel(f"{rs.name}.dma", R, 1, threads=32, regs=0)
        k = self.b.wl.kernels[ki]
        k.cais.enabled, k.cais.num_gpus = True, G  # push reductions the switch merges, N - 1 per line
        for j in range(G):  # shards g + 1, g + 2, ..., then the GPU's own
            rows = rotated(affine(0, bx=block), shard_rows * ldc, G, 1 + j)
            tracker = rotated(affine(0, bx=8), 8 * R, G, 1 + j)
            p.ins(isa.FLAG_WAIT, buffer=trackers, addr=tracker, value=gx)
            p.ins(isa.LD, buffer=partial, addr=rows, rows=1, row_bytes=block, reg=R_ROWS)
            owner = affine(1 + j, g=1, mod=G)
            p.ins(isa.RED_CAIS, buffer=out, addr=affine(0, bx=block), peer=owner, rows=1, row_bytes=block,
                  reg=R_ROWS)
        p.ins(isa.WAIT, count=0)
        p.ins(isa.FLAG_WAIT, buffer=arrivals, addr=affine(0, bx=8), value=(G - 1) * block)  # the others' sums
        return self.launch(rs, ki, self.dma, after=after), 0

    def ring_ag(self, ag: Collective, after: tuple[int, ...]) -> tuple[int, int, int]:
        """Multicast every row block of the shard (DMA multimem.st), then flag every peer.
        Flag k*R + b on GPU g: row block b of shard k arrived."""
        G, ldh = self.t.gpus, ag.cols * ELEM
        shard_rows = ag.rows // G
        R = self._rows(ag.name, shard_rows)
        src = self.shard_of(ag)
        full = self.tensor(ag.name, ag.bytes, multicast=True)
        arrived = self.b.flags(f"{ag.name}.arrived", G * R)
        ki, p = self.b.kernel(f"{ag.name}.dma", R, 1, threads=32, regs=0)
        block = TILE_ROWS * ldh
        p.ins(isa.DMA_PUSH, buffer=full, addr=affine(0, g=shard_rows * ldh, bx=block), src_buffer=src,
              src_addr=affine(0, bx=block), rows=1, row_bytes=block)
        signal_peers(p, arrived, affine(0, g=8 * R, bx=8), G)
        return self.launch(ag, ki, self.dma, after=after), arrived, R

    def chunk_wait(self, arrived: int, R: int, i: int, c) -> tuple:
        """Chunk i (shard g - i) waits for its row block's multicast."""
        return (arrived, rotated(affine(0, by=8 * (c.tm // TILE_ROWS)), 8 * R, self.t.gpus, -i), 1)


@register("t3_nvls", partition="sp", params=SchemeParams,
          summary="T3-NVLS: tracker-triggered push reductions merged in the switch, DMA multicast AllGather")
def lower(graph, target, params: SchemeParams):
    return lower_t3(graph, target, params, "t3_nvls", T3NvlsLowering)
