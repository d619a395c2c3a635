"""CoCoNet (Jangda et al., ASPLOS'22): the producer GEMM overlapped chunk by chunk with NCCL's ring
AllReduce (Simple protocol) on 16 channels of 512 threads, which spin-wait on per-chunk tile
counters the GEMM's blocks increment (spec 2.3, from the CoCoNet artifact)."""
from __future__ import annotations

from dataclasses import dataclass

from harness.kernels import ring
from harness.schemes import SchemeParams, register
from harness.schemes.overlap import lower_chunked


@dataclass
class CoconetParams(SchemeParams):
    channels: int = 16
    """NCCL ring channels (CTAs) of the communication kernel (NCCL_MIN/MAX_NCHANNELS=16)."""
    chunks: int = 8
    """Chunks the AllReduce is cut into (rounded to divide the GEMM's row blocks)."""

    def check(self) -> None:
        self.require("channels", self.channels >= 1, ">= 1")
        self.require("chunks", self.chunks >= 1, ">= 1")


@register("coconet", partition="tp", params=CoconetParams,
          summary="CoCoNet chunked GEMM+AllReduce overlap, NCCL ring AllReduce per chunk")
def lower(graph, target, params: CoconetParams):
    cfg = ring.RingConfig(channels=params.channels)

    def emit(lw, op, data, chunks, wait, stream, after):
        ki = ring.collective(lw.b, op.name, "all_reduce", op.bytes, data=data, cfg=cfg, chunks=chunks, wait=wait)
        return lw.launch(op, ki, stream, after=after)

    return lower_chunked(graph, target, params, "coconet", emit)
