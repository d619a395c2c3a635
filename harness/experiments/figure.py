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


def run_figure(name: str, experiment: str, point_task: str, params: dict, overrides: list[str],
               out_dir: Path) -> tuple[pd.DataFrame, int]:
    """Run every point of the grid (params x overrides) into out_dir/<N>, then the figure step."""
    from hydra import compose

    points = sweep.grid(params, point_overrides(overrides))
    reporter = progress.current()
    dirs, statuses = [], []
    for i, point in enumerate(points):
        d = Path(out_dir) / str(i)
        dirs.append(d)
        label = " ".join(point)
        if reporter:
            reporter.work(i, len(points), "runs")
        started = time.time()
        try:
            cfg = compose(config_name="config",
                          overrides=[f"experiment={experiment}", *point, f"task={point_task}", f"out_dir={d}"])
            single_run.execute(cfg, d, label=label)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed point is recorded; the sweep goes on
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if not (single_run.read_status(d) or {}).get("status") == "failed":  # failed before it ran
                d.mkdir(parents=True, exist_ok=True)
                single_run.write_status(d, "failed", started, message=message, label=label)
            print(f"cais-sim: error: {name} point #{i} ({label}): {message}", file=sys.stderr)
        statuses.append((f"#{i} ({label})", single_run.read_status(d)))
    if reporter:
        reporter.work(len(points), len(points), "runs")
    if sweep.summarize(statuses) != sweep.EXIT_OK:
        sweep.last_exit = sweep.EXIT_FAILED
    return figures.finish(name, dirs, Path(out_dir))


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    params = OmegaConf.to_container(hc.sweeper.params) if hc.sweeper.get("params") else {}
    experiment = next((o.split("=", 1)[1] for o in hc.overrides.task if o.startswith("experiment=")), cfg.figure.name)
    overrides = [o for o in hc.overrides.task if not o.startswith("figure.axes=")] + list(cfg.figure.axes)
    table, _ = run_figure(str(cfg.figure.name), experiment, str(cfg.figure.point_task), params, overrides, out_dir)
    return table
