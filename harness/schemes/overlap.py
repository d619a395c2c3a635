"""CoCoNet's overlap of a producer GEMM with the AllReduce of its output, chunk by chunk
(Jangda et al., ASPLOS'22; spec section 2.3, read from the CoCoNet artifact).

The communication kernel is launched first, on its own higher-priority stream, so its `channels`
CTAs hold their SMs for the whole GEMM (CoCoNet runs NCCL with 16 channels x 512 threads beside
the GEMM; the GEMM takes the other SMs). The GEMM walks its tiles row block by row block; after a
tile's store its block adds 1 to the chunk's status counter on this GPU. Each channel spin-waits
until the counter of chunk i reaches the chunk's tile count, then reduces chunk i (NVLS or ring)
while the GEMM produces chunk i + 1. The ops after the AllReduce start when both have finished.
Only the producer GEMM overlaps; the consumer GEMM starts after the collective (spec 2.3 item 8).
"""
from __future__ import annotations

import math

from harness.errors import ConfigError
from harness.gpu.isa_text import isa
from harness.kernels.builder import affine
from harness.kernels.gemm import Signal, plan
from harness.schemes.lowering import Lowering
from harness.workload.graph import Collective, Gemm


def lower_chunked(graph, target, params, scheme: str, emit_collective):
    """Lower a TP graph; every (row-parallel GEMM -> AllReduce) pair overlaps chunk by chunk,
    `emit_collective(lw, op, data, chunks, wait, stream) -> launch` emits the chunked AR."""
    if params.channels >= target.num_sms:  # the GEMM's tiles would never find an SM
        raise ConfigError("scheme.channels", f"{params.channels} communication CTAs of scheme '{scheme}' hold their "
                          f"SMs for the whole GEMM, which needs at least one of the {target.num_sms} "
                          f"(gpu.num_sms); allowed: 1 to {target.num_sms - 1}")
    lw = Lowering(graph, target, scheme)
    comm = lw.b.stream("comm", priority=1)
    pending_after: tuple[int, ...] = ()
    ops = graph.ops
    i, prev = 0, None
    while i < len(ops):
        op = ops[i]
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if isinstance(op, Gemm) and op.out_partial and isinstance(nxt, Collective) and nxt.kind == "all_reduce":
            c = plan(op.M, op.N, op.K, target.num_sms - params.channels)
            tiles_m = math.ceil(op.M / c.tm)
            # chunks of whole row blocks; M that is not whole tiles (its last an edge tile) is one chunk
            chunks = math.gcd(params.chunks, tiles_m) if op.M % c.tm == 0 else 1
            rows = op.M // chunks
            gx = math.ceil(op.N / c.tn)
            flags = lw.b.flags(f"{op.name}.chunk_status", chunks)
            data = lw.out_of(op)

            def wait(p, flags=flags, need=gx * math.ceil(rows / c.tm)):
                p.ins(isa.FLAG_WAIT, buffer=flags, addr=affine(0, loops=(8,)), value=need)

            after = (prev,) if prev is not None else ()
            ar = emit_collective(lw, nxt, data, chunks, wait, comm, after)
            g = lw.gemm(op, signal=Signal(flags, "local", rows_per_flag=rows), config=c, after=pending_after)
            lw.tensors[nxt.name] = data
            pending_after = (ar, g)
            prev = g
            i += 2
            continue
        if isinstance(op, Collective):
            raise ValueError(f"{scheme}: collective '{op.name}' does not follow a row-parallel GEMM")
        prev = lw.plain(op, after=pending_after)
        pending_after = ()
        i += 1
    return lw.finish()
