"""LayerNorm and attention kernels of a transformer layer, added to a multi-GPU workload.

The programs are those of the calibrated single-GPU kernels (harness.gpu.norm_attention: PyTorch's
vectorised layernorm, FlashAttention-style fused attention); here they read and write the
workload's buffers.
"""
from __future__ import annotations

import math

from harness.gpu import norm_attention
from harness.kernels.builder import WorkloadBuilder
from harness.workload.models import ELEM_BYTES as ELEM

LN_THREADS = 128


def layernorm(b: WorkloadBuilder, name: str, rows: int, cols: int, *, x: int, y: int, gamma: int, beta: int,
              dy: int | None = None, x_gpu_offset: int = 0) -> int:
    """One block per row (forward, or backward with the output gradient dy); x_gpu_offset: GPU
    g's rows start at g * x_gpu_offset in x."""
    ki, p = b.kernel(name, rows, 1, threads=LN_THREADS, regs=32, smem=LN_THREADS // 32 * 3 // 2 * 4, loads_via_l1=True)
    norm_attention.layernorm_program(p, x, y, gamma, beta, cols, LN_THREADS, dy=dy, x_gpu_offset=x_gpu_offset)
    return ki


def attention(b: WorkloadBuilder, name: str, batch_heads: int, seq: int, head_dim: int, *, q: int, kv: int, o: int,
              backward: bool = False, queries: int = 0, kv_peer=None) -> int:
    """One block per (128-query tile, batch x head); causal. queries: query rows per head when
    they are not one whole sequence (LADM: this GPU's token rows); kv_peer: K/V tiles loaded
    from the GPU that affine names."""
    tq = norm_attention.ATTN_TILE
    dp = max(16, math.ceil(head_dim / 16) * 16)
    smem = (tq * dp + 4 * tq * dp) * ELEM
    ki, p = b.kernel(name, math.ceil((queries or seq) / tq), batch_heads, threads=256,
                     regs=224 if not backward else 255, smem=smem)
    norm_attention.attention_program(p, q, kv, o, seq, head_dim, causal=True, backward=backward, kv_peer=kv_peer,
                                     q_rows=max(seq, queries))
    return ki


def attention_buffers(b: WorkloadBuilder, prefix: str, batch_heads: int, seq: int, head_dim: int,
                      backward: bool = False, queries: int = 0) -> tuple[int, int, int]:
    """q, kv, and the output: O forward; backward dQ, dK, dV side by side (what the QKV dgrad
    GEMM reads), dO loaded from its first third. queries: as attention()'s (q and O hold that
    many rows per head when it exceeds seq)."""
    per = batch_heads * seq * head_dim * ELEM
    per_q = batch_heads * max(seq, queries) * head_dim * ELEM
    return (b.buffer(f"{prefix}.q", per_q), b.buffer(f"{prefix}.kv", 2 * per),
            b.buffer(f"{prefix}.o", 3 * per_q if backward else per_q))
