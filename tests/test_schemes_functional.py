"""Values, not just timing: every scheme's reduced and gathered activations on model=tiny equal
what numpy computes.

In a functional run every GPU's GEMM writes its partial output as the constant g + 1 (the
engine's functional store), the collectives move the values through tile registers, DMA
pushes and in-switch reductions, and LayerNorm writes g + 1 into its shard. So after a
reduction every element is sum(g + 1) = 36, and a gathered row block holds its owner's g + 1.
The engine reports each buffer's sum, min, max and an order-sensitive hash per GPU; numpy
computes the same four numbers from the expected contents (harness/gpu/functional.py).
Every functional layer run also checks each collective's result itself
(harness/functional_check.py); the tests below check it does, and the paths (merging,
eviction, timeouts, coordination steps) that need a particular configuration.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness import schemes
from harness.gpu import functional

from conftest import run_cli

G = 8
T, H, F = 1024, 256, 1024  # model=tiny: tokens, hidden, FFN
SUM = sum(g + 1 for g in range(G))
BASE = ("model=tiny", "system=dgx_h100_half", "net.functional=true")


def _stats(tmp_path, scheme: str, *extra: str) -> dict[str, float]:
    out = tmp_path / scheme
    run_cli(*BASE, f"scheme={scheme}", f"out_dir={out}", *extra)
    st = pd.read_csv(out / "stats.csv")
    return dict(zip(st["name"], st["value"]))


def _check(stats, gpu: int, buffer: str, values: np.ndarray) -> None:
    assert functional.engine_summary(stats, gpu, buffer) == functional.summary(values), f"gpu{gpu} {buffer}"


def _gathered(gpu: int) -> np.ndarray:
    """[T, H] row blocks of T/G rows, block k holding k + 1."""
    return np.repeat(np.arange(1, G + 1, dtype=float), T // G)[:, None] * np.ones((1, H))


@pytest.mark.parametrize("scheme", schemes.available())
def test_every_scheme_checks_its_own_collectives_in_a_training_layer(engines, tmp_path, scheme):
    """A functional run checks every collective's result buffer on every GPU itself
    (harness/functional_check.py) and fails on a wrong value; the row counts the checks.
    Every scheme but LADM (which has no collectives) has at least its four forward and
    backward reductions checked on all 8 GPUs; LADM its four weight-gradient reductions."""
    out = tmp_path / scheme
    run_cli(*BASE, f"scheme={scheme}", "phase=training", "workload=layer", f"out_dir={out}")
    row = pd.read_csv(out / "results.csv").iloc[0]
    assert row["functional_checks"] >= 4 * G


@pytest.mark.parametrize("scheme", schemes.available())
def test_every_scheme_stays_exact_on_4_gpus_where_gemms_end_in_column_edge_tiles(engines, tmp_path, scheme):
    """On 4 GPUs model=tiny's QKV GEMM is 192 columns per GPU: a 128-column tile and a clipped
    64-column edge tile (Instr.row_bytes_in_bounds). Its stores and the weight loads of that
    tile stay inside the matrix, so the run checks every collective like the 8-GPU one; with a
    mean-extent edge tile (both tiles 96 columns wide from their own offsets) the last tile's
    last row ran past the buffer, and a reduction's overhang would add into the next row."""
    out = tmp_path / scheme
    run_cli(*BASE, f"scheme={scheme}", "phase=training", "workload=layer", "system.gpus=4", f"out_dir={out}")
    row = pd.read_csv(out / "results.csv").iloc[0]
    assert row["gpus"] == 4 and row["functional_checks"] >= 4 * 4


@pytest.mark.parametrize("scheme,seq,batch", [("tp_nvls", 64, 16), ("ladm", 64, 16), ("cais", 192, 8)])
def test_attention_over_sequences_that_are_not_whole_tiles_stays_in_its_buffers(engines, tmp_path, scheme, seq, batch):
    """A sequence of 64 tokens (less than one 128-row attention tile) or 192 (one and a half):
    the last query and key tiles of each head move only their rows (Instr.rows_in_bounds), so
    the run stays inside q, kv and o, whose heads lie back to back (a whole tile read the next
    head's rows, and the last head's ran past the buffer: an engine error), and checks its
    collectives."""
    out = tmp_path / scheme
    run_cli(*BASE, f"scheme={scheme}", "phase=training", "workload=layer", f"model.seq_len={seq}",
            f"model.batch={batch}", f"out_dir={out}")
    assert pd.read_csv(out / "results.csv").iloc[0]["functional_checks"] >= 4 * G


@pytest.mark.parametrize("scheme", ["cais", "cais_base"])
def test_cais_stays_exact_where_hidden_is_not_whole_tiles(engines, tmp_path, scheme):
    """hidden 320 on 2 GPUs: the weight gradients' rows (320) end in an edge tile, whose gathered
    operand (X^T, loaded along K by ld.cais) is clipped to its columns of X; the GEMM-RS's 320
    columns end in a clipped column of tiles, and CAIS-Base's owners count N x 2 bytes per row
    (both were internal errors)."""
    out = tmp_path / scheme
    run_cli(*BASE, f"scheme={scheme}", "phase=training", "workload=layer", "system.gpus=2", "model.hidden=320",
            "model.heads=10", "model.ffn_hidden=1280", "model.seq_len=256", "model.batch=5", f"out_dir={out}")
    assert pd.read_csv(out / "results.csv").iloc[0]["functional_checks"] >= 4 * 2


@pytest.mark.parametrize("scheme,workload,extra", [
    # hidden 768: a LayerNorm row of 1536 B is one round of 1024 B and a partial one
    ("tp_nvls", "sublayer_l1", ("model.heads=24", "model.hidden=768", "model.ffn_hidden=3072")),
    ("cais", "sublayer_l4", ("model.heads=24", "model.hidden=768", "model.ffn_hidden=3072")),
    # 1600 tokens on 2 GPUs: CoCoNet's GEMM ends in an edge tile, so its AllReduce is one chunk
    ("coconet", "sublayer_l2", ("system.gpus=2", "model.heads=2", "model.hidden=64", "model.ffn_hidden=256",
                                "model.seq_len=320", "model.batch=5")),
    # hidden 480: rows of 960 B and K steps of 120 B share lines between tiles and steps; such a
    # line goes alone, not in an 8-line bulk whose shape other GPUs would not match
    ("cais_base", "sublayer_l1", ("system.gpus=5", "model.heads=15", "model.hidden=480", "model.ffn_hidden=1440",
                                  "model.seq_len=64", "model.batch=20", "gpu.launch_skew_ns=50000")),
    ("cais_partial", "sublayer_l1", ("system.gpus=3", "model.heads=9", "model.hidden=288", "model.ffn_hidden=864",
                                     "model.seq_len=128", "model.batch=15")),
    # T3-NVLS's trackers count 128-row blocks: its GEMM's tiles must not span two
    ("t3_nvls", "sublayer_l1", ("system.gpus=4", "model.heads=4", "model.hidden=128", "model.ffn_hidden=512",
                                "model.batch=4", "gpu.num_sms=4", "model.num_sms=4")),
])
def test_shapes_the_layer_fuzzer_found_run_exactly(engines, tmp_path, scheme, workload, extra):
    """Points of scripts/fuzz_layers.py that stopped (an access past a buffer, or an internal
    error) and now run and check their collectives (docs/FUZZING.md, finding 24)."""
    out = tmp_path / scheme
    run_cli(*BASE, f"scheme={scheme}", "phase=training", f"workload={workload}", *extra, f"out_dir={out}")
    assert pd.read_csv(out / "results.csv").iloc[0]["functional_checks"] >= 1


def test_the_self_check_fails_a_wrong_value_naming_the_collective_gpu_and_buffer():
    """The check compares sum, min, max and an order-sensitive hash: one element off, or the
    right values in the wrong blocks, fails."""
    from harness.errors import SimulationError
    from harness.functional_check import Gathered, Reduced, check

    n = 64
    good = {f"gpu{g}.mem.{k}": v for g in range(G) for k, v in
            [(f"red.{s}", x) for s, x in functional.summary(np.full(n, float(SUM))).items()] +
            [(f"src.{s}", x) for s, x in functional.summary(np.full(4, g + 1.0)).items()] +
            [(f"ag.{s}", x) for s, x in functional.summary(_gathered_small(g)).items()]}
    expect = {"rs": Reduced("red", n), "ag": Gathered("ag", "src", G * 2, 3)}
    assert check(good, expect, G) == 2 * G

    one_off = np.full(n, float(SUM))
    one_off[5] -= 1
    bad = dict(good, **{f"gpu3.mem.red.{s}": x for s, x in functional.summary(one_off).items()})
    with pytest.raises(SimulationError, match=r"'rs' left wrong values in red on gpu3: sum 2303 \(expected 2304\)"):
        check(bad, expect, G)

    swapped = _gathered_small(2)[::-1].copy()  # the same values, blocks in reverse order
    bad = dict(good, **{f"gpu2.mem.ag.{s}": x for s, x in functional.summary(swapped).items()})
    with pytest.raises(SimulationError, match="'ag' left wrong values in ag on gpu2: same sum, min and max"):
        check(bad, expect, G)


def _gathered_small(gpu: int) -> np.ndarray:
    """[G * 2, 3]: two rows per GPU, block k holding k + 1."""
    return np.repeat(np.arange(1, G + 1, dtype=float), 2)[:, None] * np.ones((1, 3))


@pytest.mark.parametrize("skew", ["default", "0"])
def test_t3_nvls_merges_push_reductions_in_the_switch_and_multicasts_the_gather(engines, tmp_path, skew):
    """Exact sums and gathers at any launch skew; without skew every line's N-1 contributions
    merge into one write. (T3-NVLS has no TB coordination: with the measured skew, beyond the
    merge timeout, entries time out and partial sums reach the home, still summing exactly.)"""
    extra = () if skew == "default" else ("gpu.launch_skew_ns=0",)
    stats = _stats(tmp_path, "t3_nvls", "workload=sublayer_l1", *extra)
    for g in range(G):
        _check(stats, g, "reduce_out_proj", np.full(T // G * H, float(SUM)))
        _check(stats, g, "ag_ln2", _gathered(g))
    if skew == "default":
        return
    merged = sum(v for k, v in stats.items() if k.endswith(".rx.CAIS_RED.packets") and k.startswith("gpu"))
    sent = sum(v for k, v in stats.items() if k.endswith(".tx.CAIS_RED.packets") and k.startswith("gpu"))
    assert merged * (G - 1) == sent  # one write per line reaches the home for N-1 contributions


def test_ladm_reduces_weight_gradients_at_their_homes(engines, tmp_path):
    """LADM's FFN2 weight gradient [F, H]: every GPU's partial over its tokens (g + 1) lands as an
    unmerged remote reduction at the home of its rows (F/G rows each): 36 everywhere."""
    stats = _stats(tmp_path, "ladm", "phase=training", "workload=layer")
    for g in range(G):
        _check(stats, g, "ffn2_wgrad", np.full(F // G * H, float(SUM)))


def _merge_stat(stats, name: str) -> float:
    return sum(v for k, v in stats.items() if k.startswith("sw") and f".cais_merge." in k and k.endswith(f".{name}"))


@pytest.mark.parametrize("extra", [
    (),                                                          # CAIS-Base as configured
    ("scheme.compile=false",),                                   # the source form: plain remote ops
    ("scheme.pre_launch_sync=true", "scheme.pre_access_sync=true"),  # with the coordination steps
    ("net.cais_merge.table_entries=4", "net.cais_merge.timeout_ns=100"),  # evictions and timeouts
])
def test_cais_base_reduces_and_gathers_exactly(engines, tmp_path, extra):
    """The GEMM-RS shards hold the sum of every GPU's partial (red.cais merged in the switch, or
    plain remote adds, or evicted partial sums), and the re-gathers hold every owner's rows
    (ld.cais answered from the merge table or the owner)."""
    stats = _stats(tmp_path, "cais_base", "phase=training", "workload=layer", *extra)
    for g in range(G):
        for buf in ("reduce_attn", "reduce_ffn", "reduce_ffn1_dgrad", "reduce_qkv_dgrad"):
            _check(stats, g, buf, np.full(T // G * H, float(SUM)))
        _check(stats, g, "ag_ln2_regather", _gathered(g))
    merged = _merge_stat(stats, "completions")
    if "scheme.compile=false" in extra:
        assert merged == 0 and _merge_stat(stats, "misses") == 0
    else:
        assert merged > 0
    if "net.cais_merge.table_entries=4" in extra:
        assert _merge_stat(stats, "evictions") > 0 and _merge_stat(stats, "timeouts") > 0
    if "scheme.pre_access_sync=true" in extra:
        assert sum(v for k, v in stats.items() if k.startswith("sw") and "group_sync" in k and k.endswith("released")) > 0


def _packets(stats, kind: str) -> float:
    return sum(v for k, v in stats.items() if k.startswith("gpu") and k.endswith(f".tx.{kind}.packets"))


COORDINATION = [(), ("scheme.pre_launch_sync=false",), ("scheme.pre_access_sync=false",), ("scheme.throttle=false",),
                ("scheme.pre_launch_sync=false", "scheme.pre_access_sync=false", "scheme.throttle=false")]


@pytest.mark.parametrize("steps", COORDINATION, ids=lambda s: "+".join(x.split(".")[1].split("=")[0] for x in s) or "all_on")
def test_cais_reduces_exactly_with_each_coordination_step_on_and_off(engines, tmp_path, steps):
    """red.cais from every producer tile merged in the switch: the owner's shard holds the sum;
    pre-launch / pre-access sync send SYNC_REQ packets exactly when they are on."""
    stats = _stats(tmp_path, "cais", "workload=sublayer_l1", *steps)
    for g in range(G):
        _check(stats, g, "reduce_out_proj", np.full(T // G * H, float(SUM)))
    syncs = _packets(stats, "SYNC_REQ")
    sync_on = "scheme.pre_launch_sync=false" not in steps or "scheme.pre_access_sync=false" not in steps
    assert (syncs > 0) == sync_on
    assert _merge_stat(stats, "merged_writes") > 0


def test_cais_stays_exact_when_a_shrunk_merge_table_evicts_and_times_out(engines, tmp_path):
    """Eight 128 B entries per port and a 100 ns timeout: entries are evicted and time out, the
    partial sums and re-fetched lines still give exact values (the home counts contributions).
    (With two entries, both are nearly always Load-Wait, which is never a victim: requests
    bypass instead, and nothing is evicted.)"""
    stats = _stats(tmp_path, "cais", "phase=training", "workload=layer", "net.cais_merge.table_entries=8",
                   "net.cais_merge.table_bytes=1024", "net.cais_merge.timeout_ns=100")
    assert _merge_stat(stats, "evictions") > 0
    assert _merge_stat(stats, "timeouts") > 0
    for g in range(G):
        for rs in ("reduce_attn", "reduce_ffn", "reduce_ffn1_dgrad", "reduce_qkv_dgrad"):
            _check(stats, g, rs, np.full(T // G * H, float(SUM)))
        _check(stats, g, "ag_dy_attn", _gathered(g))


@pytest.mark.parametrize("cap", [(), ("net.cais_merge.outstanding_cap_kb=4",)], ids=["1280kb", "4kb"])
def test_cais_stays_exact_under_the_per_gpu_cap_of_mergeable_lines(engines, tmp_path, cap):
    """CAIS caps each GPU's outstanding mergeable lines (spec 3.5 step 3.4): the switches ack
    every red.cais line they retire, so the acks add up to the lines sent, the cap holds, and a
    4 KB cap (32 lines) only slows the run down: the sums stay exact, nothing deadlocks."""
    stats = _stats(tmp_path, "cais", "workload=sublayer_l1", *cap)
    for g in range(G):
        _check(stats, g, "reduce_out_proj", np.full(T // G * H, float(SUM)))
    gpu = lambda name: [stats[f"gpu{g}.mergeable.{name}"] for g in range(G)]  # noqa: E731
    assert sum(gpu("red_ack_lines")) == _merge_stat(stats, "red_ack_lines") == _packets(stats, "CAIS_RED") > 0
    limit = 4096 // 128 if cap else 1280 * 1024 // 128
    assert 0 < max(gpu("high_water_lines")) <= limit
    stalls = sum(stats[f"gpu{g}.stall.mergeable_cap"] for g in range(G))
    assert (stalls > 0) == bool(cap)


def test_cais_without_throttling_posts_red_cais_unacked(engines, tmp_path):
    """scheme.throttle=false (CAIS-w/o-Coord, the ablation's steps before +throttling) keeps
    red.cais posted: no acks, no cap."""
    stats = _stats(tmp_path, "cais", "workload=sublayer_l1", "scheme.throttle=false")
    assert _merge_stat(stats, "red_acks") == 0
    assert not any(".mergeable." in k for k in stats)
    for g in range(G):
        _check(stats, g, "reduce_out_proj", np.full(T // G * H, float(SUM)))


def test_ladm_attention_keeps_a_gpus_several_sequences_apart(engines, tmp_path):
    """LADM's attention runs a GPU's own token rows of every head: 256 rows of 128-token
    sequences here, as MegaGPT-4B's 2048 rows of 1024. Its query and output tiles are addressed
    per head by those rows, not by the sequence length (which overlapped the heads and ran past
    the buffers, an engine error in every run now), and the run's self-check passes."""
    stats = _stats(tmp_path, "ladm", "model.seq_len=128", "model.batch=16", "phase=training", "workload=layer")
    assert stats["gpu0.kernel0.attn.end"] > 0
