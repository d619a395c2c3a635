"""validate_concurrent: a GEMM beside a streaming kernel on one simulated GPU."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.experiments import validate_concurrent as vc
from harness.gpu import kernels, stream_kernel

ROWS = [dict(name="g", M=1024, N=1024, K=1024, stream_kind="copy", ctas=8, bytes=8 << 20, order="stream_first",
             start_gap_us=10.0),
        dict(name="g", M=1024, N=1024, K=1024, stream_kind="reduce", ctas=16, bytes=8 << 20, order="gemm_first",
             start_gap_us=10.0)]
SIM = ["sim_gemm_us", "sim_stream_us", "sim_makespan_us", "sim_gemm_alone_us", "sim_stream_alone_us"]


def test_stream_kernel_moves_its_bytes_in_whole_chunks():
    wl = kernels.new_workload("s")
    stream_kernel.add_stream_kernel(wl, "reduce", 8, 8 << 20, stream=0)
    assert [b.name for b in wl.buffers] == ["stream_src0", "stream_src1", "stream_dst"]
    assert wl.buffers[2].bytes == 8 << 20  # 1 MiB per CTA = 32 chunks of 32 KiB
    assert wl.kernels[0].program[0].count == 32 and wl.kernels[0].grid_x == 8
    assert stream_kernel.moved_bytes("reduce", 8, 8 << 20) == {"read": 16 << 20, "write": 8 << 20}


def test_the_copy_keeps_one_16_byte_load_per_thread_in_flight_as_its_sass_does():
    """measure_concurrent.py's copy compiles to LDG, STG, LDG, STG, ... (a store waits for its
    load): each chunk is `unroll` steps of one load per thread, its wait, then its store. The
    reduce issues all its loads first."""
    wl = kernels.new_workload("s")
    stream_kernel.add_stream_kernel(wl, "copy", 8, 8 << 20, stream=0, threads=512, unroll=4)
    body = list(wl.kernels[0].program)[1:-1]  # inside the loop
    from harness.gpu.isa_text import isa
    assert [i.op for i in body] == [isa.LD, isa.WAIT, isa.ST] * 4
    assert {i.row_bytes for i in body if i.op in (isa.LD, isa.ST)} == {512 * 16}
    assert [i.addr.base for i in body if i.op == isa.LD] == [0, 8192, 16384, 24576]
    wl = kernels.new_workload("r")
    stream_kernel.add_stream_kernel(wl, "reduce", 8, 8 << 20, stream=0, threads=512, unroll=4)
    ops = [i.op for i in list(wl.kernels[0].program)[1:-1]]
    assert ops == [isa.LD, isa.LD, isa.WAIT, isa.ALU, isa.ST]


def test_validate_concurrent_experiment_is_deterministic(tmp_path, engines, cli):
    csv = tmp_path / "cases.csv"
    pd.DataFrame(ROWS).to_csv(csv, index=False)
    outs = []
    for run in ("a", "b"):
        cli("experiment=validate_concurrent", f"validate.input={csv}", f"out_dir={tmp_path / run}",
            env={"CAIS_ENGINE_DIR": str(engines)})
        outs.append(pd.read_csv(tmp_path / run / "results.csv"))
    res = outs[0]
    assert set(SIM) <= set(res.columns) and len(res) == 2
    pd.testing.assert_frame_equal(outs[0], outs[1])
    assert (res[SIM] > 0).all().all()
    # the makespan covers both kernels; running together costs at least as much as the longer alone
    assert (res["sim_makespan_us"] >= res[["sim_gemm_us", "sim_stream_us"]].max(axis=1) - 1e-6).all()
    assert (res["sim_makespan_us"] >= res[["sim_gemm_alone_us", "sim_stream_alone_us"]].max(axis=1) - 1e-6).all()


def test_gemm_first_holds_back_a_stream_that_does_not_fit_beside_it(engines):
    """The recorded cuBLAS plan (384 threads x 168 registers per CTA) leaves no room on an SM:
    the streaming kernel waits for the GEMM's SMs, as measured (gemm_first rows)."""
    row = pd.Series(dict(ROWS[0], name="extra.sq4096", order="gemm_first", M=4096, N=4096, K=4096, bytes=4 << 20))
    out = vc.simulate_rows(pd.DataFrame([row]), {"gpu.launch_skew_ns": 0.0}, jobs=1)
    assert out["sim_makespan_us"][0] >= 0.95 * (out["sim_gemm_alone_us"][0] + out["sim_stream_alone_us"][0] - 10)


def test_a_stream_that_starts_beside_a_running_gemm_gets_its_small_l1(engines):
    """A kernel launched while a cuBLAS GEMM runs takes the SMs the GEMM frees with the GEMM's
    shared-memory configuration (28 KB of L1; docs/MEASUREMENTS.md, call 31): its reduce CTAs,
    64 KiB of loads in flight each, move about half as fast. Run after the GEMM (stream_first
    puts it on fresh SMs) or beside a GEMM that does not hold its configuration, nothing changes."""
    from harness.gpu import standalone
    row = pd.Series(dict(ROWS[1], name="llama_7b.fc2.fwd", M=9216, N=4096, K=1408, ctas=8, bytes=50 << 20))
    base = {"gpu.launch_skew_ns": 0.0, "gpu.clock_spread_frac": 0.0}
    gwl, _ = vc.gemm_workload(row, base)
    pair = vc.pair_workload(gwl, row)
    plain = vc.pair_workload(gwl, row)
    for k in plain.kernels:
        k.holds_carveout = False
    kept, reset = standalone.run_many([pair, plain], [base, base], jobs=1)
    assert kept["gpu0.l1.kept_configs"] > 0 and kept["gpu0.l1.held_loads"] > 0
    assert reset["gpu0.l1.kept_configs"] == 0 and reset["gpu0.l1.held_loads"] == 0
    stream = lambda st: st["gpu0.kernel1.stream_reduce.end"] - st["gpu0.kernel1.stream_reduce.first_cta"]  # noqa: E731
    assert 1.6 < stream(kept) / stream(reset) < 2.6
    assert kept["gpu0.kernel0.gemm_dp.end"] == reset["gpu0.kernel0.gemm_dp.end"]  # the GEMM's TMA loads: no L1


def test_the_measured_clock_is_not_an_input(engines):
    """Every row runs at the power model's burst clocks (the GEMM's while it runs, the maximum
    while only the streaming kernel does; gpu.clock_mhz fixes one), whatever clock NVML read
    while the measured pair ran."""
    rows = pd.DataFrame([dict(ROWS[0], sm_clock_mhz=1860.0), dict(ROWS[0], sm_clock_mhz=1395.0)])
    out = vc.simulate_rows(rows, {"gpu.launch_skew_ns": 0.0}, jobs=1)
    assert out.loc[0, SIM].tolist() == out.loc[1, SIM].tolist()
    assert vc.burst_clock_mhz({}) == 1650.0 and vc.burst_clock_mhz({}, "memory") == 1980.0
    assert vc.burst_clock_mhz({"gpu.clock_mhz": 1620.0}) == 1620.0
    assert vc.burst_clock_mhz({"gpu.clock_mhz": 1620.0}, "memory") == 1620.0  # one fixed clock
    assert vc.burst_clock_mhz({"gpu.clock_mhz_without_mma": 1900.0}, "memory") == 1900.0  # a key is never ignored
    assert vc.burst_clock_mhz({"gpu.clock_mhz_without_mma": 1900.0}) == 1650.0
    slow = vc.simulate_rows(rows[:1], {"gpu.launch_skew_ns": 0.0, "gpu.clock_mhz": 990.0}, jobs=1)
    assert slow["sim_gemm_alone_us"][0] > 1.3 * out["sim_gemm_alone_us"][0]  # the launch does not scale


@pytest.mark.parametrize("change, match", [
    (dict(order="sideways"), "row 2: order='sideways'"),
    (dict(stream_kind="scatter"), "row 2: stream_kind='scatter'"),
    (dict(ctas=0), "row 2: ctas=0"),
])
def test_bad_rows_are_named(tmp_path, change, match):
    csv = tmp_path / "bad.csv"
    pd.DataFrame([dict(ROWS[0], **change)]).to_csv(csv, index=False)
    with pytest.raises(ConfigError, match=match):
        vc.load_input(csv)


def test_missing_columns_are_named(tmp_path):
    csv = tmp_path / "bad.csv"
    pd.DataFrame([{k: v for k, v in ROWS[0].items() if k != "start_gap_us"}]).to_csv(csv, index=False)
    with pytest.raises(ConfigError, match=r"lacks columns \['start_gap_us'\]"):
        vc.load_input(csv)


def test_a_row_with_a_field_more_than_the_header_is_refused(tmp_path):
    """pandas would read every row's extra field as an index and shift the values by a column."""
    csv = tmp_path / "extra.csv"
    pd.DataFrame([ROWS[0]]).to_csv(csv, index=False)
    header, row = csv.read_text().splitlines()
    csv.write_text(f"{header}\n{row},surplus\n")
    with pytest.raises(ConfigError, match=r"line 2 has \d+ fields, the header \d+"):
        vc.load_input(csv)


def test_start_modes_split_the_repetitions_at_the_gemms_end():
    """A gemm_first repetition started beside the GEMM when its first streaming CTA started more
    than the stamp kernel's launch before the GEMM's end (gemm_end_us > 0 is the GEMM still
    running); one that started within that was placed on an idle GPU, as one after it."""
    reps = pd.DataFrame(dict(name="g", stream_kind="copy", ctas=8, order="gemm_first", rep=range(5),
                             gemm_end_us=[9.0, -8.0, 0.5, 12.0, -7.5], stream_us=[300.0, 180.0, 182.0, 320.0, 184.0]))
    reps = pd.concat([reps, reps.assign(order="stream_first")])
    m = vc.start_modes(reps)
    assert len(m) == 1 and m.loc[0, "order"] == "gemm_first"
    assert (m.loc[0, "reps"], m.loc[0, "reps_beside"]) == (5, 2)
    assert m.loc[0, "stream_beside_us"] == 310.0 and m.loc[0, "stream_after_us"] == 182.0


def test_each_start_mode_is_compared_with_its_own_repetitions(engines):
    rows = pd.DataFrame([dict(ROWS[1], stream_us=300.0, stream_beside_us=400.0, stream_after_us=100.0, reps=4,
                              reps_beside=2)])
    out = vc.simulate_rows(rows, {"gpu.launch_skew_ns": 0.0}, jobs=1)
    sim, alone = out["sim_stream_us"][0], out["sim_stream_alone_us"][0]
    assert out["err_stream_after_pct"][0] == pytest.approx(100 * (alone - 100.0) / 100.0, abs=0.01)
    if out["sim_stream_start_vs_gemm_end_us"][0] < 0:  # the engine's kernel started beside the GEMM
        assert out["err_stream_beside_pct"][0] == pytest.approx(100 * (sim - 400.0) / 400.0, abs=0.01)
    else:
        assert np.isnan(out["err_stream_beside_pct"][0])
