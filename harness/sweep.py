"""Sweeps: the grid of points, and what happens when a Hydra multirun ends.

A figure experiment declares its points as Hydra sweeper parameters (``hydra.sweeper.params``
in conf/experiment/<fig>.yaml), so ``cais-sim -m experiment=fig11`` hands them to whatever
launcher is configured (basic: one after another; joblib: all local cores; submitit: SLURM; ray),
and ``cais-sim experiment=fig11`` runs the same grid in one process (:func:`grid`, the basic
sweeper's rule: command-line overrides of a key replace its axis).

:class:`SweepCallback` (conf/config.yaml: hydra.callbacks) runs in the process that started the
sweep, after every point: it reads the points' status.json (the only record that survives a
launcher running points elsewhere), prints the summary, and for a figure experiment runs the
figure step over the points.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

EXIT_OK, EXIT_FAILED = 0, 1
# The exit status of the sweep that just ended (read by harness.cli.main).
last_exit = EXIT_OK


def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def grid(params: dict[str, Any] | None, overrides: list[str]) -> list[list[str]]:
    """Every point as its list of overrides: the product of the params' axes, in their order,
    with each command-line override replacing (or adding) the axis of its key."""
    parsed = _parser().parse_overrides([f"{k}={v}" for k, v in (params or {}).items()] + list(overrides))
    axes: dict[str, list[str]] = {}
    for o in parsed:
        key = o.get_key_element()
        if o.is_sweep_override():
            axes[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
        else:
            axes[key] = [f"{key}={o.get_value_element_as_str()}"]
    return [list(p) for p in itertools.product(*axes.values())]


def _is_figure(experiment: str) -> bool:
    from harness import CONF_DIR

    path = CONF_DIR / "experiment" / f"{experiment}.yaml"
    return path.is_file() and any(line.strip() == "task: figure" for line in path.read_text().splitlines())


def one_process_argv(argv: list[str]) -> list[str]:
    """A figure experiment run without -m takes several values for an axis too (scheme=a,b):
    Hydra refuses sweep syntax outside a multirun, so such overrides travel as figure.axes
    (a list of the override strings), which harness/experiments/figure.py expands like the
    multirun would."""
    if any(a in ("-m", "--multirun") for a in argv):
        return argv
    experiment = next((a.split("=", 1)[1] for a in argv if a.startswith("experiment=")), "")
    if not _is_figure(experiment):
        return argv
    out, axes = [], []
    for a in argv:
        if "=" in a and not a.startswith(("-", "hydra", "++hydra")):
            try:
                (o,) = _parser().parse_overrides([a])
            except Exception:  # noqa: BLE001 - left for Hydra to report as usual
                out.append(a)
                continue
            if o.is_sweep_override():
                axes.append(a.replace("\\", "\\\\").replace('"', '\\"'))
                continue
        out.append(a)
    if axes:
        out.append("figure.axes=[" + ",".join(f'"{a}"' for a in axes) + "]")
    return out


def point_dirs(sweep_dir: Path) -> list[Path]:
    """The folders of a sweep's points (Hydra's job numbers), in order."""
    dirs = [p for p in Path(sweep_dir).iterdir() if p.is_dir() and p.name.isdigit()] if Path(sweep_dir).is_dir() else []
    return sorted(dirs, key=lambda p: int(p.name))


def summarize(points: list[tuple[str, dict | None]], stream=None) -> int:
    """Print 'sweep: N of M points succeeded (K from the cache)' and each failure; the exit status."""
    stream = stream or sys.stderr
    failed = [(label, st) for label, st in points if not st or st.get("status") not in ("ok", "cached")]
    cached = sum(1 for _, st in points if st and st.get("status") == "cached")
    if not points:
        return EXIT_OK
    print(f"sweep: {len(points) - len(failed)} of {len(points)} points succeeded ({cached} from the cache)",
          file=stream)
    for label, st in failed:
        why = (st or {}).get("message") or (st or {}).get("status") or "no status recorded (the point never ran)"
        print(f"  failed {label}: {why}", file=stream)
    unstored = [st["cache_error"] for _, st in points if st and st.get("cache_error")]
    if unstored:  # the run is fine; only a repeat of the sweep would recompute these points
        print(f"cache: {len(unstored)} of {len(points)} points were not stored ({unstored[0]}); "
              "a repeated sweep recomputes them", file=stream)
    return EXIT_FAILED if failed else EXIT_OK


class SweepCallback(Callback):
    """Summary of a multirun and the figure step of a figure experiment (module docstring)."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global last_exit
        from harness.single_run import read_status

        sweep_dir = Path(config.hydra.sweep.dir)
        points = []
        for d in point_dirs(sweep_dir):
            st = read_status(d)
            points.append((f"#{d.name} ({(st or {}).get('label') or d.name})", st))
        last_exit = summarize(points)
        if str(config.get("task")) == "figure":
            from harness.figures import collect_sweep

            try:
                collect_sweep(config, sweep_dir)
            except Exception as exc:  # noqa: BLE001 - the points are kept; say why the figure is not
                print(f"cais-sim: error: figure step over {sweep_dir}: {exc}", file=sys.stderr)
                last_exit = EXIT_FAILED
