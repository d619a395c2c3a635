"""The CAIS compiler pass (harness/compiler): what it rewrites, what it refuses, the groups and
the coordination it attaches. Pure Python: kernels from the library, never hand-written .cais."""
from __future__ import annotations

import itertools

import pytest

from harness.compiler import Coordination, compile_cais
from harness.compiler.index_analysis import gpu_invariant
from harness.gpu import kernels as calibrated
from harness.gpu.isa_text import eval_affine, isa
from harness.kernels import gemm as gemm_kernel
from harness.kernels import layer_ops, nvls, ring
from harness.kernels.builder import WorkloadBuilder, affine, rotated
from harness.kernels.flags import barrier
from harness.schemes.ladm import attention_kv_peer

G = 8


def _builder() -> WorkloadBuilder:
    return WorkloadBuilder("t", G, 66)


def _gemm(b, name, M, N, K, **kw) -> int:
    a = b.buffer(f"{name}.a", M * K * 2)
    w = b.buffer(f"{name}.w", N * K * 2)
    out = b.buffer(f"{name}.out", M * N * 2)
    ki, _ = gemm_kernel.gemm(b, name, M, N, K, a=a, w=w, out=out, **kw)
    b.launch(ki, b.stream("main"))
    return ki


def _ops(kernel) -> list[int]:
    return [i.op for i in kernel.program]


def _same_on_every_gpu(kernel, ins) -> bool:
    """Evaluate address and peer for every GPU over a sample of blocks and loop counters."""
    for bx, by, l0 in itertools.product(range(kernel.grid_x), range(min(kernel.grid_y, 12)), range(3)):
        seen = {(eval_affine(ins.addr, bx, by, g, (l0,)), eval_affine(ins.peer, bx, by, g, (l0,))) for g in range(G)}
        if len(seen) != 1:
            return False
    return True


def test_an_unseen_gemm_with_remote_a_gets_ld_cais_and_groups():
    """An odd shape (M = 8 x 320 rows, N = 1000, K = 520) with a tile config no scheme uses."""
    b = _builder()
    cfg = calibrated.GemmConfig(64, 192, stages=3)
    ki = _gemm(b, "odd", 8 * 320, 1000, 520, source=gemm_kernel.Source("remote", 320), config=cfg)
    before = [i.op for i in b.wl.kernels[ki].program]
    report = compile_cais(b)
    k = b.wl.kernels[ki]
    after = _ops(k)
    assert before.count(isa.LD_REMOTE) >= 2 and after.count(isa.LD_REMOTE) == 0
    assert after.count(isa.LD_CAIS) == before.count(isa.LD_REMOTE)
    assert after.count(isa.LD) == before.count(isa.LD) > 0          # B stays a local load
    assert after.count(isa.ST) == before.count(isa.ST) == 1         # C stays a local store
    assert [a for a, o in zip(after, before) if a != o] == [isa.LD_CAIS] * before.count(isa.LD_REMOTE)
    for ins in k.program:
        if ins.op == isa.LD_CAIS:
            assert _same_on_every_gpu(k, ins)  # the analysis' claim, checked by evaluation
    assert (k.cais.enabled, k.cais.num_gpus, k.cais.first_gpu) == (True, G, 0)
    assert not k.cais.pre_launch_sync and not k.cais.pre_access_sync and isa.CAIS_SYNC not in after
    kr = report.kernel("odd")
    assert kr.groups == k.grid_x * k.grid_y == 6 * 40 and kr.group_base == k.cais.group_base
    assert len(report.rewritten) == before.count(isa.LD_REMOTE) and not report.refused


def test_a_gemm_rs_source_form_becomes_red_cais():
    b = _builder()
    ki = _gemm(b, "rs", 8 * 256, 768, 384, sink=gemm_kernel.Sink("red_remote", 256))
    assert isa.RED_REMOTE in _ops(b.wl.kernels[ki])
    report = compile_cais(b)
    ops = _ops(b.wl.kernels[ki])
    assert isa.RED_REMOTE not in ops and ops.count(isa.RED_CAIS) == 1
    assert [d.new_op for _, d in report.rewritten] == ["red.cais"]


def test_ring_and_rank_dependent_accesses_are_refused():
    """A ring step's rotated() address, a (g + 1) mod N peer, a rank inside a quotient, NVLS
    shards, LADM's K/V peer and a per-rank staging slot all depend on the GPU: none is rewritten."""
    b = _builder()
    buf = b.buffer("x", 1 << 20)
    ki, p = b.kernel("mixed", 4, 1)
    p.ins(isa.LD_REMOTE, buffer=buf, addr=rotated(affine(0, bx=128), 4096, G, 1), peer=affine(3), rows=1, row_bytes=128)
    p.ins(isa.LD_REMOTE, buffer=buf, addr=affine(0, bx=128), peer=affine(1, g=1, mod=G), rows=1, row_bytes=128)
    q = affine(0, bx=128)
    q.quotient.add(gpu=1, block_x=1, divisor=4, scale=512)
    p.ins(isa.RED_REMOTE, buffer=buf, addr=q, peer=affine(2), rows=1, row_bytes=128)
    p.ins(isa.LD, buffer=buf, addr=affine(0, g=128), rows=1, row_bytes=128)  # local: untouched
    b.launch(ki, b.stream("main"))
    mc = b.buffer("mc", 1 << 20, multicast=True)
    shard = b.buffer("shard", 1 << 17)
    b.launch(nvls.collective(b, "rs", "reduce_scatter", 1 << 20, tensor=mc, shard=shard, cfg=nvls.NvlsConfig(4, 32768)),
             b.stream("main"))
    b.launch(ring.collective(b, "ar", "all_reduce", 1 << 20, data=buf, cfg=ring.RingConfig(channels=2)),
             b.stream("main"))
    q_, kv, o = layer_ops.attention_buffers(b, "attn", 4, 512, 64)
    b.launch(layer_ops.attention(b, "attn", 4, 512, 64, q=q_, kv=kv, o=o, queries=128,
                                 kv_peer=attention_kv_peer(128, G)), b.stream("main"))
    slot = _gemm(b, "fuselib", 8 * 128, 256, 128, sink=gemm_kernel.Sink("st_remote", 128))
    snapshot = [isa.Kernel() for _ in b.wl.kernels]
    for s, k in zip(snapshot, b.wl.kernels):
        s.CopyFrom(k)
    report = compile_cais(b)
    assert not report.rewritten
    assert list(b.wl.kernels) == snapshot  # nothing changed, no kernel enabled
    why = {d.pc: d.reason for d in report.kernel("mixed").decisions}
    assert "address depends on the GPU id" in why[0] and "peer depends on the GPU id" in why[1]
    assert "floor" in why[2] and 3 not in why  # the local load is not even considered
    assert all(d.action == "refused" for d in report.kernel(b.wl.kernels[slot].name).decisions)
    assert any("multimem" in d.reason for d in report.kernel("rs").decisions)
    assert any(d.op == "ld.remote" and "peer depends" in d.reason for d in report.kernel("attn").decisions)


def test_local_kernels_are_untouched():
    b = _builder()
    x, y, gm, bt = (b.buffer(n, 1 << 18) for n in "xygb")
    ki = layer_ops.layernorm(b, "ln", 128, 256, x=x, y=y, gamma=gm, beta=bt)
    b.launch(ki, b.stream("main"))
    before = isa.Kernel()
    before.CopyFrom(b.wl.kernels[ki])
    report = compile_cais(b, coordination=Coordination(True, True))
    assert b.wl.kernels[ki] == before and report.kernel("ln").decisions == [] and report.kernel("ln").groups == 0


def test_group_ids_of_kernels_never_collide_and_recompiling_keeps_them():
    b = _builder()
    hand = _gemm(b, "hand", 8 * 128, 256, 128, sink=gemm_kernel.Sink("red_cais", 128))
    b.wl.kernels[hand].cais.enabled = True  # a scheme's hand-set kernel at group_base 0
    k1 = _gemm(b, "a", 8 * 128, 256, 128, source=gemm_kernel.Source("remote", 128))
    k2 = _gemm(b, "b", 8 * 256, 512, 128, sink=gemm_kernel.Sink("red_remote", 256))
    report = compile_cais(b)
    ranges = [range(k.cais.group_base, k.cais.group_base + k.grid_x * k.grid_y) for k in b.wl.kernels]
    assert all(not set(r1) & set(r2) for r1, r2 in itertools.combinations(ranges, 2))
    assert report.kernel("hand").of("kept") and not report.kernel("hand").of("rewritten")
    bases = [b.wl.kernels[i].cais.group_base for i in (k1, k2)]
    again = compile_cais(b)
    assert [b.wl.kernels[i].cais.group_base for i in (k1, k2)] == bases and not again.rewritten


@pytest.mark.parametrize("pre_launch,pre_access", [(False, False), (True, False), (False, True), (True, True)])
def test_coordination_switches(pre_launch, pre_access):
    b = _builder()
    ki = _gemm(b, "ag", 8 * 128, 256, 640, source=gemm_kernel.Source("remote", 128))
    report = compile_cais(b, coordination=Coordination(pre_launch, pre_access))
    k = b.wl.kernels[ki]
    ops = _ops(k)
    assert (k.cais.pre_launch_sync, k.cais.pre_access_sync) == (pre_launch, pre_access)
    assert ops.count(isa.CAIS_SYNC) == (1 if pre_access else 0)
    if pre_access:
        at = ops.index(isa.CAIS_SYNC)
        assert report.kernel("ag").sync_pc == at
        first_cais = ops.index(isa.LD_CAIS)
        assert at < first_cais
        depth = sum(1 if o == isa.LOOP else -1 if o == isa.ENDLOOP else 0 for o in ops[:at])
        assert depth == 0  # hoisted out of every loop: one sync per block
        assert all(o != isa.LD_CAIS for o in ops[:at])
        compile_cais(b, coordination=Coordination(pre_launch, pre_access))
        assert _ops(k).count(isa.CAIS_SYNC) == 1  # not inserted twice


def test_groups_span_the_gpus_of_the_launch():
    b = _builder()
    ki = _gemm(b, "part", 4 * 128, 256, 128, source=gemm_kernel.Source("remote", 128))
    b.wl.launches[-1].gpus.extend([2, 3, 4, 5])
    report = compile_cais(b, num_gpus=4)
    k = b.wl.kernels[ki]
    assert (k.cais.first_gpu, k.cais.num_gpus) == (2, 4) and report.rewritten
    b2 = _builder()
    ki = _gemm(b2, "holes", 4 * 128, 256, 128, source=gemm_kernel.Source("remote", 128))
    b2.wl.launches[-1].gpus.extend([0, 2, 4, 6])
    report = compile_cais(b2, num_gpus=4)
    assert "contiguous" in report.kernel("holes").refused and not b2.wl.kernels[ki].cais.enabled
    assert isa.LD_CAIS not in _ops(b2.wl.kernels[ki]) and report.refused


def test_a_multicast_buffer_is_not_rewritten():
    b = _builder()
    mc = b.buffer("mc", 1 << 16, multicast=True)
    ki, p = b.kernel("k", 2, 1)
    p.ins(isa.LD_REMOTE, buffer=mc, addr=affine(0, bx=128), peer=affine(0), rows=1, row_bytes=128)
    b.launch(ki, b.stream("main"))
    report = compile_cais(b)
    assert "multicast" in report.refused[0][1].reason and isa.LD_CAIS not in _ops(b.wl.kernels[ki])


def test_a_flag_barrier_is_synchronisation_not_data():
    b = _builder()
    f = b.flags("f", 1)
    ki, p = b.kernel("bar", 1, 1)
    barrier(p, f, affine(0), G)
    b.launch(ki, b.stream("main"))
    report = compile_cais(b)
    assert {d.action for d in report.kernel("bar").decisions} == {"refused"} and not b.wl.kernels[ki].cais.enabled


def test_index_analysis_sees_quotient_terms():
    a = affine(5, bx=3, by=7, loops=(64,))
    assert gpu_invariant(a)
    a.quotient.add(block_y=1, divisor=2, scale=9)
    assert gpu_invariant(a)
    a.quotient.add(gpu=1, divisor=16, scale=0)  # a zero-scale term adds nothing
    assert gpu_invariant(a)
    a.quotient.add(gpu=1, divisor=16, scale=4)
    assert not gpu_invariant(a)
    assert not gpu_invariant(affine(0, g=1, mod=G))


def _remote_rows(kernel, buffer: int, bx: int, by: int, row_bytes: int, ld: int) -> list[tuple[int, int]]:
    """(peer, first row) of every remote load of `buffer` a block issues over its K loop."""
    out, count = [], 1
    for ins in kernel.program:
        if ins.op == isa.LOOP:
            count = ins.count
        elif ins.op in (isa.LD_REMOTE, isa.LD_CAIS) and ins.buffer == buffer:
            assert ins.row_bytes == row_bytes and ins.row_stride == ld
            for L in range(count):
                addr = eval_affine(ins.addr, bx, by, 0, (L,))
                out.append((eval_affine(ins.peer, bx, by, 0, (L,)), addr // ld, addr % ld))
    return out


def test_a_weight_gradient_loads_its_k_sharded_operand_from_each_owner_once_per_tile():
    """dW = X^T dY with X sharded over the GPUs along K, the tokens (spec A5): each tile's K loop
    loads every owner's token rows once, 64 at a time, at its own columns, from the owner
    (GPU-invariant, so the compiler makes them ld.cais)."""
    b = _builder()
    M, N, K = 256, 384, G * 192  # 192 tokens per GPU: 3 K steps of 64 each
    ki = _gemm(b, "wgrad", M, N, K, source=gemm_kernel.Source("remote", K // G, along_k=True))
    k = b.wl.kernels[ki]
    buf = b.buffer_index("wgrad.a")
    cfg = gemm_kernel.plan(M, N, K, 66)
    cols, ld = cfg.tm, M * 2
    for bx, by in itertools.product(range(k.grid_x), range(k.grid_y)):
        col = by * cfg.tm * 2
        rows = _remote_rows(k, buf, bx, by, cols * 2, ld)
        assert sorted(rows) == [(o, r, col) for o in range(G) for r in range(0, K // G, gemm_kernel.TK)]
    report = compile_cais(b)
    assert not report.kernels[0].refused and _ops(k).count(isa.LD_CAIS) >= 2 and isa.LD_REMOTE not in _ops(k)


def test_a_k_sharded_operand_whose_steps_straddle_two_owners_loads_each_part_from_its_owner():
    """96 tokens per GPU: step 1 holds tokens 64-127, the last 32 of GPU 0's and the first 32 of
    GPU 1's; each step loads in 32-token parts, each from the GPU that owns it, every token once."""
    b = _builder()
    M, N, K = 256, 384, G * 96
    ki = _gemm(b, "wgrad", M, N, K, source=gemm_kernel.Source("remote", 96, along_k=True))
    k = b.wl.kernels[ki]
    buf = b.buffer_index("wgrad.a")
    cfg = gemm_kernel.plan(M, N, K, 66)
    ld = M * 2
    for bx, by in itertools.product(range(k.grid_x), range(k.grid_y)):
        rows = _remote_rows(k, buf, bx, by, cfg.tm * 2, ld)
        assert sorted(rows) == [(o, r, by * cfg.tm * 2) for o in range(G) for r in range(0, 96, 32)]
    with pytest.raises(ValueError, match="whole 64-token steps"):
        _gemm(_builder(), "wgrad", 256, 384, G * 96 + 32, source=gemm_kernel.Source("remote", 96, along_k=True))
