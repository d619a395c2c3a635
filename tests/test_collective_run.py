"""workload=collective: one collective as the library's tile-ISA kernel on the Hopper engine."""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import read_results


def _env(engines):
    return {"CAIS_ENGINE_DIR": str(engines)}


def test_it_is_the_kernel_validate_collectives_runs(tmp_path, engines, cli):
    """The same row through validate_collectives' ISA path (with the default switch's keys) gives
    the same time to the picosecond: one kernel, one way to build it."""
    keys = ["gpu.launch_skew_ns=0", "gpu.bulk_lines=1", "cache.enabled=false"]
    cli("workload=collective", "collective.op=all_gather", "collective.bytes=1048576", "system=hgx_h200_2gpu",
        *keys, f"out_dir={tmp_path / 'one'}", env=_env(engines))
    rows = tmp_path / "rows.csv"
    pd.DataFrame([dict(name="ag", op="all_gather", bytes=1048576, gpus=2, algo="ring", system="hgx_h200_2gpu",
                       measured_us=10.0)]).to_csv(rows, index=False)
    cli("experiment=validate_collectives", "validate.kernels=isa", f"validate.input={rows}",
        "net.sw_alloc_granularity=flit", "net.vc_buffer_scope=lane", "net.vc_depth_flits=256", *keys,
        f"out_dir={tmp_path / 'vc'}", env=_env(engines))
    one, vc = read_results(tmp_path / "one"), read_results(tmp_path / "vc")
    assert one.loc[0, "sim_time_us"] == pytest.approx(vc.loc[0, "sim_us"], abs=1e-6)
    assert one.loc[0, "clock_mhz"] == 1980.0  # a collective alone: the memory-bound clock
    # all_gather of B bytes on n GPUs: every GPU writes the other (n - 1) parts of B / n to its
    # neighbour, (n - 1) B in all (B rounded up to whole 128 B parts per channel and GPU), plus
    # the channels' flags, which are small
    n, unit = 2, 24 * 2 * 128
    data = (n - 1) * (-(-1048576 // unit) * unit)
    assert data <= one.loc[0, "bytes_write"] < data * 1.01
    assert (tmp_path / "one" / "stats.csv").exists() and (tmp_path / "one" / "series.csv").exists()


def test_an_nvls_all_reduce_moves_the_bytes_of_nccls_algorithm(tmp_path, engines, cli):
    """NVLS all_reduce of B bytes on n GPUs: each GPU ld_reduces its B / n part, for which the
    switch reads that part from every member (each GPU answers n parts of B / n: B, n B in all),
    and multicasts the reduced part (B / n per GPU, B in all)."""
    b = 8 * 2**20
    cli("workload=collective", "collective.algo=nvls", f"collective.bytes={b}", "system=dgx_h100",
        "net.features=nvls", "cache.enabled=false", f"out_dir={tmp_path}", env=_env(engines))
    r = read_results(tmp_path).iloc[0]
    unit = 16 * 8 * 128
    bb = -(-b // unit) * unit
    assert (r["op"], r["algo"], r["gpus"], r["channels"]) == ("all_reduce", "nvls", 8, 16)
    assert r["bytes_mm_st"] == bb and r["bytes_read_resp"] == 8 * bb
    assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 2 * 7 / 8)


@pytest.mark.parametrize("overrides, match", [
    (["collective.algo=nvls"], "net.features: collective.algo=nvls needs the switch feature nvls"),
    (["collective.algo=nvls", "collective.op=all_gather", "net.features=nvls"], "collective.op: 'all_gather' with"),
    (["collective.op=broadcast"], "collective.op: 'broadcast' is not one of"),
    (["collective.bytes=0"], "collective.bytes: must be >= 1"),
    (["collective.start_ns=5"], "collective.start_ns: experiment simulate does not read it with workload=collective"),
    (["traffic.request_bytes=64"], "traffic.request_bytes: experiment simulate does not read traffic"),
    (["scheme=tp_nvls"], "scheme: workload=collective runs no scheme"),
])
def test_bad_keys_are_one_line_errors(tmp_path, engines, cli, overrides, match):
    proc = cli("workload=collective", "system=dgx_h100", *overrides, f"out_dir={tmp_path}", check=False,
               env=_env(engines))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(err) == 1 and match in err[0], proc.stderr
    assert not (tmp_path / "results.csv").exists()
