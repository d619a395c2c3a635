"""TP-NVLS: Megatron tensor parallelism with NCCL's NVLS AllReduce (spec section 2.3).

Kernel-serial on one stream: every GEMM, LN and attention kernel runs on all SMs, and each
row-parallel GEMM's partial output is all-reduced by NCCL's NVLS kernel (scatter into NCCL's
staging buffer, ld_reduce + multimem.st, gather out, on `channels` CTAs; harness/kernels/nvls.py)
once the GEMM has finished on every GPU (the paper's global barrier).
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.kernels.nvls import NvlsConfig
from harness.schemes import SchemeParams, register
from harness.schemes.lowering import Lowering
from harness.workload.graph import Collective


@dataclass
class TpNvlsParams(SchemeParams):
    channels: int = 16
    """NVLS channels (CTAs) of the collective kernel (NCCL's default at 8 GPUs, spec A15)."""

    def check(self) -> None:
        self.require("channels", self.channels >= 1, ">= 1")


def lower_serial(graph, target, params, scheme: str):
    """Every op as one kernel on one stream, collectives by NVLS (TP-NVLS and SP-NVLS)."""
    lw = Lowering(graph, target, scheme)
    cfg = NvlsConfig(channels=params.channels)
    for op in graph.ops:
        if isinstance(op, Collective):
            lw.nvls(op, cfg)
        else:
            lw.plain(op)
    return lw.finish()


@register("tp_nvls", partition="tp", params=TpNvlsParams,
          summary="Megatron TP, NVLS AllReduce after each row-parallel GEMM, kernel-serial")
def lower(graph, target, params: TpNvlsParams):
    return lower_serial(graph, target, params, "tp_nvls")
