"""The CAIS schemes' lowering (harness/schemes/cais_dataflow.py) without the engines: the
TB-level chain GEMM-RS -> LN -> AG-GEMM, the SM partition of the overlap, the hand-written
.cais metadata the compiler will replace, and the coordination switches reaching the config."""
from __future__ import annotations

import pytest

from harness import schemes
from harness.gpu.isa_text import isa
from harness.schemes.lowering import Target
from harness.workload import build, from_config

from conftest import compose

G, SMS = 8, 66


def _lower(scheme: str, phase: str, workload: str, *extra: str, model: str = "tiny"):
    cfg = compose(f"model={model}", "system=dgx_h100_half", f"scheme={scheme}", *extra)
    spec = schemes.get(scheme)
    params = schemes.params_from_config(spec, cfg.scheme)
    graph = build(from_config(cfg.model), phase, workload, spec.partition, G)
    return cfg, spec.lower(graph, Target(G, SMS, False), params)


def _launch(low, kernel_name: str):
    wl = low.workload
    for i, la in enumerate(wl.launches):
        if wl.kernels[la.kernel].name == kernel_name:
            return i, la, wl.kernels[la.kernel]
    raise KeyError(kernel_name)


def test_the_chain_is_released_tile_by_tile_not_kernel_by_kernel():
    _, low = _lower("cais", "inference", "sublayer_l1", model="llama_7b")
    _, la_rs, _ = _launch(low, "out_proj")
    gate, la_gate, k_gate = _launch(low, "reduce_out_proj.gate")
    ln, la_ln, _ = _launch(low, "ln2")
    _, la_pub, _ = _launch(low, "ag_ln2.publish")
    ag_gate, _, k_ag_gate = _launch(low, "ag_ln2.gate")
    _, la_ffn1, k_ffn1 = _launch(low, "ffn1")
    for la in (la_rs, la_gate, la_ln, la_pub, la_ffn1):  # nothing waits for a whole kernel
        assert list(la.after) == []
    # LN row r waits for its row block's gate: contributions landed and own tiles done
    (d,) = la_ln.deps
    assert (d.producer, d.key, d.scale_num, d.scale_den, d.lo, d.hi) == (gate, isa.LINEAR, 1, 128, 0, 0)
    waits = [i for i in k_gate.program if i.op == isa.FLAG_WAIT]
    assert [w.value for w in waits] == [16, (G - 1) * 128 * 4096 * 2]  # 16 tiles of a row block; 7 x its bytes
    # the publisher of row block b waits for LN rows 128 b .. 128 b + 127 and flags every GPU
    (d,) = la_pub.deps
    assert (d.producer, d.scale_num, d.lo, d.hi) == (ln, 128, 0, 127)
    assert k_ag_gate.grid_y == 9216 // 128
    # FFN1 tile row by waits for its rows' flag and ld.cais's them from their owner in its K
    # loop, every tile of the row at the same K step (one fetch per GPU, the others join it)
    (d,) = la_ffn1.deps
    assert (d.producer, d.key) == (ag_gate, isa.ROW) and k_ffn1.cais.enabled
    (a_load,) = [i for i in k_ffn1.program if i.op == isa.LD_CAIS][:1]
    assert a_load.addr.block_x == 0 and a_load.peer.quotient[0].block_y == 1
    assert not any(k.name == "ag_ln2.gather" for k in low.workload.kernels)


def test_a_gathered_tensor_that_two_kernels_read_is_copied_once_and_read_locally():
    """The output gradient of the attention block: the out-proj dgrad (an AG-GEMM) and its
    weight gradient both read it, so one copy fetches each row block (ld.cais from its owner)
    when its flag is set, and the dgrad's tile row by waits for that copy."""
    _, low = _lower("cais", "training", "layer", model="llama_7b")
    ag_gate, _, _ = _launch(low, "ag_dy_attn.gate")
    gather, la_gather, k_gather = _launch(low, "ag_dy_attn.gather")
    (d,) = la_gather.deps
    assert (d.producer, d.key) == (ag_gate, isa.ROW)
    assert [i.op for i in k_gather.program if i.op != isa.CAIS_SYNC] == [isa.LD_CAIS, isa.ST]
    _, la_dgrad, k_dgrad = _launch(low, "out_proj_dgrad")
    (d,) = la_dgrad.deps
    assert (d.producer, d.key) == (gather, isa.ROW)
    assert not {isa.LD_CAIS, isa.LD_REMOTE} & {i.op for i in k_dgrad.program}


def test_a_weight_gradient_loads_its_re_gather_in_its_k_loop():
    """spec A5: the QKV and FFN1 weight gradients ld.cais X^T from the owners of its tokens in
    their K loop once every owner has flagged its rows (the re-gather's gate), with no copy."""
    _, low = _lower("cais", "training", "layer", model="llama_7b")
    names = {k.name for k in low.workload.kernels}
    for wgrad, ag in (("qkv_wgrad", "ag_ln1_regather"), ("ffn1_wgrad", "ag_ln2_regather")):
        gate, _, _ = _launch(low, f"{ag}.gate")
        _, la, k = _launch(low, wgrad)
        assert gate in la.after and f"{ag}.gather" not in names
        loads = [i for i in k.program if i.op == isa.LD_CAIS]
        assert loads and all(i.rows == 64 and i.peer.quotient[0].loop == [64] for i in loads)


def test_gates_take_no_registers_or_shared_memory_from_the_gemm_tiles():
    """The gates stand for the TB scheduler holding consumer blocks (spec 3.6 (1)): they must not
    take the registers a GEMM tile needs, or a tile that fills an SM's register file (the
    library GEMMs' 128x256 tiles) could not share an SM with one."""
    _, low = _lower("cais", "training", "layer", model="llama_7b")
    gates = [k for k in low.workload.kernels if k.name.endswith((".gate", ".publish"))]
    assert {k.name.rsplit(".", 1)[1] for k in gates} == {"gate", "publish"}
    for k in gates:
        assert (k.threads_per_block, k.regs_per_thread, k.smem_bytes) == (32, 0, 0), k.name
    whole_sm = [k for k in low.workload.kernels if k.threads_per_block * k.regs_per_thread >= 64 * 1024 - 1024]
    assert whole_sm  # tiles that a 32-register one-warp gate would have kept off its SM


def test_producer_consumer_and_gather_share_the_home_interleaved_row_order():
    """Every GPU hands out row block r of every owner before r + 1 (Kernel.row_interleave = N),
    the producer on every SM ahead of the consumer."""
    _, low = _lower("cais", "training", "layer", model="llama_7b")
    _, la_rs, k_rs = _launch(low, "out_proj")
    _, la_ffn1, k_ffn1 = _launch(low, "ffn1")
    _, _, k_gather = _launch(low, "ag_dy_attn.gather")
    assert k_rs.row_interleave == k_ffn1.row_interleave == k_gather.row_interleave == G
    assert la_rs.sm_count == 0 and la_ffn1.sm_count == 0  # every SM
    assert la_rs.priority > la_ffn1.priority


@pytest.mark.parametrize("scheme,pre_launch,pre_access", [("cais", True, True), ("cais_wo_coord", False, False),
                                                           ("cais_partial", True, True)])
def test_cais_kernels_carry_groups_and_one_pre_access_sync(scheme, pre_launch, pre_access):
    _, low = _lower(scheme, "training", "layer")
    ranges = []
    for k in low.workload.kernels:
        cais_ops = [i for i, ins in enumerate(k.program) if ins.op in (isa.LD_CAIS, isa.RED_CAIS)]
        syncs = [i for i, ins in enumerate(k.program) if ins.op == isa.CAIS_SYNC]
        if not cais_ops:
            assert not k.cais.enabled and not syncs
            continue
        assert k.cais.enabled and k.cais.num_gpus == G
        assert (k.cais.pre_launch_sync, k.cais.pre_access_sync) == (pre_launch, pre_access)
        assert len(syncs) == (1 if pre_access else 0)  # the compiler inserts it only when asked
        if syncs:
            assert syncs[0] < cais_ops[0]
            depth = sum(1 if ins.op == isa.LOOP else -1 if ins.op == isa.ENDLOOP else 0 for ins in k.program[:syncs[0]])
            assert depth == 0  # outside every loop: a TB synchronises once
        ranges.append((k.cais.group_base, k.cais.group_base + k.grid_x * k.grid_y))
    ranges.sort()
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))  # no two kernels share a group id


@pytest.mark.parametrize("extra,throttle,traffic_control", [
    ((), True, True), (("scheme.throttle=false",), False, True), (("scheme=cais_wo_coord",), False, True),
    (("scheme=cais_partial",), True, False)])
def test_coordination_and_traffic_control_reach_the_switch(extra, throttle, traffic_control):
    cfg = compose("model=tiny", "system=dgx_h100_half", "scheme=cais", *extra)
    assert cfg.net.cais_merge.throttle is throttle and cfg.net.traffic_control is traffic_control
    assert set(str(cfg.net.features).split(",")) == {"cais_merge", "group_sync"}


def test_bad_coordination_values_are_rejected():
    with pytest.raises(Exception) as e:
        _lower("cais", "inference", "sublayer_l1", "scheme.pre_launch_sync=maybe")
    assert "scheme.pre_launch_sync" in str(e.value)

