"""Ctrl-C ends any run within 2 s: engines stopped, one line, no results, no traceback."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from harness import REPO_ROOT
from tests.conftest import CAIS_SIM
from tests.test_cosim import engine_pids

LONG_TRAFFIC = ["traffic.requests_per_gpu=200000", "traffic.issue_gap_ns=5", "cosim.gpus_per_process=4"]


def long_rows(tmp_path):
    rows = tmp_path / "rows.csv"  # each row takes tens of seconds
    rows.write_text("name,op,bytes,gpus,algo\n" + "".join(f"ar{i},all_reduce,{8 << 30},8,ring\n" for i in range(3)))
    return ["experiment=validate_collectives", f"validate.input={rows}"]


@pytest.mark.parametrize("case,jobs", [("traffic", "1"), ("collectives", "1"), ("collectives", "2")])
def test_ctrl_c_stops_the_run_and_its_engines(engines, tmp_path, case, jobs):
    tag = f"sigint-{case}-{jobs}-{os.getpid()}-{time.time_ns()}"
    out = tmp_path / "out"
    args = LONG_TRAFFIC if case == "traffic" else long_rows(tmp_path)
    proc = subprocess.Popen([*CAIS_SIM, *args, f"out_dir={out}"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CAIS_TEST_TAG": tag, "CAIS_VALIDATE_JOBS": jobs})
    deadline = time.monotonic() + 60
    while not engine_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engine_pids(tag), "engines never started"
    time.sleep(1.5)  # well into the lock-step loop
    proc.send_signal(signal.SIGINT)  # to the harness only, as `kill -INT`; a terminal's Ctrl-C also hits engines
    sent = time.monotonic()
    _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 2.0, "the run took more than 2 s to end"
    assert proc.returncode == 130
    assert [l for l in stderr.splitlines() if l.strip()] == [
        "cais-sim: interrupted (engines stopped; the interrupted run wrote no results)"], stderr
    assert not (out / "results.csv").exists()
    assert engine_pids(tag) == set(), "engines left running"
