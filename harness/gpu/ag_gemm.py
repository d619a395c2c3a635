"""The multi-GPU AG-GEMM of the CAIS tests and the drift study: each GPU's GEMM loads its A row
tiles from their owners, by `ld.cais` (merged in the switch) or by plain remote loads, and the
bytes each way should move."""
from __future__ import annotations

from harness.gpu.isa_text import isa
from harness.gpu.kernels import ELEM, TK, Program, add_buffer, affine, new_workload

def ag_gemm(M: int, N: int, K: int, gpus: int = 8, mode: str = "cais", tm: int = 128, tn: int = 128,
            sms: int | None = None, functional: bool = False):
    """All-gather + GEMM with tensor parallelism: the activation A [M,K] is row-sharded over the
    GPUs (GPU r owns rows [r*M/G, (r+1)*M/G)); every GPU multiplies the whole A by its own weight
    shard B_r [K, N]. Blocks with the same blockIdx on every GPU read the same A tile from its
    owner (a GPU-invariant address: the CAIS compiler turns those loads into ld.cais and puts the
    blocks in one TB group). mode: 'cais' (ld.cais + group sync), 'remote' (plain remote loads).

    A tile's owner is by // (M/G/tm); the loads of rows a GPU owns are local."""
    assert M % (gpus * tm) == 0 and N % tn == 0 and K % TK == 0
    wl = new_workload(f"ag_gemm_{mode}_{M}x{N}x{K}", gpus, functional)
    a = add_buffer(wl, "A_shard", M // gpus * K * ELEM)
    b = add_buffer(wl, "B", K * N * ELEM)
    out = add_buffer(wl, "C", M * N * ELEM)
    gx, gy = N // tn, M // tm
    k = wl.kernels.add(name=f"ag_gemm_{mode}", grid_x=gx, grid_y=gy, threads_per_block=256, regs_per_thread=168,
                       smem_bytes=2 * (tm + tn) * TK * ELEM)
    if mode == "cais":
        k.cais.enabled = True
        k.cais.num_gpus = gpus
        k.cais.group_base = 1
        k.cais.pre_launch_sync = True
        k.cais.pre_access_sync = False
    p = Program(k)
    lda = K * ELEM
    tiles_per_owner = M // gpus // tm
    op = isa.LD_CAIS if mode == "cais" else isa.LD_REMOTE
    # Owner of row tile `by` is by // tiles_per_owner: affine only per owner, so the builder
    # emits one kernel per owner range? No: we use one kernel per owner, launched together.
    del k
    wl.ClearField("kernels")
    for owner in range(gpus):
        kk = wl.kernels.add(name=f"ag_gemm_{mode}_owner{owner}", grid_x=gx, grid_y=tiles_per_owner,
                            threads_per_block=256, regs_per_thread=168, smem_bytes=2 * (tm + tn) * TK * ELEM)
        if mode == "cais":
            kk.cais.enabled = True
            kk.cais.num_gpus = gpus
            kk.cais.group_base = 1 + owner * gx * tiles_per_owner
            kk.cais.pre_launch_sync = True
        p = Program(kk)
        p.loop(K // TK)
        p.ins(op, is_async=True, buffer=a, peer=affine(owner), addr=affine(0, by=tm * lda, loops=(TK * ELEM,)),
              rows=tm, row_bytes=TK * ELEM, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=affine(0, bx=tn * ELEM, loops=(TK * N * ELEM,)), rows=TK,
              row_bytes=tn * ELEM, row_stride=N * ELEM)
        p.ins(isa.WAIT, count=0)
        p.ins(isa.MMA, m=tm, n=tn, k=TK, dtype=isa.BF16)
        p.end()
        p.ins(isa.ST, buffer=out, addr=affine(owner * tiles_per_owner * tm * N * ELEM, bx=tn * ELEM, by=tm * N * ELEM),
              rows=tm, row_bytes=tn * ELEM, row_stride=N * ELEM)
        la = wl.launches.add(kernel=owner, stream=owner)
        if sms:
            la.sm_count = sms
    return wl


def ag_gemm_remote_bytes(M: int, N: int, K: int, gpus: int, tn: int = 128, mode: str = "cais") -> dict[str, int]:
    """Analytical NVLink payload bytes of ag_gemm (summed over GPUs).

    Every GPU's blocks load every remote A tile once per N-column of blocks (gx = N/tn times).
    'remote': owner -> requesters response bytes = (G-1) x owner shard x gx for each owner.
    'cais': the switch merges the G-1 requests for one line: the owner sends each line once."""
    gx = N // tn
    shard = M // gpus * K * ELEM
    requesters = gpus - 1
    per_owner_unmerged = requesters * shard * gx
    per_owner_merged = shard * gx
    return {
        "owner_egress_bytes": gpus * (per_owner_merged if mode == "cais" else per_owner_unmerged),
        "requester_ingress_bytes": gpus * per_owner_unmerged,
    }
