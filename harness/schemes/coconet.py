"""CoCoNet (Jangda et al., ASPLOS'22): the producer GEMM overlapped chunk by chunk with NCCL's ring
AllReduce (Simple protocol) on 16 channels of 512 threads, which spin-wait on per-chunk tile
counters the GEMM's blocks increment (spec 2.3, from the CoCoNet artifact)."""
from __future__ import annotations

from dataclasses import dataclass

from harness.errors import ConfigError
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
        split = chunks * lw.t.gpus * 128  # each chunk's channels x GPUs parts must be whole 128 B lines
        if op.bytes % (split * params.channels):
            fits = [c for c in range(1, lw.t.num_sms) if op.bytes % (split * c) == 0]
            key, allowed = ("scheme.channels", f"{', '.join(map(str, fits[:8]))}") if fits else ("model", "a model "
                            f"whose '{op.name}' splits into whole 128 B lines per chunk and GPU")
            raise ConfigError(key, f"scheme 'coconet' cuts '{op.name}' ({op.bytes} B) into {chunks} chunks x "
                              f"{params.channels} channels x {lw.t.gpus} GPUs of whole 128 B lines, which it does not "
                              f"split into; allowed: {allowed}")
        ki = ring.collective(lw.b, op.name, "all_reduce", op.bytes, data=data, cfg=cfg, chunks=chunks, wait=wait)
        return lw.launch(op, ki, stream, after=after)

    return lower_chunked(graph, target, params, "coconet", emit)
