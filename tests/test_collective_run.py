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


@pytest.mark.parametrize("op, algo, system", [
    ("all_reduce", "ring", "hgx_h200_4gpu"), ("reduce_scatter", "ring", "hgx_h200_4gpu"),
    ("all_gather", "ring", "hgx_h200_2gpu"), ("all_reduce", "nvls", "hgx_h200_4gpu"),
])
def test_a_functional_run_checks_its_result_on_every_gpu_at_the_timing_runs_time(tmp_path, engines, cli, op, algo,
                                                                                 system):
    """net.functional=true: every GPU's input starts at rank + 1 (Buffer.init_rank), the run
    compares the tensor each GPU holds afterwards with what the collective leaves, and counts
    one check per GPU; nothing runs before the collective, so its time is the timing run's."""
    keys = ["workload=collective", f"collective.op={op}", f"collective.algo={algo}", "collective.bytes=262144",
            f"system={system}", "cache.enabled=false"] + (["net.features=nvls"] if algo == "nvls" else [])
    cli(*keys, "net.functional=true", f"out_dir={tmp_path / 'f'}", env=_env(engines))
    cli(*keys, f"out_dir={tmp_path / 't'}", env=_env(engines))
    f, t = read_results(tmp_path / "f").iloc[0], read_results(tmp_path / "t").iloc[0]
    assert f["functional_checks"] == f["gpus"] and "functional_checks" not in t
    assert f["sim_time_us"] == t["sim_time_us"]


def test_a_wrong_collective_result_fails_the_functional_run_naming_the_gpu():
    """The check itself: a ring reduce_scatter expected where an all_reduce ran fails on GPU 0."""
    import numpy as np

    from harness import functional_check
    from harness.errors import SimulationError
    from harness.gpu import functional
    from harness.kernels import ring

    G, C, n = 2, 1, 2 * 2 * 128
    ran = {g: ring.functional_result("all_reduce", g, G, C, n) for g in range(G)}
    stats = {f"gpu{g}.mem.data.{k}": v for g in range(G) for k, v in functional.summary(ran[g]).items()}
    functional_check.check(stats, {"ring all_reduce": functional_check.Computed("data", ran.__getitem__)}, G)
    wrong = functional_check.Computed("data", lambda g: ring.functional_result("reduce_scatter", g, G, C, n))
    with pytest.raises(SimulationError, match="'ring reduce_scatter' left wrong values in data on gpu0"):
        functional_check.check(stats, {"ring reduce_scatter": wrong}, G)
    assert np.all(ran[0] == 3.0)


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
