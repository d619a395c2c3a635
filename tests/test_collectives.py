"""validate_collectives: NCCL-like collectives on the network engine (GPU model "collective")."""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from harness import REPO_ROOT
from harness.errors import ConfigError
from harness.experiments import validate_collectives as vc
from tests.conftest import compose, read_results

TINY = REPO_ROOT / "tests" / "data" / "collectives_tiny.csv"


def test_bus_factors_follow_nccl_tests():
    assert vc.bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert vc.bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert vc.bus_factor("reduce_scatter", 2) == pytest.approx(0.5)


def test_default_input_covers_measured_rows_and_nvls_sizes():
    df = vc.build_default_input()
    assert set(df["op"]) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert (df[df["algo"] == "ring"]["bytes"] >= 64 * 2**20).all()
    nvls = df[df["algo"] == "nvls"]
    assert sorted(nvls["bytes"] // 2**30) == [1, 2, 4, 8, 16]
    assert (nvls["gpus"] == 8).all()


def test_system_overrides_reach_every_row():
    # Each row brings its own system; a system.* override of the run must still apply to it.
    row = pd.Series({"name": "r", "op": "all_reduce", "bytes": 1 << 20, "gpus": 2, "algo": "ring"})
    plain = vc.row_system(compose("experiment=validate_collectives"), row)
    assert plain.name == "hgx_h200_2gpu" and plain.gpus == 2 and plain.lane_bw_gbps == 25.0
    assert plain.gpu_model == "collective"  # set by the experiment config
    faster = vc.row_system(compose("experiment=validate_collectives", "system.lane_bw_gbps=26.5625"), row)
    assert faster.lane_bw_gbps == 26.5625 and faster.name == "hgx_h200_2gpu"
    assert vc.system_overrides(compose("experiment=validate_collectives")) == {"gpu_model": "collective"}
    with pytest.raises(ConfigError, match="system.name"):
        vc.system_overrides(compose("experiment=validate_collectives", "system.name=nowhere"))


def test_a_row_runs_the_gpus_of_its_own_system():
    """Before, an H200 row of a run composed on dgx_h100 ran H100s (3350 GB/s HBM, the power-model
    clock): the row's system brought its system.* keys but not its gpu.* keys."""
    h200 = vc.row_gpu(compose("experiment=validate_collectives"), "hgx_h200_8gpu").gpu
    assert (h200.hbm_bw_gbps, h200.clock_mhz) == (4800.0, 0.0)  # 0: the power model's clock
    assert h200.bulk_lines == 1  # the experiment's own gpu.* keys stay
    h100 = vc.row_gpu(compose("experiment=validate_collectives", "system=hgx_h200_8gpu"), "dgx_h100").gpu
    assert (h100.hbm_bw_gbps, h100.clock_mhz) == (3350.0, 0.0)  # 0: the power model's clock
    mine = vc.row_gpu(compose("experiment=validate_collectives", "gpu.clock_mhz=1500"), "hgx_h200_8gpu").gpu
    assert (mine.hbm_bw_gbps, mine.clock_mhz) == (4800.0, 1500.0)  # the command line wins


def test_a_collective_alone_runs_at_the_power_models_memory_bound_clock():
    """With no GEMM the GPUs draw little power: a power-aware system's rows run at the clock the
    power model gives memory-bound kernels on all SMs (the maximum, 1980 MHz), not the 1395 MHz
    of 132 SMs of tensor work; a fixed clock stays fixed."""
    from harness.gpu import power
    from harness.system import engine_params

    row = pd.Series({"name": "r", "op": "all_reduce", "bytes": 1 << 26, "gpus": 8, "algo": "nvls"})
    h100 = vc.row_gpu(compose("experiment=validate_collectives"), "dgx_h100")
    clock = vc.row_params(h100, row)["gpu.clock_mhz"]
    flat = {f"gpu.{k}": v for k, v in h100.gpu.items()}
    assert clock == power.settled_clock_mhz(132, "memory", flat) == 1980.0
    assert engine_params(h100)["gpu.clock_mhz"] == power.settled_clock_mhz(132, "tensor", flat) < clock
    h200 = vc.row_gpu(compose("experiment=validate_collectives"), "hgx_h200_8gpu")
    assert vc.row_params(h200, row)["gpu.clock_mhz"] == 1980.0  # an H200 the same
    fixed = vc.row_gpu(compose("experiment=validate_collectives", "gpu.clock_mhz=1620"), "hgx_h200_8gpu")
    assert vc.row_params(fixed, row)["gpu.clock_mhz"] == 1620.0


def test_a_row_may_force_the_channel_count():
    cfg = compose("experiment=validate_collectives")
    row = pd.Series({"name": "r", "op": "all_gather", "bytes": 1 << 20, "gpus": 2, "algo": "ring", "channels": 8})
    assert vc.row_params(cfg, row)["collective.channels"] == 8
    assert vc.row_params(cfg, row.drop("channels"))["collective.channels"] == cfg.collective.channels
    with pytest.raises(ConfigError, match="channels must be >= 1"):
        vc.row_params(cfg, row.copy().replace(8, 0))


def test_experiment_on_tiny_input_is_functionally_correct(engines, tmp_path):
    cfg = compose("experiment=validate_collectives", f"validate.input={TINY}", "collective.functional=true",
                  "net.functional=true", "collective.packet_multiple=2")
    df = vc.run(cfg, tmp_path)
    tiny = pd.read_csv(TINY)
    assert list(df["name"]) == list(tiny["name"])
    assert (df["functional_errors"] == 0).all()
    assert (df["sim_us"] > 0).all()
    n = df["gpus"]
    factor = [vc.bus_factor(o, g) for o, g in zip(df["op"], n)]
    assert df["busbw_GBps"].tolist() == pytest.approx((df["bytes"] / (df["sim_us"] * 1e3) * factor).tolist())
    # nothing is faster than the links allow: 450 GB/s per GPU and direction
    assert (df[df["algo"] == "ring"]["busbw_GBps"] < 450).all()
    assert "busbw_err_pct" in df.columns and df["busbw_err_pct"].notna().sum() == 1


def test_cli_writes_results(engines, cli, tmp_path):
    cli("experiment=validate_collectives", f"validate.input={TINY}", f"out_dir={tmp_path}", "validate.stats=true")
    df = read_results(tmp_path)
    assert {"name", "op", "bytes", "gpus", "algo", "sim_us", "busbw_GBps"} <= set(df.columns)
    assert len(df) == 4
    for _, row in df.iterrows():  # per-row statistics: the channels' time, link series
        stats = pd.read_csv(tmp_path / "rows" / row["name"] / "stats.csv").set_index("name")["value"]
        series = pd.read_csv(tmp_path / "rows" / row["name"] / "series.csv")
        assert stats["gpu0.collective.finish_time"] / 1e6 <= row["sim_us"]
        link = "gpu0.port0.tx.wire_bytes"
        assert series.loc[series["name"] == link, "value"].sum() == stats[link] > 0
    # ... which scripts/collective_breakdown.py summarises per row
    out = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "collective_breakdown.py"), str(tmp_path),
                          "--window-us", "0", "5"], capture_output=True, text=True, check=True).stdout
    assert all(f"{name}: busbw" in out for name in df["name"]) and out.count("egress_busy") == len(df)


def test_unknown_op_is_refused(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("name,op,bytes,gpus,algo\nx,all_to_all,1024,2,ring\n")
    cfg = compose("experiment=validate_collectives", f"validate.input={bad}")
    with pytest.raises(Exception, match="all_to_all"):
        vc.run(cfg, tmp_path)


def test_isa_kernels_run_the_same_rows_and_move_nccls_bytes(engines, tmp_path):
    """validate.kernels=isa runs each row as the library's tile-ISA kernel on the Hopper engine:
    a ring AllReduce sends 2(N-1)/N of the (128 B-rounded) tensor per GPU, ReduceScatter and
    AllGather (N-1)/N, plus one 8 B flag add per step, slice (one here), channel and warp (each
    of a channel's warps raises the slice's flag once its own stores have landed); an NVLS
    AllReduce answers the switch's ld_reduce reads of the whole tensor once per GPU."""
    from harness.kernels import ring
    warps = ring.RingConfig().warps
    cfg = compose("experiment=validate_collectives", f"validate.input={TINY}", "validate.kernels=isa")
    df = vc.run(cfg, tmp_path)
    assert (df["sim_us"] > 0).all() and len(df) == 4
    for _, row in df.iterrows():
        n, algo, op = int(row["gpus"]), row["algo"], row["op"]
        ch = cfg.collective.nvls_channels if algo == "nvls" else cfg.collective.channels
        unit = ch * n * 128
        nbytes = -(-int(row["bytes"]) // unit) * unit
        assert row["busbw_GBps"] < 450 * n / max(n - 1, 1)
        if algo == "ring":
            steps = 2 * (n - 1) if op == "all_reduce" else n - 1
            per_gpu = steps * nbytes // n + 8 * steps * ch * warps
            assert row["bytes_write"] == n * per_gpu, row["name"]
        else:
            assert row["bytes_read_resp"] == n * nbytes


def test_unknown_kernels_choice_is_refused(tmp_path):
    cfg = compose("experiment=validate_collectives", f"validate.input={TINY}", "validate.kernels=bogus")
    with pytest.raises(ConfigError, match="validate.kernels"):
        vc.run(cfg, tmp_path)
