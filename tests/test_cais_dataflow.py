"""The CAIS schemes' lowering (harness/schemes/cais_dataflow.py) without the engines: the
TB-level chain GEMM-RS -> LN -> AG-GEMM, the SM partition of the overlap, the hand-written
.cais metadata the compiler will replace, and the coordination switches reaching the config."""
from __future__ import annotations

import pytest

from harness import schemes
from harness.gpu.isa_text import isa
from harness.schemes.cais_dataflow import MIN_SHARE, overlap_share, shift_rows
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
    _, la_head, _ = _launch(low, "out_proj.head")
    _, la_rest, _ = _launch(low, "out_proj.rest")
    gate, la_gate, k_gate = _launch(low, "reduce_out_proj.gate")
    ln, la_ln, _ = _launch(low, "ln2")
    _, la_pub, _ = _launch(low, "ag_ln2.publish")
    ag_gate, _, k_ag_gate = _launch(low, "ag_ln2.gate")
    _, la_ffn1, k_ffn1 = _launch(low, "ffn1")
    for la in (la_head, la_rest, la_gate, la_ln, la_pub, la_ffn1):  # nothing waits for a whole kernel
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
    # row block by is copied once (ld.cais from its owner) when its flag is set; FFN1 tile row
    # by waits for that copy and reads the rows locally
    gather, la_gather, k_gather = _launch(low, "ag_ln2.gather")
    (d,) = la_gather.deps
    assert (d.producer, d.key) == (ag_gate, isa.ROW) and list(la_gather.after) == []
    assert [i.op for i in k_gather.program if i.op != isa.CAIS_SYNC] == [isa.LD_CAIS, isa.ST]
    (d,) = la_ffn1.deps
    assert (d.producer, d.key) == (gather, isa.ROW)
    assert not {isa.LD_CAIS, isa.LD_REMOTE} & {i.op for i in k_ffn1.program}
    # without the reuse, every FFN1 tile ld.cais's its A rows from their owner
    _, low = _lower("cais", "inference", "sublayer_l1", "scheme.reuse_remote_rows=false", model="llama_7b")
    ag_gate, _, _ = _launch(low, "ag_ln2.gate")
    _, la_ffn1, k_ffn1 = _launch(low, "ffn1")
    (d,) = la_ffn1.deps
    assert (d.producer, d.key) == (ag_gate, isa.ROW) and k_ffn1.cais.enabled
    assert isa.LD_CAIS in {i.op for i in k_ffn1.program}


def test_the_producer_keeps_a_static_share_of_the_sms_beside_the_consumer():
    _, low = _lower("cais", "inference", "sublayer_l1", model="llama_7b")
    _, la_head, k_head = _launch(low, "out_proj.head")
    _, la_rest, k_rest = _launch(low, "out_proj.rest")
    _, la_ffn1, _ = _launch(low, "ffn1")
    assert la_head.sm_count == 0 and la_ffn1.sm_count == 0  # every SM
    w_rs, w_ag = 2 * 9216 * 4096 * 512 * 7 / 8, 2 * 9216 * 1408 * 4096
    assert la_rest.sm_count == round(SMS * overlap_share(w_rs, w_ag)) == round(SMS * MIN_SHARE)
    assert la_rest.priority > la_ffn1.priority
    assert k_head.grid_y == 9 and k_rest.grid_y == 63  # the first owner's 1152 rows, then the rest
    # backward L3: the producer (FFN1 dgrad) outweighs the consumer (out-proj dgrad)
    _, low = _lower("cais", "training", "sublayer_l3", model="llama_7b")
    _, la_rest, _ = _launch(low, "ffn1_dgrad.rest")
    share = overlap_share(2 * 9216 * 4096 * 1408 * 7 / 8, 2 * 9216 * 512 * 4096)
    assert 0.5 < share <= 1 - MIN_SHARE and la_rest.sm_count == round(SMS * share)


def test_a_later_row_launch_addresses_the_rows_it_computes():
    """shift_rows(k, t) turns block_y into block_y + t in every address and quotient."""
    a = isa.Affine(base=5, block_y=100)
    a.quotient.add(block_y=1, divisor=3, scale=7)
    k = isa.Kernel()
    k.program.add(op=isa.LD, addr=a)
    shift_rows(k, 4)
    got = k.program[0].addr
    assert got.base == 5 + 400 and got.quotient[0].base == 4


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
