"""CAIS on shards that are not whole 128-row blocks (Fig 17's 32-GPU LLaMA: 288 rows per GPU =
2 x 128 + 32). model=tiny_edge gives each of 8 GPUs 160 rows = 128 + 32: the GEMMs' last tile
per owner is an edge tile clipped to its rows (Instr.rows_in_bounds), the gates of the partial
row block wait for its own bytes (Instr.value_of_block). Values, bytes and the counters must be
exact, as for the whole-block model=tiny (tests/test_schemes_functional.py, test_schemes.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness import schemes
from harness.gpu import functional
from harness.gpu.isa_text import eval_affine, format as format_isa, isa, parse as parse_isa
from harness.schemes.lowering import Target
from harness.workload import build, from_config

from conftest import compose, run_cli
from test_schemes import cais_base_bytes, cais_bytes

G, SMS = 8, 66
T, H = 1280, 256           # model=tiny_edge: tokens, hidden
ROWS = T // G              # 160 = one whole row block + 32 rows
SUM = sum(g + 1 for g in range(G))
EDGE = ("model=tiny_edge", "system=dgx_h100_half")
CAIS_SCHEMES = ["cais_base", "cais_wo_coord", "cais_partial", "cais"]


def _lower(scheme: str, model: str, gpus: int, phase: str = "training", workload: str = "layer"):
    cfg = compose(f"model={model}", "system=dgx_h100_half", f"system.gpus={gpus}", f"scheme={scheme}")
    spec = schemes.get(scheme)
    graph = build(from_config(cfg.model), phase, workload, spec.partition, gpus)
    return spec.lower(graph, Target(gpus, SMS, False), schemes.params_from_config(spec, cfg.scheme)).workload


def _kernel(wl, name: str):
    return next(k for k in wl.kernels if k.name == name)


@pytest.mark.parametrize("scheme", CAIS_SCHEMES)
def test_fig17_shard_of_288_rows_lowers_with_a_clipped_edge_tile(scheme):
    """LLaMA-7B at 32 GPUs: every owner's row tiles move 128, 128, 32 rows, and the gate of
    each owner's partial row block waits for 31 x 32 rows of contributions, not 31 x 128."""
    wl = _lower(scheme, "llama_7b_32gpu", 32, "inference", "sublayer_l1")
    rs = _kernel(wl, "out_proj")
    (red,) = [i for i in rs.program if i.op in (isa.RED_CAIS, isa.RED_REMOTE)]
    assert rs.grid_y == 32 * 3 and red.rows == 128
    assert [eval_affine(red.rows_in_bounds, by=by) for by in range(6)] == [288, 160, 32] * 2  # clipped to 128
    ldc = 16384 * 2
    gate = _kernel(wl, "reduce_out_proj.arrivals" if scheme == "cais_base" else "reduce_out_proj.gate")
    (wait,) = [i for i in gate.program if i.op == isa.FLAG_WAIT and i.HasField("value_of_block")]
    blocks = [dict(bx=b) if scheme == "cais_base" else dict(by=b) for b in range(3)]
    assert [eval_affine(wait.value_of_block, **b) for b in blocks] == [31 * r * ldc for r in (128, 128, 32)]


def test_whole_block_shards_carry_no_edge_fields():
    wl = _lower("cais", "tiny", 8)
    assert not any(i.HasField("rows_in_bounds") or i.HasField("value_of_block") for k in wl.kernels for i in k.program)


def test_a_gemm_of_columns_not_whole_tiles_clips_its_last_column_of_tiles():
    """model=tiny on 4 GPUs: QKV is 192 columns per GPU, a 128-column tile and a 64-column edge
    tile. The edge tile stores 128 B of each row (in_bytes) and loads 64 rows of the weights
    (in_rows on bx), so the tiles together store exactly M x N x 2 bytes inside the matrix;
    N of one tile or of whole tiles carries no clip."""
    wl = _lower("tp_nvls", "tiny", 4, "inference", "layer")
    qkv = _kernel(wl, "qkv")
    (st,) = [i for i in qkv.program if i.op == isa.ST]
    w_lds = [i for i in qkv.program if i.op == isa.LD and i.HasField("rows_in_bounds")]  # the K loop's B loads
    assert qkv.grid_x == 2 and st.row_bytes == 256 and st.row_stride == 192 * 2
    widths = [min(st.row_bytes, eval_affine(st.row_bytes_in_bounds, bx=bx)) for bx in range(2)]
    assert widths == [256, 128]
    rows = st.rows  # every row tile is whole: 1024 tokens in 128-row tiles
    assert sum(widths) * rows * qkv.grid_y == 1024 * 192 * 2
    assert w_lds and {tuple(min(i.rows, eval_affine(i.rows_in_bounds, bx=bx)) for bx in range(2)) for i in w_lds} \
        in ({(128, 64)}, {(64, 32)})  # 64 / 32: a 2-CTA cluster's halves
    whole = _lower("tp_nvls", "tiny", 8, "inference", "layer")
    assert not any(i.HasField("row_bytes_in_bounds") for k in whole.kernels for i in k.program)
    text = format_isa(wl)
    assert "in_bytes=[" in text and format_isa(parse_isa(text)) == text


def test_edge_fields_round_trip_through_the_text_form():
    wl = _lower("cais", "tiny_edge", 8, "inference", "sublayer_l1")
    text = format_isa(wl)
    assert "in_rows=[" in text and "wait_for=[" in text
    back = parse_isa(text)
    assert format_isa(back) == text
    clipped = [(i.rows_in_bounds, i.value_of_block) for k in wl.kernels for i in k.program]
    assert [(i.rows_in_bounds, i.value_of_block) for k in back.kernels for i in k.program] == clipped


def _run(tmp_path, scheme: str, *extra: str):
    out = tmp_path / scheme
    run_cli(*EDGE, "net.functional=true", f"scheme={scheme}", "phase=training", "workload=layer", f"out_dir={out}",
            *extra)
    st = pd.read_csv(out / "stats.csv")
    return dict(zip(st["name"], st["value"])), pd.read_csv(out / "results.csv").iloc[0]


def _check(stats, gpu: int, buffer: str, values: np.ndarray) -> None:
    assert functional.engine_summary(stats, gpu, buffer) == functional.summary(values), f"gpu{gpu} {buffer}"


def _gathered() -> np.ndarray:
    """[T, H]: the rows of owner k hold k + 1."""
    return np.repeat(np.arange(1, G + 1, dtype=float), ROWS)[:, None] * np.ones((1, H))


@pytest.mark.parametrize("scheme,extra", [(s, ()) for s in CAIS_SCHEMES] + [("cais", ("gpu.cache_remote_reads=false",))],
                         ids=CAIS_SCHEMES + ["cais-no-l2-cache"])
def test_cais_schemes_reduce_gather_and_count_exactly_with_a_partial_row_block(engines, tmp_path, scheme, extra):
    """A training layer: every ReduceScatter's 160-row shard holds the sum, every gather holds
    each owner's rows, the bytes on NVLink equal spec 1.6's count, and the homes counted every
    contribution (a gate expecting a whole block's bytes for the partial one would never open:
    the run would not end; the threshold itself is pinned by the lowering test above). Every
    AG-GEMM here is one column of tiles, so without the L2 keeping remote chunks the bytes are
    the same; the wgrads' K steps, which straddle two owners, move each token row once too."""
    stats, row = _run(tmp_path, scheme, *extra)
    for g in range(G):
        for rs in ("reduce_attn", "reduce_ffn", "reduce_ffn1_dgrad", "reduce_qkv_dgrad"):
            _check(stats, g, rs, np.full(ROWS * H, float(SUM)))
        if scheme == "cais_base":  # a copy kernel re-gathers
            _check(stats, g, "ag_ln2_regather", _gathered())
        else:  # the re-gathers are loads in the wgrads' K loops (in 32-token parts: 160 per GPU)
            _check(stats, g, "ag_dy_ffn", _gathered())
    model = ("model=tiny_edge",)
    want = cais_base_bytes("training", "layer", model=model) if scheme == "cais_base" else \
        cais_bytes("training", "layer", model=model)
    for kind, nbytes in want.items():
        assert row.get(f"bytes_{kind}", 0) == nbytes, kind
    # every red.cais line that reached a home was counted there, the partial block's included
    landed = sum(stats[f"gpu{g}.red_arrivals.contributions"] for g in range(G))
    assert landed == (G - 1) * 4 * T * H * 2 // 128  # N-1 contributions per 128 B line of each RS's D
    if scheme in ("cais", "cais_partial"):  # throttled: every mergeable line acked, none left outstanding
        acks = sum(stats[f"gpu{g}.mergeable.red_ack_lines"] for g in range(G))
        assert acks == sum(v for k, v in stats.items() if k.startswith("gpu") and k.endswith(".tx.CAIS_RED.packets"))


@pytest.mark.parametrize("scheme", ["tp_nvls", "sp_nvls", "coconet", "coconet_nvls", "ladm"])
def test_the_other_schemes_run_edge_shards_and_check_their_values(engines, tmp_path, scheme):
    """160 rows per GPU: the schemes that clip edge tiles run a training layer and its functional
    self-check passes (LADM's per-GPU GEMMs of 160 token rows end in an edge tile: unclipped, its
    tiles read and wrote past their buffers, which every run now refuses)."""
    out = tmp_path / scheme
    run_cli(*EDGE, f"scheme={scheme}", "phase=training", "workload=layer", "net.functional=true", f"out_dir={out}")
    assert pd.read_csv(out / "results.csv").iloc[0]["functional_checks"] > 0


@pytest.mark.parametrize("scheme", ["t3", "t3_nvls", "fuselib", "fuselib_nvls"])
def test_schemes_that_move_whole_tiles_refuse_edge_shards_by_name(engines, tmp_path, scheme):
    proc = run_cli(*EDGE, f"scheme={scheme}", "workload=sublayer_l1", f"out_dir={tmp_path}", check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"cais-sim: error: model: scheme '{scheme}' moves ") and "160 rows per GPU" in lines[0]
