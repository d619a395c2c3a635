"""LLM layers lowered by the schemes, on model=tiny (8 GPUs of the half-scale DGX-H100).

Every registered scheme runs the layer (both phases) and the sub-layers L1-L4; the bytes each
GPU sends by packet type equal the analytical count of spec section 1.6 for its mechanism; runs
are deterministic and do not depend on how GPUs are split over processes.
"""
from __future__ import annotations

import pandas as pd
import pytest

import math

from harness import schemes
from harness.kernels import nvls, ring
from harness.kernels.gemm import plan
from harness.workload import build, from_config

from conftest import compose, run_cli

G = 8
BASE = ("model=tiny", "system=dgx_h100_half")
CASES = [("inference", "layer"), ("training", "layer"), ("inference", "sublayer_l1"), ("inference", "sublayer_l2"),
         ("training", "sublayer_l3"), ("training", "sublayer_l4")]


def _run(tmp_path, scheme: str, phase: str, workload: str, *extra: str) -> pd.Series:
    out = tmp_path / f"{scheme}_{phase}_{workload}_{len(extra)}"
    run_cli(*BASE, f"scheme={scheme}", f"phase={phase}", f"workload={workload}", f"out_dir={out}", *extra)
    df = pd.read_csv(out / "results.csv")
    assert len(df) == 1
    return df.iloc[0]


def _collectives(scheme: str, phase: str, workload: str):
    cfg = compose(*BASE)
    spec = schemes.get(scheme)
    g = build(from_config(cfg.model), phase, workload, spec.partition, G)
    return [o for o in g.ops if hasattr(o, "kind")]


def ladm_bytes(phase: str, workload: str) -> dict[str, int]:
    """LADM: a block loads its B tile (b_rows x K) from the GPU holding the tile's first weight row
    (N/G rows each) by plain remote loads; attention loads each K and V tile (128 x d) from the GPU
    holding those keys (g + floor((128 bx - 128 L0) / rows per GPU), mod G); a weight gradient's
    tile goes to the home of its rows (M/G each) as an unmerged remote reduction. The loads are
    read-only, so each GPU's L2 keeps what it fetched for the kernel (gpu.cache_remote_reads):
    a B tile column is fetched once, not once per tile row, and a K/V tile once per head."""
    from harness.gpu import kernels as calibrated
    from harness.schemes.ladm import logical_shape
    from harness.workload.graph import Attention, Gemm
    g = build(from_config(compose(*BASE).model), phase, workload, "sp", G)
    tokens = next(o.M for o in g.ops if isinstance(o, Gemm) and not o.wgrad and o.sharded != "M")
    out = {"read_resp": 0, "cais_red": 0}
    for op in g.ops:
        if isinstance(op, Gemm):
            M, N, K = logical_shape(op, G)
            c = plan(M, N, K, 66)
            _, b_rows, tm_eff, tn_eff = calibrated._tile_rows(M, N, c)
            gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
            for gpu in range(G):
                if op.wgrad:
                    home = max(c.tm, -(-(M // G) // c.tm) * c.tm)  # M/G rows per home, whole tiles
                    out["cais_red"] += sum(c.tm * tn_eff * 2 * gx for by in range(gy) if by * c.tm // home != gpu)
                else:
                    out["read_resp"] += sum(b_rows * K * 2 for bx in range(gx) if bx * c.tn // (N // G) != gpu)
        elif isinstance(op, Attention):
            q = tokens // G
            heads = op.batch_heads * G // (tokens // op.seq)
            nt = math.ceil(op.seq / 128)
            for gpu in range(G):
                tiles = {((gpu + (128 * bx - 128 * L0) // q) % G, L0) for bx in range(q // 128)
                         for L0 in range((nt + 1) // 2)}  # (peer, key tile): one fetch each
                out["read_resp"] += sum(heads * 2 * 128 * op.head_dim * 2 for peer, _ in tiles if peer != gpu)
    return out


def _row_blocks(rows: int) -> int:
    """128-row blocks of a shard, the last one partial (model=tiny_edge)."""
    return -(-rows // 128)


def _tile_plan(M: int, N: int, K: int):
    """The AG-GEMM's tiles: whole shards plan their tiles to divide them, a partial one 128 rows."""
    return plan(M, N, K, 66, M // G if M // G % 128 == 0 else 128)


def cais_base_bytes(phase: str, workload: str, compiled: bool = True, model: tuple[str, ...] = BASE) -> dict[str, int]:
    """CAIS-Base (spec 1.6) summed over the GPUs. GEMM-RS: every GPU sends the (N-1)/N of its
    partial that others own, (N-1) D in all, as red.cais or plain red (the merge happens beyond
    the GPUs' links). AG-GEMM: each A line is asked for by the N-1 GPUs that do not own it; merged
    (ld.cais) its owner answers once per merge session, one session per line (the requester's
    L2 keeps the line for the kernel's other tiles, spec A7), so D in all; as plain remote loads
    N-1 times that. A re-gather: D, or (N-1) D. Before every gather a
    barrier: N-1 flag writes of 8 B per GPU."""
    from harness.workload.graph import Collective, Gemm
    g = build(from_config(compose(*model).model), phase, workload, "sp", G)
    load, copies = ("cais_ld_resp", 1) if compiled else ("read_resp", G - 1)
    out = {"cais_red": 0, "cais_ld_resp": 0, "read_resp": 0, "write": 0}
    for i, op in enumerate(g.ops):
        if not isinstance(op, Collective):
            continue
        if op.kind == "reduce_scatter":
            out["cais_red"] += (G - 1) * op.bytes
            continue
        out["write"] += G * 8 * (G - 1)
        out[load] += copies * op.bytes
    return out


def cais_bytes(phase: str, workload: str, model: tuple[str, ...] = BASE) -> dict[str, int]:
    """CAIS moves each remote line once per merge session from its owner (spec 1.6): a
    ReduceScatter's red.cais send (N-1)/N D per GPU (the owner's own partial stays local); a
    gathered tensor D leaves its owners once: ld.cais'd by the AG-GEMM's tiles in their K loop,
    the requester's L2 keeping each chunk for the row's other tiles (spec A7), or by a copy when
    another kernel reads it too. Each owner flags each of its 128-row blocks ready to the N-1
    other GPUs (8 B each), a partial last block too."""
    from harness.workload.graph import Collective, Gemm
    g = build(from_config(compose(*model).model), phase, workload, "sp", G)
    out = {"cais_red": 0, "cais_ld_resp": 0, "write": 0, "read_resp": 0}
    for op in g.ops:
        if not isinstance(op, Collective):
            continue
        if op.kind == "reduce_scatter":
            out["cais_red"] += (G - 1) * op.bytes
            continue
        out["write"] += G * (G - 1) * 8 * _row_blocks(op.rows // G)
        consumers = g.consumers(op.name)
        ag_gemms = [c for c in consumers if isinstance(c, Gemm) and c.a_gathered and c.deps == (op.name,)]
        out["cais_ld_resp"] += op.bytes
    return out


def expected_bytes(scheme: str, phase: str, workload: str) -> dict[str, int]:
    """Payload bytes summed over the 8 GPUs, per packet type, from spec section 1.6 (D = bytes of
    the whole activation; per GPU: NVLS ld_reduce answers the switch's reads of D (every member's
    copy of the slices being reduced) and multimem.st sends D/N; NCCL's ring sends 2(N-1)/N D for
    an AllReduce; FuseLib: the partial tiles to their owners and the sums back, 2(N-1)/N D) plus
    the flags: 8 B per flag write (NVLS: 2 x N-1 writes per channel and step; ring: one per
    step per channel per chunk per warp)."""
    if scheme == "ladm":
        return ladm_bytes(phase, workload)
    if scheme == "cais_base":
        return cais_base_bytes(phase, workload)
    if scheme.startswith("cais"):
        return cais_bytes(phase, workload)
    spec = schemes.get(scheme)
    params = schemes.params_from_config(spec, compose(*BASE, f"scheme={scheme}").scheme)
    C = getattr(params, "channels", 0)
    out = {"read_resp": 0, "mm_st": 0, "write": 0}
    graph = build(from_config(compose(*BASE).model), phase, workload, spec.partition, G)
    for op in _collectives(scheme, phase, workload):
        D = op.bytes
        if scheme == "t3":  # DMA ring: (N-1)/N D per GPU per RS or AG; one flag per step per 128-row block
            out["dma"] = out.get("dma", 0) + (G - 1) * D  # (and per RS a ready flag per step to the next GPU)
            out["write"] += G * 8 * (G - 1) * (op.rows // G // 128) * (2 if op.kind == "reduce_scatter" else 1)
            continue
        if scheme == "t3_nvls":  # RS: (N-1)/N D of push reductions per GPU; AG: a D/N multicast push
            if op.kind == "reduce_scatter":  # per GPU, and N-1 flags per 128-row block
                out["cais_red"] = out.get("cais_red", 0) + (G - 1) * D
            else:
                out["dma"] = out.get("dma", 0) + D
                out["write"] += G * 8 * (G - 1) * (op.rows // G // 128)
            continue
        if scheme in ("fuselib", "fuselib_nvls"):
            # per tile of the producer GEMM not owned by its GPU: one 8 B flag write to the owner;
            # the closing barrier: N-1 flag writes per GPU
            gemm = graph.op(op.deps[0])
            c = plan(gemm.M, gemm.N, gemm.K, 66, gemm.M // G)
            tiles = math.ceil(gemm.N / c.tn) * math.ceil(gemm.M / c.tm)
            out["write"] += G * 8 * (tiles * (G - 1) // G) + G * 8 * (G - 1)
            if scheme == "fuselib":  # partial tiles to their owners, then the sums to every GPU
                out["write"] += G * (2 * (G - 1) * D // G)
            else:  # ld_reduce reads every GPU's whole partial; multimem.st sends D/N per GPU
                out["read_resp"] += G * D
                out["mm_st"] += D
            continue
        if scheme == "coconet":
            chunks = params.chunks
            warps = ring.RingConfig().warps  # each warp raises a slice's flag (one slice per step here)
            out["write"] += G * (2 * (G - 1) * D // G) + G * 8 * chunks * C * 2 * (G - 1) * warps
            continue
        chunks = params.chunks if scheme == "coconet_nvls" else 1
        steps = nvls.geometry(D, G, nvls.NvlsConfig(channels=C), chunks).steps
        # per channel and step two flags to the N-1 peers: scattered and landed (all_reduce),
        # scattered and slot freed (reduce_scatter), landed and slot freed (all_gather)
        out["write"] += G * 8 * C * chunks * steps * 2 * (G - 1)
        if op.kind in ("all_reduce", "reduce_scatter"):
            out["read_resp"] += G * D
        if op.kind in ("all_reduce", "all_gather"):
            out["mm_st"] += G * D // G
    return out


@pytest.mark.parametrize("scheme", ["tp_nvls", "sp_nvls", "coconet", "coconet_nvls", "fuselib", "fuselib_nvls", "t3", "t3_nvls", "ladm",
                                    "cais_base", "cais", "cais_wo_coord", "cais_partial"])
@pytest.mark.parametrize("phase,workload", CASES)
def test_scheme_runs_and_moves_the_analytical_bytes(engines, tmp_path, scheme, phase, workload):
    row = _run(tmp_path, scheme, phase, workload)
    assert row["time_us"] > 0 and row["scheme"] == scheme and row["workload"] == workload
    for kind, nbytes in expected_bytes(scheme, phase, workload).items():
        assert row.get(f"bytes_{kind}", 0) == nbytes, kind
    kernels = pd.read_csv(tmp_path / f"{scheme}_{phase}_{workload}_0" / "kernels.csv")
    assert (kernels["end_us"] > kernels["start_us"]).all()
    # the SM time a kernel's blocks held, and the part of it spent in CAIS sync waits
    assert kernels["sm_us"].sum() > 0 and (kernels["sync_wait_sm_us"] <= kernels["sm_us"]).all()
    assert (kernels["sync_wait_sm_us"] > 0).any() == (scheme in ("cais", "cais_partial"))


def test_cais_ld_replaced_by_plain_remote_loads_moves_n_minus_1_times_the_bytes(engines, tmp_path):
    """The traffic claim (issue 15): with the compiler off the AG-GEMM's remote loads are plain
    loads, each answered by the owner for every requester; with it on, once per merge session.
    Both counts equal the analytical formula, N-1 = 7x apart; the merged reductions likewise
    reach the homes once per line instead of N-1 times."""
    # No launch skew: CAIS-Base has no coordination, so a skew beyond the merge timeout flushes
    # partial sums (more reduction bytes at the homes, tested in test_drift / DRIFT.md).
    on = _run(tmp_path, "cais_base", "inference", "sublayer_l1", "gpu.launch_skew_ns=0")
    off = _run(tmp_path, "cais_base", "inference", "sublayer_l1", "scheme.compile=false", "gpu.launch_skew_ns=0")
    want_on, want_off = cais_base_bytes("inference", "sublayer_l1"), cais_base_bytes("inference", "sublayer_l1", False)
    assert on["bytes_cais_ld_resp"] == want_on["cais_ld_resp"] > 0 and on.get("bytes_read_resp", 0) == 0
    assert off["bytes_read_resp"] == want_off["read_resp"] == (G - 1) * on["bytes_cais_ld_resp"]
    assert off.get("bytes_cais_ld_resp", 0) == 0
    assert on["bytes_cais_red"] == off["bytes_cais_red"] == want_on["cais_red"]
    rx = {}
    for name, label in (("cais_base_inference_sublayer_l1_1", "on"), ("cais_base_inference_sublayer_l1_2", "off")):
        st = pd.read_csv(tmp_path / name / "stats.csv")
        rx[label] = st.loc[st["name"].str.fullmatch(r"gpu\d+\.rx\.CAIS_RED\.bytes"), "value"].sum()
    D = 1024 * 256 * 2  # model=tiny: tokens x hidden x 2 B
    assert rx["on"] == D and rx["off"] == (G - 1) * D


def test_layer_results_are_deterministic_and_partition_invariant(engines, tmp_path):
    a = _run(tmp_path, "coconet_nvls", "training", "sublayer_l3")
    b = _run(tmp_path, "coconet_nvls", "training", "sublayer_l3", "cosim.gpus_per_process=1",
             "cosim.switches_per_process=1")
    assert a.equals(b)
    ka = pd.read_csv(tmp_path / "coconet_nvls_training_sublayer_l3_0" / "kernels.csv")
    kb = pd.read_csv(tmp_path / "coconet_nvls_training_sublayer_l3_2" / "kernels.csv")
    assert ka.equals(kb)


@pytest.mark.parametrize("cache", [True, False])
def test_cais_fetches_a_gathered_row_once_per_gpu_only_with_remote_read_caching(engines, tmp_path, cache):
    """FFN1 four times wider than model=tiny's (4 columns of tiles): with the requester's L2
    keeping remote chunks (spec A7) each GPU fetches every gathered line once; without
    (gpu.cache_remote_reads=false, A7's sensitivity) up to once per column of tiles (fewer
    where a GPU's second request for a line finds the first one's merge entry still waiting)."""
    phase, workload, wide = "inference", "sublayer_l1", (*BASE, "model.ffn_hidden=4096")
    extra = () if cache else ("gpu.cache_remote_reads=false",)
    row = _run(tmp_path, "cais", phase, workload, "model.ffn_hidden=4096", *extra)
    want = cais_bytes(phase, workload, model=wide)
    for kind, nbytes in want.items():
        if cache or kind != "cais_ld_resp":
            assert row.get(f"bytes_{kind}", 0) == nbytes, kind
    if not cache:
        assert want["cais_ld_resp"] < row["bytes_cais_ld_resp"] <= 4 * want["cais_ld_resp"]


def test_cais_results_are_deterministic_and_partition_invariant(engines, tmp_path):
    a = _run(tmp_path, "cais", "training", "sublayer_l4")
    b = _run(tmp_path, "cais", "training", "sublayer_l4", "cosim.gpus_per_process=1", "cosim.switches_per_process=1")
    c = _run(tmp_path, "cais", "training", "sublayer_l4", "cosim.gpus_per_process=8", "cosim.switches_per_process=4",
             "cosim.colocate=true")
    assert a.equals(b) and a.equals(c)
    ka = pd.read_csv(tmp_path / "cais_training_sublayer_l4_0" / "kernels.csv")
    kb = pd.read_csv(tmp_path / "cais_training_sublayer_l4_2" / "kernels.csv")
    assert ka.equals(kb)


def test_sp_nvls_moves_less_than_tp_nvls_up_and_the_same_down():
    """Sanity of the analytical counts: SP's RS + AG send D/N less per GPU upward than TP's AR
    does (no multicast of the reduced slice by the RS), the same ld_reduce reads."""
    tp = expected_bytes("tp_nvls", "inference", "sublayer_l1")
    sp = expected_bytes("sp_nvls", "inference", "sublayer_l1")
    assert tp["read_resp"] == sp["read_resp"] and tp["mm_st"] == sp["mm_st"]


@pytest.mark.parametrize("override,key", [
    ("scheme=bogus", "scheme"), ("phase=bogus", "phase"), ("workload=bogus", "workload"),
    ("scheme.bogus=1", "scheme"), ("scheme.channels=0", "scheme.channels"),
    ("scheme.chunk_bytes=32768", "scheme.chunk_bytes"),  # gone: NCCL's rounds follow from its warps
])
def test_bad_layer_keys_are_one_line_errors(engines, tmp_path, override, key):
    proc = run_cli(*BASE, "scheme=tp_nvls", "workload=sublayer_l1", override, f"out_dir={tmp_path}", check=False)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.strip().splitlines() if l]
    assert len(lines) == 1 and key in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_layer_workload_needs_a_scheme_and_a_scheme_needs_a_layer(engines, tmp_path):
    p = run_cli(*BASE, "workload=layer", f"out_dir={tmp_path}", check=False)
    assert p.returncode != 0 and "scheme" in p.stderr
    p = run_cli(*BASE, "scheme=tp_nvls", f"out_dir={tmp_path}", check=False)
    assert p.returncode != 0 and "workload" in p.stderr
    p = run_cli(*BASE, "scheme=tp_nvls", "workload=sublayer_l3", "phase=inference", f"out_dir={tmp_path}", check=False)
    assert p.returncode != 0 and "phase=training" in p.stderr


def test_a_failed_rerun_leaves_no_earlier_output_behind(engines, tmp_path):
    """results, statistics, kernels and config of a run that succeeded in out_dir are removed
    when a rerun there fails, and the failed run writes none of its own."""
    run_cli(*BASE, "scheme=tp_nvls", "workload=sublayer_l1", f"out_dir={tmp_path}")
    assert {"results.csv", "config.yaml", "kernels.csv", "stats.csv"} <= {p.name for p in tmp_path.iterdir()}
    p = run_cli(*BASE, "scheme=tp_nvls", "workload=sublayer_l1", "scheme.channels=0", f"out_dir={tmp_path}",
                check=False)
    assert p.returncode != 0 and list(tmp_path.iterdir()) == []


def test_a_backward_regather_gathers_the_saved_ln_output_not_its_ordering_dependency():
    """The re-gathers depend on attention backward / the FFN2 dgrad only for their place in the
    backward pass; the data is the forward LN output (spec A5). Every scheme gathers `source`."""
    from harness.workload.graph import Collective, Graph

    g = build(from_config(compose(*BASE).model), "training", "layer", "sp", G)
    assert (g.op("ag_ln1_regather").source, g.op("ag_ln1_regather").deps) == ("ln1", ("attn_bwd",))
    assert (g.op("ag_ln2_regather").source, g.op("ag_ln2_regather").deps) == ("ln2", ("ffn2_dgrad",))
    assert g.op("ag_ln2").source == "ln2" and g.op("reduce_attn").source == "out_proj"
    with pytest.raises(ValueError, match="unknown ops"):
        Graph("x", G, "sp").add(Collective("ag", "all_gather", 8, 8, (), data="missing"))


@pytest.mark.parametrize("scheme", ["t3", "t3_nvls"])
def test_t3_trigger_blocks_leave_a_one_sm_gpu_to_its_gemm(engines, tmp_path, scheme):
    """The trigger blocks take no registers (T3's tracker is hardware): with 32 a thread two of
    them kept the GEMM tile, which fills an SM's register file, off the only SM: a deadlock."""
    row = _run(tmp_path, scheme, "inference", "sublayer_l1", "gpu.num_sms=1", "model.num_sms=1")
    assert row["time_us"] > 0
