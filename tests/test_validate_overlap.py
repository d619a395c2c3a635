"""validate_overlap: GEMM + ring AllReduce, serial and two-stream chunked, on the engines."""
from __future__ import annotations

import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.experiments import validate_overlap as vo
from harness.kernels import gemm as gemm_kernel
from harness.kernels import ring

from conftest import compose

ROWS = [dict(name="tiny2", M=512, N=512, K=128, gpus=2, chunks=2, gemm_us=10.0, allreduce_us=20.0,
             serial_us=30.0, overlap_us=35.0),
        dict(name="tiny4", M=512, N=256, K=128, gpus=4, chunks=4, gemm_us=10.0, allreduce_us=20.0,
             serial_us=30.0, overlap_us=45.0)]
SIM = ["sim_gemm_us", "sim_allreduce_us", "sim_serial_us", "sim_overlap_us"]
ERR = ["err_gemm_pct", "err_allreduce_pct", "err_serial_pct", "err_overlap_pct"]


def test_validate_overlap_columns_and_determinism(tmp_path, engines, cli):
    csv = tmp_path / "rows.csv"
    pd.DataFrame(ROWS).to_csv(csv, index=False)
    outs = []
    for run in ("a", "b"):
        cli("experiment=validate_overlap", f"validate.input={csv}", f"out_dir={tmp_path / run}", "cache.enabled=false",
            env={"CAIS_ENGINE_DIR": str(engines)})
        outs.append((tmp_path / run / "results.csv").read_bytes())
        timing = pd.read_csv(tmp_path / run / "timing.csv")
        assert {"serial_wall_s", "overlap_wall_s"} <= set(timing.columns)
    assert outs[0] == outs[1]
    res = pd.read_csv(tmp_path / "a" / "results.csv")
    assert list(res["name"]) == ["tiny2", "tiny4"] and set(SIM + ERR) <= set(res.columns)
    assert not any(c.endswith("wall_s") for c in res.columns)
    assert list(res["system"]) == ["hgx_h200_2gpu", "hgx_h200_4gpu"]
    assert (res[SIM] > 0).all().all()
    # serial: the AllReduce is released when the GEMM ends, so the whole is the two spans
    assert (res["sim_serial_us"] - res["sim_gemm_us"] - res["sim_allreduce_us"]).abs().max() < 2.0
    expect = 100 * (res["sim_overlap_us"] - res["overlap_us"]) / res["overlap_us"]
    assert (res["err_overlap_pct"] - expect).abs().max() < 0.01


def test_the_measured_bursts_run_at_the_clock_that_follows_their_load():
    """measure_overlap.py timed a few milliseconds at a time from an idle GPU: the power model's
    burst clock while a GEMM runs (1650 MHz on 132 SMs), the maximum while NCCL runs alone (its
    power is the memory system's), not the 1395 MHz a settled all-SM GEMM load gives; a clock the
    user fixes stays the one clock."""
    from harness.gpu import power
    from harness.system import engine_params

    cfg = compose("experiment=validate_overlap")
    flat = {f"gpu.{k}": v for k, v in cfg.gpu.items()}
    p = engine_params(cfg, burst=True)
    assert p["gpu.clock_mhz"] == power.burst_clock_mhz(132, "tensor", flat) == 1650.0
    assert p["gpu.clock_mhz_without_mma"] == power.burst_clock_mhz(132, "memory", flat) == 1980.0
    assert engine_params(cfg)["gpu.clock_mhz"] == power.settled_clock_mhz(132, "tensor", flat) == 1395.0
    assert not set(power.MODEL_KEYS) & set(p)  # the engine sees only the resolved clocks
    fixed = engine_params(compose("experiment=validate_overlap", "gpu.clock_mhz=1620"), burst=True)
    assert (fixed["gpu.clock_mhz"], fixed["gpu.clock_mhz_without_mma"]) == (1620.0, 0.0)
    own = engine_params(compose("experiment=validate_overlap", "gpu.clock_mhz_without_mma=1900"), burst=True)
    assert (own["gpu.clock_mhz"], own["gpu.clock_mhz_without_mma"]) == (1650.0, 1900.0)


def test_overlap_workload_is_two_streams_with_one_allreduce_after_each_gemm_chunk():
    row = pd.Series(ROWS[1])
    wl = vo.build_workload(row, 132, ring.RingConfig(channels=4), overlap=True)
    names = [wl.kernels[la.kernel].name for la in wl.launches]
    assert names == ["gemm0", "allreduce0", "gemm1", "allreduce1", "gemm2", "allreduce2", "gemm3", "allreduce3"]
    gemms, ars = wl.launches[0::2], wl.launches[1::2]
    assert len({la.stream for la in gemms}) == 1 and len({la.stream for la in ars}) == 1
    assert gemms[0].stream != ars[0].stream
    assert [list(la.after) for la in ars] == [[0], [2], [4], [6]]
    # each chunk's GEMM has M / chunks rows; its AllReduce covers the chunk (rounded to whole parts)
    tm = gemm_kernel.plan(128, 256, 128, 132).tm
    assert wl.kernels[wl.launches[0].kernel].grid_y == -(-128 // tm)
    assert wl.buffers[vo_buffer(wl, "y0")].bytes == vo.ar_bytes(128, 256, 4, 4)
    serial = vo.build_workload(row, 132, ring.RingConfig(channels=4), overlap=False)
    assert [wl_.stream for wl_ in serial.launches] == [0, 0] and list(serial.launches[1].after) == [0]


def vo_buffer(wl, name: str) -> int:
    return [b.name for b in wl.buffers].index(name)


def test_allreduce_size_rounds_up_to_whole_parts():
    assert vo.ar_bytes(16384, 2048, 2, 24) % (24 * 2 * 128) == 0
    assert 0 <= vo.ar_bytes(16384, 2048, 8, 24) - 16384 * 2048 * 2 < 24 * 8 * 128
    assert vo.ar_bytes(4, 64, 2, 1) == 512  # 4 x 64 bf16 = 512 B: already whole


@pytest.mark.parametrize("change, match", [
    (dict(chunks=3), r"line 2 \(name tiny2\): M 512 does not split into chunks 3"),
    (dict(gpus=3), r"line 2 \(name tiny2\): gpus '3' is not allowed; allowed: 2, 4, 8"),
    (dict(K="64MiB"), r"line 2 \(name tiny2\): K '64MiB' is not allowed"),
    (dict(overlap_us=-1), r"line 2 \(name tiny2\): overlap_us '-1' is not allowed"),
])
def test_bad_rows_are_one_line_errors(tmp_path, change, match):
    csv = tmp_path / "bad.csv"
    pd.DataFrame([dict(ROWS[0], **change)]).to_csv(csv, index=False)
    with pytest.raises(ConfigError, match=match) as e:
        vo.load_input(csv)
    assert "\n" not in str(e.value)


def test_a_bad_row_stops_the_cli_with_one_line(tmp_path, engines, cli):
    csv = tmp_path / "bad.csv"
    pd.DataFrame([dict(ROWS[0], gpus=6)]).to_csv(csv, index=False)
    proc = cli("experiment=validate_overlap", f"validate.input={csv}", f"out_dir={tmp_path / 'o'}", check=False)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cais-sim: error: validate.input:") and "gpus '6'" in err[0]
    assert not (tmp_path / "o" / "results.csv").exists()


def test_the_committed_inputs_are_the_measured_rows():
    full = vo.load_input(vo.DEFAULT_INPUT)
    assert len(full) == 72 and sorted(full["gpus"].unique()) == [2, 4, 8]
    sub = vo.load_input(vo.DEFAULT_INPUT.with_name("overlap_h200_subset.csv"))
    merged = sub.merge(full, on=list(sub.columns), how="left", indicator=True)
    assert (merged["_merge"] == "both").all() and sorted(sub["gpus"].unique()) == [2, 4, 8]



def _ring_rate_gbps(gpus: int, lines_per_part: int, *overrides: str) -> float:
    """Per-GPU data rate (GB/s) of a ring all_reduce with validate_overlap's settings: the bytes a
    GPU sends, 2 (G-1)/G of the tensor, over the last GPU's end."""
    cfg = compose("experiment=validate_overlap", f"system=hgx_h200_{gpus}gpu", *overrides)
    return vo.ring_alone(cfg, int(cfg.collective.channels) * gpus * 128 * lines_per_part)[0]


def test_the_switch_runs_a_4_and_an_8_gpu_ring_at_the_same_rate(engines):
    """On 4 GPUs as on 8 every GPU sends data to the next and write acks to the previous, so each
    switch output takes one GPU's data and another's acks, and per GPU the rings move data at the
    same rate. The default switch, allocated flit by flit, does that: 32 MiB alone (1980 MHz) runs
    at 293.3 GB/s on 4 GPUs and 296.7 on 8. The packet-level allocator does not (212.6 against 312.4:
    an input holds its data behind a response for a busy output), nor do its stand-ins for
    flit interleaving settle in one place (docs/VALIDATION.md)."""
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")
    four = _ring_rate_gbps(4, 2732)  # 32 MiB in whole 128 B parts
    eight = _ring_rate_gbps(8, 1366)
    assert four == pytest.approx(eight, rel=0.03)
