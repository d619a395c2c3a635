"""T3 (Pati et al., ASPLOS'24): the producer GEMM fused with a DMA-driven ring ReduceScatter, and
(the CAIS authors' extension) a DMA ring AllGather consumed by row-chunk sub-GEMMs; no SMs for
communication, no NVLS (spec 2.3, A18).

GEMM-RS: every GPU computes its output shard by shard in ring order (staggered work-group
scheduling: GPU g first produces shard g+1, the one its ring step 0 sends), as N concurrent
row-chunk GEMMs whose priorities order them. A tracker counts each tile row's finished tiles (a
local counter per row of tiles); when a row is complete the copy engine pushes it to the previous
GPU as a reduce-write that adds at the destination (near-memory op-and-store), and flags it. Step
s forwards what step s-1 delivered, so after N-1 steps every GPU's own shard holds the sum. LN
runs on the shard after the whole ReduceScatter.
AG-GEMM: the LN shard travels the ring by DMA pushes, row block by row block; the consumer GEMM is
N row-chunk GEMMs, chunk i (shard g - i) waiting per row block for its arrival.
The trigger programs run as one-warp blocks beside the GEMM (no SM issue slots for the data:
the copy engine moves it); standing for T3's tracker and trigger hardware, they take no
registers (as CAIS's gates), so they never keep a GEMM tile off its SM.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from harness.functional_check import Computed, Gathered
from harness.gpu.isa_text import isa
from harness.kernels.builder import affine, rotated
from harness.kernels.gemm import Signal, plan
from harness.schemes import SchemeParams, register
from harness.schemes.lowering import Lowering
from harness.workload.graph import Collective, Gemm, Norm
from harness.workload.models import ELEM_BYTES as ELEM

TILE_ROWS = 128


def ring_partials(gpus: int, shard_rows: int, cols: int, gpu: int) -> np.ndarray:
    """GPU `gpu`'s partial buffer after the ring ReduceScatter of a functional run: every GPU
    starts with g + 1 everywhere; at step s GPU g adds its shard (g + 1 + s) into GPU g - 1's, so
    each GPU's own shard ends with the sum and the others with what passed through."""
    val = np.array([[g + 1.0] * gpus for g in range(gpus)])  # val[g][k]: shard k on GPU g
    for s in range(gpus - 1):
        adds = [((g - 1) % gpus, (g + 1 + s) % gpus, val[g][(g + 1 + s) % gpus]) for g in range(gpus)]
        for dst, k, v in adds:
            val[dst][k] += v
    return np.repeat(val[gpu], shard_rows)[:, None] * np.ones((1, cols))


class T3Lowering(Lowering):
    def __init__(self, graph, target, scheme: str):
        super().__init__(graph, target, scheme)
        self.dma = self.b.stream("dma", priority=100)
        self.chunk_streams = [self.b.stream(f"chunk{i}", priority=50 - i) for i in range(target.gpus)]

    def _rows(self, op_name: str, shard_rows: int) -> int:
        self.require_whole_tiles(shard_rows, TILE_ROWS, f"the shards of '{op_name}'")
        return shard_rows // TILE_ROWS

    def gemm_rs(self, op: Gemm, rs: Collective, after: tuple[int, ...]) -> tuple[int, int]:
        """The producer GEMM as N shard GEMMs in ring order + the DMA ring ReduceScatter; returns
        (the launch after which the shard is reduced, GPU-offset of the shard in the partial)."""
        G, ldc = self.t.gpus, op.N * ELEM
        shard_rows = op.M // G
        R = self._rows(op.name, shard_rows)
        partial = self.tensor(op.name, op.M * ldc)  # local memory: the copy engine pushes from it
        c = plan(shard_rows, op.N, op.K, self.t.num_sms, TILE_ROWS)
        gx = math.ceil(op.N / c.tn)
        trackers = self.b.flags(f"{op.name}.tracker", G * R)
        for s in range(G):  # shard (g + 1 + s) mod G, its tile rows counted in trackers[s*R + row]
            self.gemm(op, self.chunk_streams[s], name=f"{op.name}.chunk{s}", shard=(shard_rows, 1 + s), config=c,
                      signal=Signal(trackers, "local", rows_per_flag=c.tm, base=8 * R * s), after=after)
        steps = self.b.flags(f"{rs.name}.steps", (G - 1) * R)
        # The add-at-destination of step s lands in the previous GPU's chunk s + 1, which that GPU
        # computes itself: its GEMM's store would overwrite an add that came first. So each GPU
        # tells the next one when its own tiles of a chunk's tile row are stored (ready flags),
        # and a push waits for that (T3 adds both in the memory controller; here the store and
        # the add are ordered instead).
        ready = self.b.flags(f"{rs.name}.ready", G * R)
        ki, p = self.b.kernel(f"{rs.name}.ready", R, 1, threads=32, regs=0)
        nxt = affine(1, g=1, mod=G)
        for s in range(1, G):
            p.ins(isa.FLAG_WAIT, buffer=trackers, addr=affine(8 * R * s, bx=8), value=gx)
            p.ins(isa.FLAG_SIGNAL, buffer=ready, addr=affine(8 * R * s, bx=8), value=1, scope=isa.REMOTE, peer=nxt)
        self.launch(rs, ki, self.b.stream(f"{rs.name}.ready", priority=100), after=after)
        ki, p = self.b.kernel(f"{rs.name}.dma", R, 1, threads=32, regs=0)
        prev = affine(G - 1, g=1, mod=G)
        row = affine(0, bx=TILE_ROWS * ldc)
        for s in range(G - 1):
            p.ins(isa.FLAG_WAIT, buffer=trackers, addr=affine(8 * R * s, bx=8), value=gx)
            p.ins(isa.FLAG_WAIT, buffer=ready, addr=affine(8 * R * (s + 1), bx=8), value=1)  # the destination's own tiles
            if s:
                p.ins(isa.FLAG_WAIT, buffer=steps, addr=affine(8 * R * (s - 1), bx=8), value=1)
            rows = rotated(row, shard_rows * ldc, G, 1 + s)
            self.push_step(p, partial, rows, prev, TILE_ROWS * ldc)
            p.ins(isa.FLAG_SIGNAL, buffer=steps, addr=affine(8 * R * s, bx=8), value=1, scope=isa.REMOTE, peer=prev)
        p.ins(isa.FLAG_WAIT, buffer=trackers, addr=affine(8 * R * (G - 1), bx=8), value=gx)  # own tiles of own shard
        p.ins(isa.FLAG_WAIT, buffer=steps, addr=affine(8 * R * (G - 2), bx=8), value=1)    # the others' sum of it
        self.tensors[rs.name] = partial
        self.expect(rs.name, Computed(self.b.wl.buffers[partial].name, functools.partial(ring_partials, G, shard_rows, op.N)))
        return self.launch(rs, ki, self.dma, after=after), shard_rows * ldc

    def push_step(self, p, buf: int, rows, peer, nbytes: int) -> None:
        p.ins(isa.DMA_PUSH_REDUCE, buffer=buf, addr=rows, peer=peer, src_buffer=buf, src_addr=rows, rows=1,
              row_bytes=nbytes)

    def ring_ag(self, ag: Collective, after: tuple[int, ...]) -> tuple[int, int, int]:
        """DMA ring AllGather of the shard into a full buffer; returns (launch, arrival flags,
        row blocks per shard). Flag s*R + b on GPU g: row block b of shard g - 1 - s arrived."""
        G, ldh = self.t.gpus, ag.cols * ELEM
        shard_rows = ag.rows // G
        R = self._rows(ag.name, shard_rows)
        src = self.shard_of(ag)
        full = self.tensor(ag.name, ag.bytes)  # unicast: each push goes to one peer
        # the GPU's own block is never pushed to it: its first row-chunk GEMM reads the shard itself
        self.expect(ag.name, Gathered(ag.name, self.b.wl.buffers[src].name, ag.rows, ag.cols, own=0.0))
        arrived = self.b.flags(f"{ag.name}.arrived", (G - 1) * R)
        ki, p = self.b.kernel(f"{ag.name}.dma", R, 1, threads=32, regs=0)
        nxt = affine(1, g=1, mod=G)
        block = affine(0, bx=TILE_ROWS * ldh)
        for s in range(G - 1):
            dst = rotated(block, shard_rows * ldh, G, -s)
            if s:
                p.ins(isa.FLAG_WAIT, buffer=arrived, addr=affine(8 * R * (s - 1), bx=8), value=1)
            src_buf, src_addr = (src, block) if s == 0 else (full, dst)
            p.ins(isa.DMA_PUSH, buffer=full, addr=dst, peer=nxt, src_buffer=src_buf, src_addr=src_addr, rows=1,
                  row_bytes=TILE_ROWS * ldh)
            p.ins(isa.FLAG_SIGNAL, buffer=arrived, addr=affine(8 * R * s, bx=8), value=1, scope=isa.REMOTE, peer=nxt)
        return self.launch(ag, ki, self.dma, after=after), arrived, R

    def chunk_wait(self, arrived: int, R: int, i: int, c) -> tuple:
        """Chunk i (shard g - i) waits for ring step i - 1 to have delivered its row block."""
        return (arrived, affine(8 * R * (i - 1), by=8 * (c.tm // TILE_ROWS)), 1)

    def ag_gemm(self, ag: Collective, op: Gemm, after: tuple[int, ...]) -> tuple[int, ...]:
        """The consumer as N row-chunk GEMMs: chunk 0 on the local shard, chunk i on shard g - i
        as it arrives. Returns their launches."""
        G = self.t.gpus
        shard_rows = op.M // G
        dma, arrived, R = self.ring_ag(ag, after)
        c = plan(shard_rows, op.N, op.K, self.t.num_sms, TILE_ROWS)
        full = self.tensors[ag.name]
        out = self.out_of(op)
        launches = [self.gemm(op, self.chunk_streams[0], name=f"{op.name}.chunk0", a=self.tensors[ag.source] if ag.source else full,
                              rows=shard_rows, config=c, after=after)]
        for i in range(1, G):
            wait = self.chunk_wait(arrived, R, i, c)
            launches.append(self.gemm(op, self.chunk_streams[i], name=f"{op.name}.chunk{i}", a=full, out=out,
                                      shard=(shard_rows, -i), wait=wait, config=c, after=after))
        return (dma, *launches)


def lower_t3(graph, target, params, scheme: str, cls=T3Lowering):
    lw = cls(graph, target, scheme)
    ops, i, pending = graph.ops, 0, ()
    while i < len(ops):
        op = ops[i]
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if isinstance(op, Gemm) and op.out_partial and isinstance(nxt, Collective) and nxt.kind == "reduce_scatter":
            rs, offset = lw.gemm_rs(op, nxt, pending)
            pending = (rs,)
            i += 2
            ln = ops[i] if i < len(ops) else None
            if isinstance(ln, Norm) and ln.deps == (nxt.name,):
                pending = (lw.norm(ln, x_gpu_offset=offset, after=pending),)
                i += 1
            continue
        if isinstance(op, Collective) and op.kind == "all_gather":
            if isinstance(nxt, Gemm) and nxt.a_gathered and nxt.deps == (op.name,):
                pending = lw.ag_gemm(op, nxt, pending)
                i += 2
            else:  # a re-gather for a wgrad GEMM: the ring alone
                pending = (lw.ring_ag(op, pending)[0],)
                i += 1
            continue
        if isinstance(op, Collective):
            raise ValueError(f"{scheme}: collective '{op.name}' ({op.kind}) has no T3 lowering here")
        pending = (lw.plain(op, after=pending),)
        i += 1
    return lw.finish()


@register("t3", partition="sp", params=SchemeParams,
          summary="T3: GEMM fused with a DMA ring ReduceScatter (tracker + near-memory adds), DMA ring AllGather "
                  "consumed by row-chunk GEMMs")
def lower(graph, target, params: SchemeParams):
    return lower_t3(graph, target, params, "t3")
