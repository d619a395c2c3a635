"""Where runs write: folders no two runs share, nothing outside out_dir, readable files,
results.csv identical for identical inputs (wall-clock figures in timing.csv)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness import REPO_ROOT
from tests.conftest import CAIS_SIM, read_results, run_cli

TINY_TRAFFIC = ["traffic.requests_per_gpu=100", "traffic.max_outstanding=8"]
BOOKSIM_SMALL = REPO_ROOT / "conf" / "booksim" / "fly8_uniform.cfg"


def start(cwd: Path, *overrides: str, umask: int | None = None) -> subprocess.Popen:
    pre = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.Popen([*CAIS_SIM, *overrides], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=pre)


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out


def results_path(stdout: str) -> Path:
    return Path(next(l for l in stdout.splitlines() if l.startswith("results: ")).split(": ", 1)[1])


def test_two_runs_started_together_get_their_own_folders(engines, tmp_path):
    runs = [start(tmp_path, *TINY_TRAFFIC, f"seed={s}") for s in (1, 2)]
    paths = [results_path(finish(p)) for p in runs]
    assert paths[0].parent != paths[1].parent
    assert [read_results(p.parent).loc[0, "seed"] for p in paths] == [1, 2]
    assert all(p.is_relative_to(tmp_path / "outputs") for p in paths)


def test_run_dir_is_unique_per_process():
    code = "from harness.config.run_dir import run_dir; print(run_dir(None, 'outputs'))"
    names = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
             for _ in range(3)}
    assert len(names) == 3


def test_out_dir_gets_everything_and_the_working_directory_nothing(engines, tmp_path):
    cwd, out = tmp_path / "cwd", tmp_path / "out"
    cwd.mkdir()
    finish(start(cwd, *TINY_TRAFFIC, f"out_dir={out}"))
    assert list(cwd.iterdir()) == []  # no outputs/, no .hydra, no cli.log
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "results.csv", "series.csv", "stats.csv",
                                                        "status.json"]


def test_a_sweep_gives_each_point_its_own_folder(engines, tmp_path):
    cwd, out = tmp_path / "cwd", tmp_path / "sweep"
    cwd.mkdir()
    finish(start(cwd, "-m", *TINY_TRAFFIC, "seed=1,2", f"out_dir={out}"))
    assert list(cwd.iterdir()) == []
    assert [read_results(out / n).loc[0, "seed"] for n in ("0", "1")] == [1, 2]


def test_result_files_respect_the_umask(engines, tmp_path):
    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        out = tmp_path / f"u{umask:o}"
        finish(start(tmp_path, *TINY_TRAFFIC, f"out_dir={out}", umask=umask))
        for name in ("results.csv", "stats.csv", "series.csv", "config.yaml"):
            assert (out / name).stat().st_mode & 0o777 == mode, (name, oct((out / name).stat().st_mode))


def test_results_are_byte_identical_and_wall_clock_goes_to_timing(engines, tmp_path):
    outs = [tmp_path / n for n in ("a", "b")]
    for out in outs:
        run_cli("experiment=net_synthetic", f"net.booksim_config={BOOKSIM_SMALL}", "net.injection_rates=[0.1]",
                f"out_dir={out}", "cache.enabled=false")  # both runs simulate: nothing from the run cache
    assert outs[0].joinpath("results.csv").read_bytes() == outs[1].joinpath("results.csv").read_bytes()
    results = read_results(outs[0])
    assert not [c for c in results.columns if "wall" in c]
    timing = pd.read_csv(outs[0] / "timing.csv")
    assert {"row", "wall_s", "events_per_wall_s"} <= set(timing.columns) and (timing["wall_s"] > 0).all()


def repo_run_folders() -> set[Path]:
    return {p for top in ("outputs", "multirun") for p in (REPO_ROOT / top).glob("**/*")}


def test_the_test_suite_leaves_no_run_folders_in_the_repository(engines, tmp_path):
    """Tests run from the repository with out_dir (nothing else may appear) or fail (a folder the
    run chose itself is removed again)."""
    before = repo_run_folders()
    run_cli(*TINY_TRAFFIC, f"out_dir={tmp_path}")
    run_cli(*TINY_TRAFFIC, "system.gpus=1", check=False)
    assert repo_run_folders() == before
