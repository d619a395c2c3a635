"""A figure experiment in one process: ``cais-sim experiment=fig11 out_dir=DIR``.

The points are the experiment's Hydra sweeper params (conf/experiment/<fig>.yaml), with the
command line's overrides replacing an axis or adding a value (harness/sweep.py: the same grid a
multirun would launch). Each point is composed as its own config and run through the ordinary
single-run path (harness/single_run.py: cache, status.json) into DIR/<N>, the layout
``cais-sim -m`` gives; a failed point is recorded and the others go on; then the figure step
(harness/figures) writes DIR/results.csv, DIR/<fig>.png and DIR/figure.json. The CLI exits 1
when a point failed, after everything is written.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness import figures, single_run, sweep
from harness.cosim import progress

# Overrides that say where the figure goes or which figures a paper run makes, not what a point is.
_NOT_POINT_KEYS = ("out_dir", "experiment", "paper")


def point_overrides(overrides: list[str]) -> list[str]:
    return [o for o in overrides if o.split("=", 1)[0].lstrip("+~").split(".")[0] not in _NOT_POINT_KEYS]


def _run_point(cfg: DictConfig, out_dir: Path, label: str) -> str:
    """One point into out_dir (in this process or a joblib worker); '' or its one-line error."""
    started = time.time()
    try:
        single_run.execute(cfg, out_dir, label=label)
        return ""
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed point is recorded; the sweep goes on
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not (single_run.read_status(out_dir) or {}).get("status") == "failed":  # failed before it ran
            _record_failure(out_dir, started, message, label)
        return message


def _record_failure(out_dir: Path, started: float, message: str, label: str) -> None:
    """status.json of a point that failed before its run could write one."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # no folder to record it in (a file is there): the sweep's summary takes the message
    single_run.write_status(out_dir, "failed", started, message=message, label=label)


def _run_indexed(i: int, cfg: DictConfig, out_dir: Path, label: str) -> tuple[int, str]:
    return i, _run_point(cfg, out_dir, label)


def _workers(jobs: int, points: int) -> int:
    return max(1, min(points, jobs if jobs > 0 else (os.cpu_count() or 1)))


def run_figure(name: str, experiment: str, point_task: str, params: dict, overrides: list[str],
               out_dir: Path, jobs: int = 1) -> tuple[pd.DataFrame, int]:
    """Run every point of the grid (params x overrides) into out_dir/<N>, then the figure step.
    jobs: points at once (joblib worker processes; 0 = one per CPU core). Results do not depend
    on it: each point is an ordinary run of its own."""
    from hydra import compose

    points = sweep.grid(params, point_overrides(overrides))
    side_by_side = []
    if _workers(jobs, len(points)) > 1 and not any(o.split("=", 1)[0].lstrip("+~") == "cosim.colocate"
                                                   for o in overrides):
        # Points side by side, one per core: each point's engines share one process. Split engines
        # would only add the lock-step exchange between them (docs/PERFORMANCE.md); results are the
        # same either way (partition invariance), and the run cache does not key on it.
        side_by_side = ["cosim.colocate=true"]
    reporter = progress.current()
    dirs = [Path(out_dir) / str(i) for i in range(len(points))]
    labels = [" ".join(point) for point in points]
    errors: dict[int, str] = {}  # points that did not compose, then those that failed
    configs = []
    for i, point in enumerate(points):  # composed here: workers need no Hydra state of their own
        try:
            configs.append(compose(config_name="config", overrides=[f"experiment={experiment}", *point, *side_by_side,
                                                                    f"task={point_task}", f"out_dir={dirs[i]}"]))
        except Exception as exc:  # noqa: BLE001 - a point that cannot compose fails alone
            configs.append(None)
            errors[i] = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _record_failure(dirs[i], time.time(), errors[i], labels[i])
    todo = [i for i in range(len(points)) if configs[i] is not None]
    workers = _workers(jobs, len(todo))
    if reporter:
        reporter.work(0, len(points), "runs")
    if workers == 1:
        outcomes = ((i, _run_point(configs[i], dirs[i], labels[i])) for i in todo)
    else:
        from joblib import Parallel, delayed

        run = Parallel(n_jobs=workers, return_as="generator_unordered")
        outcomes = run(delayed(_run_indexed)(i, configs[i], dirs[i], labels[i]) for i in todo)
    for i in sorted(errors):  # points that did not compose
        print(f"cais-sim: error: {name} point #{i} ({labels[i]}): {errors[i]}", file=sys.stderr)
    for done, (i, message) in enumerate(outcomes, start=len(points) - len(todo) + 1):
        if message:
            errors[i] = message
            print(f"cais-sim: error: {name} point #{i} ({labels[i]}): {message}", file=sys.stderr)
        if reporter:
            reporter.work(done, len(points), "runs")
    statuses = [(f"#{i} ({labels[i]})", single_run.read_status(d) or
                 ({"status": "failed", "message": errors[i]} if i in errors else None)) for i, d in enumerate(dirs)]
    if sweep.summarize(statuses) != sweep.EXIT_OK:
        sweep.last_exit = sweep.EXIT_FAILED
    return figures.finish(name, dirs, Path(out_dir))


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    params = OmegaConf.to_container(hc.sweeper.params) if hc.sweeper.get("params") else {}
    experiment = next((o.split("=", 1)[1] for o in hc.overrides.task if o.startswith("experiment=")), cfg.figure.name)
    overrides = [o for o in hc.overrides.task if not o.startswith("figure.axes=")] + list(cfg.figure.axes)
    table, _ = run_figure(str(cfg.figure.name), experiment, str(cfg.figure.point_task), params, overrides,
                          out_dir, jobs=int(cfg.figure.jobs))
    return table
