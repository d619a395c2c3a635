"""LADM (Khairy et al., MICRO'20) on the TP layer: no tensor parallelism and no collectives; each
layer kernel runs as one logical kernel over all GPUs' SMs, its thread blocks and pages placed
by LADM's locality-aware scheduling (spec 2.3 and A11).

For every GEMM LADM's rule picks the binding of the larger operand: the activations [T, K]
outweigh the weights in every layer GEMM, so thread blocks are row-bound: GPU g runs the tile
rows of its T/N tokens, the activations' pages sit with them (row placement) and stay local from
op to op (LN and attention's queries too). The weights are spread over the GPUs by rows (column
placement of B); a block loads its B tile with plain remote loads from the GPU holding it. Weight
gradients (backward) are partial sums over each GPU's tokens, reduced at the rows' home GPUs
by remote reductions (unmerged). Attention loads K/V tiles from the GPU that holds those keys
(walking back from the query tile, across GPU boundaries; sequence boundaries ignored).
The engine does not cache remote lines in the requester's L2 (LADM's RTWICE), so every tile
fetches its B tile again: spec A7's open choice, recorded in docs/SCHEMES.md.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from harness.errors import ConfigError
from harness.functional_check import Computed, reduced_value
from harness.kernels import gemm as gemm_kernel
from harness.kernels import layer_ops
from harness.kernels.builder import affine
from harness.kernels.gemm import Sink
from harness.schemes import SchemeParams, register
from harness.schemes.lowering import Lowering
from harness.workload.graph import Attention, Collective, Gemm
from harness.workload.models import ELEM_BYTES as ELEM


def logical_shape(op: Gemm, G: int) -> tuple[int, int, int]:
    """This GPU's part of the unpartitioned GEMM: its T/N token rows (or, for a weight gradient,
    the whole weight with K = its tokens)."""
    full = {"M": op.M, "N": op.N, "K": op.K}
    full[op.sharded] *= G
    if op.wgrad:
        return full["M"], full["N"], op.K // G
    return op.M // G, full["N"], full["K"]


def home_rows(M: int, N: int, K: int, gpus: int, num_sms: int) -> int:
    """Rows of a weight gradient each GPU is home to: M/G, rounded up to whole tiles (only a
    test-sized model has fewer rows per GPU than a tile; then fewer GPUs are homes)."""
    tm = gemm_kernel.plan(M, N, K, num_sms).tm
    return max(tm, -(-(M // gpus) // tm) * tm)


def attention_kv_peer(queries: int, gpus: int):
    """The GPU holding the key tile L0 steps back from query tile bx: g + floor((128 bx - 128 L0) /
    rows per GPU), modulo the GPUs."""
    peer = affine(0, g=1, mod=gpus)
    peer.quotient.add(block_x=128, loop=[-128], divisor=queries, scale=1)
    return peer


def _reduced_at_home(M: int, N: int, home: int, gpus: int, gpu: int) -> np.ndarray:
    """A weight gradient's rows at their home GPU in a functional run: the sum of every GPU's
    partial on the rows it is home to (rows g x home onward, within M), zero past them."""
    rows = np.clip(M - gpu * home, 0, home)
    out = np.zeros((home, N))
    out[:rows] = reduced_value(gpus)
    return out


@register("ladm", partition="sp", params=SchemeParams,
          summary="LADM: logical kernels over all GPUs, row-bound TBs, remote weight loads, no collectives")
def lower(graph, target, params: SchemeParams):
    lw = Lowering(graph, target, "ladm")
    G = target.gpus
    tokens = next(o.M for o in graph.ops if isinstance(o, Gemm) and not o.wgrad and o.sharded != "M")
    pending: tuple[int, ...] = ()
    for op in graph.ops:
        if isinstance(op, Collective):  # row-bound blocks keep every activation where it is used
            if op.source:
                lw.tensors[op.name] = lw.tensors[op.source]
            lw.expect(op.name, None)  # nothing is reduced or gathered
            continue
        if isinstance(op, Gemm):
            M, N, K = logical_shape(op, G)
            a = lw.tensor(f"{op.name}.saved_act", M * K * ELEM) if op.wgrad else lw.input_of(op, M * K * ELEM)
            w = lw.tensor(f"{op.name}.w", N * K * ELEM)
            if op.wgrad:  # partial dW rows go to their home GPU
                home = home_rows(M, N, K, G, target.num_sms)
                if M % home:
                    raise ConfigError("model", f"scheme 'ladm' makes each GPU home to {home} rows (whole tiles) of "
                                      f"the weight gradient '{op.name}', but it has {M} rows; allowed: a model whose "
                                      f"weight gradients' rows are a multiple of {home}")
                out = lw.tensor(op.name, home * N * ELEM)
                ki, _ = gemm_kernel.gemm(lw.b, op.name, M, N, K, a=a, w=w, out=out, sink=Sink("red_cais", home))
                lw.expect(op.name, Computed(lw.b.wl.buffers[out].name, partial(_reduced_at_home, M, N, home, G)))
            else:
                out = lw.tensor(op.name, M * N * ELEM)
                ki, _ = gemm_kernel.gemm(lw.b, op.name, M, N, K, a=a, w=w, out=out, w_owner_rows=N // G)
            pending = (lw.launch(op, ki, after=pending),)
        elif isinstance(op, Attention):
            batch = tokens // op.seq
            heads = op.batch_heads * G // batch
            queries = tokens // G
            q, kv, o = layer_ops.attention_buffers(lw.b, op.name, heads, op.seq, op.head_dim, op.backward, queries)
            lw.tensors[op.name] = o
            ki = layer_ops.attention(lw.b, op.name, heads, op.seq, op.head_dim, q=q, kv=kv, o=o, backward=op.backward,
                                     queries=queries, kv_peer=attention_kv_peer(queries, G))
            pending = (lw.launch(op, ki, after=pending),)
        else:
            pending = (lw.norm(op, after=pending),)
    return lw.finish()
