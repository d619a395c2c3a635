"""The one path every run takes: a resolved config in, a finished run folder out.

``cais-sim`` (one run, or one point of a Hydra sweep under any launcher) and the figure
experiments (their points, harness/experiments/figure.py) all call :func:`execute`:

- the run's key (harness/run_cache.py) is looked up first: a cached run is copied in and nothing
  is simulated;
- otherwise the experiment runs, results.csv is written atomically (wall-clock columns go to
  timing.csv), the resolved config beside it, and the folder is stored in the cache;
- ``status.json`` records the outcome either way (ok | failed | cached, the error message, start
  and end wall time, pid, and ``cache_error`` when the run cache could not keep it), which is
  what a sweep's summary, the figure step and the tests read: with a parallel launcher the
  points run in other processes, so files are the only record.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness import run_cache
from harness.config.precheck import check_out_dir
from harness.errors import CaisError
from harness.results import split_timing, write_csv_atomic, write_text_atomic

STATUS_FILE = "status.json"
# Outputs a rerun must not leave behind looking like its own result.
_STALE = ("results.csv", "timing.csv", "config.yaml", "stats.csv", "series.csv", "kernels.csv", STATUS_FILE)
# Tasks made of other runs, never cached as a whole: figure and paper (their points are cached
# one by one) and compare, which composes one config per scheme, so its own key cannot see an
# override of a key that a scheme's file sets.
UNCACHED_TASKS = ("figure", "paper", "compare")


@dataclass
class Outcome:
    results: Path
    cached: bool
    cache_error: str = ""  # why the run cache could not keep this run ("" when it did or is off)


def write_status(out_dir: Path, status: str, started: float, message: str = "", key: str = "",
                 label: str = "", cache_error: str = "") -> None:
    record = {"status": status, "label": label, "message": message, "key": key, "pid": os.getpid(),
              "start_wall_s": round(started, 3), "end_wall_s": round(time.time(), 3)}
    if cache_error:
        record["cache_error"] = cache_error
    try:
        write_text_atomic(out_dir / STATUS_FILE, json.dumps(record, indent=1) + "\n")
    except CaisError:
        pass  # a folder that cannot take the status cannot take results either: that error wins


def read_status(out_dir: Path) -> dict | None:
    try:
        return json.loads((Path(out_dir) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None


def _clear(out_dir: Path) -> None:
    for stale in _STALE:
        try:
            (out_dir / stale).unlink(missing_ok=True)
        except OSError as exc:
            raise CaisError(f"out_dir: cannot remove {out_dir / stale}: {exc.strerror}") from None


def _write_config(out_dir: Path, cfg: DictConfig) -> None:
    write_text_atomic(out_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))


def execute(cfg: DictConfig, out_dir: Path, label: str = "") -> Outcome:
    """Run cfg's experiment into out_dir (or take it from the cache); raise on failure. label: how
    a sweep summary names the point (its overrides); a labelled point records a failure in
    status.json, an unlabelled single run leaves no file behind."""
    from harness import experiments

    out_dir = Path(out_dir)
    started = time.time()
    check_out_dir(out_dir)
    _clear(out_dir)
    cacheable = str(cfg.task) not in UNCACHED_TASKS
    key = run_cache.run_key(cfg) if cacheable else ""
    try:
        if cacheable and run_cache.lookup(cfg, key, out_dir):
            _write_config(out_dir, cfg)  # the entry may be another experiment's point: say how this one was asked for
            write_status(out_dir, "cached", started, key=key, label=label)
            return Outcome(out_dir / "results.csv", cached=True)
        runner = experiments.get(cfg.task)
        df, timing = split_timing(runner(cfg, out_dir))
        if timing is not None:
            write_csv_atomic(out_dir / "timing.csv", timing)
        _write_config(out_dir, cfg)  # only beside a result
        write_csv_atomic(out_dir / "results.csv", df)
    except BaseException as exc:
        if not label:  # a single run that failed leaves nothing behind; a sweep point says why it failed
            raise
        write_status(out_dir, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed", started,
                     message=str(exc).splitlines()[0] if str(exc) else type(exc).__name__, key=key, label=label)
        raise
    cache_error = run_cache.store(cfg, key, out_dir) if cacheable else ""
    write_status(out_dir, "ok", started, key=key, label=label, cache_error=cache_error)
    return Outcome(out_dir / "results.csv", cached=False, cache_error=cache_error)
