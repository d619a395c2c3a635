"""GPU engine through its standalone main: kernel builders, traffic counts, calibration, the
validate_kernels experiment, parameter plumbing."""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from dataclasses import asdict, fields

import pandas as pd
import pytest

from harness.gpu import ag_gemm, cublas_plans, isa_text, kernels, norm_attention, standalone
from harness.params.gpu import GpuParams, from_accelsim
from harness.errors import CaisError, ConfigError

from conftest import compose

MEASURED = Path(__file__).resolve().parents[1] / "harness" / "data" / "measured"


@pytest.fixture(scope="module")
def exe(engines):
    path = engines / standalone.BINARY
    if not path.exists():
        pytest.fail(f"{path} not built: run scripts/build_engines.sh")
    return path


def run(wl, exe, **over):
    over.setdefault("launch_skew_ns", 0.0)
    over.setdefault("clock_spread_frac", 0.0)
    return standalone.run(wl, over, exe=exe, num_gpus=wl.num_gpus or 1)


def test_builders_round_trip_through_the_text_form():
    for wl in (kernels.gemm(4096, 4096, 4096), kernels.gemm(256, 2048, 16384),
               norm_attention.layernorm(1024, 2048), norm_attention.attention(12, 1024, 128), ag_gemm.ag_gemm(1024, 256, 512)):
        assert isa_text.parse(isa_text.format(wl)) == wl


def test_gemm_moves_the_tiles_it_should(exe):
    M = N = K = 1024
    c = kernels.GemmConfig(128, 128, 1, cluster=1)
    st = run(kernels.gemm(M, N, K, 132, c), exe)
    tiles = (M // 128) * (N // 128)
    assert st["gpu0.tbs_completed"] == tiles
    assert st["gpu0.mma_flops"] == 2 * M * N * K
    # every block loads its A and B panels once: 2 x 128 x K x 2 B
    assert st["gpu0.local.ld_bytes"] == tiles * 2 * 128 * K * 2
    assert st["gpu0.local.st_bytes"] == M * N * 2
    # A and B come from HBM once (first touch); the rest hits in L2
    assert st["gpu0.local.hbm_read_bytes"] == (M * K + N * K) * 2


def test_layernorm_reads_rows_twice_and_hbm_once_and_is_latency_bound(exe):
    """PyTorch's vectorized layernorm: pass 1 and pass 2 each load the row (1 KiB rounds of 128
    threads x 8 B), pass 2 also gamma and beta; x comes from HBM once (pass 2 hits in L2), gamma
    and beta once for all rows. With 16 blocks of 128 threads per SM and one round trip per
    round, halving the SMs nearly doubles the time while HBM is far from saturated."""
    M, N = 256, 4096
    st = run(norm_attention.layernorm(M, N), exe)
    assert st["gpu0.tbs_completed"] == M
    assert st["gpu0.local.ld_bytes"] == M * (2 * N * 2 + 2 * N * 2)
    assert st["gpu0.local.st_bytes"] == M * N * 2
    assert st["gpu0.local.hbm_read_bytes"] == M * N * 2 + 2 * N * 2
    t = {sms: standalone.kernel_time_us(run(norm_attention.layernorm(8192, N), exe, num_sms=sms, kernel_launch_ns=0.0))
         for sms in (16, 32)}
    assert 1.8 < t[16] / t[32] < 2.1, t


def test_gemm_time_scales_with_flops_and_sms(exe):
    clock = 1620.0  # fixed: SM scaling alone (the power-aware clock differs by SM count)
    t132 = standalone.kernel_time_us(run(kernels.gemm(8192, 8192, 8192, 132), exe, clock_mhz=clock))
    t64 = standalone.kernel_time_us(run(kernels.gemm(8192, 8192, 8192, 64), exe, num_sms=64, clock_mhz=clock))
    p = GpuParams()
    peak = 2 * 8192**3 / (132 * p.tc_flops_per_cycle_per_sm * clock * 1e6) * 1e6
    assert peak < t132 < 1.5 * peak
    assert 1.7 < t64 / t132 < 2.3


def test_split_k_and_stream_k_schedules_complete(exe):
    M, N, K = 2048, 2048 + 256, 8192
    for c in (kernels.GemmConfig(128, 256, 4), kernels.GemmConfig(128, 256, 1, "streamk", grid=132),
              kernels.GemmConfig(256, 256, 1, "streamk", 3, grid=132, fixup="reduce")):
        st = run(kernels.gemm(M, N, K, 132, c), exe)
        assert st["gpu0.mma_flops"] == 2 * M * N * K, c  # every (tile, k step) once, no edge tiles
        if c.split > 1 or c.fixup == "reduce":
            reduce = [k for k in st if k.endswith("splitk_reduce.end")]
            assert reduce and st[reduce[0]] * 1000 == pytest.approx(st["gpu0.finish_time"], abs=1.0)  # ns vs ps


def test_calibrated_gemm_error_at_the_full_and_the_half_gpu(exe):
    """The committed calibration, at the clock the power model predicts, against every GEMM measured
    in steady state at 132 and 66 SMs (h100_power.csv; docs/VALIDATION.md, issue #17): mean |error|
    <= 7 % at 132 SMs (issue #17's bound) and <= 5 % at 66, no shape beyond 25 %. Rows that drew
    under 75 % of the power limit kept the GPU waiting for host launches (extra.sq1024: 39 us
    between 11 us kernels). The 66-SM bound was 4 % until the SM's port got its two measured rates
    and the GPU was recalibrated for them (132 SMs 5.5 -> 4.3 %, 66 SMs 4.0 -> 4.8 %, now 2.8 %
    fast on average: the power model predicts NVML's clock, which reads 2-4 % above the SMs' own
    on an H100, docs/MEASUREMENTS.md "The SM clock in GEMM bursts on an H100")."""
    from harness.experiments.validate_kernels import load_input, simulate_rows
    df = load_input(MEASURED / "h100_power.csv")
    df = df[(df["kind"] == "gemm") & (df["power_w"] >= 0.75 * df["power_limit_w"])]
    out = simulate_rows(df, asdict(GpuParams()))
    for sms, mean in ((132, 7.0), (66, 5.0)):
        err = out.loc[out["num_sms"] == sms, "err_pct"].abs()
        assert len(err) >= 57
        assert err.mean() <= mean, (sms, err.mean())
        assert err.max() <= 25.0, (sms, err.max())


def test_validate_kernels_experiment_from_a_csv(tmp_path, engines, cli):
    csv = tmp_path / "cases.csv"
    pd.DataFrame([dict(name="g", kind="gemm", M=2048, N=2048, K=2048, num_sms=132),
                  dict(name="ln", kind="layernorm", M=4096, N=2048, K=0, num_sms=66)]).to_csv(csv, index=False)
    out = tmp_path / "out"
    cli("experiment=validate_kernels", f"validate.input={csv}", f"out_dir={out}",
        env={"CAIS_ENGINE_DIR": str(engines)})
    res = pd.read_csv(out / "results.csv")
    assert list(res["name"]) == ["g", "ln"]
    assert (res["sim_us"] > 0).all()


def test_validate_kernels_runs_the_schemes_gemm_with_validate_gemm_library(tmp_path, engines, cli):
    """validate.gemm=library builds each GEMM as harness/kernels/gemm.py does for the schemes
    (data-parallel tiles, no split-K): a shape whose cuBLAS plan splits K (small output, long K)
    is slower there, one cuBLAS runs data-parallel takes the same time; other kinds unchanged."""
    csv = tmp_path / "cases.csv"
    pd.DataFrame([dict(name="splitk", kind="gemm", M=256, N=2048, K=16384, num_sms=132),
                  dict(name="dp", kind="gemm", M=2048, N=2048, K=2048, num_sms=132),
                  dict(name="ln", kind="layernorm", M=4096, N=2048, K=0, num_sms=66)]).to_csv(csv, index=False)
    res = {}
    for gemm in ("cublas", "library"):
        cli("experiment=validate_kernels", f"validate.input={csv}", f"validate.gemm={gemm}",
            f"out_dir={tmp_path / gemm}", env={"CAIS_ENGINE_DIR": str(engines)})
        res[gemm] = pd.read_csv(tmp_path / gemm / "results.csv").set_index("name")
    assert "library" in res["library"].loc["dp", "sim_config"] and "split" in res["cublas"].loc["splitk", "sim_config"]
    assert res["library"].loc["splitk", "sim_us"] > 1.5 * res["cublas"].loc["splitk", "sim_us"]
    assert res["library"].loc["ln", "sim_us"] == res["cublas"].loc["ln", "sim_us"]


def test_unknown_or_bad_parameters_are_named(exe):
    with pytest.raises(ConfigError, match="gpu.nonsense"):
        standalone.gpu_params({"nonsense": 1})
    with pytest.raises(CaisError, match="gpu.tc_efficiency"):
        run(norm_attention.layernorm(128, 128), exe, tc_efficiency=1.5)


def test_every_gpu_param_is_read_by_the_engine(exe):
    # The engine rejects unread gpu.* keys, so a run proves every declared field is consumed;
    # and a missing key is an error naming it.
    run(norm_attention.layernorm(128, 128), exe)
    cfg = standalone.configure(norm_attention.layernorm(128, 128), {k: v for k, v in standalone.gpu_params().items()
                                                              if k != "gpu.hbm_latency_ns"})
    import subprocess, tempfile, pathlib
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "c.pb"
        p.write_bytes(cfg.SerializeToString())
        r = subprocess.run([str(exe), str(p), str(pathlib.Path(d) / "s.pb")], capture_output=True, text=True)
    assert r.returncode == 2 and "gpu.hbm_latency_ns" in r.stderr


def test_accel_sim_option_names_map_to_fields():
    cfg = "-gpgpu_n_clusters 66\n-gpgpu_n_cores_per_cluster 1\n-gpgpu_clock_domains 1755.0:1755.0:1755.0:2619.0\n" \
          "-gpgpu_shader_registers 65536\n-gpgpu_shmem_size 233472 # 228 KB\n-gpgpu_shader_cta 32\n" \
          "-gpgpu_unified_l1d_size 256\n-gpgpu_shmem_option 0,8,16,32,64,100,132,164,196,228\n"
    over = from_accelsim(cfg)
    assert over["gpu.num_sms"] == 66 and over["gpu.clock_mhz"] == 1755.0
    assert over["gpu.smem_per_sm_kb"] == 228.0 and over["gpu.max_blocks_per_sm"] == 32
    assert over["gpu.l1_smem_per_sm_kb"] == 256.0 and over["gpu.smem_configs_kb"] == GpuParams().smem_configs_kb
    names = {f.name for f in fields(GpuParams)}
    assert all(k.split(".", 1)[1] in names for k in over)


def test_hydra_config_carries_gpu_params():
    cfg = compose("system=dgx_h100_half", "gpu.num_sms=66")
    assert cfg.gpu.num_sms == 66 and math.isclose(cfg.gpu.tc_efficiency, GpuParams().tc_efficiency)


def _tile_origins(wl, M, N, tm, tn):
    """Output offsets every store of a GEMM workload writes, over all blocks and loop trips."""
    got = []
    for k in wl.kernels:
        trips = [i.count for i in k.program if i.op == isa_text.isa.LOOP][:1] or [1]
        st = [i for i in k.program if i.op == isa_text.isa.ST][0]
        for bx in range(k.grid_x):
            for by in range(k.grid_y):
                for l0 in range(trips[0] if k.name.startswith("gemm_persistent") else 1):
                    got.append(isa_text.eval_affine(st.addr, bx, by, 0, (l0,)))
    want = [(r * tm * N + c * tn) * 2 for r in range(math.ceil(M / tm)) for c in range(math.ceil(N / tn))]
    return sorted(got), sorted(want)


def test_persistent_gemm_stores_every_tile_once():
    # 9 x 7 = 63 tiles over 20 CTAs: 3 CTAs own 4 tiles, 17 own 3
    M, N, K = 9 * 128, 7 * 256, 512
    c = kernels.GemmConfig(128, 256, 1, "persistent", grid=20)
    wl = kernels.gemm(M, N, K, 132, c)
    assert [k.grid_x for k in wl.kernels] == [3, 17]
    got, want = _tile_origins(wl, M, N, 128, 256)
    assert got == want
    assert isa_text.parse(isa_text.format(wl)) == wl


def test_persistent_gemm_runs_in_rounds_in_a_smaller_partition(exe):
    M, N, K = 16 * 128, 8 * 256, 1024
    c = kernels.GemmConfig(128, 256, 1, "persistent", grid=32)  # 128 tiles, 4 per CTA
    t32 = standalone.kernel_time_us(run(kernels.gemm(M, N, K, 132, c), exe, num_sms=32))
    t16 = standalone.kernel_time_us(run(kernels.gemm(M, N, K, 132, c), exe, num_sms=16))
    assert 1.7 < t16 / t32 < 2.2  # 32 CTAs in two rounds of 16


@pytest.mark.parametrize("kernel,grid,shape,want", [
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 132, (8192, 8192, 8192), ("streamk", 256, 128, 4, "inline")),
    ("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", 128, (1024, 1024, 1024), ("dp", 128, 64, 8, "inline")),
    ("nvjet_sm90_tst_96x128_64x6_2x1_v_bz_splitK_NTN", 132, (256, 2048, 16384), ("streamk", 96, 128, 6, "reduce")),
    ("nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN", 132, (192 * 22, 192 * 12, 4096), ("streamk", 192, 192, 4, "inline")),
])
def test_recorded_cublas_kernels_become_plans(kernel, grid, shape, want):
    M, N, K = shape
    c = cublas_plans.plan_from_cublas_kernel(kernel, grid, M, N, K)
    assert (c.schedule, c.tm, c.tn, c.stages, c.fixup) == want
    assert c.schedule == "dp" or c.grid == grid
    assert cublas_plans.plan_from_cublas_kernel("void cublasLt::splitKreduce_kernel<...>", 64, M, N, K) is None


def test_nvjet_kernel_names_parse():
    nv = cublas_plans.parse_nvjet("nvjet_sm90_tst_320x64_64x4_2x2_h_bz_splitK_NTT")
    assert nv == dict(tile_m=320, tile_n=64, k_step=64, stages=4, cluster_m=2, cluster_n=2, raster="h", coop="",
                      splitk=True)
    assert cublas_plans.parse_nvjet("nvjet_sm90_tst_192x192_64x3_1x2_h_bz_coopB_NNN")["coop"] == "B"


def test_committed_cublas_plans_are_derived_from_the_probe(tmp_path):
    """h100_cublas_plans.csv is what derive_cublas_plans makes of the partition probe (regenerate
    with python -m harness.gpu.cublas_plans); each shape's kernel and grid agree in every partition."""
    out = tmp_path / "plans.csv"
    assert cublas_plans.write_cublas_plans(out) == 60
    assert out.read_text() == cublas_plans.CUBLAS_PLANS_CSV.read_text()
    plans = pd.read_csv(out)
    seen = plans["partitions"].str.split()
    assert all("132:primary" in p and len(p) in (3, 6) for p in seen)
    # the 2x4-cluster kernels cannot launch in driver-made partitions (not recorded there)
    assert set(plans.loc[[len(p) == 3 for p in seen], "cluster_m"] * plans.loc[[len(p) == 3 for p in seen], "cluster_n"]) == {8}
    assert set(plans["schedule"]) == {"dp", "streamk", "streamk+reduce"}


def test_a_kernel_or_grid_differing_between_partitions_is_an_error(tmp_path):
    probe = tmp_path / "probe.csv"
    head = "partition,api,num_sms,name,M,N,K,kernel,grid,block,cluster\n"
    k = "nvjet_sm90_tst_128x128_64x6_1x2_h_bz_NNT"
    probe.write_text(head + f'132:primary,primary,132,g,1024,1024,1024,{k},"[2, 64, 1]","[384, 1, 1]",\n'
                     f'66:driver,driver,66,g,1024,1024,1024,{k},"[2, 66, 1]","[384, 1, 1]",\n')
    with pytest.raises(ValueError, match="66:driver"):
        cublas_plans.derive_cublas_plans(probe)


def test_validate_kernels_replays_the_recorded_cublas_plan():
    from harness.experiments.validate_kernels import build
    row = {"name": "extra.sq1024", "kind": "gemm", "M": 1024, "N": 1024, "K": 1024, "num_sms": 66}
    wl, desc = build(row, {})
    assert "128x64_64x8_1x2" in desc and wl.kernels[0].grid_x * wl.kernels[0].grid_y == 128
    row = dict(row, name="not.recorded")
    assert build(row, {})[1].endswith("(heuristic)")


def _walk(k):
    """(bx, op, buffer, address) of every memory instruction a kernel's blocks execute, in order."""
    isa = isa_text.isa
    prog, match, stack = list(k.program), {}, []
    for i, ins in enumerate(prog):
        if ins.op == isa.LOOP:
            stack.append(i)
        elif ins.op == isa.ENDLOOP:
            h = stack.pop()
            match[i], match[h] = h, i
    for by in range(k.grid_y):
        for bx in range(k.grid_x):
            pc, loops = 0, []
            while pc < len(prog):
                ins = prog[pc]
                if ins.op == isa.LOOP:
                    if ins.count == 0:
                        pc = match[pc] + 1
                    else:
                        loops.append(0)
                        pc += 1
                    continue
                if ins.op == isa.ENDLOOP:
                    loops[-1] += 1
                    if loops[-1] < prog[match[pc]].count:
                        pc = match[pc] + 1
                    else:
                        loops.pop()
                        pc += 1
                    continue
                if ins.op in (isa.LD, isa.ST):
                    yield bx, ins.op, ins.buffer, isa_text.eval_affine(ins.addr, bx, by, 0, tuple(loops))
                pc += 1


@pytest.mark.parametrize("shape,c", [
    ((9216, 512, 4096), kernels.GemmConfig(128, 160, 1, "streamk", 5, grid=120)),  # 2 tiles/CTA + stream-K
    ((384, 3072, 12288), kernels.GemmConfig(320, 64, 1, "streamk", 4, grid=120, fixup="reduce")),  # split-K
    ((9 * 128, 7 * 256, 576), kernels.GemmConfig(128, 256, 1, "streamk", grid=21)),  # grid divides the tiles
    ((9 * 128, 7 * 256, 512), kernels.GemmConfig(128, 256, 1, "persistent", grid=20)),
])
def test_every_tile_and_k_step_is_loaded_once(shape, c):
    """The quotient-term addresses of the data-parallel, stream-K and persistent kernels visit
    each (tile row, k step) of A and (tile column, k step) of B exactly as often as a plain tiled
    GEMM does: every tile's every K step once."""
    M, N, K = shape
    wl = kernels.gemm(M, N, K, 132, c)
    gx, gy, kt, lda = math.ceil(N / c.tn), math.ceil(M / c.tm), math.ceil(K / 64), K * 2
    got = Counter()
    for k in wl.kernels:
        if k.name.startswith("gemm"):
            for _, op, buf, addr in _walk(k):
                if op == isa_text.isa.LD and buf in (0, 1):
                    tile = c.tm if buf == 0 else c.tn
                    got[(buf, addr // (tile * lda), addr % lda // 128)] += 1
    want = Counter({(0, r, s): gx for r in range(gy) for s in range(kt)})
    want.update({(1, col, s): gy for col in range(gx) for s in range(kt)})
    assert got == want


def test_streamk_split_counts_ranges_and_pieces():
    sk = kernels.streamk_split(384, 3072, 12288, kernels.GemmConfig(320, 64, 1, "streamk", grid=120))
    assert (sk["tiles"], sk["q"], sk["sk_tiles"], sk["kt"]) == (96, 0, 96, 192)
    assert sk["w"] * 120 + sk["head"] == 96 * 192  # 18432 iterations: 72 CTAs of 154, 48 of 153
    sk = kernels.streamk_split(2048, 2048, 1024, kernels.GemmConfig(128, 128, 1, "streamk", grid=64))
    assert (sk["q"], sk["sk_tiles"], sk["w"], sk["pieces"]) == (4, 0, 0, 0)
    sk = kernels.streamk_split(1024, 1024, 65536, kernels.GemmConfig(256, 128, 1, "streamk", grid=128))
    assert (sk["w"], sk["head"], sk["pieces"]) == (256, 0, 128)  # 4 CTAs per tile, aligned


def test_a_streamk_launch_is_persistent_ctas_that_go_on_with_their_ranges():
    """cuBLAS's grid of G CTAs: one persistent launch sharing out the data-parallel tiles
    (dynamic blocks), continued on the same SMs by the two stream-K kernels, CTAs 0 .. head-1
    and head .. G-1."""
    c = kernels.GemmConfig(128, 160, 1, "streamk", 5, grid=120)
    wl = kernels.gemm(9216, 512, 4096, 132, c)  # 2 tiles per CTA + stream-K
    sk = kernels.streamk_split(9216, 512, 4096, c)
    names = [wl.kernels[la.kernel].name for la in wl.launches]
    assert names == ["gemm_dp", "gemm_streamk_head", "gemm_streamk"]
    dp = wl.kernels[wl.launches[0].kernel]
    assert (dp.persistent, dp.dynamic_blocks, dp.ctas, dp.grid_x) == (True, True, 120, 2 * 120)
    assert [(la.continues, la.continue_offset) for la in wl.launches] == [(0, 0), (1, 0), (1, sk["head"])]
    assert [wl.kernels[la.kernel].grid_x for la in wl.launches[1:]] == [sk["head"], 120 - sk["head"]]


def test_streamk_data_parallel_tiles_spread_over_a_smaller_partition(exe):
    """cuBLAS's 132-CTA grid on fewer SMs: the resident CTAs share out the data-parallel tiles
    (8 tiles per CTA: ~1.03x as long on 128 SMs, not 2 rounds), the stream-K ranges stay with their
    CTA (a split-K launch of 128 CTAs runs in two rounds on 64 SMs)."""
    c = kernels.GemmConfig(128, 128, 1, "streamk", grid=132)
    wl = kernels.gemm(128 * 33, 128 * 32, 1024, 132, c)  # 1056 tiles = 8 per CTA
    t132 = standalone.kernel_time_us(run(wl, exe, num_sms=132, kernel_launch_ns=0.0, clock_mhz=1620.0))
    t128 = standalone.kernel_time_us(run(wl, exe, num_sms=128, kernel_launch_ns=0.0, clock_mhz=1620.0))
    assert 1.0 < t128 / t132 < 1.2
    c = kernels.GemmConfig(256, 128, 1, "streamk", grid=128, fixup="reduce")
    wl = kernels.gemm(1024, 1024, 65536, 132, c)  # 32 tiles, 4 CTAs each
    t128 = standalone.kernel_time_us(run(wl, exe, num_sms=128, kernel_launch_ns=0.0, clock_mhz=1620.0))
    t64 = standalone.kernel_time_us(run(wl, exe, num_sms=64, kernel_launch_ns=0.0, clock_mhz=1620.0))
    assert 1.8 < t64 / t128 < 2.2


def test_edge_tiles_cost_their_in_bounds_columns():
    """An edge tile's mma covers its in-bounds 64-row wgmma blocks and its in-bounds columns
    rounded up to 8, averaged over the tiles."""
    c = kernels.GemmConfig(128, 160, 1)
    assert kernels._mma_shape(9216, 512, c) == (128, 128)  # 160 + 160 + 160 + 32 columns: mean 128
    # rows 0-319 (5 blocks of 64) and 320-383 (1 block; the other 4 are out of bounds): mean 192
    assert kernels._mma_shape(384, 3072, kernels.GemmConfig(320, 64, 1)) == (192, 64)
    assert kernels._mma_shape(1000, 3072, kernels.GemmConfig(96, 64, 1)) == (122, 64)  # (10 x 2 + 1) x 64 rows / 11 tiles
    assert kernels._mma_shape(1000, 1000, c) == (128, 144)  # ceil(1000 / 7) = 143 -> 144


def test_heuristic_plans_stream_k_for_the_device():
    c = kernels.choose_gemm(8192, 8192, 8192, 66, device_sms=132)
    assert c.schedule == "streamk" and c.grid == 132
    assert kernels.choose_gemm(8192, 8192, 8192, 66).schedule == "dp"  # no device: plain waves


def test_recorded_plans_carry_their_cluster_and_partitions_their_cluster_slots():
    """A recorded 2x2-cluster kernel launches 4-CTA clusters; validate_kernels gives the engine
    the 4-CTA cluster slots measured for the partition (30 on the whole H100, 8 in driver-made
    partitions), and none where nothing was measured."""
    from harness.experiments import validate_kernels as vk
    plan = dict(tile_m=128, tile_n=256, k_step=64, stages=4, cluster_m=2, cluster_n=2, grid_ctas=132, tiles=264,
                splitk="False")
    c = cublas_plans.plan_config(plan)
    assert c.cluster_ctas == 4 and c.cluster == 2
    wl = kernels.gemm(4096, 8192, 4096, 132, c)
    assert {k.cluster_ctas for k in wl.kernels} == {4}
    assert vk.measured_cluster_slots(132) == 30
    assert vk.measured_cluster_slots(66) == 8
    assert vk.measured_cluster_slots(50) is None
