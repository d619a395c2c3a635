"""Figure experiments as sweeps: resuming an interrupted sweep from the run cache, two points at
once with the joblib launcher, the paper at test scale then cais-report, launcher configs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pandas as pd
import pytest
import yaml

from harness import REPO_ROOT
from conftest import CAIS_SIM, compose, run_cli

FIG11_TINY = ["experiment=fig11", "model=tiny", "phase=inference", "scheme=tp_nvls,coconet_nvls,ladm"]


def statuses(out_dir):
    found = {int(p.name): json.loads((p / "status.json").read_text())["status"]
             for p in out_dir.iterdir() if p.is_dir() and p.name.isdigit() and (p / "status.json").is_file()}
    return dict(sorted(found.items()))


def test_an_interrupted_fig11_sweep_resumes_without_recomputing_finished_runs(engines, tmp_path):
    out, cache = tmp_path / "fig11", f"cache.dir={tmp_path / 'cache'}"
    proc = subprocess.Popen([*CAIS_SIM, "-m", *FIG11_TINY, f"out_dir={out}", cache], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and "ok" in statuses(out).values():
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C halfway: the point in progress is lost
    proc.wait(timeout=30)
    finished = [n for n, s in statuses(out).items() if s == "ok"]
    assert 1 <= len(finished) < 3, statuses(out)
    run_cli("-m", *FIG11_TINY, f"out_dir={out}", cache, timeout=400)
    after = statuses(out)
    assert sorted(after) == [0, 1, 2]
    assert [n for n, s in after.items() if s == "cached"] == finished  # nothing finished was recomputed
    assert [n for n, s in after.items() if s == "ok"] == [n for n in range(3) if n not in finished]
    assert (out / "fig11.png").is_file() and len((out / "results.csv").read_text().splitlines()) == 4


def test_a_point_another_figure_ran_comes_from_the_cache(engines, tmp_path):
    cache, point = f"cache.dir={tmp_path / 'cache'}", ["model=tiny", "workload=sublayer_l1", "scheme=cais"]
    run_cli("experiment=fig12", *point, f"out_dir={tmp_path / 'fig12'}", cache, timeout=200)
    run_cli("experiment=fig15", *point, f"out_dir={tmp_path / 'fig15'}", cache, timeout=200)
    assert statuses(tmp_path / "fig15") == {0: "cached"}
    assert yaml.safe_load((tmp_path / "fig15" / "0" / "config.yaml").read_text())["figure"]["name"] == "fig15"
    fig12, fig15 = (pd.read_csv(tmp_path / f / "0" / "results.csv") for f in ("fig12", "fig15"))
    pd.testing.assert_frame_equal(fig12, fig15)


def test_joblib_runs_two_points_at_once(engines, tmp_path):
    out = tmp_path / "j"
    run_cli("-m", "experiment=fig11", "model=tiny", "phase=inference", "scheme=tp_nvls,ladm", "cache.enabled=false",
            "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"out_dir={out}", timeout=300)
    runs = [json.loads((out / str(n) / "status.json").read_text()) for n in (0, 1)]
    assert {r["status"] for r in runs} == {"ok"}
    assert runs[0]["pid"] != runs[1]["pid"]
    a, b = sorted(runs, key=lambda r: r["start_wall_s"])
    assert b["start_wall_s"] < a["end_wall_s"]  # the second started before the first ended


def test_a_figure_runs_its_points_two_at_once_with_the_same_results(engines, tmp_path):
    rows = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        run_cli("experiment=fig11", "model=tiny", "phase=inference", "scheme=tp_nvls,ladm", "cache.enabled=false",
                f"figure.jobs={jobs}", f"out_dir={out}", timeout=300)
        runs = [json.loads((out / str(n) / "status.json").read_text()) for n in (0, 1)]
        assert {r["status"] for r in runs} == {"ok"}
        rows[jobs] = (out / "results.csv").read_text()
        colocated = [yaml.safe_load((out / str(n) / "config.yaml").read_text())["cosim"]["colocate"] for n in (0, 1)]
        assert colocated == [jobs == 2] * 2  # side by side, each point's engines share one process
        if jobs == 2:
            assert runs[0]["pid"] != runs[1]["pid"]
            a, b = sorted(runs, key=lambda r: r["start_wall_s"])
            assert b["start_wall_s"] < a["end_wall_s"]  # the second started before the first ended
    assert rows[1] == rows[2]


def test_a_figure_experiment_takes_several_values_of_an_axis_without_m(engines, tmp_path):
    out = tmp_path / "f"
    proc = run_cli("experiment=fig18", "collective.bytes=1048576,2097152", f"out_dir={out}",
                   f"cache.dir={tmp_path / 'c'}", timeout=200)
    assert "sweep: 2 of 2 points succeeded" in proc.stderr
    fig = json.loads((out / "figure.json").read_text())
    assert fig["points"] == 2 and (out / "fig18.png").stat().st_size > 1000


def test_paper_at_test_scale_then_report(engines, tmp_path):
    out = tmp_path / "paper"
    proc = run_cli("experiment=paper", "paper=tiny", f"out_dir={out}", f"cache.dir={tmp_path / 'c'}",
                   timeout=900, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: points of schemes not on this branch failed
    names = ["fig2", "fig11", "fig12", "fig13", "fig14", "fig15", "fig16", "fig17", "fig18", "table2"]
    for name in names:
        assert (out / name / f"{name}.png").is_file(), name
    for name in ("fig2", "fig11", "fig12", "fig18"):  # baselines only: these have rows whatever has landed
        assert len((out / name / "results.csv").read_text().splitlines()) >= 2, name
    timing = pd.read_csv(out / "timing.csv")  # wall clock is kept out of results.csv
    assert list(timing["figure"]) == names and (timing["wall_s"] > 0).all()  # REPRODUCE's per-figure times
    rep = subprocess.run([*CAIS_SIM[:-2], "-m", "harness.report", str(out)], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    for name in names:
        assert f"## {name}:" in md and f"<h2>{name}:" in page
    assert page.count("data:image/png;base64,") == len(names)
    assert "| quantity | simulated | paper | ratio | tolerance | within |" in md


@pytest.mark.parametrize("launcher,target", [("joblib", "JoblibLauncher"), ("slurm", "SlurmLauncher"),
                                             ("ray", "RayLauncher")])
def test_launcher_configs_compose(launcher, target):
    proc = run_cli(f"hydra/launcher={launcher}", "--cfg", "hydra", timeout=60)
    assert f"{target}" in proc.stdout


@pytest.mark.parametrize("experiment", ["fig2", "fig11", "fig12", "fig13", "fig14", "fig15", "fig16", "fig17",
                                        "fig18", "table2", "paper", "ci_fast"])
def test_figure_experiments_compose(experiment):
    cfg = compose(f"experiment={experiment}")
    assert cfg.task in ("figure", "paper")
