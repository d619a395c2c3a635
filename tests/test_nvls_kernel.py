"""NCCL's NVLS kernels (harness/kernels/nvls.py): warp groups as NCCL's, the step geometry, and
the bytes the staging copies move. The values every GPU ends with are checked per scheme
(tests/test_schemes_functional.py: tp_nvls, sp_nvls, coconet_nvls)."""
from __future__ import annotations

import pandas as pd
import pytest

from harness.experiments import validate_collectives as vc
from harness.gpu import functional
from harness.gpu.isa_text import isa
from harness.kernels import nvls
from harness.kernels.builder import WorkloadBuilder, affine
from harness.system import run_system
from tests.conftest import compose

GROUPS = {"all_reduce": ["scatter", "reduce", "gather"], "reduce_scatter": ["scatter", "reduce"],
          "all_gather": ["bcast", "gather"]}


@pytest.mark.parametrize("kind", list(GROUPS))
def test_a_channel_is_a_cta_of_nccls_warp_groups(kind):
    b = WorkloadBuilder(kind, 8, 132)
    tensor, shard = b.buffer("t", 1 << 20, multicast=True), b.buffer("s", 1 << 17)
    k = b.wl.kernels[nvls.collective(b, "c", kind, 1 << 20, tensor=tensor, shard=shard)]
    assert [g.name for g in k.warp_groups] == GROUPS[kind] and not k.program
    assert (k.grid_x, k.threads_per_block) == (16, 640)  # NVLS_NCHANNELS_SM90, NCCL_MAX_NTHREADS
    staging = {x.name for x in b.wl.buffers if x.multicast} - {"t"}
    assert staging == {"c.up", "c.down"} - ({"c.up"} if kind == "all_gather" else {"c.down"} if kind == "reduce_scatter" else set())


def test_steps_are_equal_whole_lines_of_at_most_nccls_chunk():
    cfg = nvls.NvlsConfig()
    big = nvls.geometry(1 << 30, 8, cfg)  # 8 MiB per channel and head: 64 steps of 128 KiB
    assert (big.steps, big.step) == (64, 131072)
    odd = nvls.geometry(294912 * 8 * 16, 8, cfg)  # 288 KiB per channel and head: 3 steps of 96 KiB
    assert (odd.steps, odd.step) == (3, 98304)
    small = nvls.geometry(8 * 16 * 1024, 8, cfg)  # 1 KiB: one step
    assert (small.steps, small.step) == (1, 1024)
    with pytest.raises(ValueError, match="whole 128 B lines"):
        nvls.geometry(8 * 16 * 1000, 8, cfg)


@pytest.mark.parametrize("kind,gpus,want", [
    # all_reduce.h: reduce 5 warps above 6 ranks (7 up to 6), scatter and gather share the rest
    ("all_reduce", 8, {"scatter": 8, "reduce": 5, "gather": 7}),
    ("all_reduce", 4, {"scatter": 7, "reduce": 7, "gather": 6}),
    ("reduce_scatter", 8, {"scatter": 8, "reduce": 12}),  # reduce_scatter.h: 8 scatter warps
    ("all_gather", 8, {"bcast": 12, "gather": 8}),         # all_gather.h: 8 gather warps
])
def test_warp_groups_and_their_rounds_are_nccls(kind, gpus, want):
    """NCCL_MAX_NTHREADS = 640 split as NCCL does without buffer registration; a round is the
    group's threads x COLL_UNROLL (8 on sm_90) x 16 B."""
    assert nvls.warps(kind, gpus) == want and sum(want.values()) == 20
    assert nvls.round_bytes("all_reduce", 8, "reduce") == 5 * 32 * 8 * 16 == 20480
    b = WorkloadBuilder(kind, gpus, 132)
    n = 16 * gpus * 131072  # one 128 KiB step per channel and head
    tensor, shard = b.buffer("t", n, multicast=True), b.buffer("s", n // gpus)
    k = b.wl.kernels[nvls.collective(b, "c", kind, n, tensor=tensor, shard=shard)]
    for g in k.warp_groups:  # every load of a round is its group's round, or the step's rest
        sizes = {i.row_bytes for i in g.program if i.op in (isa.LD, isa.MM_LD_REDUCE)}
        full, rest = divmod(131072, nvls.round_bytes(kind, gpus, g.name))
        assert sizes == {nvls.round_bytes(kind, gpus, g.name)} | ({rest} if rest else set()), g.name


def test_a_chunked_collective_is_an_all_reduce():
    b = WorkloadBuilder("x", 8, 132)
    t, s = b.buffer("t", 1 << 20), b.buffer("s", 1 << 17)
    with pytest.raises(ValueError, match="chunked"):
        nvls.collective(b, "c", "reduce_scatter", 1 << 20, tensor=t, shard=s, chunks=2)


def test_the_staging_copies_move_what_nccls_do(engines, tmp_path):
    """Per GPU, D the tensor and N the GPUs: all_reduce loads D (scatter) + D (gather) and stores
    as much; reduce_scatter loads D and stores D + D/N (its shard); all_gather loads D/N (bcast)
    + D and stores D. Every remote byte is the switch's: ld_reduce reads D per GPU, multicasts
    D/N per GPU."""
    rows = tmp_path / "rows.csv"
    rows.write_text("name,op,bytes,gpus,algo\n" + "".join(f"{op},{op},1048576,4,nvls\n" for op in GROUPS))
    cfg = compose("experiment=validate_collectives", f"validate.input={rows}", "validate.kernels=isa",
                  "validate.stats=true")
    df = vc.run(cfg, tmp_path).set_index("name")
    D, N = 1 << 20, 4
    want = {"all_reduce": (2 * D, 2 * D), "reduce_scatter": (D, D + D // N), "all_gather": (D // N + D, D)}
    for op, (ld, st) in want.items():
        stats = pd.read_csv(tmp_path / "rows" / op / "stats.csv").set_index("name")["value"]
        for g in range(N):
            assert (stats[f"gpu{g}.local.ld_bytes"], stats[f"gpu{g}.local.st_bytes"]) == (ld, st), (op, g)
        assert df.loc[op, "bytes_read_resp"] == (N * D if op != "all_gather" else 0)
        assert df.loc[op, "bytes_mm_st"] == (D if op != "reduce_scatter" else 0)


def test_validate_collectives_runs_the_kernel_with_delivered_multicast_stores():
    """The kernel's flags after a multicast store mean 'delivered' (every member holds it), as
    the NVLS schemes configure the switch (conf/scheme/tp_nvls.yaml)."""
    cfg = compose("experiment=validate_collectives", "validate.kernels=isa")
    row = pd.Series({"name": "r", "op": "all_reduce", "bytes": 1 << 20, "gpus": 8, "algo": "nvls"})
    params = vc.row_params(cfg, row)
    vc.isa_workload(cfg, row, params)
    assert params["net.nvls.member_acks"] is True


@pytest.mark.parametrize("kind", list(GROUPS))
def test_rounds_with_a_shorter_rest_leave_exact_values(engines, kind):
    """4 GPUs, 2 channels, one 128 KiB step per channel and head: the groups' rounds (28 / 24 KiB
    at 4 ranks) loop over whole rounds and end on a shorter one; every GPU ends with numpy's sums
    (all_reduce, reduce_scatter's shard) or gathered parts (all_gather)."""
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")
    G, C, step = 4, 2, 131072
    cfg = nvls.NvlsConfig(channels=C)
    assert any(step % nvls.round_bytes(kind, G, g) for g in GROUPS[kind])  # a rest round is exercised
    n = C * G * step
    b = WorkloadBuilder(f"nvls_{kind}", G, 132, functional=True)
    tensor, shard = b.buffer("data", n, multicast=True), b.buffer("shard", n // G)
    fk, p = b.kernel("fill", C, 1, threads=128)  # every GPU writes g + 1 into what it contributes
    if kind == "all_gather":
        p.ins(isa.ST, buffer=shard, addr=affine(0, bx=n // G // C), rows=1, row_bytes=n // G // C)
    else:
        p.ins(isa.ST, buffer=tensor, addr=affine(0, bx=n // C), rows=1, row_bytes=n // C)
    fill = b.launch(fk, b.stream("s"))
    b.launch(nvls.collective(b, "c", kind, n, tensor=tensor, shard=shard, cfg=cfg), b.stream("s"), after=(fill,))
    run = compose("system=hgx_h200_4gpu", "system.gpu_model=hopper", "net.functional=true", "net.features=nvls",
                  "net.nvls.member_acks=true")
    stats = run_system(run, workload=b.wl.SerializeToString()).stats
    s = dict(zip(stats["name"], stats["value"]))
    total = float(sum(g + 1 for g in range(G)))
    for g in range(G):
        if kind == "all_reduce":
            assert functional.engine_summary(s, g, "data") == functional.summary([total] * (n // 2)), g
        elif kind == "reduce_scatter":
            assert functional.engine_summary(s, g, "shard") == functional.summary([total] * (n // G // 2)), g
        else:  # part r of the tensor is GPU r's shard
            want = [float(r + 1) for r in range(G) for _ in range(n // G // 2)]
            assert functional.engine_summary(s, g, "data") == functional.summary(want), g
