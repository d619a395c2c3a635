"""The paper's figures: how a figure experiment's points become its table, PNG and comparison.

Every figure is a :class:`Figure` (registered in FIGURES by the modules below): ``table`` turns
the points' results (one frame, a ``point`` column naming each point's folder) into the rows the
figure shows (results.csv of the experiment), ``plot`` draws them like the paper's figure, and
``paper`` sets its numbers beside the paper's (rows for cais-report, with the tolerance key of
harness/figures/tolerances.py). :func:`finish` is the figure step, whichever way the points ran
(one process: harness/experiments/figure.py; a Hydra multirun: harness/sweep.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from harness.errors import ConfigError
from harness.results import write_csv_atomic, write_text_atomic

FIGURE_FILE = "figure.json"  # marks a figure's folder for cais-report


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    table: Callable[[pd.DataFrame], pd.DataFrame]
    plot: Callable[[pd.DataFrame, "object"], None]
    paper: Callable[[pd.DataFrame], list[dict]]


FIGURES: dict[str, Figure] = {}


def register(fig: Figure) -> Figure:
    FIGURES[fig.name] = fig
    return fig


def get(name: str) -> Figure:
    from harness.figures import merge, scaling, speedup, utilisation  # noqa: F401  (they register)

    if name not in FIGURES:
        raise ConfigError("figure.name", f"unknown figure '{name}' (available: {', '.join(sorted(FIGURES))})")
    return FIGURES[name]


def load_points(dirs: list[Path]) -> tuple[pd.DataFrame, list[tuple[Path, dict | None]]]:
    """Every finished point's results rows (column ``point``: its folder) and every point's status."""
    from harness.single_run import read_status

    frames, statuses = [], []
    for d in dirs:
        st = read_status(d)
        statuses.append((d, st))
        if st and st.get("status") in ("ok", "cached") and (d / "results.csv").is_file():
            df = pd.read_csv(d / "results.csv")
            df.insert(0, "point", str(d))
            frames.append(df)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"point": []})), statuses


def draw(fig: Figure, table: pd.DataFrame, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    canvas = plt.figure(figsize=(10, 4.8), dpi=100)
    if table.empty:
        canvas.text(0.5, 0.5, "no finished points", ha="center", va="center")
    else:
        fig.plot(table, canvas)
    canvas.suptitle(f"{fig.name}: {fig.title}", fontsize=11)
    tmp = png.with_name(f".{png.name}.tmp.png")
    canvas.savefig(tmp, bbox_inches="tight")
    plt.close(canvas)
    tmp.replace(png)


def finish(name: str, dirs: list[Path], out_dir: Path) -> tuple[pd.DataFrame, int]:
    """The figure step: <out_dir>/results.csv (the figure's table), <name>.png, figure.json
    (points, failures, the comparison with the paper). Returns the table and the failed count."""
    fig = get(name)
    points, statuses = load_points(dirs)
    table = fig.table(points) if not points.empty else pd.DataFrame()
    out_dir = Path(out_dir)
    write_csv_atomic(out_dir / "results.csv", table)
    draw(fig, table, out_dir / f"{name}.png")
    failed = [{"point": str(d), "label": (st or {}).get("label", ""), "message": (st or {}).get("message")
               or "did not run"} for d, st in statuses if not st or st.get("status") not in ("ok", "cached")]
    comparison = fig.paper(table) if not table.empty else []
    record = {"name": name, "title": fig.title, "png": f"{name}.png", "points": len(dirs),
              "cached": sum(1 for _, st in statuses if st and st.get("status") == "cached"),
              "failed": failed, "paper": comparison}
    write_text_atomic(out_dir / FIGURE_FILE, json.dumps(record, indent=1, default=float) + "\n")
    return table, len(failed)


def collect_sweep(config, sweep_dir: Path) -> None:
    """The figure step after a Hydra multirun of a figure experiment (harness/sweep.py)."""
    from harness.sweep import point_dirs

    table, failed = finish(str(config.figure.name), point_dirs(sweep_dir), sweep_dir)
    print(f"{config.figure.name}: {len(table)} rows, {sweep_dir / (str(config.figure.name) + '.png')}")
