"""Cross-GPU readiness with flags, as NCCL's kernels and fused kernels do it: a block adds 1 to a
flag on each peer (a small remote write) and waits until its own flag has heard from all of them.
"""
from __future__ import annotations

from harness.gpu.isa_text import isa
from harness.kernels.builder import Program, affine


def signal_peers(p: Program, flags: int, addr, gpus: int, value: int = 1) -> None:
    """Add `value` to the flag at `addr` on every other GPU (peer = (g + i) mod gpus)."""
    for i in range(1, gpus):
        p.ins(isa.FLAG_SIGNAL, buffer=flags, addr=addr, value=value, scope=isa.REMOTE,
              peer=affine(i, g=1, mod=gpus))


def barrier(p: Program, flags: int, addr, gpus: int) -> None:
    """Every GPU's block with the same flag address meets here (one use per flag address)."""
    signal_peers(p, flags, addr, gpus)
    p.ins(isa.FLAG_WAIT, buffer=flags, addr=addr, value=gpus - 1)
