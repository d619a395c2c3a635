"""FuseLib-NVLS: FuseLib's fused GEMM + AllReduce with the per-tile AllReduce done by multimem
instructions (spec A19): each tile's partial stays in local memory (the multicast object), its
block signals the tile's owner; once all N partials are in, the owner's communication-phase block
reads the sum of its slice with multimem.ld_reduce and writes it to every GPU with multimem.st."""
from __future__ import annotations

from harness.gpu.isa_text import isa
from harness.kernels.builder import affine
from harness.schemes import register
from harness.schemes.fuselib import FuseLibParams, lower_fused
from harness.workload.models import ELEM_BYTES as ELEM


def _reduce_by_multimem(p, lw, *, partial, result, rows, tn, ldc, owner_rows, clip):
    row0 = affine(0, g=owner_rows * ldc, by=rows * ldc, bx=tn * ELEM)
    p.ins(isa.MM_LD_REDUCE, buffer=partial, addr=row0, rows=rows, row_bytes=tn * ELEM, row_stride=ldc, reg=1, **clip)
    p.ins(isa.MM_ST, buffer=result, addr=row0, rows=rows, row_bytes=tn * ELEM, row_stride=ldc, is_async=True, reg=1,
          **clip)
    p.ins(isa.WAIT, count=0)


@register("fuselib_nvls", partition="tp", params=FuseLibParams,
          summary="FuseLib-NVLS: per-tile flags, owner multimem.ld_reduce + multimem.st")
def lower(graph, target, params: FuseLibParams):
    return lower_fused(graph, target, params, "fuselib_nvls", _reduce_by_multimem, "local")
