"""CoCoNet-NVLS: CoCoNet's chunked GEMM + AllReduce overlap with the AllReduce of each chunk done
by NVLS (multimem.ld_reduce on the rank's 1/N of the chunk, then multimem.st) on the
communication kernel's channels; chunk-ready counters and 16 CTAs as CoCoNet (spec 2.3)."""
from __future__ import annotations

from dataclasses import dataclass

from harness.kernels import nvls
from harness.schemes import SchemeParams, register
from harness.schemes.overlap import lower_chunked


@dataclass
class CoconetNvlsParams(SchemeParams):
    channels: int = 16
    """CTAs of the communication kernel, resident beside the GEMM (CoCoNet's 16 NCCL channels)."""
    chunks: int = 8
    """Chunks the AllReduce is cut into (rounded to divide the GEMM's row blocks)."""

    def check(self) -> None:
        self.require("channels", self.channels >= 1, ">= 1")
        self.require("chunks", self.chunks >= 1, ">= 1")


@register("coconet_nvls", partition="tp", params=CoconetNvlsParams,
          summary="CoCoNet chunked GEMM+AllReduce overlap, NVLS AllReduce per chunk")
def lower(graph, target, params: CoconetNvlsParams):
    cfg = nvls.NvlsConfig(channels=params.channels)

    def emit(lw, op, data, chunks, wait, stream, after):
        ki = nvls.collective(lw.b, op.name, "all_reduce", op.bytes, tensor=data, cfg=cfg, chunks=chunks, wait=wait)
        return lw.launch(op, ki, stream, after=after)

    return lower_chunked(graph, target, params, "coconet_nvls", emit)
