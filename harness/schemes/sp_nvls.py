"""SP-NVLS: Megatron tensor + sequence parallelism with NVLS collectives (spec section 2.3).

Kernel-serial on one stream: the row-parallel GEMM's partial output is reduce-scattered by
NCCL's NVLS ReduceScatter (multimem.ld_reduce, upstream-bound), LN runs on the T/N-row shard,
and NVLS AllGather (multimem.st, downstream-bound) assembles the next column-parallel GEMM's
input. The backward pass is strictly serial too (spec A10's default).
"""
from __future__ import annotations

from harness.schemes import register
from harness.schemes.tp_nvls import TpNvlsParams, lower_serial


@register("sp_nvls", partition="sp", params=TpNvlsParams,
          summary="Megatron TP+SP, NVLS ReduceScatter and AllGather, kernel-serial")
def lower(graph, target, params: TpNvlsParams):
    return lower_serial(graph, target, params, "sp_nvls")
