"""LayerNorm and attention as tile-ISA kernels, as PyTorch runs them on Hopper (one row per block
for LayerNorm; FlashAttention's forward for attention), and their programs, which the layer
library (harness/kernels/layer_ops.py) reuses inside its own kernels."""
from __future__ import annotations

import math

from harness.gpu.isa_text import isa
from harness.gpu.kernels import ELEM, Program, add_buffer, affine, new_workload

def layernorm(M: int, N: int, threads: int = 128, vec_elems: int = 4, name: str | None = None):
    """Row-wise layernorm as PyTorch's vectorized_layer_norm_kernel runs it
    (aten/src/ATen/native/cuda/layer_norm_kernel.cu): one block of num_threads() = 128 threads
    per row, each thread loading vec_size = 4 elements (8 B of bf16) at a time. Pass 1
    (compute_stats) walks the row in rounds of threads x 8 B, each a load the thread waits for
    before its Welford update (a reciprocal per element: LN_PASS1_FLOPS); 16 resident blocks
    (32 registers, CUPTI: h100_layernorm_resources.csv) keep 16 KiB per SM in flight, so the
    kernel is bound by the HBM round trip and the SM's ALU issue together; a block reduction;
    pass 2 walks the row again: x (an L2 hit), gamma and beta loaded together, normalise, store
    (stores do not block)."""
    wl = new_workload(name or f"layernorm_{M}x{N}")
    x = add_buffer(wl, "x", M * N * ELEM)
    y = add_buffer(wl, "y", M * N * ELEM)
    gamma = add_buffer(wl, "gamma", N * ELEM)
    beta = add_buffer(wl, "beta", N * ELEM)
    k = wl.kernels.add(name="layernorm", grid_x=M, grid_y=1, threads_per_block=threads, regs_per_thread=32,
                       smem_bytes=threads // 32 * 3 // 2 * 4, loads_via_l1=True)
    layernorm_program(Program(k), x, y, gamma, beta, N, threads, vec_elems)
    wl.launches.add(kernel=0, stream=0)
    return wl


# ALU work per element of a layernorm pass as 2 x its SASS instructions (the ALU rate is FP32
# lanes x 2; every instruction takes an issue slot), {forward, backward}: PyTorch's
# vectorized_layer_norm_kernel / layer_norm_grad_input_kernel_vectorized loops as their source
# writes them, compiled for sm_90 (nvcc 13.0 -O3) and counted per 4-element iteration:
# forward pass 1 (Welford with a reciprocal per element) 73, pass 2 45; backward 56 and 69.
LN_PASS1_FLOPS = {False: 2 * 73 / 4, True: 2 * 56 / 4}
LN_PASS2_FLOPS = {False: 2 * 45 / 4, True: 2 * 69 / 4}


def layernorm_program(p: Program, x: int, y: int, gamma: int, beta: int, N: int, threads: int = 128,
                      vec_elems: int = 4, dy: int | None = None, x_gpu_offset: int = 0) -> None:
    """The program of one layernorm block (row bx of x [rows, N] -> y); see layernorm().
    With `dy` (backward): LayerNorm's input gradient as PyTorch's layer_norm_backward runs it per
    row: pass 1 reads the row of dy beside x for the two row reductions, pass 2 reads them again
    (L2 hits) with gamma to write dx into y: twice the row loads and about twice the arithmetic.
    x_gpu_offset: GPU g's rows start at g * x_gpu_offset in x (its shard of a full-size buffer)."""
    row = N * ELEM
    chunk = min(threads * vec_elems * ELEM, row)  # a row shorter than one round is one partial round
    rounds = math.ceil(row / chunk)
    backward = dy is not None
    # a row that is not whole rounds ends in a partial one (the threads past its end are predicated off)
    part = {"row_bytes_in_bounds": affine(row, loops=(-chunk,))} if row % chunk else {}
    p.loop(rounds)  # pass 1: load, then Welford on the 4 elements
    p.ins(isa.LD, buffer=x, addr=affine(0, bx=row, g=x_gpu_offset, loops=(chunk,)), rows=1, row_bytes=chunk, **part)
    if backward:
        p.ins(isa.LD, buffer=dy, addr=affine(0, bx=row, loops=(chunk,)), rows=1, row_bytes=chunk, **part)
    p.ins(isa.ALU, elements=threads * vec_elems, flops_per_element=LN_PASS1_FLOPS[backward])
    p.end()
    p.ins(isa.BAR)  # block reduction of the Welford partials through shared memory
    p.loop(rounds)  # pass 2
    p.ins(isa.LD, buffer=x, addr=affine(0, bx=row, g=x_gpu_offset, loops=(chunk,)), rows=1, row_bytes=chunk,
          is_async=True, **part)
    if backward:
        p.ins(isa.LD, buffer=dy, addr=affine(0, bx=row, loops=(chunk,)), rows=1, row_bytes=chunk, is_async=True,
              **part)
    p.ins(isa.LD, buffer=gamma, addr=affine(0, loops=(chunk,)), rows=1, row_bytes=chunk, is_async=True, **part)
    p.ins(isa.LD, buffer=beta, addr=affine(0, loops=(chunk,)), rows=1, row_bytes=chunk, is_async=True, **part)
    p.ins(isa.WAIT, count=0)
    p.ins(isa.ALU, elements=threads * vec_elems, flops_per_element=LN_PASS2_FLOPS[backward])
    p.ins(isa.ST, buffer=y, addr=affine(0, bx=row, loops=(chunk,)), rows=1, row_bytes=chunk, is_async=True, **part)
    p.end()


# ---------------------------------------------------------------- attention
def attention(BH: int, S: int, D: int, causal: bool = True, name: str | None = None):
    """FlashAttention-style forward: one block per (128-query tile, batch x head); the K/V loop
    streams 128-key tiles (QK^T mma, softmax on the ALUs, PV mma). Causal: a query tile visits
    the key tiles up to its own, modelled as the average half (S/128+1)/2 tiles per block."""
    wl = new_workload(name or f"attention_{BH}x{S}x{D}")
    q = add_buffer(wl, "q", BH * S * D * ELEM)
    kv = add_buffer(wl, "kv", 2 * BH * S * D * ELEM)
    o = add_buffer(wl, "o", BH * S * D * ELEM)
    tq = 128
    nt = math.ceil(S / tq)
    dp = max(16, math.ceil(D / 16) * 16)
    k = wl.kernels.add(name="flash_fwd", grid_x=nt, grid_y=BH, threads_per_block=256, regs_per_thread=224,
                       smem_bytes=(tq * dp + 4 * tq * dp) * ELEM)
    attention_program(Program(k), q, kv, o, S, D, causal)
    wl.launches.add(kernel=0, stream=0)
    return wl


ATTN_TILE = 128


def attention_program(p: Program, q: int, kv: int, o: int, S: int, D: int, causal: bool = True,
                      backward: bool = False, kv_peer=None, q_rows: int = 0) -> None:
    """The program of one attention block (query tile bx of head by); see attention().
    q_rows: query rows per head in q and o (default S; LADM: a GPU's token rows, more than one
    sequence when it holds several).
    backward: FlashAttention-2's backward per key tile recomputes S = QK^T and computes dP = dO V^T,
    dV += P^T dO, dK += dS^T Q, dQ += dS K: five mmas where the forward has two (about 2.5x the
    FLOPs, spec A1), with dO loaded beside Q and dQ stored beside O. kv_peer: K/V tiles are plain
    remote loads from the GPU that affine names (None: local)."""
    tq = ATTN_TILE
    nt = math.ceil(S / tq)
    trips = (nt + 1) // 2 if causal else nt
    dp = max(16, math.ceil(D / 16) * 16)
    row = D * ELEM
    per_head = (q_rows or S) * row
    # a sequence (or a head's query rows) that is not whole 128-row tiles ends in an edge tile
    # that moves only its rows, as TMA does; its mmas still run the whole tile
    q_clip = {"rows_in_bounds": affine(q_rows or S, bx=-tq)} if (q_rows or S) % tq else {}
    kv_clip = {"rows_in_bounds": affine(S, loops=(-tq,))} if S % tq else {}
    p.ins(isa.LD, buffer=q, addr=affine(0, bx=tq * row, by=per_head), rows=tq, row_bytes=row, **q_clip)
    if backward:
        p.ins(isa.LD, buffer=o, addr=affine(0, bx=tq * row, by=per_head), rows=tq, row_bytes=row, **q_clip)
    p.loop(trips)
    kv_op = dict(op=isa.LD) if kv_peer is None else dict(op=isa.LD_REMOTE, peer=kv_peer, read_only=True)
    p.ins(buffer=kv, is_async=True, addr=affine(0, by=2 * S * row, loops=(tq * row,)), rows=tq, row_bytes=row, **kv_op,
          **kv_clip)
    p.ins(buffer=kv, is_async=True, addr=affine(S * row, by=2 * S * row, loops=(tq * row,)), rows=tq, row_bytes=row,
          **kv_op, **kv_clip)
    p.ins(isa.WAIT, count=0)
    p.ins(isa.MMA, m=tq, n=tq, k=dp, dtype=isa.BF16)
    p.ins(isa.ALU, elements=tq * tq, flops_per_element=6.0)
    p.ins(isa.MMA, m=tq, n=dp, k=tq, dtype=isa.BF16)
    if backward:
        p.ins(isa.MMA, m=tq, n=tq, k=dp, dtype=isa.BF16)
        p.ins(isa.ALU, elements=tq * tq, flops_per_element=4.0)
        p.ins(isa.MMA, m=tq, n=dp, k=tq, dtype=isa.BF16)
        p.ins(isa.MMA, m=tq, n=dp, k=tq, dtype=isa.BF16)
    p.end()
    p.ins(isa.ST, buffer=o, addr=affine(0, bx=tq * row, by=per_head), rows=tq, row_bytes=row, **q_clip)
